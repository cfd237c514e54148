/**
 * TEXT-OWN-ID: an anchor or a delete range on a character of the op's own client leaves the
 * client's id out (`[clock, hint]`, `[clock, count, hint]`), and means what the full form means.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  applyOp,
  createText,
  defineMachine,
  deleteArgs,
  insertArgs,
  textLongArgs,
  textOps,
  textToString,
  TEXT_DELETE,
  TEXT_INSERT,
  type TextInsertArgs,
} from '../src/index.ts';

const machine = defineMachine({ name: 'own', version: 1, initial: { doc: createText('ab') }, ops: { ...textOps() } });
type S = typeof machine.initial;
const A = '0b9f8e2c-5d1a-4c3e-9f7a-2b6d8e1c4a57';
const B = '7d3e1f0a-9c2b-4e5d-8a6f-1b2c3d4e5f60';
let seq = 0;
const apply = (s: S, client: string, name: string, args: unknown) => applyOp(machine, s, { client, seq: ++seq, author: client, name, args }, seq);
const run = (s: S, client: string, name: string, args: unknown): S => {
  const r = apply(s, client, name, args);
  if (r.error !== undefined) throw new Error(r.error);
  return r.state;
};

/** "ab", then A types "xyz" after "a", B types "Q" after A's "x". */
function typed(): S {
  let s = machine.initial;
  s = run(s, A, TEXT_INSERT, insertArgs(s.doc, 'doc', A, 1, 'xyz'));
  return run(s, B, TEXT_INSERT, insertArgs(s.doc, 'doc', B, 2, 'Q'));
}

// spec: TEXT-OWN-ID
test("an insert between the author's own character and another's: the own anchor short, the other full; both forms give one state", () => {
  const s = typed();
  assert.equal(textToString(s.doc), 'axQyzb');
  // After A's "y" (index 3), before A's "z": both A's.
  const own = insertArgs(s.doc, 'doc', A, 4, '!');
  assert.deepEqual(
    [own.l, own.r],
    [
      [1, 3],
      [2, 4],
    ],
  );
  // After B's "Q", before A's "y": B's full, A's short.
  const mixed = insertArgs(s.doc, 'doc', A, 3, '?');
  assert.deepEqual(
    [mixed.l, mixed.r],
    [
      [B, 0, 2],
      [1, 3],
    ],
  );
  const long = textLongArgs(TEXT_INSERT, mixed, A) as TextInsertArgs;
  assert.deepEqual(
    [long.l, long.r],
    [
      [B, 0, 2],
      [A, 1, 3],
    ],
  );
  assert.deepEqual(run(s, A, TEXT_INSERT, mixed), run(s, A, TEXT_INSERT, long));
  assert.ok(JSON.stringify(mixed).length <= JSON.stringify(long).length - A.length - 3, "the own anchor's id is not on the wire");
});

// spec: TEXT-OWN-ID
test("a delete across the author's and another's characters: the own ranges short; both forms give one state", () => {
  const s = typed();
  const d = deleteArgs(s.doc, 'doc', 1, 4, A);
  assert.deepEqual(d.d, [
    [0, 1, 1],
    [B, 0, 1, 2],
    [1, 2, 3],
  ]);
  const long = textLongArgs(TEXT_DELETE, d, A);
  assert.deepEqual(long, deleteArgs(s.doc, 'doc', 1, 4));
  const after = run(s, A, TEXT_DELETE, d);
  assert.deepEqual(after, run(s, A, TEXT_DELETE, long));
  assert.equal(textToString(after.doc), 'ab');
});

// spec: TEXT-OWN-ID
test("a short anchor means the op's own client's character: under another client it names that one's, or is refused", () => {
  const s = typed();
  const own = insertArgs(s.doc, 'doc', A, 4, '!');
  // B has no clock 4: B's op with A's short anchor is refused, it does not land on A's text.
  assert.match(apply(s, B, TEXT_INSERT, { ...own, k: 1 }).error ?? '', /no character 1 of client/);
  assert.throws(() => run(s, A, TEXT_INSERT, { ...own, l: [2] }), /must be null, \[client, clock, hint\] or \[clock, hint\]/);
  assert.throws(() => run(s, A, TEXT_DELETE, { p: 'doc', d: [[1, 1]] }), /a range is/);
});
