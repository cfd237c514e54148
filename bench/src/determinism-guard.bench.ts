/**
 * What watching an op for Date.now(), new Date() and Math.random() costs (core's
 * determinism-guard.ts): installing the watch around a run of ops (once per applyOp or applyOps
 * call) and naming each op (once per op), against an empty call, alternated in each repetition,
 * beside one applyOp of a small op.
 *   node --conditions=@hercules/source --import tsx bench/src/determinism-guard.bench.ts
 */
import { applyOp, defineMachine } from '@hercules/core';
import { runningOp, watchOps } from '../../packages/core/src/determinism-guard.ts';

const m = defineMachine({
  name: 'counter',
  version: 1,
  initial: { n: 0, items: { a: { qty: 1 } } as Record<string, { qty: number }> },
  ops: {
    inc(s) {
      s.n++;
      s.items.a.qty++;
    },
  },
});
const op = { name: 'inc', args: {}, client: 'c', seq: 1, author: 'c' } as never;
const N = 200_000;
let sink = 0;

function time(fn: () => void): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn();
  return Number(process.hrtime.bigint() - t0) / N;
}

const bare: number[] = [];
const watched: number[] = [];
const apply: number[] = [];
const named: number[] = [];
for (let rep = 0; rep < 7; rep++) {
  bare.push(time(() => (sink += 1)));
  watched.push(time(() => watchOps(() => (sink += 1))));
  named.push(time(() => runningOp('counter', 'inc')));
  apply.push(time(() => (sink += applyOp(m, m.initial, op, 1).state.n)));
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const extra = med(watched) - med(bare);
console.log(
  JSON.stringify({
    nsPerCallBare: +med(bare).toFixed(1),
    nsPerCallWatched: +med(watched).toFixed(1),
    watchPerRunNs: +extra.toFixed(1),
    namePerOpNs: +(med(named) - med(bare)).toFixed(1),
    applyOpNs: +med(apply).toFixed(1),
    watchShareOfApply: `${((extra / med(apply)) * 100).toFixed(1)} %`,
    sink: sink > 0,
  }),
);
