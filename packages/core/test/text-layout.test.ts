/**
 * TEXT-LAYOUT: a text stored in the layout before runs became tuples (`$text: 1`, runs
 * `{ c, k, t | d, l, r }`), or in the one before the tree (`$text: 2`, a flat list of chunks),
 * still reads, and an op on it gives what that code gave. The state in
 * text-v1.fixture.json was written by that code (main at 1b3fbc6): two clients typing at one place
 * while apart, deletes across runs, 5 chunks; `after` are ops made against it there (a third
 * client's typed against an early state, so the old runs' left origins place them) and
 * `textAfter` the text they gave there. text-v2.fixture.json is the same for `$text: 2`, written by
 * main at e3e08fa (16 chunks).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  applyOp,
  ClientRoom,
  compactText,
  defineMachine,
  deleteArgs,
  insertArgs,
  isText,
  textIndexOf,
  textOps,
  textPlaceAt,
  textPlaceIndex,
  textToString,
  type OpInvocation,
  treeText,
  type Text,
  type TextFlat,
  type TextV1,
} from '../src/index.ts';
import { decode, encode } from '../src/msgpack.ts';

interface Fixture {
  state: { doc: TextV1 | TextFlat };
  text: string;
  after: (OpInvocation & { client: string; seq: number; author: string })[];
  textAfter: string;
}
const fixtureOf = (name: string) => JSON.parse(readFileSync(new URL(name, import.meta.url), 'utf8')) as Fixture;
const fixture = fixtureOf('./text-v1.fixture.json');
const fixtureV2 = fixtureOf('./text-v2.fixture.json');
const machineWith = (doc: unknown) => defineMachine({ name: 'layout', version: 1, initial: { doc: doc as Text }, ops: { ...textOps() } });

function replay(doc: unknown, f: Fixture = fixture): Text {
  const m = machineWith(doc);
  let s = m.initial;
  f.after.forEach((op, i) => {
    s = applyOp(m, s, op, i + 1).state;
  });
  return s.doc;
}

// spec: TEXT-LAYOUT
test('a text stored in the layout before tuples reads: its string, places and indexes, and ops made against it', () => {
  const old = machineWith(fixture.state.doc).initial.doc;
  assert.equal(old.$text, 1, 'the fixture is in the old layout');
  assert.ok(isText(old));
  assert.equal(textToString(old), fixture.text);
  const now = compactText(old);
  assert.equal(now.$text, 2);
  assert.equal(textToString(now), fixture.text);
  for (let i = 0; i <= old.len; i++) assert.equal(textPlaceIndex(old, textPlaceAt(old, i)), i, `place at ${i}`);
  assert.deepEqual(insertArgs(old, 'doc', 'z', 7, 'q'), insertArgs(now, 'doc', 'z', 7, 'q'));
  assert.deepEqual(deleteArgs(old, 'doc', 3, 20), deleteArgs(now, 'doc', 3, 20));
  const [c, k] = [old.clients[1], (fixture.state.doc as TextV1).chunks[0].runs[1].k];
  assert.equal(textIndexOf(old, c, k), textIndexOf(now, c, k));
});

// spec: TEXT-LAYOUT
test('ops on a text stored in the old layout give the text they gave there, in the new layout, the same as on the text converted first', () => {
  const onOld = replay(fixture.state.doc);
  assert.equal(textToString(onOld), fixture.textAfter);
  assert.equal(onOld.$text, 3, 'the op turned it into the new layout');
  assert.ok(
    compactText(onOld).chunks.every((ch) => ch.runs.every((r) => Array.isArray(r))),
    'every run a tuple',
  );
  const onNew = replay(compactText(machineWith(fixture.state.doc).initial.doc));
  assert.deepEqual(onOld, onNew, 'migrated in the op or converted before: one state');
  assert.deepEqual(decode(encode(onOld)), onOld, 'msgpack round trip');
  assert.ok(JSON.stringify(onOld).length < JSON.stringify(fixture.state.doc).length, 'smaller than the old layout');
});

// spec: TEXT-LAYOUT
test('room.text on a room whose state holds an old-layout text: insert, delete and toString work', () => {
  const room = new ClientRoom(machineWith(fixture.state.doc), { clientId: 'z' });
  const text = room.text('doc');
  assert.equal(text.toString(), fixture.text);
  text.insert(3, 'NEW');
  text.delete(0, 2);
  const want = (fixture.text.slice(0, 3) + 'NEW' + fixture.text.slice(3)).slice(2);
  assert.equal(text.toString(), want);
  assert.equal(text.length(), want.length);
});

// spec: TEXT-LAYOUT
test('a text stored as a flat list of chunks ($text: 2) reads, and ops made against it there give the text they gave, in the tree', () => {
  const old = machineWith(fixtureV2.state.doc).initial.doc;
  assert.equal(old.$text, 2, 'the fixture is in the layout before the tree');
  assert.ok(isText(old));
  assert.equal(textToString(old), fixtureV2.text);
  const tree = treeText(old);
  assert.equal(tree.$text, 3);
  assert.deepEqual(compactText(tree).chunks, (fixtureV2.state.doc as TextFlat).chunks, 'the chunks are the leaves of the tree, in order');
  for (let i = 0; i <= old.len; i++) assert.equal(textPlaceIndex(old, textPlaceAt(old, i)), i, `place at ${i}`);
  for (const i of [0, 1, 57, 300, old.len]) assert.deepEqual(insertArgs(old, 'doc', 'z', i, 'q'), insertArgs(tree, 'doc', 'z', i, 'q'));
  assert.deepEqual(deleteArgs(old, 'doc', 3, 200), deleteArgs(tree, 'doc', 3, 200));
  const onOld = replay(fixtureV2.state.doc, fixtureV2);
  assert.equal(textToString(onOld), fixtureV2.textAfter, 'what the code before the tree gave');
  assert.equal(onOld.$text, 3, 'the op turned it into the tree');
  assert.deepEqual(onOld, replay(tree, fixtureV2), 'migrated in the op or converted before: one state');
  assert.deepEqual(decode(encode(onOld)), onOld, 'msgpack round trip');
  assert.deepEqual(JSON.parse(JSON.stringify(onOld)), onOld, 'JSON round trip');
});
