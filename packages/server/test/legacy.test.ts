/**
 * Data written by a server before protocol 2, which marked a refused op only by the prefix
 * 'refused: ' on its error, reads as refused after an upgrade: here a client whose op was
 * refused while it was away comes back to the upgraded server and learns the verdict as a flag.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, memoryStorage } from '@hercules/client';
import { OpRejectedError } from '@hercules/core';
import { SqliteStore, createServer } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir } from './helpers.ts';

test('a refusal stored with the old "refused: " prefix reaches its client, after an upgrade, as refused with the plain reason', async (t) => {
  const { dir, cleanup } = tempDir('legacy-refused');
  t.after(cleanup);
  const reason = 'not authorized: the room is closed for the night';
  const op = { client: 'night-owl', seq: 1, name: 'say', args: { text: 'anyone?' } };
  // As the old server left it: the op in the log without its args, the verdict in the record.
  const old = new SqliteStore(dir);
  old.create('r', chat.name, chat.version, chat.initial);
  old.commit([
    [
      'r',
      {
        appended: [{ ...op, pos: 1, args: null, author: 'night-owl', error: `refused: ${reason}` }],
        clients: { 'night-owl': { highWater: 1, visibleSeq: 0, rejected: [{ seq: 1, pos: 1, error: `refused: ${reason}` }] } },
      },
    ],
  ]);
  old.close();

  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  // The client still holds its op, durable but without a verdict.
  const storage = memoryStorage();
  const key = `${chat.name}@${chat.version}/r`; // connect()'s storage key for the room
  await storage.init(key, op.client);
  await storage.append(key, [op]);
  const room = await connect({ url: srv.url, room: 'r', machine: chat, storage, clientId: op.client, onError: () => {} });
  t.after(() => room.close());
  const [h] = room.pending();
  assert.equal(h.id, 'night-owl:1');
  await assert.rejects(
    h.authoritative,
    (e: unknown) => e instanceof OpRejectedError && e.refused && e.message === `operation night-owl:1 was refused: ${reason}`,
  );
  assert.equal(h.stage, 'rejected');
  assert.equal(h.refused, true);
  assert.equal(h.error, reason);
  assert.deepEqual(room.getState('authoritative').messages, [], 'the refused op had no effect');
});
