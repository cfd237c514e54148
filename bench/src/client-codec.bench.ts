/**
 * The client's MessagePack codec (packages/core/src/msgpack.ts, hand-written for the browser
 * bundle) against msgpackr as the server configures it, on the client's real work: decoding the
 * server's `log` frames (1 and 100 remote ops of a small spreadsheet op, client ids and op names
 * interned as on a live connection; and 100 ops whose text is not ASCII) and encoding its own
 * `ops` frames (1 and 100 ops). Both codecs do the same bytes in the same run, alternated within
 * every repetition (which goes first alternates too); medians of 15 repetitions, and the median
 * of the per-repetition ratios ours / msgpackr. The work is in client-codec-work.ts.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/client-codec.bench.ts            (Node)
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/client-codec.bench.ts --browser  (Chromium)
 *
 * Node: msgpackr with its native string extractor (msgpackr-extract), frames in Buffers as `ws`
 * delivers them. --browser: the same work bundled by esbuild for the browser (msgpackr's browser
 * build, plain JavaScript) and run in Debian's Chromium (the browser tests' one, through
 * playwright-core; $CHROMIUM_PATH or `chromium` on the PATH), frames in plain Uint8Arrays.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { measure, type CodecRow } from './client-codec-work.ts';

const inBrowser = process.argv.includes('--browser');
let result: { rows: CodecRow[]; clientCodecDecodeUs: { log1: number; log100: number } };
let where: string;
if (!inBrowser) {
  const { isNativeAccelerationEnabled } = await import('msgpackr');
  where = `Node ${process.version}, msgpackr native acceleration ${isNativeAccelerationEnabled ? 'on' : 'off'}, Buffer frames`;
  result = measure((b) => Buffer.from(b));
} else {
  const bundle = await build({
    stdin: {
      contents: `import { measure } from './client-codec-work.ts'; globalThis.measure = measure;`,
      resolveDir: fileURLToPath(new URL('.', import.meta.url)),
      loader: 'ts',
    },
    bundle: true,
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    write: false,
    logLevel: 'error',
    define: { 'process.env.NODE_ENV': '"production"' },
    conditions: ['@hercules/source'],
  });
  const executablePath = process.env.CHROMIUM_PATH ?? execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage();
    await page.addScriptTag({ content: bundle.outputFiles[0].text });
    where = `Chromium ${browser.version()}, msgpackr's browser build, Uint8Array frames`;
    result = await page.evaluate(() => (globalThis as unknown as { measure: typeof measure }).measure((b) => new Uint8Array(b)));
  } finally {
    await browser.close();
  }
}
console.log(`${where}; 15 alternated repetitions, medians`);
console.table(result.rows);
console.log(
  `ClientCodec.decode (ours + the tuple checks): log frame with 1 op ${result.clientCodecDecodeUs.log1} µs, with 100 ops ${result.clientCodecDecodeUs.log100} µs`,
);
mkdirSync('docs/benchmarks', { recursive: true });
const file = `docs/benchmarks/client-codec${inBrowser ? '-chromium' : ''}.json`;
writeFileSync(file, JSON.stringify({ when: new Date().toISOString(), where, ...result }, null, 2) + '\n');
