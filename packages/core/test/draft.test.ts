import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { create, current as mutativeCurrent } from 'mutative';
import { current, isDraft, produce, type Patch } from '../src/draft.ts';
import { changesFromPatches } from '../src/undo.ts';
import { deepFreeze } from '../src/machine.ts';

// Random programs of what ops do to a JSON state, run on draft.ts's draft and on Mutative's
// (which draft.ts replaced): where Mutative finishes, the results must be equal, share the same
// untouched parts with the base, name the same changes for undo, and leave the base as it was.

const key = fc.constantFrom('a', 'b', 'c');
const leaf = fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constant(null), fc.constant('s'), fc.boolean());
const json = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(key, tie('v'), { maxKeys: 3 })),
})).v;
const state = fc.dictionary(key, json, { minKeys: 1, maxKeys: 3 });
const where = fc.array(fc.oneof(key, fc.nat(3)), { maxLength: 3 });

type Step =
  | { k: 'set'; at: (string | number)[]; key: string | number; value: unknown }
  | { k: 'delete'; at: (string | number)[]; key: string }
  | { k: 'bump'; at: (string | number)[]; key: string | number }
  | { k: 'push' | 'unshift'; at: (string | number)[]; value: unknown }
  | { k: 'pop' | 'shift' | 'reverse' | 'sort' | 'current'; at: (string | number)[] }
  | { k: 'splice'; at: (string | number)[]; start: number; del: number; value: unknown }
  | { k: 'move'; at: (string | number)[]; to: (string | number)[]; key: string | number }
  | { k: 'take'; at: (string | number)[]; to: (string | number)[] };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ k: fc.constant('set' as const), at: where, key: fc.oneof(key, fc.nat(4)), value: json }),
  fc.record({ k: fc.constant('delete' as const), at: where, key }),
  fc.record({ k: fc.constant('bump' as const), at: where, key: fc.oneof(key, fc.nat(3)) }),
  fc.record({ k: fc.constantFrom('push' as const, 'unshift' as const), at: where, value: json }),
  fc.record({ k: fc.constantFrom('pop' as const, 'shift' as const, 'reverse' as const, 'sort' as const, 'current' as const), at: where }),
  fc.record({ k: fc.constant('splice' as const), at: where, start: fc.nat(4), del: fc.nat(2), value: json }),
  fc.record({ k: fc.constant('move' as const), at: where, to: where, key: fc.oneof(key, fc.nat(3)) }),
  fc.record({ k: fc.constant('take' as const), at: where, to: where }),
);

const isObj = (v: unknown): v is Record<string | number, any> => v !== null && typeof v === 'object';
function walk(s: unknown, path: readonly (string | number)[]): Record<string | number, any> | undefined {
  let o = s;
  for (const p of path) {
    if (!isObj(o)) return undefined;
    o = Array.isArray(o) ? (typeof p === 'number' ? o[p] : undefined) : typeof p === 'string' ? o[p] : undefined;
  }
  return isObj(o) ? o : undefined;
}
const fits = (o: object, k: string | number) => (Array.isArray(o) ? typeof k === 'number' && k <= o.length : typeof k === 'string');

/** One step on a draft, as an op would write it; `cur` is the library's `current`. */
function run(d: unknown, st: Step, cur: (v: any) => any): void {
  const o = walk(d, st.at);
  if (!o) return;
  const arr = Array.isArray(o) ? (o as unknown[]) : undefined;
  switch (st.k) {
    case 'set':
      if (fits(o, st.key)) o[st.key] = structuredClone(st.value);
      return;
    case 'delete':
      if (!arr) delete o[st.key];
      return;
    case 'bump':
      if (fits(o, st.key) && typeof o[st.key] === 'number') o[st.key] += 1;
      return;
    case 'current': {
      // Read a part once as plain data, write a changed copy back (text.ts's way).
      const parent = walk(d, st.at.slice(0, -1));
      const last = st.at[st.at.length - 1];
      if (parent && last !== undefined && fits(parent, last)) parent[last] = Array.isArray(o) ? Object.freeze([...cur(o), 1]) : { ...cur(o), c: 1 };
      return;
    }
    case 'move': {
      // Put a part (a draft) in a second place, then change it through the second place.
      const to = walk(d, st.to);
      if (to && fits(to, st.key) && !st.to.slice(0, st.at.length).every((p, i) => p === st.at[i])) {
        to[st.key] = o;
        const again = to[st.key];
        if (!Array.isArray(again)) again.moved = true;
      }
      return;
    }
    default:
  }
  if (!arr) return;
  switch (st.k) {
    case 'push':
      arr.push(structuredClone(st.value));
      return;
    case 'unshift':
      arr.unshift(structuredClone(st.value));
      return;
    case 'pop':
      arr.pop();
      return;
    case 'shift':
      arr.shift();
      return;
    case 'reverse':
      arr.reverse();
      return;
    case 'sort':
      arr.sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : JSON.stringify(x) > JSON.stringify(y) ? 1 : 0));
      return;
    case 'splice':
      arr.splice(st.start, st.del, structuredClone(st.value));
      return;
    case 'take': {
      // Remove an element, change it, and put it elsewhere (moving an item between lists).
      const x = arr.shift();
      const to = walk(d, st.to);
      if (isObj(x) && !Array.isArray(x)) x.taken = true;
      if (Array.isArray(to)) to.push(x);
      return;
    }
    default:
  }
}

