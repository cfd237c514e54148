/**
 * Tabs of one browser sharing one client (connectTabs, docs/tabs.md), in Debian's Chromium:
 *  - submit → Submitted in a follower tab beside the leader tab (in the page, 200 submits each,
 *    alternating leader and follower in one run);
 *  - delivery to another browser: submit in the sending tab until another context's Submitted
 *    view has the op (one clock: performance.timeOrigin + now(), the same machine), ROUNDS ops
 *    each from the leader and from a follower, alternating;
 *  - JS heap per tab after a forced GC with 1, 3 and 10 tabs of a room of 2000 messages.
 *  - where a follower's op spends its time on the way to the socket (timestamps in the pages:
 *    submit, the follower's post, the leader's receipt, the leader's WebSocket send), in a profile
 *    of its own whose pages are instrumented, ROUNDS ops each from the leader and a follower;
 *  - the hop between two quiet tabs alone: a BroadcastChannel against a MessagePort handed out
 *    by a SharedWorker, HOPS messages each, alternating.
 * The demo server (apps/web/serve.ts) runs without an emulated round trip. With
 * BENCH_TABS_BASE=<another checkout, its dependencies installed>, that checkout's demo server runs
 * too ("old"), and each measurement alternates old and new in this one run.
 *
 *   npm run bench:tabs
 *   BENCH_TABS_BASE=../hercules-main npm run bench:tabs
 *   BENCH_TABS_PARTS=path npm run bench:tabs    (only some of latency, delivery, path, hop, memory)
 */
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { freePort, tempDir } from '@hercules/test-utils';
import { repoRoot } from '../harness.ts';

const HISTORY = 2000;
/** BENCH_TABS_PARTS=path,latency (say) runs only those of latency, delivery, path, hop and memory. */
const PARTS = process.env.BENCH_TABS_PARTS?.split(',');
const part = (name: string) => !PARTS || PARTS.includes(name);
/** Ops from each tab in the delivery and path measurements. */
const ROUNDS = 200;
/** Messages over each channel in the hop measurement. */
const HOPS = 300;
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const fmt = (xs: number[]) => `median ${q(xs, 0.5).toFixed(3)} ms, p90 ${q(xs, 0.9).toFixed(3)} ms (n ${xs.length})`;

/** A demo server of one checkout, and the pages the bench opens on it. */
interface Build {
  name: string;
  base: string;
  stop(): void;
}
/** One profile's leader and follower tab, and another profile receiving. */
interface Trio {
  name: string;
  leader: Page;
  follower: Page;
  other: Page;
}
type Open = (ctx: BrowserContext, room?: string) => Promise<Page>;

/** The demo server of the checkout at `root`, once it answers. */
async function serve(name: string, root: string): Promise<Build> {
  const data = tempDir(`bench-tabs-${name}`);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'apps/web/serve.ts'), '--port', String(port), '--data-dir', data.dir, '--log-level', 'warn'],
    { cwd: root, stdio: 'ignore' },
  );
  const up = () =>
    fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
  for (let i = 0; i < 600 && !(await up()); i++) await new Promise((r) => setTimeout(r, 100));
  return {
    name,
    base,
    stop: () => {
      server.kill('SIGTERM');
      data.cleanup();
    },
  };
}

function opener(b: Build, room: string): Open {
  return async (ctx, r = room) => {
    const page = await ctx.newPage();
    await page.goto(`${b.base}/chat?room=${r}`);
    await page.waitForFunction(() => (window as any).hercules?.status() === 'online', undefined, { timeout: 60_000 });
    return page;
  };
}

async function trio(browser: Browser, b: Build, room: string, init?: () => void): Promise<Trio> {
  const open = opener(b, room);
  const ctx = await browser.newContext();
  if (init) await ctx.addInitScript(init);
  const [leader, follower] = [await open(ctx), await open(ctx)];
  const other = await open(await browser.newContext());
  return { name: b.name, leader, follower, other };
}

