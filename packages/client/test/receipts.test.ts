/**
 * Delivery receipts through a real server and real sockets (protocol 7): who holds my op, how far
 * behind each member is, live; nothing for a client that did not ask.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from '@hercules/server';
import { tempDir, until } from '@hercules/test-utils';
import { connect } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';

async function server(t: { after: (fn: () => unknown) => void }) {
  const { dir, cleanup } = tempDir('receipts');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

// spec: RECEIPT-TRUE, RECEIPT-LIVE
test('seenBy and memberPositions: live for the client that listens, updated as members ack, join and leave; nothing for one that does not', async (t) => {
  const srv = await server(t);
  const open = async () => {
    const r = await connect({ url: srv.url, room: 'r', machine: chat, onError: () => {} });
    t.after(() => r.close());
    await r.whenOnline({ timeoutMs: 5000 });
    return r;
  };
  const a = await open();
  const b = await open();
  let calls = 0;
  const off = a.onReceipts(() => {
    calls++;
  });
  const op = a.ops.say({ text: 'hi' });
  await op.visible;
  // Visible: every other member acked it; the acks message says so to A.
  await until(() => a.seenBy(op).length === 1, 5000, 'B in seenBy');
  assert.deepEqual(a.seenBy(op), [b.clientId]);
  assert.ok(calls > 0, 'the listener heard it');
  const head = a.positions().authoritative;
  assert.deepEqual(a.memberPositions(), [{ client: b.clientId, pos: head, behind: 0 }]);
  assert.deepEqual(b.memberPositions(), [], 'B never asked: it knows no positions');
  assert.deepEqual(b.seenBy(op), []);

  // A joiner is reported once it holds the op; a member that leaves is no longer counted.
  const c = await open();
  await until(() => a.seenBy(op).length === 2, 5000, 'C in seenBy');
  assert.deepEqual([...a.seenBy(op)].sort(), [b.clientId, c.clientId].sort());
  await b.close();
  await until(() => a.seenBy(op).length === 1, 5000, 'B gone from seenBy');
  assert.deepEqual(a.seenBy(op), [c.clientId]);

  // A later op: C holds it once it acks; seenBy of the new op moves from [] to [C].
  const op2 = a.ops.say({ text: 'again' });
  await op2.visible;
  await until(() => a.seenBy(op2).length === 1, 5000, 'C has op2');
  assert.ok(a.memberPositions()[0].pos >= op2.position!);

  // Off: positions are forgotten, not left stale, and the next op is not reported.
  off();
  assert.deepEqual(a.memberPositions(), []);
  const op3 = a.ops.say({ text: 'unseen' });
  await op3.visible;
  assert.deepEqual(a.seenBy(op3), []);
});

test('onReceipts is asked for again on the next connection: after a server restart the new one reports members too', async (t) => {
  const { dir, cleanup } = tempDir('receipts-restart');
  let srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const port = srv.port;
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const open = () => connect({ url: srv.url, room: 'r2', machine: chat, backoff: { minMs: 5, maxMs: 50 }, onError: () => {} });
  const a = await open();
  const b = await open();
  t.after(() => Promise.all([a.close(), b.close()]));
  await Promise.all([a.whenOnline({ timeoutMs: 5000 }), b.whenOnline({ timeoutMs: 5000 })]);
  a.onReceipts(() => {});
  const op = a.ops.say({ text: 'one' });
  await until(() => a.seenBy(op).length === 1, 5000, 'B has it');
  await srv.close();
  await until(() => a.status() !== 'online' && b.status() !== 'online', 5000, 'both offline');
  assert.deepEqual(a.seenBy(op), [], 'offline: no members, so no one is reported');
  srv = await createServer({ port, dataDir: dir, machines: [chat], log: 'silent' });
  await Promise.all([a.whenOnline({ timeoutMs: 10_000 }), b.whenOnline({ timeoutMs: 10_000 })]);
  const op2 = a.ops.say({ text: 'two' });
  await until(() => a.seenBy(op2).length === 1, 10_000, 'B has op2 on the new connection');
  assert.deepEqual(a.seenBy(op), [b.clientId]);
});
