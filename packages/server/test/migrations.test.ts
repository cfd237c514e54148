/**
 * Machine versions and migrations through real sockets, a real SQLite room store and real client
 * stores (docs/migrations.md): a room stored under v1 is migrated once, on load, and not again
 * after a restart; a client on the old version is refused with client-too-old and keeps its
 * store, and the ops it saved offline reach the room once it runs the new code, translated, or
 * settle as rejected with the translation's reason; a newer client against an older server is
 * refused with server-too-old.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connect, memoryStorage, type ConnectedRoom } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { HerculesError, MIGRATE_OP, OpRejectedError, SYSTEM_CLIENT, defineMachine, type Machine } from '@hercules/core';
import { SqliteStore, createServer } from '../src/index.ts';
import { online, rawConnection, tempDir, until } from './helpers.ts';

// spec: REC-MIGRATE-ONCE

const notesV1 = defineMachine({
  name: 'notes',
  version: 1,
  initial: { items: [] as string[] },
  ops: {
    add(s, text: string) {
      s.items.push(text);
    },
    clear(s) {
      s.items.length = 0;
    },
  },
});

const notesV2 = defineMachine({
  name: 'notes',
  version: 2,
  initial: { items: [] as { text: string; by: string }[] },
  ops: {
    add(s, a: { text: string }, ctx) {
      s.items.push({ text: a.text, by: ctx.author });
    },
  },
  migrateFrom: {
    machine: notesV1,
    state: (s1) => ({ items: s1.items.map((text) => ({ text, by: 'before v2' })) }),
    op: (op) => (op.name === 'add' ? { name: 'add', args: { text: op.args } } : { refuse: `${op.name} was removed in notes@2` }),
  },
});

async function server(dir: string, machines: Machine<any, any>[]) {
  return createServer({ port: 0, dataDir: dir, machines, log: 'silent' });
}

function errors() {
  const seen: Error[] = [];
  return { seen, onError: (e: Error) => seen.push(e), has: (code: string) => seen.some((e) => e instanceof HerculesError && e.code === code) };
}

const texts = (r: ConnectedRoom<typeof notesV2>) => r.getState('authoritative').items.map((i) => i.text);

test('a room stored under v1 is migrated on load by one log entry, and not again after a restart', async (t) => {
  const { dir, cleanup } = tempDir('migrate-once');
  t.after(cleanup);
  let srv = await server(dir, [notesV1]);
  const a = await connect({ url: srv.url, room: 'r', machine: notesV1, onError: () => {} });
  await online(a);
  await a.ops.add('one').authoritative;
  await a.ops.add('two').authoritative;
  await a.close();
  await srv.close();

  srv = await server(dir, [notesV1, notesV2]);
  const b = await connect({ url: srv.url, room: 'r', machine: notesV2, onError: () => {} });
  await online(b);
  assert.deepEqual(b.getState('authoritative'), {
    items: [
      { text: 'one', by: 'before v2' },
      { text: 'two', by: 'before v2' },
    ],
  });
  assert.equal(b.positions().authoritative, 3, 'two ops and the migration entry');
  await b.ops.add({ text: 'three' }).authoritative;
  await b.close();
  await srv.close();

  // The stored room records the migration in the room's own client record, and holds the entry.
  const store = new SqliteStore(dir);
  const loaded = store.load('r')!;
  assert.deepEqual(loaded.durable.clients[SYSTEM_CLIENT], { highWater: 2, visibleSeq: 2 });
  const migrations = loaded.durable.suffix.filter((e) => e.client === SYSTEM_CLIENT);
  assert.ok(migrations.every((e) => e.name === MIGRATE_OP && e.pos === 3));
  store.close();

  // A restart with only the new machine (v1 comes with its chain) migrates nothing again.
  srv = await server(dir, [notesV2]);
  t.after(() => srv.close());
  const c = await connect({ url: srv.url, room: 'r', machine: notesV2, onError: () => {} });
  t.after(() => c.close());
  await online(c);
  assert.equal(c.positions().authoritative, 4, 'no second migration entry');
  assert.deepEqual(texts(c), ['one', 'two', 'three']);
});

test('a v1 client gets client-too-old from a v2 server and keeps its store; reloaded as v2, its offline ops arrive once, translated or rejected with the reason', async (t) => {
  const { dir, cleanup } = tempDir('migrate-offline');
  t.after(cleanup);
  const file = join(dir, 'client.db');
  const serverDir = join(dir, 'server');
  let srv = await server(serverDir, [notesV1]);
  let a = await connect({ url: srv.url, room: 'r', machine: notesV1, storage: sqliteStorage(file), onError: () => {} });
  await online(a);
  await a.ops.add('online').authoritative;
  const id = a.clientId;
  await srv.close();
  await until(() => a.status() !== 'online', 10_000, 'offline');
  // Offline under v1: saved on the device, not sent.
  await a.ops.add('offline').durable;
  await a.ops.clear().durable;
  await a.close();

  srv = await server(serverDir, [notesV2]);
  t.after(() => srv.close());
  // The old code comes back first: refused, fatal, nothing of its store lost.
  const e1 = errors();
  a = await connect({ url: srv.url, room: 'r', machine: notesV1, storage: sqliteStorage(file), onError: e1.onError });
  await until(() => e1.has('client-too-old'), 10_000, 'client-too-old');
  assert.equal(a.status(), 'failed');
  assert.deepEqual(
    a.pending().map((h) => h.name),
    ['add', 'add', 'clear'],
    'the op the server had ordered before it stopped (not yet known visible) and the two it never got',
  );
  await a.close();

  // The app reloads with v2: same store, same client id.
  const b = await connect({ url: srv.url, room: 'r', machine: notesV2, storage: sqliteStorage(file), onError: () => {} });
  assert.equal(b.clientId, id, 'the store survived the upgrade');
  const [added, cleared] = b.pending().filter((h) => h.seq > 1);
  assert.deepEqual([added.name, cleared.name], ['add', 'clear']);
  // Offline, before the welcome: the v1 op already shows, translated, on the migrated base.
  await online(b);
  await added.authoritative;
  await assert.rejects(cleared.authoritative, (e: unknown) => e instanceof OpRejectedError && e.refused && e.message.endsWith('clear was removed in notes@2'));
  assert.equal(cleared.error, 'clear was removed in notes@2');
  assert.deepEqual(b.getState('authoritative').items, [
    { text: 'online', by: 'before v2' },
    { text: 'offline', by: id },
  ]);
  const head = b.positions().authoritative;
  await b.close();

  // Again: nothing is sent twice.
  const c = await connect({ url: srv.url, room: 'r', machine: notesV2, storage: sqliteStorage(file), onError: () => {} });
  t.after(() => c.close());
  await online(c);
  await until(() => c.pending().length === 0, 10_000, 'every op visible');
  assert.equal(c.positions().authoritative, head);
  assert.deepEqual(texts(c), ['online', 'offline']);
});

test('a v2 client against a v1 server gets server-too-old; a v1 client against a v2 server client-too-old, close 4002', async (t) => {
  const { dir, cleanup } = tempDir('migrate-versions');
  t.after(cleanup);
  const srv1 = await server(join(dir, 'one'), [notesV1]);
  t.after(() => srv1.close());
  const e = errors();
  const b = await connect({ url: srv1.url, room: 'r', machine: notesV2, onError: e.onError });
  t.after(() => b.close());
  await until(() => e.has('server-too-old'), 10_000, 'server-too-old');
  assert.equal(b.status(), 'failed');

  const srv2 = await server(join(dir, 'two'), [notesV2]);
  t.after(() => srv2.close());
  const raw = await rawConnection(srv2.url, 'r');
  raw.hello('old', notesV1);
  await until(() => raw.closed() !== undefined, 10_000, 'closed');
  assert.equal(raw.closed()!.code, 4002);
  const err = raw.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'client-too-old' && err.fatal);
});

test('a room migrated past the newest version a server has is refused with server-too-old', async (t) => {
  const { dir, cleanup } = tempDir('migrate-downgrade');
  t.after(cleanup);
  let srv = await server(dir, [notesV1]);
  const a = await connect({ url: srv.url, room: 'r', machine: notesV1, onError: () => {} });
  await online(a);
  await a.ops.add('x').authoritative;
  await a.close();
  await srv.close();
  srv = await server(dir, [notesV2]);
  const b = await connect({ url: srv.url, room: 'r', machine: notesV2, onError: () => {} });
  await online(b);
  await b.close();
  await srv.close();
  // An old node of a rolling deploy loads the migrated room.
  srv = await server(dir, [notesV1]);
  t.after(() => srv.close());
  const raw = await rawConnection(srv.url, 'r');
  raw.hello('old', notesV1);
  await until(() => raw.closed() !== undefined, 10_000, 'closed');
  const err = raw.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'server-too-old', JSON.stringify(err));
});

test('createServer refuses two versions of one machine that are not one migrateFrom chain', async (t) => {
  const { dir, cleanup } = tempDir('migrate-chain');
  t.after(cleanup);
  const stray = defineMachine({ name: 'notes', version: 2, initial: {}, ops: {} });
  await assert.rejects(
    server(dir, [notesV1, stray]),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /migrateFrom chain/.test(e.message),
  );
});

test('a client store written before stores dropped the version from their key (name@1/room) is found by v2 code, its ops read as v1', async (t) => {
  const { dir, cleanup } = tempDir('migrate-legacy-key');
  t.after(cleanup);
  const srv = await server(dir, [notesV2]);
  t.after(() => srv.close());
  const storage = memoryStorage();
  // As connect() of the release before left it: keyed by name@version, ops without a version.
  await storage.init('notes@1/r', 'old-client');
  await storage.append('notes@1/r', [{ client: 'old-client', seq: 1, name: 'add', args: 'kept' }]);
  const b = await connect({ url: srv.url, room: 'r', machine: notesV2, storage, onError: () => {} });
  t.after(() => b.close());
  assert.equal(b.clientId, 'old-client');
  const [h] = b.pending();
  await h.authoritative;
  assert.deepEqual(b.getState('authoritative').items, [{ text: 'kept', by: 'old-client' }]);
  assert.equal(await storage.load('notes/r'), undefined, 'it goes on under the key it was found at');
});
