import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { LogEntry } from '@hercules/core';
import { SqliteStore, StorageError } from '../src/store/sqlite.ts';
import { tempDir } from './helpers.ts';

const entry = (pos: number, extra: Partial<LogEntry> = {}): LogEntry =>
  ({ pos, client: `c${pos % 3}`, seq: pos, name: 'say', args: { text: `m${pos}` }, author: `c${pos % 3}`, ...extra });
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => entry(a + i));

test('the log is stored in chunks and reloads entry by entry, in order, rejected entries included', (t) => {
  const { dir, cleanup } = tempDir('store-chunks');
  t.after(cleanup);
  const store = new SqliteStore(dir);
  store.create('r', 'chat', 1, { messages: [] });
  store.create('s', 'chat', 1, { messages: [] });
  // Two outputs of room r and one of s in one group commit, then one more of r alone.
  store.commit([['r', { appended: range(1, 3), clients: { c1: { highWater: 1, visibleSeq: 0 } } }], ['s', { appended: range(1, 1), clients: {} }], ['r', { appended: [entry(4, { error: 'empty message' })], clients: {} }]]);
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
  assert.throws(() => again.commit([['s', { appended: range(2, 2), clients: {} }], ['r', { appended: [entry(10), entry(12)], clients: {} }]]), /not 2 consecutive positions/);
  assert.deepEqual(again.load('s')!.durable.suffix, range(1, 1));
});

test('a checkpoint inside a chunk: covered chunks are pruned, the straddling one stays, reload gives only the entries after it', (t) => {
  const { dir, cleanup } = tempDir('store-checkpoint');
  t.after(cleanup);
  const store = new SqliteStore(dir, { checkpointEvery: 5 });
  store.create('r', 'chat', 1, { messages: [] });
  store.commit([['r', { appended: range(1, 4), clients: {} }]]);
  store.commit([['r', { appended: range(5, 10), clients: {} }]]);
  // Checkpoint at 7: the chunk 1-4 is covered, the chunk 5-10 straddles it.
  store.commit([['r', { appended: range(11, 12), clients: {}, checkpoint: { pos: 7, state: { messages: ['through 7'] } } }]]);
  store.close();
  const again = new SqliteStore(dir, { checkpointEvery: 5 });
  t.after(() => again.close());
  const d = again.load('r')!.durable;
  assert.deepEqual(d.checkpoint, { pos: 7, state: { messages: ['through 7'] } });
  assert.deepEqual(d.suffix.map((e) => e.pos), [8, 9, 10, 11, 12]);
  assert.deepEqual(again.db.prepare('SELECT first, last FROM log_chunks ORDER BY first').all(), [{ first: 5, last: 10 }, { first: 11, last: 12 }]);
});

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

test('one room whose writes cannot be serialised fails alone, before the transaction; a failed commit leaves no checkpoint behind', (t) => {
  const { dir, cleanup } = tempDir('store-isolate');
  t.after(cleanup);
  const store = new SqliteStore(dir);
  store.create('good', 'chat', 1, { messages: [] });
  store.create('bad', 'chat', 1, { messages: [] });
  let deep: unknown = 'bottom';
  for (let i = 0; i < 5000; i++) deep = [deep];
  assert.throws(() => store.serialize('bad', { appended: [entry(1, { args: deep })], clients: {} }), (e: unknown) => e instanceof StorageError && /^room bad: cannot serialise its writes/.test(e.message));
  store.commitPrepared([store.serialize('good', { appended: range(1, 2), clients: {} })]);
  // A transaction that fails (here: a chunk written twice) writes nothing, and the checkpoint it
  // carried must not be written later on close: its ops never reached the disk.
  assert.throws(() => store.commit([['good', { appended: range(1, 2), clients: {}, checkpoint: { pos: 2, state: { messages: ['never stored'] } } }]]), StorageError);
  store.close();
  const again = new SqliteStore(dir);
  t.after(() => again.close());
  const d = again.load('good')!.durable;
  assert.deepEqual(d.checkpoint, { pos: 0, state: { messages: [] } });
  assert.deepEqual(d.suffix, range(1, 2));
  assert.deepEqual(again.load('bad')!.durable.suffix, []);
});
