import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { isDraft } from '../src/draft.ts';
import { applyOp, defineMachine, findNonJson, HerculesError, keyedMap, migrateState, type KeyedMap } from '../src/index.ts';
import { hashKey } from '../src/keyed-map.ts';
import { decode, encode } from '../src/msgpack.ts';

const LEAF_MAX = 32;

type Node = Record<string, unknown> | unknown[] | null;

/** Check the trie's invariants; returns the entries found. Throws with the path of what is wrong. */
function checkShape(m: KeyedMap<unknown>): Map<string, unknown> {
  const found = new Map<string, unknown>();
  const visit = (n: Node, depth: number, prefix: number, where: string): number => {
    assert.notEqual(n, null, `${where}: a null node where a node is needed`);
    if (Array.isArray(n)) {
      assert.equal(n.length, 33, `${where}: a branch has a count and 32 children`);
      assert.ok(depth < 7, `${where}: a branch at depth ${depth}`);
      let sum = 0;
      for (let i = 1; i <= 32; i++) {
        if (n[i] === null) continue;
        sum += visit(n[i] as Node, depth + 1, prefix | ((i - 1) << (5 * depth)), `${where}[${i}]`);
      }
      assert.equal(n[0], sum, `${where}: the branch's count`);
      assert.ok(sum > LEAF_MAX, `${where}: a branch holding ${sum} <= ${LEAF_MAX} keys should be a leaf`);
      return sum;
    }
    const keys = Object.keys(n!);
    if (depth > 0) assert.ok(keys.length > 0, `${where}: an empty leaf under a branch should be null`);
    if (depth < 7) assert.ok(keys.length <= LEAF_MAX, `${where}: a leaf of ${keys.length} keys at depth ${depth}`);
    const mask = depth >= 7 ? 0xffffffff : (1 << (5 * depth)) - 1;
    for (const k of keys) {
      assert.equal((hashKey(k) & mask) >>> 0, prefix >>> 0, `${where}: key ${k} is in the wrong leaf`);
      assert.ok(!found.has(k));
      found.set(k, n![k]);
    }
    return keys.length;
  };
  const total = visit(m.tree as Node, 0, 0, 'tree');
  assert.equal(m.size, total, 'size');
  return found;
}

function isDeepFrozen(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (isDraft(v) || !Object.isFrozen(v)) return false;
  return Object.values(v).every(isDeepFrozen);
}

/** The tree with each leaf's keys sorted: two canonical tries for the same entries are equal. */
function normalized(n: unknown): unknown {
  if (n === null) return null;
  if (Array.isArray(n)) return n.map(normalized);
  const o = n as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]]),
  );
}

/** Keys whose hashes share their low `bits` bits: they land in one leaf until depth bits/5. */
function collidingKeys(count: number, bits: number): string[] {
  const target = hashKey('seed') & ((1 << bits) - 1);
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const k = `c${i}`;
    if ((hashKey(k) & ((1 << bits) - 1)) === target) out.push(k);
  }
  return out;
}

type S = { m: KeyedMap<{ v: number }> };
const machine = defineMachine({
  name: 'km',
  version: 1,
  initial: { m: keyedMap.empty<{ v: number }>() } as S,
  ops: {
    set(s: S, a: { k: string; v: number }) {
      keyedMap.set(s.m, a.k, { v: a.v });
    },
    bump(s: S, a: { k: string }) {
      const e = keyedMap.get(s.m, a.k);
      if (!e) throw new Error(`no entry ${a.k}`);
      e.v += 1;
    },
    del(s: S, a: { k: string }) {
      keyedMap.delete(s.m, a.k);
    },
    many(s: S, a: { ops: { k: string; v: number | null | 'bump' }[] }) {
      for (const o of a.ops) {
        if (o.v === null) keyedMap.delete(s.m, o.k);
        else if (o.v === 'bump') {
          const e = keyedMap.get(s.m, o.k);
          if (e) e.v += 1; // in place, through the draft, maybe in a leaf this op rebuilt
        } else keyedMap.set(s.m, o.k, { v: o.v });
      }
    },
  },
});
const inv = (name: string, args: unknown, seq: number) => ({ client: 'c', seq, name, args, author: 'a' });

