import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { applyOp, applyOps, ClientRoom, current, defineMachine, HerculesError, PROTOCOL_VERSION, RoomEngine, ViewEngine } from '../src/index.ts';
import { room } from './fixtures.ts';

const inv = (name: string, args: unknown, seq = 1) => ({ client: 'c', seq, name, args, author: 'alice' });

test('defineMachine refuses definitions that cannot work, naming the problem', () => {
  const bad = (spec: unknown, re: RegExp) =>
    assert.throws(
      () => defineMachine(spec as never),
      (e: unknown) => e instanceof HerculesError && e.code === 'bad-machine' && re.test(e.message),
    );
  bad(null, /needs an object/);
  bad({ name: '', version: 1, initial: {}, ops: {} }, /name/);
  bad({ name: 'm', version: 1.5, initial: {}, ops: {} }, /version/);
  bad({ name: 'm', version: 1, initial: {}, ops: { x: 3 } }, /op "x" is not a function/);
  bad({ name: 'm', version: 1, initial: { a: new Map() }, ops: {} }, /initial\.a is a Map/);
  bad({ name: 'm', version: 1, initial: { a: [1, NaN] }, ops: {} }, /initial\.a\[1\] is NaN/);
  bad({ name: 'm', version: 1, initial: { u: new Uint8Array(2) }, ops: {} }, /Uint8Array/);
});

// spec: VIEW-FROZEN
test('the initial state is deep-frozen and detached from the spec object', () => {
  const init = { list: [1, 2] };
  const m = defineMachine({ name: 'm', version: 1, initial: init, ops: {} });
  assert.ok(Object.isFrozen(m.initial) && Object.isFrozen(m.initial.list));
  init.list.push(3);
  assert.deepEqual(m.initial.list, [1, 2]);
});

// spec: OP-VERDICT
test('an op that throws has no effect and reports its message', () => {
  const s0 = room.initial;
  const r = applyOp(room, s0, inv('move', { id: 'nope', x: 1, y: 1 }), 1);
  assert.equal(r.state, s0, 'same snapshot back');
  assert.equal(r.error, 'no item nope');
  const u = applyOp(room, s0, inv('fly', {}), 1);
  assert.equal(u.state, s0);
  assert.match(u.error!, /unknown op "fly"/);
  // A prototype key is not an op.
  assert.match(applyOp(room, s0, inv('toString', {}), 1).error!, /unknown op/);
});

// spec: OP-VERDICT
test('an op that throws half-way leaves no partial writes', () => {
  const m = defineMachine({
    name: 'half',
    version: 1,
    initial: { a: 0, b: 0 },
    ops: {
      both(s) {
        s.a = 1;
        throw new Error('stop');
      },
    },
  });
  const r = applyOp(m, m.initial, inv('both', undefined), 1);
  assert.deepEqual(r.state, { a: 0, b: 0 });
  assert.equal(r.error, 'stop');
});

// spec: VIEW-FROZEN
test('snapshots share untouched subtrees by identity and are frozen', () => {
  let s = applyOp(room, room.initial, inv('add', { id: 'a', x: 0, y: 0 }), 1).state;
  s = applyOp(room, s, inv('add', { id: 'b', x: 0, y: 0 }, 2), 2).state;
  const t = applyOp(room, s, inv('move', { id: 'a', x: 5, y: 5 }, 3), 3).state;
  assert.notEqual(t, s);
  assert.notEqual(t.items.a, s.items.a);
  assert.equal(t.items.b, s.items.b, 'b untouched: same object');
  assert.equal(t.notes, s.notes);
  assert.ok(Object.isFrozen(t) && Object.isFrozen(t.items) && Object.isFrozen(t.items.a));
  assert.deepEqual(s.items.a, { x: 0, y: 0 }, 'the old snapshot is unchanged');
});

test('applyOps in one draft equals op-by-op application, including a thrower in the middle', () => {
  const ops = [
    { ...inv('add', { id: 'a', x: 0, y: 0 }, 1) },
    { ...inv('move', { id: 'zz', x: 1, y: 1 }, 2) }, // throws
    { ...inv('note', { text: 'hi' }, 3) },
    { ...inv('move', { id: 'a', x: 2, y: 3 }, 4) },
  ];
  let ref = room.initial;
  ops.forEach((o, i) => {
    ref = applyOp(room, ref, o, 10 + i).state;
  });
  assert.deepEqual(applyOps(room, room.initial, ops, 10), ref);
  // ctx.position follows the log position
  assert.deepEqual(ref.notes, ['alice@12: hi']);
  // ops already rejected by the server are skipped
  const skipped = applyOps(room, room.initial, [ops[0], { ...ops[2], error: 'rejected' }], 1);
  assert.deepEqual(skipped.notes, []);
});

