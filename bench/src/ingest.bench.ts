/**
 * The room engine's per-op cost when ingesting ops frames (100 ops a frame, acked after each):
 * ordering, the argument check, the digest chain, applying the op, fan-out bookkeeping.
 * CPU time (process.cpuUsage), median of alternated runs.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/ingest.bench.ts [--baseline <dir>]
 *
 * With --baseline, <dir> is another checkout (e.g. `git worktree add /tmp/old <commit>`): its
 * packages/core/src is run alternately with this tree's, and the ratio printed.
 */
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as current from '@hercules/core';

type Core = typeof current;
const { values } = parseArgs({ options: { baseline: { type: 'string' }, runs: { type: 'string' } } });
const FRAMES = 300,
  PER = 100,
  RUNS = Number(values.runs ?? 20);

function run(C: Core): number {
  const m = C.defineMachine({
    name: 'design',
    version: 1,
    initial: { items: {} as Record<string, { x: number; y: number }> },
    ops: {
      move(s, a: { id: string; x: number; y: number }) {
        const it = (s.items[a.id] ??= { x: 0, y: 0 });
        it.x = a.x;
        it.y = a.y;
      },
    },
  });
  const e = new C.RoomEngine(m, { ackTimeoutMs: 1e9 });
  e.open('c', 0);
  e.message('c', { t: 'hello', v: C.PROTOCOL_VERSION, client: 'w', machine: { name: 'design', version: 1 }, have: 0 }, 0);
  let seq = 0;
  const c0 = process.cpuUsage();
  for (let f = 0; f < FRAMES; f++) {
    const ops = [];
    for (let i = 0; i < PER; i++) ops.push({ seq: ++seq, name: 'move', args: { id: `item-${i % 20}`, x: f + i * 0.5, y: i } });
    e.message('c', { t: 'ops', ops }, 0);
    e.message('c', { t: 'ack', pos: e.head() }, 0);
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / (FRAMES * PER);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const base = values.baseline ? ((await import(pathToFileURL(join(resolve(values.baseline), 'packages/core/src/index.ts')).href)) as Core) : undefined;
const now: number[] = [],
  old: number[] = [];
for (let r = 0; r < RUNS; r++) {
  if (base) old.push(run(base));
  now.push(run(current));
}
console.log(`room engine ingest: ${median(now).toFixed(2)} µs CPU per op (median of ${RUNS} runs of ${FRAMES} frames x ${PER} ops)`);
if (base) console.log(`baseline ${values.baseline}: ${median(old).toFixed(2)} µs; this tree / baseline = ${(median(now) / median(old)).toFixed(3)}`);
