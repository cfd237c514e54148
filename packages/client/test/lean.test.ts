/**
 * `@hercules/client/lean` (issue 41, item 5): connect() with only the features passed. Without
 * them a room has no undo and no `room.text`, and says so; with them it has both, as the
 * default entry's rooms do. The consumer test checks what the lean bundle leaves out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError, createText, defineMachine, textOps } from '@hercules/core';
import { connect as connectFull } from '../src/index.ts';
import { connect, memoryStorage, recoveryFeature, textFeature, undoFeature } from '../src/lean.ts';

const doc = defineMachine({
  name: 'doc',
  version: 1,
  initial: { title: '', body: createText('') },
  ops: {
    ...textOps(),
    rename(state: { title: string }, args: { title: string }) {
      state.title = args.title;
    },
  },
});

// No server listens there: every room below works offline, on Submitted.
const url = 'ws://127.0.0.1:9';
const isBadArgument = (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument';

test('a lean room has no undo and no room.text, and says so; its ops run as any room', async (t) => {
  const room = await connect({ url, room: 'lean', machine: doc, storage: memoryStorage(), onError: () => {} });
  t.after(() => room.close());
  room.ops.rename({ title: 'a' });
  assert.equal(room.getState().title, 'a');
  assert.equal(room.canUndo(), false);
  assert.equal(room.undo(), undefined, 'undo does nothing, as with undo: false');
  assert.throws(
    () => room.text('body'),
    (e: unknown) => isBadArgument(e) && /textFeature/.test((e as Error).message),
  );
});

test('with undoFeature and textFeature, a lean room undoes and edits texts like a full one', async (t) => {
  for (const open of [
    () => connect({ url, room: 'lean', machine: doc, features: [undoFeature, textFeature], onError: () => {} }),
    () => connectFull({ url, room: 'full', machine: doc, onError: () => {} }),
  ]) {
    const room = await open();
    t.after(() => room.close());
    room.text('body').insert(0, 'hello');
    assert.equal(room.text('body').toString(), 'hello');
    assert.equal(room.canUndo(), true);
    room.undo();
    assert.equal(room.text('body').toString(), '');
  }
});

test('undo options or recover without their feature are refused, not ignored', async () => {
  await assert.rejects(connect({ url, room: 'lean', machine: doc, undo: { captureMs: 100 } }), isBadArgument);
  await assert.rejects(connect({ url, room: 'lean', machine: doc, recover: true }), isBadArgument);
  const room = await connect({ url, room: 'lean', machine: doc, recover: true, features: [recoveryFeature], onError: () => {} });
  await room.close();
});