async function main() {
  const chromiumPath = process.env.CHROMIUM_PATH ?? execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  const builds: Build[] = [];
  try {
    if (process.env.BENCH_TABS_BASE) builds.push(await serve('old', resolve(process.env.BENCH_TABS_BASE)));
    builds.push(await serve('new', repoRoot));
    const browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'],
    });
    try {
      const room = `bench-tabs-${Date.now().toString(36)}`;
      const trios: Trio[] = [];
      for (const b of builds) trios.push(await trio(browser, b, room));
      if (part('latency')) await latency(trios);
      if (part('delivery')) await delivery(trios);
      const paths: Trio[] = [];
      if (part('path')) {
        for (const b of builds) paths.push(await trio(browser, b, `${room}-path`, instrument));
        await path(paths);
      }
      if (part('hop')) await hop(browser, builds.at(-1)!);
      await idbCommit(trios[0]!.leader);
      if (part('memory')) for (const t of trios) await fill(t.leader);
      for (const t of [...trios, ...paths]) await Promise.all([t.leader.context().close(), t.other.context().close()]);
      if (part('memory')) for (const n of [1, 3, 10]) for (const b of builds) await memory(browser, b.name, opener(b, room), n);
      console.log(
        `machine: ${process.platform} ${process.arch}, ${(await import('node:os')).cpus().length} cores; chromium ${browser.version()}; ${new Date().toISOString().slice(0, 10)}`,
      );
    } finally {
      await browser.close();
    }
  } finally {
    for (const b of builds) b.stop();
  }
}

/** Submit → Submitted (getState after the stub returns) in the page, leader and follower alternating (and old and new). */
async function latency(trios: Trio[]) {
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
  const out = trios.map(() => ({ leader: [] as number[], follower: [] as number[] }));
  for (let i = 0; i < 200; i++) {
    for (const [k, t] of trios.entries()) {
      out[k]!.leader.push(await one(t.leader, i));
      out[k]!.follower.push(await one(t.follower, i));
    }
  }
  for (const [k, t] of trios.entries()) {
    console.log(`[${t.name}] submit → Submitted, leader tab:   ${fmt(out[k]!.leader)}`);
    console.log(`[${t.name}] submit → Submitted, follower tab: ${fmt(out[k]!.follower)}`);
  }
}

