/**
 * Tabs of one browser sharing one client (connectTabs, docs/tabs.md), in Debian's Chromium:
 *  - submit → Submitted in a follower tab beside the leader tab (in the page, 200 submits each,
 *    alternating leader and follower in one run);
 *  - delivery to another browser: submit in the sending tab until another context's Submitted
 *    view has the op (one clock: performance.timeOrigin + now(), the same machine), 100 ops
 *    each from the leader and from a follower, alternating;
 *  - JS heap per tab after a forced GC with 1, 3 and 10 tabs of a room of 2000 messages.
 * The demo server (apps/web/serve.ts) runs without an emulated round trip.
 *
 *   npm run bench:tabs
 */
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { freePort, tempDir } from '@hercules/test-utils';
import { repoRoot } from '../harness.ts';

const HISTORY = 2000;
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const fmt = (xs: number[]) => `median ${q(xs, 0.5).toFixed(3)} ms, p90 ${q(xs, 0.9).toFixed(3)} ms (n ${xs.length})`;

async function main() {
  const chromiumPath = process.env.CHROMIUM_PATH ?? execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  const data = tempDir('bench-tabs');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'apps/web/serve.ts'), '--port', String(port), '--data-dir', data.dir, '--log-level', 'warn'],
    {
      cwd: repoRoot,
      stdio: 'ignore',
    },
  );
  try {
    for (
      let i = 0;
      i < 300 &&
      !(await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
    const browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'],
    });
    try {
      const room = `bench-tabs-${Date.now().toString(36)}`;
      const open = async (ctx: BrowserContext) => {
        const page = await ctx.newPage();
        await page.goto(`${base}/chat?room=${room}`);
        await page.waitForFunction(() => (window as any).hercules?.status() === 'online', undefined, { timeout: 30_000 });
        return page;
      };
      const ctx = await browser.newContext();
      const [leader, follower] = [await open(ctx), await open(ctx)];
      const other = await open(await browser.newContext());
      await latency(leader, follower);
      await delivery(leader, follower, other);
      await idbCommit(leader);
      await fill(leader);
      await ctx.close();
      for (const n of [1, 3, 10]) await memory(browser, open, n);
      console.log(
        `machine: ${process.platform} ${process.arch}, ${(await import('node:os')).cpus().length} cores; chromium ${browser.version()}; ${new Date().toISOString().slice(0, 10)}`,
      );
    } finally {
      await browser.close();
    }
  } finally {
    server.kill('SIGTERM');
    data.cleanup();
  }
}

/** Submit → Submitted (getState after the stub returns) in the page, leader and follower alternating. */
async function latency(leader: Page, follower: Page) {
  const one = (p: Page, i: number) =>
    p.evaluate((i) => {
      const h = (window as any).hercules;
      const t0 = performance.now();
      h.ops.say({ text: `lat ${i}` });
      const got = h.getState('submitted').messages.at(-1).text === `lat ${i}`;
      const t1 = performance.now();
      if (!got) throw new Error('not in Submitted');
      return t1 - t0;
    }, i);
  const out = { leader: [] as number[], follower: [] as number[] };
  for (let i = 0; i < 200; i++) {
    out.leader.push(await one(leader, i));
    out.follower.push(await one(follower, i));
  }
  console.log(`submit → Submitted, leader tab:   ${fmt(out.leader)}`);
  console.log(`submit → Submitted, follower tab: ${fmt(out.follower)}`);
}

