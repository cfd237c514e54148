/**
 * What this disk gives a Durable write (issue 14's Durable p99 goal): the client store's commit
 * (`@hercules/client-sqlite`, one op per append: a WAL write and its fsync, `synchronous=FULL`)
 * alternated with a bare 4 KiB write and fsync of a file in the same directory, one every
 * `--every` ms, so both meet the same disk at nearly the same moments. Prints p50/p90/p99 of
 * each and their ratio.
 *
 *   node -C @hercules/source --import tsx bench/src/runtime/disk-sync.ts [--n 300] [--every 50] [--dir /tmp]
 */
import { fsyncSync, openSync, closeSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { sqliteStorage } from '@hercules/client-sqlite';
import { fsType, removeTemp, sleep, tempDir } from './common.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '300' }, every: { type: 'string', default: '50' }, dir: { type: 'string' } } });
const N = Number(values.n),
  EVERY = Number(values.every);
if (values.dir) process.env.TMPDIR = values.dir;
const dir = tempDir('disk-sync');
try {
  const store = sqliteStorage(join(dir, 'client.sqlite'));
  await store.init('r', 'c');
  const fd = openSync(join(dir, 'bare'), 'w');
  const page = Buffer.alloc(4096, 7);
  const commit: number[] = [],
    bare: number[] = [];
  for (let seq = 1; seq <= N; seq++) {
    await sleep(EVERY / 2);
    let t = performance.now();
    await store.append('r', [{ client: 'c', seq, name: 'setCell', args: { row: seq % 12, col: 1, text: 'Sprocket' }, digest: seq }]);
    commit.push(performance.now() - t);
    await sleep(EVERY / 2);
    t = performance.now();
    writeSync(fd, page, 0, page.length, (seq % 16) * page.length);
    fsyncSync(fd);
    bare.push(performance.now() - t);
  }
  closeSync(fd);
  await store.close();
  const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  const row = (xs: number[]) => ({ p50: +q(xs, 0.5).toFixed(2), p90: +q(xs, 0.9).toFixed(2), p99: +q(xs, 0.99).toFixed(2) });
  console.log(`${N} of each, alternated, one every ${EVERY / 2} ms, in ${dir} (${fsType(dir).statF})`);
  console.table({ 'client store commit (one op), ms': row(commit), 'bare 4 KiB write + fsync, ms': row(bare) });
  console.log(`commit / bare at p50: ${(q(commit, 0.5) / q(bare, 0.5)).toFixed(2)}`);
} finally {
  removeTemp(dir);
}
