/**
 * Stranded stores (DUR-NOT-STRANDED): a client that stopped offline in a store no client opens
 * again has its ops sent by the next client of the room, under its own id, exactly once.
 * IndexedDB here is fake-indexeddb with fake Web Locks; apps/web/test/e2e.test.ts runs the real
 * ones in Chromium.
 */
import { test } from 'node:test';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { IDBFactory, IDBKeyRange } from 'fake-indexeddb';
import { createServer } from '@hercules/server';
import { tempDir, until } from '@hercules/test-utils';
import { connect, findPending, indexedDbDirectory, indexedDbStorage, recoverPending, type RecoveredStore } from '../src/index.ts';
import { existsSync, readdirSync } from 'node:fs';
import Database from 'better-sqlite3';
import { sqliteDirectory, sqliteStorage } from '@hercules/client-sqlite';
import { chat } from '../../../apps/machines.ts';
import { fakeLocks } from './fake-locks.ts';

const { dir, cleanup } = tempDir('recover');
process.on('exit', cleanup);
const OFFLINE = 'ws://127.0.0.1:1';

function browser() {
  const env = { indexedDB: new IDBFactory(), IDBKeyRange, locks: fakeLocks() };
  const names = async () => (await env.indexedDB.databases()).map((d) => d.name).sort();
  return { env, names, store: (name: string) => indexedDbStorage(name, env) };
}

