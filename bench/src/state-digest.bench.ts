/**
 * What a checkpoint's state digest costs (server store/state-digest.ts: sorted-key JSON by
 * safe-stable-stringify, then SHA-256), beside what writing the same state costs a store
 * (JSON.stringify, what SQLite's checkpoint write does) and beside a digest of the insertion-order
 * JSON (the cheaper encoding not chosen: it digests two equal states with differently ordered keys
 * apart). States of a spreadsheet-like shape at three sizes; the three alternate in each of 7
 * repetitions, medians reported. Every store computes one per checkpoint append (every 1000 ops
 * by default), on the writer's event loop.
 *   node --conditions=@hercules/source --import tsx bench/src/state-digest.bench.ts
 */
import { createHash } from 'node:crypto';
import { stateDigest } from '../../packages/server/src/store/state-digest.ts';

function stateOf(rows: number): unknown {
  const cells: Record<string, { v: number | string; f?: string }> = {};
  for (let i = 0; i < rows; i++) {
    cells[`A${i}`] = { v: i };
    cells[`B${i}`] = { v: `text ${i}`, f: `=A${i}*2` };
  }
  return { title: 'sheet', cells, rows, meta: { owner: 'ada', tags: ['a', 'b'] } };
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
let sink = 0;

function ms(fn: () => void, times: number): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < times; i++) fn();
  return Number(process.hrtime.bigint() - t0) / 1e6 / times;
}

for (const rows of [100, 10_000, 100_000]) {
  const state = stateOf(rows);
  const bytes = Buffer.byteLength(JSON.stringify(state));
  const times = Math.max(1, Math.round(2_000_000 / bytes));
  const json: number[] = [];
  const digest: number[] = [];
  const plain: number[] = [];
  for (let rep = 0; rep < 7; rep++) {
    json.push(ms(() => (sink += JSON.stringify(state).length), times));
    digest.push(ms(() => (sink += stateDigest(state).length), times));
    plain.push(ms(() => (sink += createHash('sha256').update(JSON.stringify(state)).digest('hex').length), times));
  }
  console.log(
    JSON.stringify({
      stateBytes: bytes,
      jsonStringifyMs: +med(json).toFixed(3),
      stateDigestMs: +med(digest).toFixed(3),
      insertionOrderSha256Ms: +med(plain).toFixed(3),
      digestOverStringify: +(med(digest) / med(json)).toFixed(2),
    }),
  );
}
if (sink === 0) console.log('unreachable');
