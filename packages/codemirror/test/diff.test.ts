/**
 * @hercules/codemirror, the state-level parts (no editor): the changes between two snapshots of
 * a text found by character ids, places that stay on their character, the ranges a view lacks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { applyOp, createText, defineMachine, deleteArgs, insertArgs, textOps, textToString, TEXT_DELETE, TEXT_INSERT, type Text } from '@hercules/core';
import { indexOf, placeAt } from '../src/index.ts';
import { applyChanges, changesBetween, newRanges, stringDiff, textDiff } from '../src/diff.ts';

const machine = defineMachine({ name: 'cm-diff', version: 1, initial: { doc: createText('aaa') }, ops: { ...textOps() } });
type S = typeof machine.initial;
let position = 0;

function run(s: S, client: string, name: string, args: unknown): S {
  const r = applyOp(machine, s, { client, seq: ++position, name, args, author: client }, position);
  assert.equal(r.error, undefined);
  return r.state;
}
const ins = (s: S, client: string, i: number, t: string) => run(s, client, TEXT_INSERT, insertArgs(s.doc, 'doc', client, i, t));
const del = (s: S, client: string, i: number, n: number) => run(s, client, TEXT_DELETE, deleteArgs(s.doc, 'doc', i, n));

test('textDiff tells equal characters apart: an "a" typed at the start of "aaa" is an insert at 0, where comparing strings says 3', () => {
  const s0 = machine.initial;
  const s1 = ins(s0, 'bob', 3, 'a');
  assert.deepEqual(textDiff(s0.doc, s1.doc), [{ from: 3, to: 3, insert: 'a' }]);
  const s2 = ins(s0, 'bob', 0, 'a');
  assert.deepEqual(textDiff(s0.doc, s2.doc), [{ from: 0, to: 0, insert: 'a' }]);
  assert.deepEqual(stringDiff('aaa', 'aaaa'), [{ from: 3, to: 3, insert: 'a' }], 'the string diff says 3 for both');
});

test('textDiff: edits at two places are two changes, so a caret between them stays put', () => {
  let s = ins(machine.initial, 'x', 3, ' middle ');
  const before = s.doc;
  s = ins(s, 'bob', 0, '<');
  s = del(s, 'bob', 5, 3);
  s = ins(s, 'bob', s.doc.len, '>');
  const d = textDiff(before, s.doc)!;
  assert.deepEqual(d, [
    { from: 0, to: 0, insert: '<' },
    { from: 4, to: 7, insert: '' },
    { from: 11, to: 11, insert: '>' },
  ]);
  assert.equal(applyChanges(textToString(before), d), textToString(s.doc));
});

test('textDiff on random edits by three clients: its changes turn the old text into the new', () => {
  const edit = fc.record({ client: fc.constantFrom('a', 'b', 'c'), at: fc.nat(), del: fc.nat({ max: 4 }), text: fc.string({ maxLength: 3 }) });
  fc.assert(
    fc.property(fc.array(edit, { maxLength: 12 }), fc.array(edit, { minLength: 1, maxLength: 12 }), (first, then) => {
      const apply = (s: S, e: { client: string; at: number; del: number; text: string }) => {
        const at = e.at % (s.doc.len + 1);
        const n = Math.min(e.del, s.doc.len - at);
        if (n > 0) s = del(s, e.client, at, n);
        return e.text.length > 0 ? ins(s, e.client, at, e.text) : s;
      };
      const a = first.reduce(apply, machine.initial);
      const b = then.reduce(apply, a);
      const d = textDiff(a.doc, b.doc);
      assert.notEqual(d, null);
      assert.equal(applyChanges(textToString(a.doc), d!), textToString(b.doc));
      assert.equal(applyChanges(textToString(a.doc), changesBetween(a.doc, b.doc)), textToString(b.doc));
      // Backwards, as when ops of ours are refused: characters only in the old text are deleted.
      const back = textDiff(b.doc, a.doc);
      assert.notEqual(back, null);
      assert.equal(applyChanges(textToString(b.doc), back!), textToString(a.doc));
      // The ranges b has and a lacks hold exactly the inserted characters.
      const added = newRanges(a.doc, b.doc).reduce((n, r) => n + r.to - r.from, 0);
      const inserted = d!.reduce((n, c) => n + c.insert.length, 0);
      assert.equal(added, inserted);
    }),
    { numRuns: 300 },
  );
});

test('a place stays on its character: text typed before it moves it, text typed at it goes before it, a deleted character leaves it where it lay', () => {
  let s = ins(machine.initial, 'me', 3, 'bc');
  // The caret after "aaab".
  const place = placeAt(s.doc, 4);
  assert.deepEqual(place, ['me', 0]);
  s = ins(s, 'bob', 0, 'XY');
  assert.equal(indexOf(s.doc, place), 6);
  s = ins(s, 'bob', 6, '!');
  assert.equal(textToString(s.doc), 'XYaaab!c');
  assert.equal(indexOf(s.doc, place), 6, 'an insert right at the caret goes after it');
  s = del(s, 'bob', 4, 3);
  assert.equal(textToString(s.doc), 'XYaac');
  assert.equal(indexOf(s.doc, place), 4, 'its character deleted: where its tombstone lies');
  assert.equal(indexOf(s.doc, null), 0);
  assert.equal(placeAt(s.doc, 0), null);
  assert.equal(indexOf(s.doc, ['nobody', 0]), -1, 'a character not arrived yet');
  const t: Text = s.doc;
  assert.equal(indexOf(t, placeAt(t, t.len)), t.len);
});
