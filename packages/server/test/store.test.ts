import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { LogEntry } from '@hercules/core';
import { SqliteStore, StorageError } from '../src/store/sqlite.ts';
import { tempDir } from './helpers.ts';

const entry = (pos: number, extra: Partial<LogEntry> = {}): LogEntry => ({
  pos,
  client: `c${pos % 3}`,
  seq: pos,
  name: 'say',
  args: { text: `m${pos}` },
  author: `c${pos % 3}`,
  ...extra,
});
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => entry(a + i));

// spec: REC-RESTORE
test('the log is stored in chunks and reloads entry by entry, in order, rejected entries included', (t) => {
  const { dir, cleanup } = tempDir('store-chunks');
  t.after(cleanup);
  const store = new SqliteStore(dir);
  store.create('r', 'chat', 1, { messages: [] });
  store.create('s', 'chat', 1, { messages: [] });
  // Two outputs of room r and one of s in one group commit, then one more of r alone.
  store.commit([
    ['r', { appended: range(1, 3), clients: { c1: { highWater: 1, visibleSeq: 0 } } }],
    ['s', { appended: range(1, 1), clients: {} }],
    ['r', { appended: [entry(4, { error: 'empty message' })], clients: {} }],
  ]);
  store.commit([['r', { appended: range(5, 9), clients: { c1: { highWater: 7, visibleSeq: 4 } } }]]);
  store.close();
  const again = new SqliteStore(dir);
  t.after(() => again.close());
  const r = again.load('r')!.durable;
  assert.deepEqual(r.suffix, [...range(1, 3), entry(4, { error: 'empty message' }), ...range(5, 9)]);
  assert.deepEqual(r.clients, { c1: { highWater: 7, visibleSeq: 4 } });
  assert.deepEqual(again.load('s')!.durable.suffix, range(1, 1));
  assert.equal((again.db.prepare('SELECT count(*) AS n FROM log_chunks').get() as { n: number }).n, 4, 'one row per output, not per op');
  // Entries that are not consecutive are refused, and nothing of that commit is written.
  assert.throws(
    () =>
      again.commit([
        ['s', { appended: range(2, 2), clients: {} }],
        ['r', { appended: [entry(10), entry(12)], clients: {} }],
      ]),
    /not 2 consecutive positions/,
  );
  assert.deepEqual(again.load('s')!.durable.suffix, range(1, 1));
});

// spec: REC-RESTORE
test('a checkpoint inside a chunk: covered chunks are pruned, the straddling one stays, reload gives only the entries after it', (t) => {
  const { dir, cleanup } = tempDir('store-checkpoint');
  t.after(cleanup);
  const store = new SqliteStore(dir, { checkpointEvery: 5, retention: { ops: 0 } });
  store.create('r', 'chat', 1, { messages: [] });
  store.commit([['r', { appended: range(1, 4), clients: {} }]]);
  store.commit([['r', { appended: range(5, 10), clients: {} }]]);
  // Checkpoint at 7: the chunk 1-4 is covered, the chunk 5-10 straddles it.
  store.commit([['r', { appended: range(11, 12), clients: {}, checkpoint: { pos: 7, state: { messages: ['through 7'] } } }]]);
  store.close();
  const again = new SqliteStore(dir, { checkpointEvery: 5, retention: { ops: 0 } });
  t.after(() => again.close());
  const d = again.load('r')!.durable;
  assert.deepEqual(d.checkpoint, { pos: 7, state: { messages: ['through 7'] } });
  assert.deepEqual(
    d.suffix.map((e) => e.pos),
    [8, 9, 10, 11, 12],
  );
  assert.deepEqual(again.db.prepare('SELECT first, last FROM log_chunks ORDER BY first').all(), [
    { first: 5, last: 10 },
    { first: 11, last: 12 },
  ]);
});

