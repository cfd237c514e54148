/**
 * Submit after idle: what the first keystroke after a pause costs, against the same submit run
 * back to back. One sample = `engine.submit('setCell', …)` + `getState('submitted')` on the
 * spreadsheet machine (apps/machines.ts), timed around exactly those calls, after the thread
 * slept `gap` ms (a timer, as between a user's keystrokes), and the submit right after it.
 * Control: a fixed arithmetic loop (tiny code and data) after the same gap: if it stays as fast
 * as back to back, the CPU's clock did not drop while idle, and what slows the submit is its
 * larger working set (code and data) having left the caches.
 *
 *   NODE_ENV=production node --import tsx bench/src/submit-idle.bench.ts
 *
 * Gaps are interleaved sample by sample; median and p90 µs per gap. Since an op runs at the
 * first read of Submitted (ViewEngine.submit), the `getState` part is the op's run: printed on
 * its own too. Prints a table, writes nothing.
 */
import { ViewEngine } from '@hercules/core';
import { spreadsheet } from '../../apps/machines.ts';
import { fmt, printTable, quantile, stats } from './harness.ts';
import { sleep } from './runtime/common.ts';

const GAPS = [0, 1, 5, 20, 100];
const SAMPLES = 60; // per gap

let engine = new ViewEngine(spreadsheet, { clientId: 'bench', now: () => performance.now() });
let n = 0;
/** The last submitOnce's getState part, µs. */
let lastRead = 0;
function submitOnce(): number {
  if (++n % 500 === 0) engine = new ViewEngine(spreadsheet, { clientId: 'bench', now: () => performance.now() });
  const t0 = performance.now();
  engine.submit('setCell', { row: n % 5, col: n % 5, text: `v${n}` });
  const t1 = performance.now();
  engine.getState('submitted');
  const dt = performance.now() - t0;
  lastRead = (t0 + dt - t1) * 1000;
  engine.durable(n);
  engine.drain();
  return dt * 1000;
}
let acc = 0;
function arithmetic(): number {
  const t0 = performance.now();
  let x = acc;
  for (let i = 0; i < 20_000; i++) x = (x * 31 + i) % 1_000_003;
  acc = x;
  return (performance.now() - t0) * 1000;
}

// Warm up both paths hot, so the gaps measure waking up, not first compilation.
for (let i = 0; i < 3000; i++) {
  submitOnce();
  arithmetic();
}

const submit: Record<number, number[]> = Object.fromEntries(GAPS.map((g) => [g, []]));
const read: Record<number, number[]> = Object.fromEntries(GAPS.map((g) => [g, []]));
const second: Record<number, number[]> = Object.fromEntries(GAPS.map((g) => [g, []]));
const control: Record<number, number[]> = Object.fromEntries(GAPS.map((g) => [g, []]));
for (let s = 0; s < SAMPLES; s++) {
  for (const g of GAPS) {
    if (g === 0) {
      // Back to back: the 10th of 10 submits in a row (and of 10 loops), nothing in between.
      let a = 0,
        b = 0;
      for (let i = 0; i < 10; i++) a = submitOnce();
      read[0].push(lastRead);
      for (let i = 0; i < 10; i++) b = arithmetic();
      submit[0].push(a);
      control[0].push(b);
      continue;
    }
    await sleep(g);
    submit[g].push(submitOnce());
    read[g].push(lastRead);
    second[g].push(submitOnce());
    await sleep(g);
    control[g].push(arithmetic());
  }
}
const hot = stats(submit[0]).median,
  hotCtl = stats(control[0]).median;
printTable(
  `Submit after idle, µs (${SAMPLES} samples per gap, gaps interleaved; gap 0 = back to back)`,
  GAPS.map((g) => {
    const sv = stats(submit[g]),
      cv = stats(control[g]);
    return {
      'idle before, ms': g,
      'submit median': sv.median,
      'submit p90': quantile(
        [...submit[g]].sort((x, y) => x - y),
        0.9,
      ),
      'submit ÷ hot': fmt(sv.median / hot),
      'of it the read (the op runs) median': stats(read[g]).median,
      'the submit right after': g ? stats(second[g]).median : '',
      'arithmetic median': cv.median,
      'arithmetic ÷ hot': fmt(cv.median / hotCtl),
    };
  }),
);
