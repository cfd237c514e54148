/**
 * What keeping history costs the SQLite store (issue 39, item 2; docs/history.md): a room of a
 * ~50 KB state takes 10,000 ops in commits of 100, a checkpoint given every 1,000 ops (as a room
 * host gives them; the store writes each, `checkpointEvery: 1`, as the server's does), under
 * retention `{ ops: 0 }` (nothing kept: what the store did before history) and the default
 * `{ ops: 10,000 }` (the replaced state copied into history_states, the log kept).
 *
 *   node --import tsx bench/src/history.bench.ts
 *
 * The two alternate, each sample on a new file in the OS temp dir; median ms per sample (fsync
 * included, so the disk weighs), and the file's size after a sample. Prints a table, writes nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LogEntry } from '@hercules/core';
import { SqliteStore } from '../../packages/server/src/store/sqlite.ts';
import { interleaved, printTable, stats } from './harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'hercules-history-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const OPS = 10_000;
const BATCH = 100;
const EVERY = 1000;
const state = { rows: Array.from({ length: 500 }, (_, i) => ({ id: i, text: `row ${i} `.repeat(10) })) };
const entry = (pos: number): LogEntry => ({
  pos,
  client: `c${pos % 7}`,
  seq: pos,
  name: 'setCell',
  args: { row: pos % 12, col: pos % 6, text: `v${pos}` },
  author: 'u',
});

let n = 0;
const sizes: Record<string, number[]> = { 'ops 0': [], 'ops 10,000': [] };

function run(name: string, ops: number): () => void {
  return () => {
    const store = new SqliteStore(join(dir, String(++n)), { checkpointEvery: 1, retention: { ops } });
    store.create('r', 'sheet', 1, state);
    for (let first = 1; first <= OPS; first += BATCH) {
      const appended = Array.from({ length: BATCH }, (_, i) => entry(first + i));
      const last = first + BATCH - 1;
      store.commit([['r', { appended, clients: {}, ...(last % EVERY === 0 ? { checkpoint: { pos: last, state } } : {}) }]]);
    }
    const pages = (store.db.pragma('page_count', { simple: true }) as number) * (store.db.pragma('page_size', { simple: true }) as number);
    sizes[name].push(pages);
    void store.close();
  };
}

const times = interleaved({ 'ops 0': run('ops 0', 0), 'ops 10,000': run('ops 10,000', 10_000) }, 7, 1);
printTable(
  `SQLite store, ${OPS.toLocaleString('en-US')} ops in commits of ${BATCH}, a checkpoint every ${EVERY} (state ${JSON.stringify(state).length.toLocaleString('en-US')} bytes)`,
  Object.keys(times).map((k) => ({
    retention: k,
    'median ms': stats(times[k]).median,
    'µs per op': (stats(times[k]).median * 1000) / OPS,
    'file KiB': stats(sizes[k]).median / 1024,
  })),
);
