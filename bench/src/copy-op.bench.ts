/**
 * The byte-array op written two ways, and the array copy it depends on: where the figures for
 * `current()` (packages/core/src/machine.ts) and the byte-array op (apps/machines.ts) come from.
 *
 *   element by element   500 increments written one by one through the draft's proxies (the op
 *                        as it was; what benchmarks 3 and 4 still measure)
 *   copy once            the op as shipped: current() + Array.from per touched chunk, frozen
 *                        before it is assigned back
 *   frozen array copy    one frozen array of 1,000 numbers copied with slice, Array.from, spread
 *   freeze walk          assigning an unfrozen 1,000-number array in a draft (the engine's
 *                        auto-freeze walks it) vs assigning it frozen
 *
 *   NODE_ENV=production node --import tsx bench/src/copy-op.bench.ts
 *
 * Interleaved repetitions, median µs per call; prints a table, writes nothing.
 */
import { create } from 'mutative';
import { applyOp, defineMachine } from '@hercules/core';
import { byteArray } from '../../apps/machines.ts';
import { consume, fmt, interleaved, stats } from './harness.ts';

const elementwise = defineMachine({
  name: 'byte-array-elementwise',
  version: 1,
  initial: byteArray.initial,
  ops: {
    increment(s, a: { offset: number; count: number }) {
      const total = s.chunks.length * 1000;
      for (let i = 0; i < a.count; i++) {
        const k = (a.offset + i) % total;
        const c = s.chunks[Math.floor(k / 1000)];
        c[k % 1000] = (c[k % 1000] + 1) & 0xff;
      }
    },
  },
});

const N = 200;
const op = (i: number) => ({ name: 'increment', args: { offset: (i * 7919) % 100_000, count: 500 }, author: 'a', client: 'c', seq: i + 1 });
const perCall = (f: (i: number) => unknown, n: number) => () => {
  for (let i = 0; i < n; i++) consume(f(i));
};
const frozen = Object.freeze(Array.from({ length: 1000 }, (_, i) => i & 0xff));
const base = byteArray.initial;
const F = { enableAutoFreeze: true } as const;

const groups: [string, Record<string, () => void>, number][] = [
  [
    'byte-array op (500 increments)',
    {
      'element by element': perCall((i) => applyOp(elementwise, base, op(i), 1), N),
      'copy once (as shipped)': perCall((i) => applyOp(byteArray, base, op(i), 1), N),
    },
    N,
  ],
  [
    'frozen array of 1,000 numbers, copy',
    {
      slice: perCall(() => frozen.slice(), 2000),
      'Array.from': perCall(() => Array.from(frozen), 2000),
      spread: perCall(() => [...frozen], 2000),
    },
    2000,
  ],
  [
    'assign a new 1,000-number array in a draft',
    {
      'unfrozen (engine freezes it)': perCall(
        (i) =>
          create(
            base,
            (d) => {
              d.chunks[i % 100] = Array.from(frozen);
            },
            F,
          ),
        N,
      ),
      'frozen before assigning': perCall(
        (i) =>
          create(
            base,
            (d) => {
              d.chunks[i % 100] = Object.freeze(Array.from(frozen)) as number[];
            },
            F,
          ),
        N,
      ),
    },
    N,
  ],
];

console.log(`NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}, Node ${process.version}; median of 9 interleaved repetitions, µs per call`);
for (const [title, competitors, n] of groups) {
  const res = interleaved(competitors, 9, 2);
  console.log(`\n${title}`);
  console.table(Object.fromEntries(Object.entries(res).map(([k, ms]) => [k, { 'µs per call': fmt((stats(ms).median * 1000) / n) }])));
}