// spec: OP-KEYED-MAP
test('a KeyedMap matches a Map through random sets and deletes, in ops and built by hand, and its shape depends only on its entries', () => {
  const pool = [...collidingKeys(120, 10), ...Array.from({ length: 200 }, (_, i) => `k${i}`)];
  const step = fc.record({
    k: fc.constantFrom(...pool),
    v: fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 0, max: 9 }) },
      { weight: 2, arbitrary: fc.constant(null) },
      { weight: 2, arbitrary: fc.constant('bump' as const) },
    ),
  });
  fc.assert(
    fc.property(fc.array(fc.array(step, { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 25 }), (batches) => {
      const model = new Map<string, { v: number }>();
      let s: S = machine.initial;
      const built = keyedMap.empty<{ v: number }>();
      let seq = 0;
      for (const batch of batches) {
        const before = s;
        const beforeJson = JSON.stringify(before);
        const r = applyOp(machine, s, inv('many', { ops: batch }, ++seq), seq);
        assert.equal(r.error, undefined);
        s = r.state;
        assert.equal(JSON.stringify(before), beforeJson, 'the previous snapshot is unchanged');
        for (const o of batch) {
          if (o.v === null) {
            assert.equal(keyedMap.delete(built, o.k), model.delete(o.k));
          } else if (o.v === 'bump') {
            const e = model.get(o.k);
            if (e) model.set(o.k, { v: e.v + 1 });
            const b = keyedMap.get(built, o.k);
            if (b) b.v += 1;
          } else {
            model.set(o.k, { v: o.v });
            keyedMap.set(built, o.k, { v: o.v });
          }
        }
        const got = checkShape(s.m);
        assert.ok(isDeepFrozen(s), 'the new snapshot is frozen throughout (no draft or unfrozen copy left in it)');
        assert.deepEqual(new Map([...got].sort()), new Map([...model].sort()));
        assert.deepEqual(new Map(keyedMap.entries(s.m)), new Map(keyedMap.entries(built)));
        for (const k of pool.slice(0, 30).concat(pool.slice(-30))) {
          assert.deepEqual(keyedMap.get(s.m, k), model.get(k));
          assert.equal(keyedMap.has(s.m, k), model.has(k));
        }
        assert.equal(keyedMap.size(s.m), model.size);
        // Canonical: the same entries, however they came, make the same tree.
        const fresh = keyedMap.from([...model].reverse());
        assert.deepEqual(normalized(s.m.tree), normalized(fresh.tree));
        assert.deepEqual(normalized(built.tree), normalized(fresh.tree));
      }
    }),
    { numRuns: 60 },
  );
});

// spec: OP-KEYED-MAP
test('an op that splits or collapses a leaf can still change a value in it in place', () => {
  const init: S = { m: keyedMap.from(Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, { v: i }]))) };
  // One op: bump k1, insert a 33rd key (the root leaf splits), bump k0 (now in a rebuilt leaf).
  const r1 = applyOp(
    machine,
    init,
    inv(
      'many',
      {
        ops: [
          { k: 'k1', v: 'bump' },
          { k: 'new', v: 0 },
          { k: 'k0', v: 'bump' },
        ],
      },
      1,
    ),
    1,
  );
  assert.equal(r1.error, undefined);
  assert.ok(Array.isArray(r1.state.m.tree), 'the root split');
  assert.deepEqual([keyedMap.get(r1.state.m, 'k0'), keyedMap.get(r1.state.m, 'k1')], [{ v: 1 }, { v: 2 }]);
  assert.deepEqual(keyedMap.get(init.m, 'k0'), { v: 0 }, 'the snapshot before is unchanged');
  // And back: bump k2, delete the 33rd key (the branch collapses), bump k2 again.
  const r2 = applyOp(
    machine,
    r1.state,
    inv(
      'many',
      {
        ops: [
          { k: 'k2', v: 'bump' },
          { k: 'new', v: null },
          { k: 'k2', v: 'bump' },
        ],
      },
      2,
    ),
    2,
  );
  assert.equal(r2.error, undefined);
  assert.ok(!Array.isArray(r2.state.m.tree), 'the root collapsed');
  assert.deepEqual(keyedMap.get(r2.state.m, 'k2'), { v: 4 });
  assert.ok(isDeepFrozen(r1.state) && isDeepFrozen(r2.state));
});

test('keys sharing many hash bits go deep, and collapse back as they leave', () => {
  const keys = collidingKeys(40, 15); // one path through depths 0-2; 40 > 32 keys split again at depth 3
  let s: S = machine.initial;
  let seq = 0;
  for (const k of keys) s = applyOp(machine, s, inv('set', { k, v: 1 }, ++seq), seq).state;
  checkShape(s.m);
  let depth = 0;
  for (let n: unknown = s.m.tree; Array.isArray(n); depth++) n = n.find((c, i) => i > 0 && c !== null);
  assert.equal(depth, 4, 'four branches down to the leaves');
  for (const k of keys.slice(0, 10)) s = applyOp(machine, s, inv('del', { k }, ++seq), seq).state;
  checkShape(s.m);
  assert.ok(!Array.isArray(s.m.tree), '30 keys fit in one leaf at the root');
  assert.equal(keyedMap.size(s.m), 30);
});

