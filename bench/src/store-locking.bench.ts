/**
 * What owning a store costs: SQLite in WAL with `synchronous=FULL`, as both stores open it, in
 * the default locking mode (a shared-memory WAL index, locks taken per transaction) against
 * `locking_mode=EXCLUSIVE` (the lock held while open, the WAL index in heap memory), which the
 * server store and `sqliteStorage` use so that one process owns a file.
 *
 *   server commit   one transaction of 100 log rows (JSON of a setCell entry) + 2 client
 *                   records + the stable position: a group commit under load
 *   client append   one transaction of 1 op row + the last-seq update: a lone keystroke
 *
 *   node --import tsx bench/src/store-locking.bench.ts
 *
 * Each mode gets its own file in the OS temp dir; the modes alternate, median µs per
 * transaction (fsync included, so the disk dominates). Prints a table, writes nothing.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, interleaved, printTable, stats } from './harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'hercules-locking-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const TX = 100; // transactions per sample
const REPS = 9;

function open(mode: 'normal' | 'exclusive', name: string) {
  const db = new Database(join(dir, `${name}-${mode}.sqlite`));
  if (mode === 'exclusive') db.pragma('locking_mode = EXCLUSIVE');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`
    CREATE TABLE log (room TEXT NOT NULL, pos INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (room, pos)) WITHOUT ROWID;
    CREATE TABLE clients (room TEXT NOT NULL, client TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (room, client)) WITHOUT ROWID;
    CREATE TABLE rooms (room TEXT PRIMARY KEY, stable INTEGER NOT NULL);
    INSERT INTO rooms VALUES ('r', 0);
  `);
  return db;
}

function serverCommit(db: Database.Database) {
  const ins = db.prepare('INSERT INTO log (room, pos, entry) VALUES (?, ?, ?)');
  const up = db.prepare('INSERT INTO clients (room, client, record) VALUES (?, ?, ?) ON CONFLICT (room, client) DO UPDATE SET record = excluded.record');
  const stable = db.prepare('UPDATE rooms SET stable = ? WHERE room = ?');
  let pos = 0;
  const tx = db.transaction(() => {
    for (let i = 0; i < 100; i++) {
      pos++;
      ins.run(
        'r',
        pos,
        JSON.stringify({ pos, client: `c${pos & 1}`, seq: pos >> 1, name: 'setCell', args: { row: pos % 50, col: pos % 20, value: `v${pos}` } }),
      );
    }
    up.run('r', 'c0', JSON.stringify({ highWater: pos >> 1, visibleSeq: 0 }));
    up.run('r', 'c1', JSON.stringify({ highWater: pos >> 1, visibleSeq: 0 }));
    stable.run(pos - 50, 'r');
  });
  return () => {
    for (let i = 0; i < TX; i++) tx();
  };
}

function clientAppend(db: Database.Database) {
  db.exec(`CREATE TABLE ops (room TEXT NOT NULL, seq INTEGER NOT NULL, op TEXT NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID;
           CREATE TABLE client (room TEXT PRIMARY KEY, last_seq INTEGER NOT NULL); INSERT INTO client VALUES ('r', 0);`);
  const ins = db.prepare('INSERT OR REPLACE INTO ops (room, seq, op) VALUES (?, ?, ?)');
  const seq = db.prepare('UPDATE client SET last_seq = max(last_seq, ?) WHERE room = ?');
  let n = 0;
  const tx = db.transaction(() => {
    n++;
    ins.run('r', n, JSON.stringify({ client: 'c', seq: n, name: 'setCell', args: { row: 1, col: 1, value: `v${n}` } }));
    seq.run(n, 'r');
  });
  return () => {
    for (let i = 0; i < TX; i++) tx();
  };
}

const rows = [];
for (const [what, make] of [
  ['server commit (100 rows)', serverCommit],
  ['client append (1 op)', clientAppend],
] as const) {
  const samples = interleaved(
    {
      normal: make(open('normal', what.split(' ')[0])),
      exclusive: make(open('exclusive', what.split(' ')[0])),
    },
    REPS,
    2,
  );
  const n = (stats(samples.normal).median * 1000) / TX,
    x = (stats(samples.exclusive).median * 1000) / TX;
  rows.push({ transaction: what, 'normal µs': n, 'exclusive µs': x, 'exclusive ÷ normal': fmt(x / n) });
}
printTable(`SQLite locking mode, WAL + synchronous=FULL, median µs per transaction (${REPS} × ${TX}, alternated)`, rows);