// spec: REC-RESTORE
test('a data file from before log chunks (one row per op) is converted on open; nothing is lost', (t) => {
  const { dir, cleanup } = tempDir('store-migrate');
  t.after(cleanup);
  // The schema as the previous release wrote it.
  const old = new Database(join(dir, 'hercules.sqlite'));
  old.pragma('journal_mode = WAL');
  old.exec(`
    CREATE TABLE rooms (room TEXT PRIMARY KEY, machine TEXT NOT NULL, version INTEGER NOT NULL, checkpoint_pos INTEGER NOT NULL, checkpoint TEXT NOT NULL, stable INTEGER NOT NULL);
    CREATE TABLE log (room TEXT NOT NULL, pos INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (room, pos)) WITHOUT ROWID;
    CREATE TABLE clients (room TEXT NOT NULL, client TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (room, client)) WITHOUT ROWID;
  `);
  old.prepare('INSERT INTO rooms VALUES (?, ?, ?, ?, ?, ?)').run('r', 'chat', 1, 2, JSON.stringify({ messages: ['cp'] }), 3);
  const ins = old.prepare('INSERT INTO log VALUES (?, ?, ?)');
  for (const e of range(3, 6)) ins.run('r', e.pos, JSON.stringify(e));
  old.prepare('INSERT INTO clients VALUES (?, ?, ?)').run('r', 'c1', JSON.stringify({ highWater: 4, visibleSeq: 3 }));
  old.close();

  const store = new SqliteStore(dir);
  const d = store.load('r')!.durable;
  assert.deepEqual(d.checkpoint, { pos: 2, state: { messages: ['cp'] } });
  assert.deepEqual(d.suffix, range(3, 6));
  assert.deepEqual(d.clients, { c1: { highWater: 4, visibleSeq: 3 } });
  assert.equal((store.db.prepare(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'log'`).get() as { n: number }).n, 0, 'the old table is gone');
  // The room goes on in the new format, and a second open converts nothing twice.
  store.commit([['r', { appended: range(7, 8), clients: {} }]]);
  store.close();
  const again = new SqliteStore(dir);
  t.after(() => again.close());
  assert.deepEqual(again.load('r')!.durable.suffix, range(3, 8));
});

// spec: SEC-CONTAINED
test('one room whose writes cannot be serialised fails alone, before the transaction; a failed commit leaves no checkpoint behind', (t) => {
  const { dir, cleanup } = tempDir('store-isolate');
  t.after(cleanup);
  const store = new SqliteStore(dir);
  store.create('good', 'chat', 1, { messages: [] });
  store.create('bad', 'chat', 1, { messages: [] });
  let deep: unknown = 'bottom';
  for (let i = 0; i < 5000; i++) deep = [deep];
  assert.throws(
    () => store.serialize('bad', { appended: [entry(1, { args: deep })], clients: {} }),
    (e: unknown) => e instanceof StorageError && /^room bad: cannot serialise its writes/.test(e.message),
  );
  store.commitPrepared([store.serialize('good', { appended: range(1, 2), clients: {} })]);
  // A transaction that fails (here: a chunk written twice) writes nothing, and the checkpoint it
  // carried must not be written later on close: its ops never reached the disk.
  assert.throws(
    () => store.commit([['good', { appended: range(1, 2), clients: {}, checkpoint: { pos: 2, state: { messages: ['never stored'] } } }]]),
    StorageError,
  );
  store.close();
  const again = new SqliteStore(dir);
  t.after(() => again.close());
  const d = again.load('good')!.durable;
  assert.deepEqual(d.checkpoint, { pos: 0, state: { messages: [] } });
  assert.deepEqual(d.suffix, range(1, 2));
  assert.deepEqual(again.load('bad')!.durable.suffix, []);
});

// ------------------------------------------------------------------ the RoomStore contract, SQLite's own parts
// (what every store must do is in the conformance suite: store-conformance.test.ts)

const INIT = { machine: 'chat', version: 1, initial: { messages: [] } };

test('appends of many rooms made in one turn share one transaction; a fenced one fails alone inside it', async (t) => {
  const { dir, cleanup } = tempDir('store-group');
  t.after(cleanup);
  const commits: { appends: number; failed: number; ops: number; transactions: number }[] = [];
  const store = new SqliteStore(dir, { onCommit: ({ seconds: _, ...c }) => commits.push(c) });
  t.after(() => store.close());
  for (let r = 0; r < 50; r++) await store.open(`room-${r}`, INIT);
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, (_, r) =>
      store.append(`room-${r}`, { after: r === 7 ? 3 : 0, entries: range(1, 4), clients: { c1: { highWater: 4, visibleSeq: 0 } } }),
    ),
  );
  assert.deepEqual(commits, [{ appends: 49, failed: 1, ops: 196, transactions: 1 }]);
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 49);
  assert.equal(((results[7] as PromiseRejectedResult).reason as { code?: string }).code, 'fenced');
  assert.equal((await store.open('room-7'))!.durable.suffix.length, 0);
  assert.deepEqual((await store.open('room-8'))!.durable.suffix, range(1, 4));
});

test("a room's appends made in one turn are written as one: one log chunk, the rev moved by their number, each settled with its own rev and head", async (t) => {
  const { dir, cleanup } = tempDir('store-merge');
  t.after(cleanup);
  const commits: { appends: number; failed: number; ops: number; transactions: number }[] = [];
  const store = new SqliteStore(dir, { checkpointEvery: 1, onCommit: ({ seconds: _, ...c }) => commits.push(c) });
  t.after(() => store.close());
  await store.open('r', INIT);
  const results = await Promise.allSettled([
    store.append('r', { after: 0, entries: range(1, 2), clients: { c1: { highWater: 2, visibleSeq: 0 } } }),
    store.append('r', { after: 1, clients: { c2: { highWater: 0, visibleSeq: 0 } } }), // a claim: no entries
    store.append('r', { after: 2, entries: range(3, 5), clients: { c1: { highWater: 5, visibleSeq: 2 } } }),
    store.append('r', { after: 3, entries: range(6, 6), checkpoint: { pos: 4, state: { messages: ['4'] } } }),
    store.append('r', { after: 3, entries: range(7, 7) }), // fenced: the one before took rev 3
    store.append('r', { after: 5, entries: range(7, 7) }), // fenced: the room never reaches rev 5
  ]);
  assert.deepEqual(
    results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as { code?: string }).code)),
    [{ rev: 1, head: 2 }, { rev: 2, head: 2 }, { rev: 3, head: 5 }, { rev: 4, head: 6 }, 'fenced', 'fenced'],
  );
  assert.deepEqual(commits, [{ appends: 4, failed: 2, ops: 6, transactions: 1 }]);
  assert.deepEqual(store.db.prepare('SELECT first, last FROM log_chunks WHERE room = ?').all('r'), [{ first: 1, last: 6 }], 'one chunk for the four');
  assert.deepEqual(store.db.prepare('SELECT rev, stable FROM rooms WHERE room = ?').get('r'), { rev: 4, stable: 4 });
  const r = (await store.open('r'))!;
  assert.deepEqual([r.rev, r.durable.checkpoint.pos, r.durable.suffix], [4, 4, range(5, 6)], 'the checkpoint written, the chunk straddling it kept');
  assert.deepEqual(r.durable.clients, { c1: { highWater: 5, visibleSeq: 2 }, c2: { highWater: 0, visibleSeq: 0 } }, 'the last record of each client');
  // The next turn goes on from there, and a write that fails part-way fails all of the room's appends of its turn.
  store.db.function('fault', () => {
    throw new Error('injected fault');
  });
  store.db.exec(`CREATE TEMP TRIGGER fault BEFORE UPDATE OF rev ON rooms WHEN NEW.rev > 5 BEGIN SELECT fault(); END`);
  const next = await Promise.allSettled([store.append('r', { after: 4, entries: range(7, 7) }), store.append('r', { after: 5, entries: range(8, 8) })]);
  assert.deepEqual(
    next.map((x) => x.status),
    ['rejected', 'rejected'],
  );
  assert.deepEqual([(await store.open('r'))!.rev, (await store.open('r'))!.durable.suffix.length], [4, 2], 'nothing of them written');
  store.db.exec('DROP TRIGGER fault');
  assert.deepEqual(await store.append('r', { after: 4, entries: range(7, 7) }), { rev: 5, head: 7 });
});

test('a group whose transaction fails at commit is retried room by room: only the append the database refuses fails', async (t) => {
  const { dir, cleanup } = tempDir('store-retry');
  t.after(cleanup);
  const commits: { appends: number; failed: number; transactions: number }[] = [];
  const store = new SqliteStore(dir, { onCommit: ({ appends, failed, transactions }) => commits.push({ appends, failed, transactions }) });
  t.after(() => store.close());
  for (const r of ['a', 'bad', 'c']) await store.open(r, INIT);
  // A deferred foreign key, checked only at COMMIT, that a write of room "bad" violates: the
  // group's whole transaction fails at commit (as a failed fsync would), not one statement.
  store.db.pragma('foreign_keys = ON');
  store.db.exec(`
    CREATE TEMP TABLE fault_parent (id INTEGER PRIMARY KEY);
    CREATE TEMP TABLE fault_child (id INTEGER REFERENCES fault_parent(id) DEFERRABLE INITIALLY DEFERRED);
    CREATE TEMP TRIGGER fault AFTER INSERT ON log_chunks WHEN NEW.room = 'bad' BEGIN INSERT INTO fault_child VALUES (1); END;
  `);
  const results = await Promise.allSettled(['a', 'bad', 'c'].map((r) => store.append(r, { after: 0, entries: range(1, 2) })));
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.equal(((results[1] as PromiseRejectedResult).reason as { code?: string }).code, 'storage-failed');
  assert.match(
    ((results[1] as PromiseRejectedResult).reason as Error).message,
    /^room bad: the append failed and nothing of it was written: FOREIGN KEY constraint failed/,
  );
  // The group's transaction, then one per room.
  assert.deepEqual(commits, [{ appends: 2, failed: 1, transactions: 4 }]);
  assert.deepEqual((await store.open('a'))!.durable.suffix, range(1, 2));
  const bad = (await store.open('bad'))!;
  assert.deepEqual([bad.rev, bad.durable.suffix], [0, []]);
});

test('checkpoints through append are written lazily: the stable position at once, the state when due or on release; never one whose append failed', async (t) => {
  const { dir, cleanup } = tempDir('store-lazy');
  t.after(cleanup);
  const store = new SqliteStore(dir, { checkpointEvery: 5, retention: { ops: 0 } });
  const row = (room: string) => store.db.prepare('SELECT checkpoint_pos AS pos, stable, rev FROM rooms WHERE room = ?').get(room);
  const chunks = (room: string) => store.db.prepare('SELECT first, last FROM log_chunks WHERE room = ? ORDER BY first').all(room);
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: range(1, 4), checkpoint: { pos: 3, state: { messages: ['3'] } } });
  assert.deepEqual(row('r'), { pos: 0, stable: 3, rev: 1 }, 'not due: only the stable position');
  await store.append('r', { after: 1, entries: range(5, 8), checkpoint: { pos: 6, state: { messages: ['6'] } } });
  assert.deepEqual(row('r'), { pos: 6, stable: 6, rev: 2 }, 'due: the state is written and the covered chunk pruned');
  assert.deepEqual(chunks('r'), [{ first: 5, last: 8 }]);
  await store.append('r', { after: 2, entries: range(9, 9), checkpoint: { pos: 8, state: { messages: ['8'] } } });
  // A checkpoint whose append fails (fenced here) is not the one release writes.
  await assert.rejects(store.append('r', { after: 2, entries: range(10, 10), checkpoint: { pos: 9, state: { messages: ['never'] } } }), /rev 3, not 2/);
  await store.release('r');
  assert.deepEqual(row('r'), { pos: 8, stable: 8, rev: 3 });
  assert.deepEqual(chunks('r'), [{ first: 9, last: 9 }]);
  await store.close();
  const again = new SqliteStore(dir, { checkpointEvery: 5, retention: { ops: 0 } });
  t.after(() => again.close());
  const d = (await again.open('r'))!.durable;
  assert.deepEqual(d.checkpoint, { pos: 8, state: { messages: ['8'] } });
  assert.deepEqual(d.suffix, range(9, 9));
});

test('a data file from before the room store contract opens with rev 0 and an unknown creation time, and takes fenced appends', async (t) => {
  const { dir, cleanup } = tempDir('store-migrate-rev');
  t.after(cleanup);
  // The rooms table as the previous release wrote it: no rev, no created.
  const old = new Database(join(dir, 'hercules.sqlite'));
  old.pragma('journal_mode = WAL');
  old.exec(`
    CREATE TABLE rooms (room TEXT PRIMARY KEY, machine TEXT NOT NULL, version INTEGER NOT NULL, checkpoint_pos INTEGER NOT NULL, checkpoint TEXT NOT NULL, stable INTEGER NOT NULL);
    CREATE TABLE log_chunks (room TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL, entries TEXT NOT NULL, PRIMARY KEY (room, first)) WITHOUT ROWID;
    CREATE TABLE clients (room TEXT NOT NULL, client TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (room, client)) WITHOUT ROWID;
  `);
  old.prepare('INSERT INTO rooms VALUES (?, ?, ?, ?, ?, ?)').run('r', 'chat', 1, 2, JSON.stringify({ messages: ['cp'] }), 2);
  old.prepare('INSERT INTO log_chunks VALUES (?, ?, ?, ?)').run('r', 1, 4, JSON.stringify(range(1, 4)));
  old.close();
  const store = new SqliteStore(dir, { now: () => 1_700_000_000_000 });
  t.after(() => store.close());
  const r = (await store.open('r'))!;
  assert.deepEqual([r.rev, r.meta, r.durable.suffix], [0, { machine: 'chat', version: 1, created: 0 }, range(3, 4)]);
  assert.deepEqual(await store.append('r', { after: 0, entries: range(5, 6) }), { rev: 1, head: 6 });
  await assert.rejects(store.append('r', { after: 0, entries: range(7, 7) }), { code: 'fenced' });
  // Rooms created now, by either interface, record the store's clock.
  store.create('legacy', 'chat', 1, {});
  assert.equal((await store.open('legacy'))!.meta.created, 1_700_000_000_000);
  assert.equal((await store.open('new', INIT)).meta.created, 1_700_000_000_000);
});

test('a data file from before room listings gets a last-append time: unknown (0) for its rooms until they are next written', async (t) => {
  const { dir, cleanup } = tempDir('store-migrate-activity');
  t.after(cleanup);
  // The rooms table as the previous release wrote it: rev and created, no last_append.
  const old = new Database(join(dir, 'hercules.sqlite'));
  old.pragma('journal_mode = WAL');
  old.exec(`
    CREATE TABLE rooms (room TEXT PRIMARY KEY, machine TEXT NOT NULL, version INTEGER NOT NULL, checkpoint_pos INTEGER NOT NULL, checkpoint TEXT NOT NULL, stable INTEGER NOT NULL, rev INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE log_chunks (room TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL, entries TEXT NOT NULL, PRIMARY KEY (room, first)) WITHOUT ROWID;
    CREATE TABLE clients (room TEXT NOT NULL, client TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (room, client)) WITHOUT ROWID;
  `);
  old.prepare('INSERT INTO rooms VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run('r', 'chat', 1, 0, JSON.stringify({ messages: [] }), 0, 1, 1_600_000_000_000);
  old.prepare('INSERT INTO log_chunks VALUES (?, ?, ?, ?)').run('r', 1, 2, JSON.stringify(range(1, 2)));
  old.close();
  let now = 1_700_000_000_000;
  const store = new SqliteStore(dir, { now: () => now });
  t.after(() => store.close());
  const [r] = await store.listRooms({ limit: 10 });
  assert.deepEqual([r.name, r.machine, r.version, r.head, r.created, r.lastActivity], ['r', 'chat', 1, 2, 1_600_000_000_000, 0]);
  assert.ok(r.bytes > JSON.stringify(range(1, 2)).length, `bytes counts the log and the checkpoint, got ${r.bytes}`);
  now += 5000;
  assert.deepEqual(await store.append('r', { after: 1, entries: range(3, 3) }), { rev: 2, head: 3 });
  const [after] = await store.listRooms({ limit: 10 });
  assert.deepEqual([after.head, after.lastActivity], [3, now]);
  assert.equal(after.bytes, r.bytes + JSON.stringify([entry(3)]).length, 'bytes grows by the chunk written');
});

test('the WAL is synced off the event loop: SQLite commits without a sync (synchronous=NORMAL), and an append settles only once the store has synced the WAL', async (t) => {
  const { dir, cleanup } = tempDir('store-wal-sync');
  t.after(cleanup);
  const store = new SqliteStore(dir);
  t.after(() => store.close());
  assert.equal(store.db.pragma('synchronous', { simple: true }), 1, 'NORMAL: the store syncs, not SQLite');
  await store.open('r', INIT);
  // Hold the sync: the append is written (a reader sees it) but does not settle until it is synced.
  const internals = store as unknown as { syncWal: () => Promise<unknown> };
  const realSync = internals.syncWal.bind(store);
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let syncs = 0;
  internals.syncWal = () => {
    syncs++;
    return held.then(realSync);
  };
  let settled = false;
  const appended = store.append('r', { after: 0, entries: range(1, 2), clients: {} }).then((a) => {
    settled = true;
    return a;
  });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(syncs, 1, 'one sync for the group commit');
  assert.equal(settled, false, 'not acknowledged before the WAL is synced');
  release();
  assert.deepEqual(await appended, { rev: 1, head: 2 });
});

test('a failed sync of the WAL fails its appends and every later one with storage-failed, saying to restart', async (t) => {
  const { dir, cleanup } = tempDir('store-wal-sync-fails');
  t.after(cleanup);
  const syncs: { seconds: number; failed: boolean }[] = [];
  const store = new SqliteStore(dir, { onSync: (s) => syncs.push(s) });
  t.after(() => store.close());
  await store.open('r', INIT);
  const internals = store as unknown as { walFd: number };
  const { closeSync } = await import('node:fs');
  closeSync(internals.walFd);
  internals.walFd = 2 ** 30; // no such descriptor: fsync fails (EBADF), as a failing disk would
  const failed = await store.append('r', { after: 0, entries: range(1, 1), clients: {} }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(failed instanceof StorageError, 'rejected');
  assert.match((failed as Error).message, /cannot sync the data file .* restart the server/);
  const later = await store.append('r', { after: 1, entries: range(2, 2), clients: {} }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.equal(later, failed, 'nothing more is acknowledged');
  assert.equal(syncs.length, 1, 'onSync heard the one sync tried');
  assert.equal(syncs[0].failed, true);
  assert.ok(syncs[0].seconds >= 0);
});
