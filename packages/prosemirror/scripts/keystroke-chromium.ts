/**
 * One keystroke through the ProseMirror binding in Chromium (issue 38's "one keystroke in a
 * 100k-character document within 2x of one in an empty one"), where the happy-dom bench
 * (bench/src/text/prosemirror-keystroke.bench.ts) pays for happy-dom's MutationObserver, whose
 * cost grows with the DOM. The same work (keystroke-page.ts) in Debian's Chromium through
 * playwright-core: empty and large alternate, one editor each per round, the same random
 * positions per round, through the binding and with ProseMirror alone on the same documents (no
 * plugin: what the browser and the editor cost without Hercules). Reported per keystroke: the
 * page's wall time, the renderer main thread's CPU time in its tasks and the renderer process's
 * (the DevTools protocol's Performance metrics in thread ticks: on a shared machine the wall time
 * is mostly waiting for a core). With `--frames`, each keystroke waits for the next animation
 * frame, so the browser's style, layout and paint of it count too.
 *
 *   bash scripts/ensure-chromium.sh
 *   node -C @hercules/source --import tsx packages/prosemirror/scripts/keystroke-chromium.ts [--traces DIR] [--n 300] [--rounds 3] [--frames]
 *
 * The large document is automerge-paper's end state (Martin Kleppmann's trace, from Joseph
 * Gentle's `editing-traces`, CC BY 4.0), replayed through `applyOp` into the rich text's text
 * after its first block's separator (its runs and tombstones kept); each `\n` is a paragraph.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { chromium, type CDPSession, type Page } from 'playwright-core';
import { applyOp, defineMachine, deleteArgs, insertArgs, textOps, type Text } from '@hercules/core';
import { CHROMIUM_ARGS, findChromium } from '@hercules/test-utils';
import { createRichText } from '../src/rich.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    traces: { type: 'string', default: process.env.HERCULES_TRACES ?? join(here, '..', '..', '..', '..', 'shared', 'data', 'editing-traces') },
    n: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '3' },
    frames: { type: 'boolean', default: false },
  },
});

const WRITER = '6f1c2a3e-9b7d-4e21-8c55-0d4f3a2b1e90';
const PATH = ['doc', 'text'];

/** automerge-paper's end state as the text of a rich text: after the first block's separator. */
function paperText(): Text {
  const trace = JSON.parse(gunzipSync(readFileSync(join(values.traces!, 'automerge-paper.json.gz'))).toString('utf8')) as {
    endContent: string;
    txns: { patches: [number, number, string][] }[];
  };
  const m = defineMachine({ name: 'pm-build', version: 1, initial: { doc: createRichText() }, ops: { ...textOps() } });
  let s = m.initial;
  let seq = 0;
  const text = () => s.doc.text;
  for (const txn of trace.txns)
    for (const [pos, del, ins] of txn.patches) {
      if (del > 0)
        s = applyOp(m, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textDelete', args: deleteArgs(text(), PATH, pos + 1, del) }, seq).state;
      if (ins.length > 0)
        s = applyOp(m, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textInsert', args: insertArgs(text(), PATH, WRITER, pos + 1, ins) }, seq).state;
    }
  if (text().len !== trace.endContent.length + 1) throw new Error('the replay does not give endContent');
  return text();
}

/**
 * The renderer main thread's CPU time in its tasks so far (TaskDuration, Performance.enable in
 * thread ticks), and the renderer process's, its other threads included (ProcessTime: V8's
 * concurrent GC, the compositor), in µs.
 */
async function cpuUs(cdp: CDPSession): Promise<{ thread: number; process: number }> {
  const { metrics } = await cdp.send('Performance.getMetrics');
  const v = (name: string) => {
    const m = metrics.find((x) => x.name === name);
    if (m === undefined) throw new Error(`no ${name} metric`);
    return m.value * 1e6;
  };
  return { thread: v('TaskDuration'), process: v('ProcessTime') };
}

type Api = {
  setup(text: Text | null, bound: boolean): number;
  run(n: number, seed: number, frames: boolean): Promise<{ wallUs: number; typed: number }>;
  teardown(): void;
};

type Sample = { wall: number; cpu: number; proc: number };

async function keystrokes(page: Page, cdp: CDPSession, text: Text | null, bound: boolean, n: number, seed: number): Promise<Sample> {
  await page.evaluate(([t, b]) => (window as unknown as { keystrokes: Api }).keystrokes.setup(t, b), [text, bound] as const);
  const c0 = await cpuUs(cdp);
  const r = await page.evaluate(([k, s, f]) => (window as unknown as { keystrokes: Api }).keystrokes.run(k, s, f), [n, seed, values.frames!] as const);
  const c1 = await cpuUs(cdp);
  await page.evaluate(() => (window as unknown as { keystrokes: Api }).keystrokes.teardown());
  if (r.typed !== n) throw new Error(`${r.typed} characters reached the room, not ${n}`);
  return { wall: r.wallUs, cpu: (c1.thread - c0.thread) / n, proc: (c1.process - c0.process) / n };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const f = (x: number) => (x >= 100 ? x.toFixed(0) : x.toPrecision(3));

async function main(): Promise<void> {
  const exe = findChromium();
  if (!exe) throw new Error("no chromium: run 'bash scripts/ensure-chromium.sh' (or set CHROMIUM_PATH)");
  const n = Number(values.n);
  const rounds = Number(values.rounds);
  const big = paperText();
  const bundle = await build({
    entryPoints: [join(here, 'keystroke-page.ts')],
    bundle: true,
    write: false,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    conditions: ['@hercules/source'],
    // As an app's production build: no freezing walk of each snapshot (machine.ts).
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'error',
  });
  const browser = await chromium.launch({ executablePath: exe, headless: true, args: [...CHROMIUM_ARGS] });
  try {
    const page = await browser.newPage();
    await page.setContent('<!doctype html><meta charset="utf-8"><style>.ProseMirror{white-space:pre-wrap}</style><body></body>');
    await page.addScriptTag({ content: bundle.outputFiles[0].text, type: 'module' });
    await page.waitForFunction(() => 'keystrokes' in window);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
    console.log(
      `chromium ${browser.version()}, ${n} keystrokes a document a round, ${rounds} rounds after a warm-up${values.frames ? ', a frame after each' : ''}`,
    );
    // Through the binding, and ProseMirror alone on the same documents (what the browser and the
    // editor cost without Hercules), alternated in each round.
    const cases = [
      ['empty', null, true],
      ['large', big, true],
      ['empty, ProseMirror alone', null, false],
      ['large, ProseMirror alone', big, false],
    ] as const;
    const samples = new Map<string, Sample[]>(cases.map(([name]) => [name, []]));
    for (let r = 0; r <= rounds; r++) {
      const got = [];
      for (const [name, text, bound] of r % 2 ? [...cases].reverse() : cases) {
        const x = await keystrokes(page, cdp, text, bound, n, r + 1);
        got.push(`${name} ${f(x.wall)} µs (CPU ${f(x.cpu)}, process ${f(x.proc)})`);
        if (r > 0) samples.get(name)!.push(x); // round 0 warms up
      }
      console.log(`round ${r}${r === 0 ? ' (warm-up)' : ''}: ${got.join('; ')}`);
    }
    const m = (name: string, k: keyof Sample) => median(samples.get(name)!.map((x) => x[k]));
    for (const [name] of cases)
      console.log(`${name}: ${f(m(name, 'wall'))} µs a keystroke, main thread CPU ${f(m(name, 'cpu'))}, renderer process CPU ${f(m(name, 'proc'))} (medians)`);
    const ratio = (a: string, b: string, k: keyof Sample) => f(m(a, k) / m(b, k));
    console.log(
      `large / empty through the binding: wall ${ratio('large', 'empty', 'wall')}, main thread CPU ${ratio('large', 'empty', 'cpu')}, process CPU ${ratio('large', 'empty', 'proc')} (goal: at most 2)`,
    );
    console.log(
      `large / empty, ProseMirror alone: wall ${ratio('large, ProseMirror alone', 'empty, ProseMirror alone', 'wall')}, main thread CPU ${ratio('large, ProseMirror alone', 'empty, ProseMirror alone', 'cpu')}, process CPU ${ratio('large, ProseMirror alone', 'empty, ProseMirror alone', 'proc')}`,
    );
    console.log(`automerge-paper's end: ${(big.len - 1).toLocaleString('en-US')} characters`);
  } finally {
    await browser.close();
  }
}

await main();