function runAll(d: unknown, steps: readonly Step[], cur: (v: any) => any): void {
  for (const st of steps) run(d, st, cur);
}

/** Every path of `v` at which it shares its object with `base` (same path, same object). */
function shared(v: unknown, base: unknown, path = '$', out: string[] = []): string[] {
  if (!isObj(v) || !isObj(base)) return out;
  if (v === base) {
    out.push(path);
    return out;
  }
  for (const k of Object.keys(v)) if (Object.hasOwn(base, k)) shared(v[k], base[k], `${path}.${k}`, out);
  return out;
}

function unfrozen(v: unknown, path = '$'): string | undefined {
  if (!isObj(v)) return undefined;
  if (!Object.isFrozen(v)) return path;
  for (const k of Object.keys(v)) {
    const bad = unfrozen(v[k], `${path}.${k}`);
    if (bad) return bad;
  }
  return undefined;
}

// spec: VIEW-FROZEN
test('draft.ts gives what Mutative gives on random JSON states and programs: value, sharing, undo changes, and the base untouched (property)', () => {
  let compared = 0;
  fc.assert(
    fc.property(state, fc.array(step, { minLength: 1, maxLength: 8 }), (init, steps) => {
      const base = deepFreeze(structuredClone(init));
      const before = JSON.stringify(base);
      let theirs: [unknown, Patch[]];
      try {
        theirs = create(base, (d: unknown) => runAll(d, steps, mutativeCurrent), { enablePatches: true }) as unknown as [unknown, Patch[]];
      } catch {
        return; // an op Mutative refuses (a write into a frozen value): draft.ts may run it
      }
      const paths: Patch[] = [];
      const ours = produce(base, (d: unknown) => runAll(d, steps, current), paths);
      compared++;
      assert.deepEqual(ours, theirs[0]);
      assert.equal(JSON.stringify(base), before, 'the base is unchanged');
      assert.equal(ours === base, theirs[0] === base, 'unchanged state: the base itself');
      assert.deepEqual(shared(ours, base), shared(theirs[0], base), 'the same parts shared with the base');
      assert.equal(unfrozen(ours), undefined, `frozen everywhere (unfrozen at ${unfrozen(ours)})`);
      // The same changes for undo, in any order (they name disjoint paths).
      const changes = (p: Patch[]) => changesFromPatches(base, ours, p)?.sort((x, y) => (JSON.stringify(x.path) < JSON.stringify(y.path) ? -1 : 1));
      assert.deepEqual(changes(paths), changes(theirs[1]), 'the same changes for undo');
    }),
    { numRuns: 3000, seed: 41 },
  );
  assert.ok(compared > 2000, `${compared} programs compared`);
});

test('current and isDraft: plain data of a draft, the base itself while unchanged; drafts are revoked after the op', () => {
  const base = deepFreeze({ list: [{ n: 1 }, { n: 2 }], m: { x: 1 } });
  let kept: any;
  const out = produce(base, (d: any) => {
    assert.equal(isDraft(d.list), true);
    assert.equal(current(d.m), base.m, 'unchanged: the snapshot part');
    d.list[0].n = 5;
    const c = current(d.list);
    assert.equal(isDraft(c) || isDraft(c[0]), false);
    assert.deepEqual(c, [{ n: 5 }, { n: 2 }]);
    assert.equal(c[1], base.list[1]);
    kept = d.list;
  });
  assert.deepEqual(out, { list: [{ n: 5 }, { n: 2 }], m: { x: 1 } });
  assert.equal(out.m, base.m);
  assert.throws(() => kept.length, TypeError, 'a draft kept past its op is revoked');
  assert.equal(current(base), base);
});

test('bad writes through a draft throw (the op is refused), as under Mutative', () => {
  const base = deepFreeze({ list: [1], o: {} as Record<string, unknown> });
  assert.throws(() => produce(base, (d: any) => void (d.list.x = 1)), TypeError);
  assert.throws(() => produce(base, (d: any) => Object.defineProperty(d.o, 'x', { value: 1 })), TypeError);
  assert.throws(() => produce(base, (d: any) => void Reflect.set(d.o, '__proto__', { evil: true })), TypeError);
  assert.equal(
    produce(5 as unknown, () => {}),
    5,
    'a state that is no object runs as it is',
  );
});

test('a value the op builds 20,000 levels deep is settled and frozen at every level, a draft at its bottom replaced (no stack overflow)', () => {
  const base = { v: 0 as unknown, row: { n: 1 } };
  const paths: Patch[] = [];
  const next = produce(
    base,
    (d) => {
      const row = d.row;
      row.n = 2;
      let v: unknown = { row }; // a draft at the bottom: settled into its final value
      for (let i = 0; i < 20_000; i++) v = { v };
      d.v = v;
    },
    paths,
  );
  let level = next.v as { v?: unknown; row?: unknown };
  let depth = 0;
  while (level.v !== undefined) {
    assert.ok(Object.isFrozen(level), `level ${depth} frozen`);
    level = level.v as typeof level;
    depth++;
  }
  assert.equal(depth, 20_000);
  assert.ok(!isDraft(level.row) && Object.isFrozen(level.row));
  assert.deepEqual(level.row, { n: 2 });
  assert.equal(level.row, next.row, 'the same final value in both places');
  assert.deepEqual(base.row, { n: 1 }, 'the base untouched');
});
