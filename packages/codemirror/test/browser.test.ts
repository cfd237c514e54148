/**
 * @hercules/codemirror in Chromium (playwright-core driving Debian's chromium; skipped, saying
 * so, when there is none): two browser contexts type into one text at once with their frames
 * held back 150 ms; the text not yet Authoritative is marked while it waits and the marks
 * clear; both editors end with the same text, each typist's words whole; each sees the other's
 * caret with its name.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createServer, staticFiles } from '@hercules/server';
import { CHROMIUM_ARGS, findChromium, tempDir } from '@hercules/test-utils';
import { pad } from './browser-machine.ts';

const here = dirname(fileURLToPath(import.meta.url));
const RTT = 150;
const WAIT = 15_000;

const CHROMIUM = findChromium();
const skip = CHROMIUM ? false : "chromium not found (not on PATH, no $CHROMIUM_PATH): install Debian's chromium to run this test";
if (!CHROMIUM) console.warn(`@hercules/codemirror browser test: SKIPPED: ${skip}`);

let browser: Browser | undefined;
let server: Awaited<ReturnType<typeof createServer>> | undefined;
const files = tempDir('codemirror-browser');
const data = tempDir('codemirror-browser-data');

before(async () => {
  if (!CHROMIUM) return;
  await build({
    entryPoints: [join(here, 'browser-page.ts')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    outfile: join(files.dir, 'app.js'),
    conditions: ['@hercules/source'],
    logLevel: 'error',
  });
  writeFileSync(join(files.dir, 'index.html'), '<!doctype html><meta charset="utf-8"><div id="editor"></div><script type="module" src="/app.js"></script>');
  server = await createServer({ port: 0, dataDir: data.dir, machines: [pad], log: 'silent', http: staticFiles(files.dir) });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
});

after(async () => {
  await browser?.close().catch(() => {});
  await server?.close();
  files.cleanup();
  data.cleanup();
});

async function open(name: string): Promise<Page> {
  const page = await (await browser!.newContext()).newPage();
  const http = server!.url.replace(/^ws/, 'http');
  await page.goto(`${http}/?name=${name}&rtt=${RTT}`);
  await page.waitForFunction(() => (globalThis as { ready?: boolean }).ready === true, undefined, { timeout: WAIT });
  return page;
}

const doc = (p: Page) => p.evaluate(() => (globalThis as unknown as { view: { state: { doc: { toString(): string } } } }).view.state.doc.toString());
const marked = (p: Page, cls: string) => p.locator(`.${cls}`).count();

test('two Chromium contexts type at once: marks appear and clear, both end with the same text, words whole, carets named', {
  skip,
  timeout: 60_000,
}, async () => {
  const [ada, bob] = [await open('Ada'), await open('Bob')];
  await ada.click('.cm-content');
  await bob.click('.cm-content');
  const aWords = 'alpha beta gamma ';
  const bWords = 'one two three ';
  const typing = Promise.all([ada.keyboard.type(aWords, { delay: 15 }), bob.keyboard.type(bWords, { delay: 15 })]);
  // While the frames are held back, Ada's own text is not yet Authoritative: marked.
  await ada.waitForSelector('.cm-hercules-unauthoritative', { timeout: WAIT });
  await typing;
  const end = Date.now() + WAIT;
  let a = '';
  let b = '';
  while (Date.now() < end) {
    [a, b] = [await doc(ada), await doc(bob)];
    if (a === b && a.length === aWords.length + bWords.length) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(a, b, 'both editors hold the same text');
  assert.ok(a === aWords + bWords || a === bWords + aWords, `each typist's words whole: ${JSON.stringify(a)}`);
  // Every op is ordered and acknowledged by both: no mark is left.
  await ada.waitForFunction(() => document.querySelectorAll('.cm-hercules-unauthoritative, .cm-hercules-invisible').length === 0, undefined, { timeout: WAIT });
  await bob.waitForFunction(() => document.querySelectorAll('.cm-hercules-unauthoritative, .cm-hercules-invisible').length === 0, undefined, { timeout: WAIT });
  assert.equal(await marked(ada, 'cm-hercules-unauthoritative'), 0);
  // Each sees the other's caret, named.
  await bob.waitForFunction(() => document.querySelector('.cm-hercules-caret-name')?.textContent === 'Ada', undefined, { timeout: WAIT });
  await ada.waitForFunction(() => document.querySelector('.cm-hercules-caret-name')?.textContent === 'Bob', undefined, { timeout: WAIT });
});