async function server(t: { after: (fn: () => unknown) => void }, name: string) {
  const srv = await createServer({ port: 0, dataDir: join(dir, name), machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  return srv;
}

/** A tab that types offline and is closed: its store keeps the ops, and no tab opens it again. */
async function strand(b: ReturnType<typeof browser>, store: string, texts: string[], url = OFFLINE, room = 'r') {
  const tab = await connect({
    url,
    room,
    machine: chat,
    storage: b.store(store),
    backoff: { minMs: 5000, maxMs: 5000 },
    baseEveryMs: 60_000,
    recover: false,
    onError: () => {},
  });
  const handles = texts.map((text) => tab.ops.say({ text }));
  await Promise.all(handles.map((h) => h.durable));
  if (url !== OFFLINE) await Promise.all(handles.map((h) => h.authoritative));
  await tab.close();
  return tab.clientId;
}

const texts = (room: { getState(v: 'authoritative'): { messages: { text: string; author: string }[] } }) =>
  room.getState('authoritative').messages.map((m) => `${m.author.slice(0, 8)}:${m.text}`);

// spec: DUR-NOT-STRANDED, LOG-EXACTLY-ONCE
test('the next client of the room sends a closed tab’s stranded ops under the tab’s own id, once, and deletes its store; live and foreign stores are left alone', async (t) => {
  const srv = await server(t, 'a');
  const b = browser();
  const closedTab = await strand(b, 'tab-a', ['a1', 'a2', 'a3']);
  // A tab that is still open (offline too): its store is held, so it is not touched. (Not
  // recovering itself: offline, it would hold tab-a until the server answers.)
  const live = await connect({
    url: OFFLINE,
    room: 'r',
    machine: chat,
    storage: b.store('tab-b'),
    backoff: { minMs: 5000, maxMs: 5000 },
    recover: false,
    onError: () => {},
  });
  await live.ops.say({ text: 'b1' }).durable;
  // Another library's database, and a store of another room.
  await new Promise<void>((res) => {
    const r = b.env.indexedDB.open('not-hercules', 3);
    r.onupgradeneeded = () => r.result.createObjectStore('things');
    r.onsuccess = () => {
      r.result.close();
      res();
    };
  });
  await strand(b, 'tab-other-room', ['o1'], OFFLINE, 'other');
  assert.deepEqual(
    (await findPending({ stores: indexedDbDirectory(b.env), machine: chat, room: 'r' })).map((p) => [p.store, p.clientId, p.ops]),
    [['tab-a', closedTab, 3]],
    'the closed tab’s store is found; the live one is held',
  );

  assert.deepEqual(
    await findPending({ stores: indexedDbDirectory({ ...b.env, match: (n) => n.startsWith('user2-') }), machine: chat, room: 'r' }),
    [],
    'match narrows the look',
  );
  const recovered: RecoveredStore[] = [];
  const next = await connect({ url: srv.url, room: 'r', machine: chat, storage: b.store('tab-c'), onRecovered: (r) => recovered.push(r) });
  t.after(() => next.close());
  await until(() => recovered.length === 1, 10_000);
  assert.deepEqual(recovered, [{ store: 'tab-a', clientId: closedTab, ops: 3, removed: true }]);
  await until(() => next.getState('authoritative').messages.length === 3, 5000);
  assert.deepEqual(
    texts(next),
    [`${closedTab.slice(0, 8)}:a1`, `${closedTab.slice(0, 8)}:a2`, `${closedTab.slice(0, 8)}:a3`],
    'under the closed tab’s id, in its order',
  );
  assert.deepEqual(await b.names(), ['not-hercules', 'tab-b', 'tab-c', 'tab-other-room'], 'only the drained store is deleted');
  // The closed tab's ops are not sent again by anyone: a second recovery finds nothing.
  assert.deepEqual(await recoverPending({ url: srv.url, room: 'r', machine: chat, stores: indexedDbDirectory(b.env) }), []);
  await live.close();
  const fresh = await connect({ url: srv.url, room: 'r', machine: chat });
  t.after(() => fresh.close());
  await fresh.whenOnline({ timeoutMs: 5000 });
  assert.deepEqual(
    fresh.getState('authoritative').messages.map((m) => m.text),
    ['a1', 'a2', 'a3'],
    'each op once on the server',
  );
});

// spec: DUR-NOT-STRANDED, LOG-EXACTLY-ONCE
test('ops the server already has are confirmed, not ordered again: a store of sent ops drains to the same log', async (t) => {
  const srv = await server(t, 'b');
  const b = browser();
  const id = await strand(b, 'sent', ['s1', 's2'], srv.url);
  const [pending] = await findPending({ stores: indexedDbDirectory(b.env), machine: chat, room: 'r' });
  assert.equal(pending?.ops, 2, 'the store still holds them: no base took them yet');
  const got = await recoverPending({ url: srv.url, room: 'r', machine: chat, stores: indexedDbDirectory(b.env) });
  assert.deepEqual(got, [{ store: 'sent', clientId: id, ops: 2, removed: true }]);
  const fresh = await connect({ url: srv.url, room: 'r', machine: chat });
  t.after(() => fresh.close());
  await fresh.whenOnline({ timeoutMs: 5000 });
  assert.deepEqual(
    fresh.getState('authoritative').messages.map((m) => m.text),
    ['s1', 's2'],
  );
});

// spec: DUR-NOT-STRANDED
test('a recovery stopped before the server answered keeps the store and its ops for the next one; recover: false leaves stores alone', async (t) => {
  const srv = await server(t, 'c');
  const b = browser();
  const id = await strand(b, 'tab-a', ['x']);
  const stop = new AbortController();
  const errors: Error[] = [];
  const running = recoverPending({
    url: OFFLINE,
    room: 'r',
    machine: chat,
    stores: indexedDbDirectory(b.env),
    signal: stop.signal,
    onError: (e) => errors.push(e),
  });
  await new Promise((r) => setTimeout(r, 200));
  stop.abort();
  assert.deepEqual(await running, []);
  assert.deepEqual(
    errors.filter((e) => (e as { code?: string }).code !== 'unreachable'),
    [],
    'being stopped is not an error (the server being down is told as always)',
  );
  assert.ok((await b.names()).includes('tab-a'), 'kept');
  const quiet = await connect({ url: srv.url, room: 'r', machine: chat, storage: b.store('tab-q'), recover: false });
  await quiet.whenOnline({ timeoutMs: 5000 });
  await new Promise((r) => setTimeout(r, 200));
  assert.ok((await b.names()).includes('tab-a'), 'recover: false does not look');
  await quiet.close();
  // The store is not held by anyone after the stop: the next client drains it.
  const recovered: RecoveredStore[] = [];
  const next = await connect({ url: srv.url, room: 'r', machine: chat, storage: b.store('tab-c'), onRecovered: (r) => recovered.push(r) });
  t.after(() => next.close());
  await until(() => recovered.length === 2, 10_000);
  assert.deepEqual(
    recovered.map((r) => [r.store, r.clientId, r.ops, r.removed]),
    [
      ['tab-a', id, 1, true],
      ['tab-q', quiet.clientId, 0, true],
    ],
    "tab-a drained; the closed quiet tab's store held nothing the server lacks, and is deleted too",
  );
  // Closing a room while its recovery still waits for the server stops it cleanly.
  await strand(b, 'tab-d', ['y']);
  const offline = await connect({
    url: OFFLINE,
    room: 'r',
    machine: chat,
    storage: b.store('tab-e'),
    backoff: { minMs: 5000, maxMs: 5000 },
    onError: () => {},
  });
  await new Promise((r) => setTimeout(r, 100));
  await offline.close();
  assert.equal(b.env.locks.held.size, 1, 'only the open room’s own store is held');
  assert.ok((await b.names()).includes('tab-d'));
});

// spec: DUR-NOT-STRANDED, LOG-EXACTLY-ONCE
test('Node: sqliteDirectory drains the store file of a worker that stopped for good; a file in use and a foreign database are left as they are', async (t) => {
  const srv = await server(t, 'd');
  const stores = join(dir, 'workers');
  const worker = async (file: string, text: string) => {
    const w = await connect({
      url: OFFLINE,
      room: 'r',
      machine: chat,
      storage: sqliteStorage(join(stores, file)),
      backoff: { minMs: 5000, maxMs: 5000 },
      onError: () => {},
    });
    await w.ops.say({ text }).durable;
    return w;
  };
  const gone = await worker('w1.sqlite', 'from w1');
  await gone.close();
  const live = await worker('w2.sqlite', 'from w2');
  const foreign = new Database(join(stores, 'notes.db'));
  foreign.exec('CREATE TABLE notes (t TEXT)');
  foreign.close();
  const directory = sqliteDirectory(stores);
  assert.deepEqual(
    (await findPending({ stores: directory, machine: chat, room: 'r' })).map((p) => [p.store, p.clientId, p.ops]),
    [['w1.sqlite', gone.clientId, 1]],
  );
  const got = await recoverPending({ url: srv.url, room: 'r', machine: chat, stores: directory });
  assert.deepEqual(got, [{ store: 'w1.sqlite', clientId: gone.clientId, ops: 1, removed: true }]);
  assert.ok(!existsSync(join(stores, 'w1.sqlite')));
  assert.deepEqual(
    readdirSync(stores)
      .filter((f) => !f.startsWith('w2.'))
      .sort(),
    ['notes.db'],
  );
  const notes = new Database(join(stores, 'notes.db'), { readonly: true });
  assert.deepEqual(notes.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all(), [{ name: 'notes' }], 'the foreign database got no tables');
  notes.close();
  await live.close();
  const fresh = await connect({ url: srv.url, room: 'r', machine: chat });
  t.after(() => fresh.close());
  await fresh.whenOnline({ timeoutMs: 5000 });
  assert.deepEqual(
    fresh.getState('authoritative').messages.map((m) => `${m.author}:${m.text}`),
    [`${gone.clientId}:from w1`],
  );
});

// spec: DUR-NOT-STRANDED
test("a store whose client belongs to another user is refused to the signed-in one: reported with the server's code, and kept", async (t) => {
  const srv = await createServer({
    port: 0,
    dataDir: join(dir, 'e'),
    machines: [chat],
    log: 'silent',
    authenticate: (req) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' }),
  });
  t.after(() => srv.close());
  const b = browser();
  // Ada's tab was online once (the server knows its client as hers), then typed offline and was closed.
  const ada = await connect({ url: srv.url, room: 'r', machine: chat, token: 'ada', storage: b.store('tab-a'), recover: false });
  await ada.whenOnline({ timeoutMs: 5000 });
  await ada.close();
  await strand(b, 'tab-a', ['from ada']);
  const errors: Error[] = [];
  const got = await recoverPending({ url: srv.url, room: 'r', machine: chat, token: 'bob', stores: indexedDbDirectory(b.env), onError: (e) => errors.push(e) });
  assert.deepEqual(got, []);
  assert.deepEqual(
    errors.map((e) => (e as { code?: string }).code),
    ['forbidden'],
  );
  assert.match(errors[0].message, /store "tab-a" failed, it keeps them: .*belongs to another user/);
  assert.deepEqual(
    (await findPending({ stores: indexedDbDirectory(b.env), machine: chat, room: 'r' })).map((p) => p.ops),
    [1],
  );
  const back = await recoverPending({ url: srv.url, room: 'r', machine: chat, token: 'ada', stores: indexedDbDirectory(b.env) });
  assert.deepEqual(
    back.map((r) => [r.store, r.ops, r.removed]),
    [['tab-a', 1, true]],
    'Ada herself drains it',
  );
});