test('typed op stubs are inferred from the definition (checked by tsc)', () => {
  const e = new ViewEngine(room, { clientId: 'c', now: () => 0 });
  // These lines are type-checked by `npm run typecheck`; wrong arguments fail compilation.
  const typed = (r: import('../src/index.ts').ClientRoom<typeof room>) => {
    r.ops.move({ id: 'a', x: 1, y: 2 });
    r.ops.clear();
    // @ts-expect-error: x must be a number
    r.ops.move({ id: 'a', x: '1', y: 2 });
    // @ts-expect-error: unknown op
    r.ops.fly({});
    // @ts-expect-error: missing argument
    r.ops.note();
  };
  assert.equal(typeof typed, 'function');
  assert.throws(
    () => e.submit('fly', {}),
    (err: unknown) => err instanceof HerculesError && err.code === 'unknown-op' && /known ops: add, move, note, clear/.test(err.message),
  );
});

// spec: OP-ARG-DOMAIN
test('op arguments must be JSON data; the engine keeps its own frozen copy', () => {
  const e = new ViewEngine(room, { clientId: 'c', now: () => 0 });
  assert.throws(
    () => e.submit('note', { text: () => 1 }),
    (err: unknown) => err instanceof HerculesError && err.code === 'bad-argument' && /note\(args\.text is a function\)/.test(err.message),
  );
  const args = { id: 'a', x: 1, y: 2 };
  e.submit('add', args);
  args.x = 99;
  assert.deepEqual(e.getState('submitted').items.a, { x: 1, y: 2 }, "later edits to the caller's object change nothing");
});

test('applyOps with several throwers equals op-by-op application and runs few drafts', () => {
  const m = defineMachine({
    name: 'many',
    version: 1,
    initial: { n: 0, seen: [] as number[] },
    ops: {
      add(s, a: { k: number }) {
        s.seen.push(a.k);
        s.n += a.k;
        if (s.n % 3 === 0) throw new Error('multiple of 3');
      },
    },
  });
  const ops = Array.from({ length: 40 }, (_, i) => ({ client: 'c', seq: i + 1, name: 'add', args: { k: (i * 7) % 5 }, author: 'c' }));
  let ref = m.initial;
  ops.forEach((o, i) => {
    ref = applyOp(m, ref, o, 1 + i).state;
  });
  assert.deepEqual(applyOps(m, m.initial, ops, 1), ref);
  assert.ok(ref.seen.length < 40, 'some ops threw and left no trace');
});

test("schemas: any Standard Schema checks an op's arguments; bad schemas are refused at definition", () => {
  const std = (ok: (v: any) => boolean, message: string, async = false) => ({
    '~standard': {
      version: 1 as const,
      vendor: 'test',
      validate: (v: unknown): any => {
        const r = ok(v) ? { value: v } : { issues: [{ message, path: ['x'] }] };
        return async ? Promise.resolve(r) : r;
      },
    },
  });
  const m = defineMachine({
    name: 'schemas',
    version: 1,
    initial: { x: 0 },
    ops: {
      set(s, a: { x: number }) {
        s.x = a.x;
      },
      free(s) {
        s.x = -1;
      },
      slow(s, a: { x: number }) {
        s.x = a.x;
      },
    },
    schemas: { set: std((v) => typeof v?.x === 'number', 'must be a number'), slow: std(() => true, '', true) },
  });
  assert.equal(m.validate('set', { x: 1 }), undefined);
  assert.equal(m.validate('set', { x: 'a' }), 'invalid arguments for set: x: must be a number');
  assert.equal(m.validate('free', 'anything'), undefined, 'no schema: no check');
  assert.match(m.validate('slow', { x: 1 })!, /asynchronous/);
  assert.throws(() => defineMachine({ name: 'b', version: 1, initial: {}, ops: { a() {} }, schemas: { a: {} as never } }), /not a Standard Schema/);
  assert.throws(
    () => defineMachine({ name: 'b', version: 1, initial: {}, ops: { a() {} }, schemas: { nope: std(() => true, '') } as never }),
    /schemas.nope names no op/,
  );
});

