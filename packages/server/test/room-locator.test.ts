/**
 * The room locator seam (room-locator.ts) and the backend calls through it (located-backend.ts):
 * a room served here runs on this service; one served at another node is forwarded there as a
 * `BackendCall` and answered as that node answers; `rooms` and `revoke` reach every live node.
 * The other node is a second room service on its own MemoryStore, reached by `runBackendCall`,
 * as a cluster node's NATS link would (packages/cluster/test/front-door.test.ts runs the real one).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError } from '@hercules/core';
import {
  createRoomService,
  hereLocator,
  locatedBackend,
  MemoryStore,
  runBackendCall,
  type BackendCall,
  type RoomLocator,
  type RoomService,
} from '../src/core.ts';
import { chat } from '../../../apps/machines.ts';

function service(t: { after(fn: () => unknown): void }): RoomService {
  const s = createRoomService({ store: new MemoryStore(), machines: [chat], log: 'silent' });
  t.after(() => s.close());
  return s;
}

/** A locator that says rooms starting with `there-` are at node `other`, reached through `calls`. */
function twoNodes(other: RoomService, calls: BackendCall[], peers = ['other']): RoomLocator {
  return {
    locate: async (room) => (room.startsWith('there-') ? { here: false, node: 'other' } : { here: true }),
    remote: {
      relay: () => Promise.reject(new Error('not in this test')),
      call: async (node, c) => {
        assert.equal(node, 'other');
        calls.push(c);
        // As over a wire: JSON both ways, errors with their code.
        return JSON.parse(JSON.stringify(await runBackendCall(other, JSON.parse(JSON.stringify(c)))));
      },
      peers: () => peers,
      rerouteMs: 1000,
    },
  };
}

test('hereLocator: every room is served here', async () => {
  assert.deepEqual(await hereLocator().locate('any'), { here: true });
  assert.equal(hereLocator().remote, undefined);
});

test('located backend: a room here runs on this service; one at another node is forwarded and answered as there', async (t) => {
  const here = service(t);
  const other = service(t);
  const calls: BackendCall[] = [];
  const backend = locatedBackend(here, twoNodes(other, calls));
  const r = await backend.room('there-1', 'chat').submit('say', { text: 'hi' }, { author: 'bot', key: 'k' });
  assert.deepEqual(r, { seq: 1, position: 1, duplicate: false });
  assert.deepEqual(await backend.room('there-1').state(), await other.room('there-1').state(), 'the state as the other node has it');
  assert.deepEqual(other.loadedRooms(), ['there-1']);
  assert.deepEqual(here.loadedRooms(), [], 'nothing loaded here');
  assert.deepEqual(
    calls.map((c) => c.call),
    ['submit', 'state'],
  );
  // Errors come back with their code: a missing room, an unknown op.
  await assert.rejects(backend.room('there-nope').state(), (e: unknown) => e instanceof HerculesError && e.code === 'bad-room');
  await assert.rejects(backend.room('there-1').submit('nope', {}, { author: 'bot' }), (e: unknown) => e instanceof HerculesError && e.code === 'unknown-op');
  // Bad names and machines are refused here, before any call.
  const before = calls.length;
  assert.throws(
    () => backend.room('there-/bad'),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  assert.throws(
    () => backend.room('there-2', 'nope'),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  assert.equal(calls.length, before);
  // Export, import, delete.
  const file = await backend.room('there-1').export();
  await backend.importRoom('there-copy', file);
  assert.deepEqual(await other.room('there-copy').state(), await other.room('there-1').state());
  assert.equal(await backend.room('there-copy').delete(), true);
  assert.equal(await backend.room('there-copy').delete(), false);
  // A room here never leaves this service.
  const n = calls.length;
  await backend.room('local', 'chat').submit('say', { text: 'here' }, { author: 'bot' });
  assert.deepEqual(here.loadedRooms(), ['local']);
  assert.equal(calls.length, n, 'no call for a room served here');
});

test('located backend: rooms() shows the rooms another node has loaded as loaded; revoke sums every node and fails loudly if one does not answer', async (t) => {
  // One store for both, as a cluster's: each service lists every room.
  const store = new MemoryStore();
  const here = createRoomService({ store, machines: [chat], log: 'silent' });
  const other = createRoomService({ store, machines: [chat], log: 'silent' });
  t.after(async () => {
    await here.close();
    await other.close();
  });
  const calls: BackendCall[] = [];
  const backend = locatedBackend(here, twoNodes(other, calls));
  await backend.room('there-a', 'chat').submit('say', { text: 'x' }, { author: 'bot' });
  const page = await backend.rooms();
  assert.deepEqual(
    page.rooms.map((r) => [r.name, r.loaded, r.head]),
    [['there-a', true, 1]],
  );
  assert.deepEqual(
    (await here.rooms()).rooms.map((r) => r.loaded),
    [false],
    'this node alone sees it unloaded',
  );
  assert.equal(await backend.revoke({ user: 'nobody' }), 0);
  assert.ok(calls.some((c) => c.call === 'revoke'));
  const deaf: RoomLocator = {
    ...twoNodes(other, []),
    remote: { ...twoNodes(other, []).remote!, call: () => Promise.reject(new HerculesError('unreachable', 'gone')) },
  };
  await assert.rejects(locatedBackend(here, deaf).revoke({ user: 'u' }), (e: unknown) => e instanceof HerculesError && e.code === 'unreachable');
  // A peer that does not answer leaves the listing as the store has it.
  assert.deepEqual(
    (await locatedBackend(here, deaf).rooms()).rooms.map((r) => r.loaded),
    [false],
  );
});

test('runBackendCall refuses an unknown call', async (t) => {
  await assert.rejects(runBackendCall(service(t), { call: 'drop-all' } as never), (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument');
});
