/**
 * A noisy neighbour on the disk: rewrites a file of `--mb` MiB and fdatasyncs it, over and over,
 * for `--seconds` (or until killed), in the directory the benchmarks write to (the system's temp
 * directory by default). Run it beside a benchmark to see what a slow or shared disk does to a
 * store that syncs (the server's SQLite commit); it prints its own sync times when it stops.
 *
 *   node --import tsx bench/src/disk-stress.ts [--mb 16] [--seconds 60] [--dir DIR]
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { mb: { type: 'string', default: '16' }, seconds: { type: 'string', default: '60' }, dir: { type: 'string' } },
});
const MB = Number(values.mb),
  SECONDS = Number(values.seconds);
if (!(MB > 0) || !(SECONDS > 0)) throw new Error(`--mb and --seconds must be positive numbers, got ${values.mb} and ${values.seconds}`);

const dir = mkdtempSync(join(values.dir ?? tmpdir(), 'hercules-disk-stress-'));
const fd = openSync(join(dir, 'noise'), 'w');
const chunk = Buffer.alloc(1 << 20, 7);
const syncs: number[] = [];
let stopped = false;
const stop = () => {
  stopped = true;
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

const end = Date.now() + SECONDS * 1000;
while (!stopped && Date.now() < end) {
  for (let i = 0; i < MB; i++) {
    chunk[0] = (chunk[0] + 1) & 0xff; // not the same page twice in a row
    writeSync(fd, chunk, 0, chunk.length, i * chunk.length);
  }
  const t = performance.now();
  fdatasyncSync(fd);
  syncs.push(performance.now() - t);
  // Let the signal handlers run between rounds.
  await new Promise((r) => setImmediate(r));
}
closeSync(fd);
rmSync(dir, { recursive: true, force: true });
syncs.sort((a, b) => a - b);
const q = (p: number) => (syncs.length ? syncs[Math.min(syncs.length - 1, Math.floor(p * syncs.length))].toFixed(1) : 'n/a');
console.log(`disk-stress: ${syncs.length} syncs of ${MB} MiB; fdatasync ms p50 ${q(0.5)}, p90 ${q(0.9)}, max ${q(1)}`);