/** Submit in a tab until another browser's Submitted view has it, on one clock. */
async function delivery(leader: Page, follower: Page, other: Page) {
  await other.evaluate(() => {
    const w = window as any;
    w.__seen = new Map();
    w.hercules.subscribe('submitted', (s: any) => {
      const now = performance.timeOrigin + performance.now();
      for (const m of s.messages.slice(-5)) if (!w.__seen.has(m.text)) w.__seen.set(m.text, now);
    });
  });
  const send = (p: Page, text: string) =>
    p.evaluate((text) => {
      (window as any).hercules.ops.say({ text });
      return performance.timeOrigin + performance.now();
    }, text);
  const out = { leader: [] as number[], follower: [] as number[] };
  for (let i = 0; i < 100; i++) {
    for (const [who, p] of [
      ['leader', leader],
      ['follower', follower],
    ] as const) {
      const text = `del ${who} ${i}`;
      const sent = await send(p, text);
      await other.waitForFunction((t) => (window as any).__seen.has(t), text);
      out[who].push((await other.evaluate((t) => (window as any).__seen.get(t) as number, text)) - sent);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  console.log(`delivery to another browser, from the leader tab:   ${fmt(out.leader)}`);
  console.log(`delivery to another browser, from a follower tab:   ${fmt(out.follower)}`);
  const diffs = out.follower.map((f, i) => f - out.leader[i]!);
  console.log(`  follower minus leader, paired: median ${q(diffs, 0.5).toFixed(3)} ms`);
}

/**
 * What sending only after the store write costs (the shared client turns send-ahead off): one
 * IndexedDB readwrite transaction with strict durability, as the client store commits.
 */
async function idbCommit(p: Page) {
  const ms = await p.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((res, rej) => {
      const r = indexedDB.open('bench-commit', 1);
      r.onupgradeneeded = () => r.result.createObjectStore('s');
      r.onsuccess = () => res(r.result);
      r.onerror = () => rej(r.error);
    });
    const out: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      await new Promise<void>((res, rej) => {
        const t = db.transaction('s', 'readwrite', { durability: 'strict' });
        t.objectStore('s').put({ i, text: 'x'.repeat(60) }, i);
        t.oncomplete = () => res();
        t.onerror = () => rej(t.error);
      });
      out.push(performance.now() - t0);
    }
    db.close();
    indexedDB.deleteDatabase('bench-commit');
    return out;
  });
  console.log(`one IndexedDB commit (strict durability): ${fmt(ms)}`);
}

async function fill(p: Page) {
  await p.evaluate((n) => {
    const h = (window as any).hercules;
    for (let i = h.getState('submitted').messages.length; i < n; i++) h.ops.say({ text: `history ${i} ${'x'.repeat(40)}` });
  }, HISTORY);
  await p.waitForFunction((n) => (window as any).hercules.getState('stable').messages.length >= n, HISTORY, { timeout: 60_000 });
}

/** JS heap of each of `n` tabs of a fresh profile, after a forced GC. */
async function memory(browser: import('playwright-core').Browser, open: (c: BrowserContext) => Promise<Page>, n: number) {
  const ctx = await browser.newContext();
  const pages: Page[] = [];
  for (let i = 0; i < n; i++) pages.push(await open(ctx));
  for (const p of pages) await p.waitForFunction((k) => (window as any).hercules.getState('stable').messages.length >= k, HISTORY, { timeout: 60_000 });
  const heaps: { leading: boolean; mb: number }[] = [];
  for (const p of pages) {
    const cdp = await ctx.newCDPSession(p);
    await cdp.send('HeapProfiler.collectGarbage');
    const { usedSize } = (await cdp.send('Runtime.getHeapUsage')) as { usedSize: number };
    heaps.push({ leading: await p.evaluate(() => (window as any).hercules.leading as boolean), mb: usedSize / 2 ** 20 });
  }
  const lead = heaps.filter((h) => h.leading).map((h) => h.mb);
  const rest = heaps.filter((h) => !h.leading).map((h) => h.mb);
  const sum = heaps.reduce((a, h) => a + h.mb, 0);
  console.log(
    `${n} tab(s), ${HISTORY} messages: leader ${lead.map((m) => m.toFixed(1)).join()} MB` +
      (rest.length ? `, followers median ${q(rest, 0.5).toFixed(1)} MB` : '') +
      `, all tabs ${sum.toFixed(1)} MB`,
  );
  await ctx.close();
}

await main();
