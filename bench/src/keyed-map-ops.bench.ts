/**
 * The figures behind `keyedMap`'s design (packages/core/src/keyed-map.ts) that the submit and
 * engine benchmarks do not give:
 *
 *   writes in one draft   200 ops applied in one draft (applyOps, as a rebase or a batched step
 *                         does) on a 256-key map: µs per write, plain object against keyedMap.
 *                         A plain object is copied once for all 200; a keyedMap write pays its
 *                         proxy traps on the way to the leaf each time.
 *   copy a frozen map     one frozen 1,000-key object copied four ways: Mutative's way (keys
 *                         into a dictionary-mode object), Object.assign, spread, for...in. Why
 *                         a plain object cannot get cheaper to write: its copy is already the
 *                         fastest of these.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/keyed-map-ops.bench.ts
 *
 * Interleaved repetitions, median; prints a table, writes nothing.
 */
import * as core from '@hercules/core';
import { prefilledKv } from './peers/kv-machine.ts';
import { consume, fmt, interleaved, stats } from './harness.ts';

const KEYS = 256;
const OPS = 200;
const plain = prefilledKv(core, KEYS, 'plain');
const trie = prefilledKv(core, KEYS, 'keyedMap');
const ops = Array.from({ length: OPS }, (_, i) => ({ client: 'c', seq: i + 1, name: 'set', args: { key: `k${(i * 7) % KEYS}`, value: i }, author: 'a' }));
const drafts = interleaved(
  {
    plain: () => consume(core.applyOps(plain, plain.initial, ops, 1)),
    keyedMap: () => consume(core.applyOps(trie, trie.initial, ops, 1)),
  },
  300,
  50,
);

// Mutative's copyPlainObject for objects past 128 keys, restated: the copy starts in dictionary mode.
function mutativeCopy(o: Record<string, unknown>): Record<string, unknown> {
  const keys = Object.keys(o);
  const c: Record<string, unknown> = {};
  c.a = 1;
  c.b = 1;
  delete c.a;
  delete c.b;
  for (let i = 0; i < keys.length; i++) c[keys[i]] = o[keys[i]];
  return c;
}
const big: Record<string, unknown> = {};
for (let i = 0; i < 1000; i++) big[`item-${i.toString(36).padStart(5, '0')}`] = Object.freeze({ qty: i });
Object.freeze(big);
const copies = interleaved(
  {
    "Mutative's copy": () => consume(mutativeCopy(big)),
    'Object.assign': () => consume(Object.assign({}, big)),
    spread: () => consume({ ...big }),
    'for...in': () => {
      const c: Record<string, unknown> = {};
      for (const k in big) c[k] = big[k];
      consume(c);
    },
  },
  500,
  100,
);

console.log(`NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}`);
console.table([
  ...Object.entries(drafts).map(([name, ms]) => ({
    case: `${OPS} writes in one draft, ${KEYS} keys: ${name}`,
    'median µs': fmt((stats(ms).median * 1000) / OPS),
    unit: 'per write',
  })),
  ...Object.entries(copies).map(([name, ms]) => ({
    case: `copy a frozen 1,000-key object: ${name}`,
    'median µs': fmt(stats(ms).median * 1000),
    unit: 'per copy',
  })),
]);
