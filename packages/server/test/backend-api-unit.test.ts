/**
 * BackendApi on its own (one of the room service's named parts, issue 36 item 1): over a real
 * RoomRegistry and MemoryStore, with no server, no socket and no session. Through a server, the
 * same API is tested in backend-api.test.ts (in process and over the admin HTTP API).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError, type LogEntry } from '@hercules/core';
import { BackendApi } from '../src/backend-api.ts';
import { systemClock } from '../src/clock.ts';
import { RoomRegistry } from '../src/room-registry.ts';
import { MemoryStore } from '../src/store/memory.ts';
import { chat } from '../../../apps/machines.ts';

function setup() {
  const store = new MemoryStore();
  let closing = false;
  const listenersCalled: LogEntry[][] = [];
  const revoked: [string, string | undefined, string][] = [];
  let backend: BackendApi;
  const registry = new RoomRegistry({
    store,
    clock: systemClock,
    events: {
      committedEntries(host, entries) {
        for (const fn of backend.commitListeners(host.name)) fn(entries);
        listenersCalled.push([...entries]);
      },
    },
  });
  backend = new BackendApi({
    store,
    registry,
    machines: new Map([['chat', chat]]),
    closing: () => closing,
    revokeSessions(user, room, message) {
      revoked.push([user, room, message]);
      return 2; // as if two sessions were cut
    },
  });
  const close = () => {
    closing = true;
    return registry.close();
  };
  return { store, registry, backend, revoked, close };
}

const code = (c: string) => (e: unknown) => e instanceof HerculesError && e.code === c;

test('room(name, machine).submit creates the room, orders as the named author, and subscribers see the commit', async () => {
  const { backend, close } = setup();
  const room = backend.room('r1', 'chat');
  const seen: LogEntry[] = [];
  const unsubscribe = room.subscribe((entries) => seen.push(...entries));
  const result = await room.submit('say', { text: 'hi' }, { author: 'ops-bot' });
  assert.equal(result.position, 1);
  assert.deepEqual(
    seen.map((e) => [e.name, e.author]),
    [['say', 'ops-bot']],
  );
  assert.deepEqual(
    ((await room.state()) as { messages: { text: string }[] }).messages.map((m) => m.text),
    ['hi'],
  );
  unsubscribe();
  await room.submit('say', { text: 'again' }, { author: 'ops-bot' });
  assert.equal(seen.length, 1, 'an unsubscribed listener hears nothing more');
  await close();
});

test('bad names, unknown machines, a missing room and a closing service are refused with their codes', async () => {
  const { backend, close } = setup();
  assert.throws(() => backend.room('no/slash', 'chat'), code('bad-argument'));
  assert.throws(() => backend.room('ok', 'nope'), code('bad-argument'));
  await assert.rejects(backend.room('missing').state(), code('bad-room'));
  await assert.rejects(backend.rooms({ limit: 0 }), code('bad-argument'));
  await close();
  await assert.rejects(backend.room('r', 'chat').state(), code('closed'));
});

test('rooms() pages the stored and loaded rooms by name; export then import elsewhere; readLog reads the store', async () => {
  const a = setup();
  for (const name of ['b', 'a', 'c']) await a.backend.room(name, 'chat').submit('say', { text: name }, { author: 'x' });
  const first = await a.backend.rooms({ limit: 2 });
  assert.deepEqual(
    first.rooms.map((r) => [r.name, r.loaded, r.head]),
    [
      ['a', true, 1],
      ['b', true, 1],
    ],
  );
  assert.equal(first.next, 'b');
  const second = await a.backend.rooms({ after: first.next, limit: 2 });
  assert.deepEqual(
    second.rooms.map((r) => r.name),
    ['c'],
  );
  assert.equal(second.next, undefined);
  const file = await a.backend.room('a').export();
  assert.deepEqual(
    (await a.backend.readLog('a', 0, 10)).entries.map((e) => e.pos),
    [1],
  );
  const b = setup();
  await b.backend.importRoom('a2', file);
  assert.deepEqual(
    ((await b.backend.room('a2').state()) as { messages: { text: string }[] }).messages.map((m) => m.text),
    ['a'],
  );
  await assert.rejects(b.backend.importRoom('a3', { ...file, format: 'other' } as never), code('bad-argument'));
  assert.equal(await a.backend.room('c').delete(), true);
  assert.deepEqual(
    (await a.backend.rooms()).rooms.map((r) => r.name),
    ['a', 'b'],
  );
  await a.close();
  await b.close();
});

test('revoke checks its target and hands the cut to the sessions, with the reason', async () => {
  const { backend, revoked, close } = setup();
  assert.throws(() => backend.revoke({ user: '' }), code('bad-argument'));
  assert.throws(() => backend.revoke({ user: 'u', room: 5 as never }), code('bad-argument'));
  assert.equal(backend.revoke({ user: 'u', room: 'r', reason: 'left the team' }), 2);
  assert.deepEqual(revoked, [['u', 'r', 'access of user u to room r was revoked: left the team']]);
  await close();
});