// spec: OP-KEYED-MAP
test('a write copies one leaf and the branches above it; every other leaf is shared with the previous snapshot', () => {
  const entries = Array.from({ length: 5000 }, (_, i) => [`item-${i}`, { v: i }] as const);
  const s0: S = { m: keyedMap.from(entries) };
  const s1 = applyOp(machine, s0, inv('bump', { k: 'item-42' }, 1), 1).state;
  assert.equal(keyedMap.get(s1.m, 'item-42')!.v, 43);
  assert.equal(keyedMap.get(s0.m, 'item-42')!.v, 42);
  let shared = 0;
  let copied = 0;
  const cmp = (a: unknown, b: unknown) => {
    if (Array.isArray(a) && Array.isArray(b) && a !== b) {
      a.forEach((c, i) => {
        if (i > 0) cmp(c, b[i]);
      });
      return;
    }
    if (a === b) shared++;
    else copied++;
  };
  cmp(s0.m.tree, s1.m.tree);
  // 5,000 keys: a root branch, 32 branches, leaves of about 5: of the subtrees beside the path
  // (31 at each of two levels), none is copied.
  assert.equal(copied, 1, 'one leaf copied');
  // Every entry not written, in the copied leaf too, is the same object (what a React selector compares).
  for (const [k, v] of keyedMap.entries(s1.m)) if (k !== 'item-42') assert.equal(v, keyedMap.get(s0.m, k), `${k} kept its identity`);
  assert.equal(shared, 62, 'the subtrees beside the written path are shared');
  assert.ok(Object.isFrozen(s1.m.tree) && Object.isFrozen(keyedMap.get(s1.m, 'item-42')), 'the new snapshot is frozen');
});

test('a KeyedMap is JSON data: it passes the state check and survives JSON and msgpack', () => {
  const m = keyedMap.from(Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, { v: i, tags: ['a'] }])));
  assert.equal(findNonJson(m, 'state'), undefined);
  for (const back of [JSON.parse(JSON.stringify(m)), decode(encode(m))] as KeyedMap<{ v: number }>[]) {
    assert.equal(keyedMap.size(back), 300);
    assert.deepEqual(keyedMap.get(back, 'k123'), { v: 123, tags: ['a'] });
    checkShape(back);
  }
  assert.deepEqual(keyedMap.toObject(m).k7, { v: 7, tags: ['a'] });
  assert.equal([...keyedMap.keys(m)].length, 300);
  assert.equal(
    [...keyedMap.values(m)].reduce((a, e) => a + e.v, 0),
    (299 * 300) / 2,
  );
  assert.ok(keyedMap.is(m) && !keyedMap.is({ size: 1 }) && !keyedMap.is(null));
});

// spec: OP-KEYED-MAP
test('misuse gets a bad-argument error that says what to do; inside an op it rejects the op and changes nothing', () => {
  const bad = (f: () => unknown, re: RegExp) => assert.throws(f, (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && re.test(e.message));
  const frozen = machine.initial.m;
  bad(() => keyedMap.set(frozen, 'a', { v: 1 }), /frozen snapshot: call it inside an op/);
  bad(() => keyedMap.delete(frozen, 'a'), /frozen snapshot/);
  bad(() => keyedMap.get({ a: 1 } as never, 'a'), /not a KeyedMap \(make one with keyedMap.empty\(\)/);
  bad(() => keyedMap.get(frozen, 3 as never), /keys are strings/);
  for (const call of ['entries', 'keys', 'values'] as const) bad(() => keyedMap[call]({} as never), /not a KeyedMap/); // at the call, not at the first next()
  bad(() => keyedMap.set(keyedMap.empty(), '__proto__', 1), /"__proto__" cannot be a key/);
  bad(() => keyedMap.set(keyedMap.empty(), 'a', undefined), /undefined; to remove the entry, call keyedMap.delete/);
  bad(() => keyedMap.from({ a: undefined }), /value of "a" is undefined/);
  const s1 = applyOp(machine, machine.initial, inv('set', { k: 'x', v: 1 }, 1), 1).state;
  const r = applyOp(machine, s1, inv('set', { k: '__proto__', v: 2 }, 2), 2);
  assert.match(r.error ?? '', /"__proto__" cannot be a key/);
  assert.equal(r.state, s1);
  assert.equal(keyedMap.delete(keyedMap.from({ a: 1 }), 'b'), false);
});

test('a plain map moves into a keyedMap by a new version (docs/migrations.md), and v1 ops run on it unchanged', () => {
  type Item = { x: number };
  const v1 = defineMachine({
    name: 'design',
    version: 1,
    initial: { items: { a: { x: 1 }, b: { x: 2 } } as Record<string, Item> },
    ops: {
      move(s, a: { id: string; x: number }) {
        s.items[a.id].x = a.x;
      },
    },
  });
  const v2 = defineMachine({
    name: 'design',
    version: 2,
    initial: { items: keyedMap.empty<Item>() },
    ops: {
      move(s, a: { id: string; x: number }) {
        const it = keyedMap.get(s.items, a.id);
        if (!it) throw new Error(`no item ${a.id}`);
        it.x = a.x;
      },
    },
    migrateFrom: { machine: v1, state: (s1) => ({ items: keyedMap.from(s1.items) }) },
  });
  const moved = applyOp(v1, v1.initial, inv('move', { id: 'a', x: 5 }, 1), 1).state;
  const s2 = migrateState(v2, moved, 1);
  assert.deepEqual(keyedMap.toObject(s2.items), { a: { x: 5 }, b: { x: 2 } });
  assert.ok(Object.isFrozen(s2.items.tree));
  // An op written offline against v1 (v: 1) runs on v2's state as it is.
  const r = applyOp(v2, s2, { ...inv('move', { id: 'b', x: 9 }, 2), v: 1 }, 2);
  assert.equal(r.error, undefined);
  assert.deepEqual(keyedMap.get(r.state.items, 'b'), { x: 9 });
});
