/**
 * `@hercules/client/lean` (issue 41, item 5): connect() with only the features passed. Without
 * them a room has no undo, no `room.text`, no presence and no delivery receipts, and says so;
 * with them it has each, as the default entry's rooms do. The consumer test checks what the lean bundle leaves out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError, createText, defineMachine, textOps } from '@hercules/core';
import { createServer } from '@hercules/server';
import { tempDir, until } from '@hercules/test-utils';
import { connect as connectFull } from '../src/index.ts';
import { connect, memoryStorage, presenceFeature, receiptsFeature, recoveryFeature, textFeature, undoFeature, type ClientFeatures } from '../src/lean.ts';
import { chat } from '../../../apps/machines.ts';

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

// Presence and delivery receipts are features too: a lean room without them ignores what the
// server says of others' presence and asks for no receipts; with them it is a full room's equal.
// spec: PRESENCE-EPHEMERAL, RECEIPT-TRUE
test('presence and receipts: only with presenceFeature and receiptsFeature, then as in a full room', async (t) => {
  const { dir, cleanup } = tempDir('lean');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const open = async (features?: ClientFeatures[]) => {
    const r = features
      ? await connect({ url: srv.url, room: 'p', machine: chat, features, onError: () => {} })
      : await connectFull({ url: srv.url, room: 'p', machine: chat, onError: () => {} });
    t.after(() => r.close());
    await r.whenOnline({ timeoutMs: 5000 });
    return r;
  };
  const bare = await open([]);
  const lean = await open([presenceFeature, receiptsFeature]);
  const full = await open();
  assert.throws(
    () => bare.presence,
    (e: unknown) => isBadArgument(e) && /presenceFeature/.test((e as Error).message),
  );
  assert.throws(
    () => bare.setPresenceOf('tab', { name: 't' }),
    (e: unknown) => isBadArgument(e) && /presenceFeature/.test((e as Error).message),
  );
  assert.throws(
    () => bare.onReceipts(() => {}),
    (e: unknown) => isBadArgument(e) && /receiptsFeature/.test((e as Error).message),
  );
  full.presence.set({ name: 'full' });
  lean.presence.set({ name: 'lean' });
  await until(() => lean.presence.others().length === 1 && full.presence.others().length === 1, 5000, 'each sees the other');
  assert.deepEqual(lean.presence.others()[0].value, { name: 'full' });
  assert.deepEqual(full.presence.others()[0].value, { name: 'lean' });
  assert.equal(lean.presence.get()?.name, 'lean');
  let heard = 0;
  lean.onReceipts(() => heard++);
  const op = lean.ops.say({ text: 'hi' });
  await op.visible;
  await until(() => lean.seenBy(op).length === 2, 5000, 'both others in seenBy');
  assert.ok(heard > 0);
  assert.deepEqual(bare.seenBy(op), [], 'a room without receipts knows none');
  assert.deepEqual(bare.memberPositions(), []);
});