// spec: PRESENCE-EPHEMERAL
test('a presence schema types room.presence and is checked on both sides: set() throws, the room refuses and forwards nothing', () => {
  const schema: StandardSchemaV1<unknown, { cursor: number; name?: string }> = {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: (v: any) => (typeof v?.cursor === 'number' ? { value: v } : { issues: [{ message: 'must be a number', path: ['cursor'] }] }),
    },
  };
  const m = defineMachine({
    name: 'typed-presence',
    version: 1,
    initial: { n: 0 },
    ops: {
      inc(s) {
        s.n++;
      },
    },
    presence: schema,
  });
  assert.equal(m.validatePresence({ cursor: 3 }), undefined);
  assert.equal(m.validatePresence({ cursor: 'x' }), 'invalid presence: cursor: must be a number');
  assert.equal(room.validatePresence('anything'), undefined, 'no schema: no check');
  assert.throws(() => defineMachine({ name: 'b', version: 1, initial: {}, ops: {}, presence: {} as never }), /presence is not a Standard Schema/);
  // Typed by the schema (checked by tsc, which runs over the tests).
  const typed = (r: ClientRoom<typeof m>) => {
    r.presence.set({ cursor: 1 });
    r.presence.update({ name: 'Ada' });
    // @ts-expect-error: cursor must be a number
    r.presence.set({ cursor: 'a' });
    const others: readonly { value: { cursor: number } }[] = r.presence.others();
    return others;
  };
  assert.equal(typeof typed, 'function');
  // The client throws at the call, before anything is sent.
  const c = new ClientRoom(m, { clientId: 'a' });
  assert.throws(
    () => c.presence.set({ cursor: 'x' } as never),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /invalid presence: cursor: must be a number/.test(e.message),
  );
  assert.equal(c.presence.get(), undefined);
  c.presence.set({ cursor: 2 });
  assert.deepEqual(c.presence.get(), { cursor: 2 });
  // The room refuses one that got past a client (another build, a raw socket): nobody sees it.
  const r = new RoomEngine(m);
  const hello = (client: string) => ({ t: 'hello' as const, v: PROTOCOL_VERSION, client, machine: { name: m.name, version: 1 }, have: 0 });
  r.open('k1', 0);
  r.message('k1', hello('a'), 0);
  r.open('k2', 0);
  r.message('k2', hello('b'), 0);
  const o = r.message('k1', { t: 'presence', value: { cursor: 'x' } }, 1);
  assert.deepEqual(
    o.send.map((x) => [x.conn, x.msg.t, x.msg.t === 'error' ? [x.msg.code, x.msg.fatal] : undefined]),
    [['k1', 'error', ['bad-argument', false]]],
  );
  const ok = r.message('k1', { t: 'presence', value: { cursor: 4 } }, 2);
  assert.deepEqual(
    ok.send.map((x) => [x.conn, x.msg]),
    [['k2', { t: 'presence', peers: [{ client: 'a', value: { cursor: 4 } }] }]],
  );
});

test('current: an op that copies a part once and writes it back equals one that writes element by element, alone and in one draft with other ops', () => {
  const initial = {
    rows: [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ],
  };
  const byElement = defineMachine({
    name: 'e',
    version: 1,
    initial,
    ops: {
      inc(s, a: { row: number; from: number; n: number }) {
        for (let i = a.from; i < a.from + a.n; i++) s.rows[a.row][i] += 1;
      },
    },
  });
  const byCopy = defineMachine({
    name: 'c',
    version: 1,
    initial,
    ops: {
      inc(s, a: { row: number; from: number; n: number }) {
        const r = Array.from(current(s.rows[a.row]));
        for (let i = a.from; i < a.from + a.n; i++) r[i] += 1;
        s.rows[a.row] = Object.freeze(r) as number[];
      },
    },
  });
  // Row 1 is written by consecutive ops in the same draft: `current` must see the earlier write.
  const ops = [
    { row: 1, from: 0, n: 3 },
    { row: 1, from: 1, n: 3 },
    { row: 0, from: 2, n: 2 },
    { row: 1, from: 0, n: 1 },
  ].map((a, i) => inv('inc', a, i + 1));
  const one = (m: typeof byCopy) => ops.reduce((s, op, i) => applyOp(m, s, op, i + 1).state, m.initial);
  const expected = one(byElement as typeof byCopy);
  assert.deepEqual(expected, {
    rows: [
      [0, 0, 1, 1],
      [2, 2, 2, 1],
    ],
  });
  assert.deepEqual(one(byCopy), expected);
  const batched = applyOps(byCopy, byCopy.initial, ops, 1);
  assert.deepEqual(batched, expected);
  assert.ok(Object.isFrozen(batched.rows) && Object.isFrozen(batched.rows[1]));
  assert.equal(batched.rows[0] === byCopy.initial.rows[0], false);
  assert.equal(applyOps(byCopy, byCopy.initial, ops.slice(0, 2), 1).rows[0], byCopy.initial.rows[0], 'an untouched row is shared, not copied');
  assert.equal(current(expected), expected, 'outside an op it returns its argument');
});

