/**
 * The text ops run on a frozen snapshot without a draft (PlainOp, text.ts `runPlain`): each must
 * leave exactly the state the same op leaves in a draft, name the same written paths (undo
 * reads them), refuse what the draft refuses with the same message, and fall back to the draft
 * where a KeyedMap is on the path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { applyOp, createText, defineMachine, deleteArgs, insertArgs, keyedMap, textAt, textOps, type OpContext } from '../src/index.ts';
import type { Patch, PlainOp } from '../src/machine.ts';

const { textInsert, textDelete } = textOps();
const initial = {
  doc: createText('hello'),
  notes: keyedMap.from({ a: createText('note') }),
  n: 1,
};
/** The text ops as they are: single ops run without a draft. */
const plain = defineMachine({
  name: 'text-plain',
  version: 1,
  initial,
  ops: { ...textOps() },
});
/** The same ops wrapped, so the engine sees no `plain` and runs them in a draft. */
const draft = defineMachine({
  name: 'text-plain',
  version: 1,
  initial,
  ops: {
    textInsert: (s: unknown, a: Parameters<typeof textInsert>[1], ctx: OpContext) => textInsert(s, a, ctx),
    textDelete: (s: unknown, a: Parameters<typeof textDelete>[1], ctx: OpContext) => textDelete(s, a, ctx),
  },
});

const CLIENTS = ['a', 'b', 'c'];
const paths = (ps: readonly Patch[]) => ps.map((p) => JSON.stringify(p.path)).sort();

test('a text op without a draft leaves the state and names the paths a draft does', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.nat(2), fc.boolean(), fc.nat(1000), fc.nat(6), fc.boolean()), { minLength: 1, maxLength: 60 }), (steps) => {
      let s = plain.initial;
      let seq = 0;
      for (const [who, del, at, n, inNotes] of steps) {
        const client = CLIENTS[who];
        const path = inNotes ? ['notes', 'a'] : 'doc';
        const t = textAt(s, path);
        const op =
          del && t.len > 0
            ? {
                name: 'textDelete',
                args: deleteArgs(t, path, at % t.len, Math.min(n, t.len - (at % t.len)), client),
              }
            : {
                name: 'textInsert',
                args: insertArgs(t, path, client, at % (t.len + 1), 'xyz'.slice(0, 1 + (n % 3))),
              };
        seq++;
        const inv = { client, seq, author: client, ...op };
        const pp: Patch[] = [];
        const dp: Patch[] = [];
        const a = applyOp(plain, s, inv, seq, pp);
        const b = applyOp(draft, s, inv, seq, dp);
        assert.equal(a.error, undefined);
        assert.equal(b.error, undefined);
        assert.deepEqual(a.state, b.state);
        assert.ok(Object.isFrozen(a.state) && Object.isFrozen(textAt(a.state, path)), 'the new snapshot is frozen');
        // Mutative names a pushed array element's path and the length; paths are what undo cuts.
        assert.deepEqual(
          paths(pp),
          paths(dp).filter((p) => !p.endsWith('"length"]')),
        );
        // The plain run is taken on a plain path, and declined where a KeyedMap is on it (an op that
        // changes nothing leaves the snapshot as it is, either way).
        const fn = (op.name === 'textInsert' ? textInsert : textDelete) as PlainOp;
        const ran = fn.plain!(s, inv.args, {
          client,
          seq,
          author: client,
          position: seq,
        });
        if (a.state !== s) assert.equal(ran === undefined, inNotes);
        s = a.state;
      }
    }),
    { numRuns: 60 },
  );
});

test('a text op without a draft refuses what a draft refuses, with the same words, and changes nothing', () => {
  const s = plain.initial;
  const bad = [
    {
      name: 'textInsert',
      args: { p: 'doc', l: ['nobody', 3, 0], r: null, k: 0, t: 'x' },
    },
    { name: 'textInsert', args: { p: 'n', l: null, r: null, k: 0, t: 'x' } },
    { name: 'textInsert', args: { p: 'doc', l: null, r: null, k: 0, t: '' } },
    {
      name: 'textInsert',
      args: { p: 'doc', l: null, r: null, k: 10 ** 9, t: 'x' },
    },
    { name: 'textDelete', args: { p: 'doc', d: [['', 99, 1, 0]] } },
    { name: 'textDelete', args: { p: 'doc', d: 'no' } },
  ];
  for (const op of bad) {
    const inv = { client: 'a', seq: 1, author: 'a', ...op };
    const a = applyOp(plain, s, inv, 1);
    const b = applyOp(draft, s, inv, 1);
    assert.ok(a.error !== undefined, `${JSON.stringify(op)} is refused`);
    assert.equal(a.error, b.error);
    assert.equal(a.state, s);
  }
});

test('deleting deleted characters without a draft leaves the same snapshot', () => {
  const t = plain.initial.doc;
  const args = deleteArgs(t, 'doc', 1, 2, 'a');
  const once = applyOp(plain, plain.initial, { client: 'a', seq: 1, author: 'a', name: 'textDelete', args }, 1).state;
  const patches: Patch[] = [];
  const twice = applyOp(plain, once, { client: 'a', seq: 2, author: 'a', name: 'textDelete', args }, 2, patches).state;
  assert.equal(twice, once);
  assert.deepEqual(patches, []);
});