/** Submit in a tab until another browser's Submitted view has it, on one clock (leader, follower, old, new alternating). */
async function delivery(trios: Trio[]) {
  for (const t of trios) await watchArrivals(t.other);
  const out = trios.map(() => ({ leader: [] as number[], follower: [] as number[] }));
  for (let i = 0; i < ROUNDS; i++) {
    for (const [k, t] of trios.entries()) {
      for (const who of ['leader', 'follower'] as const) {
        out[k]![who].push(await deliver(t[who], t.other, `del ${who} ${i}`));
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }
  for (const [k, t] of trios.entries()) {
    const o = out[k]!;
    console.log(`[${t.name}] delivery to another browser, from the leader tab:   ${fmt(o.leader)}`);
    console.log(`[${t.name}] delivery to another browser, from a follower tab:   ${fmt(o.follower)}`);
    const diffs = o.follower.map((f, i) => f - o.leader[i]!);
    console.log(`[${t.name}]   follower minus leader, paired: median ${q(diffs, 0.5).toFixed(3)} ms, p90 ${q(diffs, 0.9).toFixed(3)} ms`);
  }
}

/** In the receiving page: when each message text first shows in its Submitted view. */
async function watchArrivals(other: Page) {
  await other.evaluate(() => {
    const w = window as any;
    w.__seen = new Map();
    w.hercules.subscribe('submitted', (s: any) => {
      const now = performance.timeOrigin + performance.now();
      for (const m of s.messages.slice(-5)) if (!w.__seen.has(m.text)) w.__seen.set(m.text, now);
    });
  });
}

/** Submit `text` in page `p`; ms until `other` has it in its Submitted view. */
async function deliver(p: Page, other: Page, text: string): Promise<number> {
  const sent = await p.evaluate((text) => {
    (window as any).hercules.ops.say({ text });
    return performance.timeOrigin + performance.now();
  }, text);
  await other.waitForFunction((t) => (window as any).__seen.has(t), text);
  return (await other.evaluate((t) => (window as any).__seen.get(t) as number, text)) - sent;
}

/**
 * Init script of the instrumented profile: stamps (performance.timeOrigin + now()) each tabs
 * message that carries a submit as it is posted and as it is received, and each WebSocket frame
 * as it is sent, with the 'path …' text it carries.
 */
function instrument() {
  const w = window as any;
  w.__name ??= (f: unknown) => f; // tsx's keepNames helper, for functions sent to the page
  const now = () => performance.timeOrigin + performance.now();
  const textOf = (m: any): string | undefined => m?.reqs?.[0]?.args?.text;
  w.__path = { posted: new Map(), received: new Map(), sent: new Map() };
  const BC = window.BroadcastChannel.prototype;
  const post = BC.postMessage;
  BC.postMessage = function (this: BroadcastChannel, m: any) {
    const t = textOf(m);
    if (t) w.__path.posted.set(t, now());
    return post.call(this, m);
  };
  const on = Object.getOwnPropertyDescriptor(BC, 'onmessage')!;
  Object.defineProperty(BC, 'onmessage', {
    get() {
      return on.get!.call(this);
    },
    set(fn: ((ev: MessageEvent) => void) | null) {
      on.set!.call(
        this,
        fn &&
          ((ev: MessageEvent) => {
            const t = textOf(ev.data);
            if (t) w.__path.received.set(t, now());
            return fn(ev);
          }),
      );
    },
  });
  // Each readwrite IndexedDB transaction: when it was opened and when it completed (the store's
  // own 'complete' handler runs after this one), to split the leader's part into its write.
  w.__idb = [] as { start: number; done: number }[];
  const tx = IDBDatabase.prototype.transaction;
  IDBDatabase.prototype.transaction = function (this: IDBDatabase, ...a: Parameters<IDBDatabase['transaction']>) {
    const t = tx.apply(this, a);
    if (a[1] === 'readwrite') {
      const rec = { start: now(), done: 0 };
      w.__idb.push(rec);
      t.addEventListener('complete', () => {
        rec.done = now();
      });
    }
    return t;
  };
  const send = WebSocket.prototype.send;
  const latin = new TextDecoder('latin1');
  WebSocket.prototype.send = function (this: WebSocket, data: any) {
    const at = now();
    if (typeof data !== 'string') {
      const m = /path (leader|follower) \d+\./.exec(latin.decode(data));
      if (m) w.__path.sent.set(m[0], at);
    }
    return send.call(this, data);
  };
}

/** The leader's part of one op, from `from` (its submit, or its receipt from a follower) to its WebSocket send. */
interface LeaderPart {
  /** `from` → the store write that holds it starts; the write; its completion → the send. */
  toWrite: number;
  write: number;
  toSend: number;
}

/** The first readwrite IndexedDB transaction the leader opened after `from` and before `sent`. */
async function leaderPart(leader: Page, from: number, sent: number): Promise<LeaderPart | undefined> {
  const rec = await leader.evaluate(
    ([from, sent]) => ((window as any).__idb as { start: number; done: number }[]).find((r) => r.start >= from! && r.start <= sent!),
    [from, sent],
  );
  if (!rec || !rec.done) return undefined;
  return { toWrite: rec.start - from, write: rec.done - rec.start, toSend: sent - rec.done };
}

/** Where the time goes from a submit to the leader's WebSocket send (instrumented pages). */
async function path(trios: Trio[]) {
  const out = trios.map(() => ({
    toPost: [] as number[],
    hop: [] as number[],
    leaderToSend: [] as number[],
    follower: [] as number[],
    leader: [] as number[],
    parts: { leader: [] as LeaderPart[], follower: [] as LeaderPart[] },
  }));
  const submit = (p: Page, text: string) =>
    p.evaluate((text) => {
      const t0 = performance.timeOrigin + performance.now();
      (window as any).hercules.ops.say({ text });
      return t0;
    }, text);
  const stamp = (p: Page, kind: string, text: string) => p.evaluate(([k, t]) => (window as any).__path[k].get(t) as number | undefined, [kind, text]);
  for (let i = 0; i < ROUNDS; i++) {
    for (const [k, t] of trios.entries()) {
      for (const who of ['leader', 'follower'] as const) {
        const text = `path ${who} ${i}.`;
        const t0 = await submit(t[who], text);
        await t.leader.waitForFunction((x) => (window as any).__path.sent.has(x), text);
        const sent = (await stamp(t.leader, 'sent', text))!;
        const o = out[k]!;
        if (who === 'leader') {
          o.leader.push(sent - t0);
          const part = await leaderPart(t.leader, t0, sent);
          if (part) o.parts.leader.push(part);
        } else {
          const posted = (await stamp(t.follower, 'posted', text))!;
          const received = (await stamp(t.leader, 'received', text))!;
          o.follower.push(sent - t0);
          o.toPost.push(posted - t0);
          o.hop.push(received - posted);
          o.leaderToSend.push(sent - received);
          const part = await leaderPart(t.leader, received, sent);
          if (part) o.parts.follower.push(part);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }
  for (const [k, t] of trios.entries()) printPath(t.name, out[k]!);
}

function printPath(
  name: string,
  o: { toPost: number[]; hop: number[]; leaderToSend: number[]; follower: number[]; leader: number[]; parts: Record<'leader' | 'follower', LeaderPart[]> },
) {
  const m = (xs: number[]) => q(xs, 0.5).toFixed(2);
  const mp = (xs: number[]) => `${m(xs)} (p90 ${q(xs, 0.9).toFixed(2)})`;
  console.log(
    `[${name}] submit → WebSocket send, median: leader tab ${m(o.leader)} ms; follower tab ${m(o.follower)} ms = ` +
      `submit → post ${m(o.toPost)} + BroadcastChannel hop ${m(o.hop)} (p90 ${q(o.hop, 0.9).toFixed(2)}) + leader's receipt → send ${m(o.leaderToSend)} ms (medians of each part)`,
  );
  for (const who of ['leader', 'follower'] as const) {
    const p = o.parts[who];
    console.log(
      `[${name}]   in the leader, ${who}'s op (n ${p.length}): ${who === 'leader' ? 'submit' : 'receipt'} → store write starts ${mp(p.map((x) => x.toWrite))}, ` +
        `the write ${mp(p.map((x) => x.write))}, its completion → send ${mp(p.map((x) => x.toSend))} ms`,
    );
  }
  const diffs = o.follower.map((f, i) => f - o.leader[i]!);
  console.log(`[${name}]   follower minus leader, submit → send, paired: median ${mp(diffs)} ms`);
}

/**
 * The hop between two tabs alone, in two quiet pages of one profile (the server's /healthz, no
 * app): one-way latency of a message (posted → received, one clock) over a BroadcastChannel and
 * over a MessagePort the two pages got from a SharedWorker (which makes a MessageChannel and
 * hands one end to each), HOPS messages each, alternating, 10 ms apart.
 */
async function hop(browser: Browser, b: Build) {
  const ctx = await browser.newContext();
  const [a, z] = [await ctx.newPage(), await ctx.newPage()];
  for (const p of [a, z]) await p.goto(`${b.base}/healthz`);
  const src = `const ports = []; onconnect = (e) => { ports.push(e.ports[0]); if (ports.length === 2) { const c = new MessageChannel(); ports[0].postMessage(0, [c.port1]); ports[1].postMessage(0, [c.port2]); } };`;
  const url = await a.evaluate((src) => URL.createObjectURL(new Blob([src], { type: 'text/javascript' })), src);
  const join = (p: Page) =>
    p.evaluate((url) => {
      const w = window as any;
      w.__name ??= (f: unknown) => f;
      const now = () => performance.timeOrigin + performance.now();
      w.__got = new Map<string, number>();
      const record = (ev: MessageEvent) => {
        if (ev.data?.id) w.__got.set(ev.data.id, now() - ev.data.at);
      };
      w.__bc = new BroadcastChannel('hop');
      w.__bc.onmessage = record;
      return new Promise<void>((res) => {
        const worker = new SharedWorker(url);
        worker.port.onmessage = (ev) => {
          w.__port = ev.ports[0];
          w.__port.onmessage = record;
          res();
        };
        w.__worker = worker;
      });
    }, url);
  await Promise.all([join(a), join(z)]);
  const out = { bc: [] as number[], port: [] as number[] };
  for (let i = 0; i < HOPS; i++) {
    for (const via of ['bc', 'port'] as const) {
      const id = `${via} ${i}`;
      await a.evaluate(
        ([via, id]) => {
          const w = window as any;
          (via === 'bc' ? w.__bc : w.__port).postMessage({ id, at: performance.timeOrigin + performance.now() });
        },
        [via, id],
      );
      await z.waitForFunction((id) => (window as any).__got.has(id), id);
      out[via].push(await z.evaluate((id) => (window as any).__got.get(id) as number, id));
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  console.log(`[${b.name}] one hop between two quiet tabs, BroadcastChannel: ${fmt(out.bc)}`);
  console.log(`[${b.name}] one hop between two quiet tabs, MessagePort (from a SharedWorker): ${fmt(out.port)}`);
  const diffs = out.port.map((p, i) => p - out.bc[i]!);
  console.log(`[${b.name}]   MessagePort minus BroadcastChannel, paired: median ${q(diffs, 0.5).toFixed(3)} ms, p90 ${q(diffs, 0.9).toFixed(3)} ms`);
  await ctx.close();
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
async function memory(browser: Browser, name: string, open: Open, n: number) {
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
    `[${name}] ${n} tab(s), ${HISTORY} messages: leader ${lead.map((m) => m.toFixed(1)).join()} MB` +
      (rest.length ? `, followers median ${q(rest, 0.5).toFixed(1)} MB` : '') +
      `, all tabs ${sum.toFixed(1)} MB`,
  );
  await ctx.close();
}

await main();
