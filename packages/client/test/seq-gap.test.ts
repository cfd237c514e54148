/**
 * A store that lost an op in the middle of its sequence (outside the store's contract, but disks
 * and buggy adapters do it): the client says so once, sends nothing past the hole, stops
 * reconnecting, and keeps the ops after the hole (LOG-OWN-HOLE).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError } from '@hercules/core';
import { createServer } from '@hercules/server';
import { connect, memoryStorage } from '../src/index.ts';
import { tempDir } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';

// spec: LOG-OWN-HOLE
test('a store that lost one of its ops in the middle: one seq-gap naming it, no reconnects, nothing sent past it, the ops after it kept', async (t) => {
  const { dir, cleanup } = tempDir('seqgap');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const storage = memoryStorage();
  const first = await connect({ url: srv.url, room: 'g', machine: chat, storage, clientId: 'c1', onError: () => {} });
  await first.ops.say({ text: 'one' }).visible;
  await first.close();
  // The store loses seq 2 and keeps 3 and 4: written by a process whose write of 2 never landed.
  const key = `${chat.name}/g`;
  await storage.append(key, [
    { client: 'c1', seq: 3, name: 'say', args: { text: 'three' } },
    { client: 'c1', seq: 4, name: 'say', args: { text: 'four' } },
  ]);

  const errors: Error[] = [];
  const statuses: string[] = [];
  const room = await connect({
    url: srv.url,
    room: 'g',
    machine: chat,
    storage,
    backoff: { minMs: 1, maxMs: 2 },
    onError: (e) => errors.push(e),
    onStatus: (s) => statuses.push(s),
  });
  await assert.rejects(room.whenOnline({ timeoutMs: 10_000 }), (e: unknown) => e instanceof HerculesError && e.code === 'seq-gap');
  assert.equal(room.status(), 'failed');
  // A reconnect loop would show as more statuses and more reports while another client works.
  const other = await connect({ url: srv.url, room: 'g', machine: chat, onError: () => {} });
  t.after(() => other.close());
  await other.ops.say({ text: 'other' }).visible;
  assert.deepEqual(
    other.getState('authoritative').messages.map((m) => m.text),
    ['one', 'other'],
    'nothing past the hole reached the room',
  );
  assert.deepEqual(statuses.slice(statuses.indexOf('failed')), ['failed'], `no reconnect after the refusal: ${statuses.join(', ')}`);
  assert.equal(errors.length, 1, `reported once: ${errors.map((e) => e.message).join(' | ')}`);
  const e = errors[0] as HerculesError;
  assert.equal(e.code, 'seq-gap');
  assert.match(e.message, /holds its op seq 3 but not seq 2, which the server never received/);
  assert.match(e.message, /room\.pending\(\) lists them/, 'says where the kept ops are');
  assert.deepEqual(
    room.pending().map((h) => [h.seq, h.name, h.stage]),
    [
      [3, 'say', 'durable'],
      [4, 'say', 'durable'],
    ],
    'the app can see the ops after the hole',
  );
  await room.close();
  const kept = (await storage.load(key))!.durable.filter((o) => o.seq > 1);
  assert.deepEqual(
    kept.map((o) => [o.seq, o.args]),
    [
      [3, { text: 'three' }],
      [4, { text: 'four' }],
    ],
    'the store still holds the ops after the hole, args and all',
  );
});
