/**
 * StoreHealth (store-health.ts): what /healthz says of the room store, from the writes the rooms
 * make. A fake clock; the servers' /healthz over a failing store is in server.test.ts (a full
 * SQLite disk) and packages/cluster/test/node.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError } from '@hercules/core';
import { FencedError, MemoryStore, StorageError, type RoomStore } from '../src/index.ts';
import { STALE_MS, StoreHealth } from '../src/store-health.ts';

test('a failed write makes the store unhealthy, with its error, until a write succeeds', () => {
  let now = 1000;
  const h = new StoreHealth(() => now);
  assert.deepEqual(h.report(), { ok: true, failures: 0 });
  h.succeeded();
  now += 5;
  h.failed(new StorageError('SQLITE_FULL: database or disk is full'));
  now += 10;
  h.failed(new Error('no JetStream leader'));
  assert.deepEqual(h.report(), { ok: false, failures: 2, error: 'no JetStream leader', lastFailureMsAgo: 0, lastCommitMsAgo: 15 });
  now += 100;
  h.succeeded();
  assert.deepEqual(h.report(), { ok: true, failures: 0, lastCommitMsAgo: 0 });
});

test('failures that say nothing of the store are not counted: fenced, a value it cannot hold, closed, a bad argument', () => {
  const h = new StoreHealth(() => 0);
  h.failed(new FencedError('r', 3, 4));
  h.failed(new StorageError('cannot serialise', undefined, 'value'));
  h.failed(new HerculesError('closed', 'the room store is closed'));
  h.failed(new HerculesError('bad-argument', 'bad room name'));
  assert.deepEqual(h.report(), { ok: true, failures: 0 });
});

test('a failure with no write since is reported for STALE_MS, then the store is reported up with its last failure', () => {
  let now = 0;
  const h = new StoreHealth(() => now);
  h.failed(new StorageError('disk full'));
  now = STALE_MS - 1;
  assert.equal(h.report().ok, false);
  now = STALE_MS;
  assert.deepEqual(h.report(), { ok: true, failures: 1, error: 'disk full', lastFailureMsAgo: STALE_MS });
});

test('watch: appends and failed opens are seen; a store keeps its other methods, optional ones as they are', async () => {
  const store = new MemoryStore();
  const h = new StoreHealth(() => 0);
  const watched: RoomStore = h.watch(store);
  const room = await watched.open('r', { machine: 'm', version: 1, initial: { n: 0 } });
  await watched.append('r', { after: room.rev, entries: [{ pos: 1, client: 'c', seq: 1, name: 'op', args: {}, author: 'c' }], clients: {} });
  assert.deepEqual(h.report(), { ok: true, failures: 0, lastCommitMsAgo: 0 });
  store.failAppend({ stage: 'before' });
  await assert.rejects(watched.append('r', { after: room.rev + 1, clients: {} }));
  assert.equal(h.report().ok, false);
  // A room that opens is no proof of commits (on a full disk it still loads); one that cannot open is a failure.
  await watched.open('r');
  assert.equal(h.report().ok, false);
  assert.equal(typeof watched.importRoom, 'function');
  assert.deepEqual(await watched.rooms(), ['r']);
  const bare = {
    ...Object.fromEntries(['append', 'release', 'rooms', 'close'].map((k) => [k, () => Promise.resolve()])),
    open: () => Promise.reject(new StorageError('no JetStream leader')),
  } as unknown as RoomStore;
  const h2 = new StoreHealth(() => 0);
  const w2 = h2.watch(bare);
  assert.equal(w2.importRoom, undefined, 'an optional method the store lacks stays absent');
  await assert.rejects(w2.open('x'));
  assert.deepEqual(h2.report(), { ok: false, failures: 1, error: 'no JetStream leader', lastFailureMsAgo: 0 });
});