// spec: VIEW-FROZEN
test('every object reachable from a snapshot is frozen, whatever an op writes (property)', async () => {
  const fc = (await import('fast-check')).default;
  // A small program of writes on a nested state, run once on a draft and once on a plain
  // mutable copy: the results must be equal, and the snapshot frozen everywhere.
  const key = fc.constantFrom('a', 'b', 'c', 'd');
  const leaf = fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constant(null), fc.constant('s'));
  const value = fc.letrec((tie) => ({
    v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(key, tie('v'), { maxKeys: 3 })),
  })).v;
  const step = fc.oneof(
    fc.record({ k: fc.constant('set' as const), path: fc.array(key, { minLength: 1, maxLength: 3 }), value }),
    fc.record({ k: fc.constant('delete' as const), path: fc.array(key, { minLength: 1, maxLength: 3 }) }),
    fc.record({ k: fc.constant('push' as const), path: fc.array(key, { maxLength: 2 }), value }),
    fc.record({ k: fc.constant('splice' as const), path: fc.array(key, { maxLength: 2 }), at: fc.nat(3) }),
    fc.record({ k: fc.constant('alias' as const), from: fc.array(key, { minLength: 1, maxLength: 2 }), to: key }),
    fc.record({ k: fc.constant('reverse' as const), path: fc.array(key, { maxLength: 2 }) }),
  );
  type Step = { k: string; path?: string[]; value?: unknown; at?: number; from?: string[]; to?: string };
  const walk = (s: any, path: string[]) => {
    let o = s;
    for (const p of path) {
      if (o === null || typeof o !== 'object') return undefined;
      o = o[p];
    }
    return o !== null && typeof o === 'object' ? o : undefined;
  };
  const run = (s: any, steps: Step[]) => {
    for (const st of steps) {
      if (st.k === 'alias') {
        const v = walk(s, st.from!);
        if (v !== undefined && !Array.isArray(s)) s[st.to!] = v;
        continue;
      }
      const path = st.path!;
      const parent = st.k === 'set' || st.k === 'delete' ? walk(s, path.slice(0, -1)) : walk(s, path);
      if (parent === undefined) continue;
      const last = path[path.length - 1];
      if (st.k === 'set' && !Array.isArray(parent)) parent[last] = structuredClone(st.value);
      else if (st.k === 'delete' && !Array.isArray(parent)) delete parent[last];
      else if (st.k === 'push' && Array.isArray(parent)) parent.push(structuredClone(st.value));
      else if (st.k === 'splice' && Array.isArray(parent)) parent.splice(st.at!, 1);
      else if (st.k === 'reverse' && Array.isArray(parent)) parent.reverse();
    }
  };
  // The first unfrozen object (draft.ts freezes every copy and every value an op assigned).
  const unfrozen = (v: unknown, path = '$'): string | undefined => {
    if (v === null || typeof v !== 'object') return undefined;
    if (!Object.isFrozen(v)) return path;
    for (const [k, c] of Object.entries(v)) {
      const bad = unfrozen(c, `${path}.${k}`);
      if (bad) return bad;
    }
    return undefined;
  };
  fc.assert(
    fc.property(fc.dictionary(key, value, { maxKeys: 4 }), fc.array(fc.array(step, { maxLength: 5 }), { minLength: 1, maxLength: 3 }), (initial, programs) => {
      const m = defineMachine({ name: 'prop', version: 1, initial, ops: { go: (s: any, a: { steps: Step[] }) => run(s, a.steps) } });
      let snap = m.initial as unknown;
      // Snapshots have value semantics: an object aliased in two places by one op is two
      // values to the next op, so the reference breaks aliases between programs.
      let plain = structuredClone(initial);
      programs.forEach((steps, i) => {
        snap = applyOp(m, snap, inv('go', { steps }, i + 1), i + 1).state;
        plain = JSON.parse(JSON.stringify(plain));
        run(plain, steps);
        assert.deepEqual(snap, plain);
        assert.equal(unfrozen(snap), undefined, `unfrozen at ${unfrozen(snap)}`);
      });
      // The same programs as one batch.
      const batched = applyOps(
        m,
        m.initial,
        programs.map((steps, i) => inv('go', { steps }, i + 1)),
        1,
      );
      const oneDraft = structuredClone(initial);
      for (const steps of programs) run(oneDraft, steps);
      assert.deepEqual(batched, oneDraft);
      assert.equal(unfrozen(batched), undefined, `unfrozen at ${unfrozen(batched)}`);
    }),
    { numRuns: 400, seed: 14 },
  );
});
