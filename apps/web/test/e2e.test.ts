/**
 * End-to-end tests of the web demo apps: a real server process (apps/web/serve.ts, SQLite in a
 * temp dir, 400 ms emulated round trip) and Debian's Chromium driven by playwright-core, two
 * browser contexts (two users, A and B) per app. No browser is downloaded: we use the system's
 * `chromium` (or $CHROMIUM_PATH) and skip, saying so, only when there is none.
 *
 * Timing-sensitive facts ("A showed a non-visible mark first", "B had the message before A's
 * mark turned visible", "after the reload the message was there before the server answered")
 * are not checked by racing the page from here: an init script in every page records, with a
 * MutationObserver, every change of the watched elements with its time and the connection
 * status, into sessionStorage (so the record survives a reload of the tab). The tests then
 * assert on that record.
 *
 * Presence (cursors, drags, typing, names) is checked the same way, and by what it must not do:
 * add an op. The tests also write the screenshots of docs/screenshots/ that the README shows.
 *
 *   node --import tsx --test apps/web/test/e2e.test.ts      (npm run test:e2e)
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM_ARGS, findChromium, freePort, tempDir } from '@hercules/test-utils';
import { colorOf } from '../src/shared/people.tsx';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '../../..');
const SHOTS = join(root, 'docs/screenshots');
const RTT = 400;
const WAIT = 15_000; // per wait
const TEST_TIMEOUT = 60_000; // per test

// ------------------------------------------------------------------------------- the browser

const CHROMIUM = findChromium();
const skip = CHROMIUM
  ? false
  : "chromium not found (not on PATH, no $CHROMIUM_PATH): install Debian's chromium (apt-get install chromium) to run the browser tests";
if (!CHROMIUM) console.warn(`e2e: SKIPPING all browser tests: ${skip}`);

// ------------------------------------------------------------------------------- the server

let server: ChildProcess | undefined;
let serverExit: Promise<number | null> | undefined;
const serverOut: string[] = [];
let dataDir: { dir: string; cleanup: () => void } | undefined;
let base = '';
let browser: Browser | undefined;
const tail = () => serverOut.slice(-15).join('\n');

before(async () => {
  if (!CHROMIUM) return;
  dataDir = tempDir('e2e');
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(root, 'apps/web/serve.ts'),
      '--port',
      String(port),
      '--data-dir',
      dataDir.dir,
      '--simulate-rtt',
      String(RTT),
      '--ack-timeout',
      '1500',
      '--log-level',
      'warn',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  for (const s of [server.stdout!, server.stderr!]) s.on('data', (b: Buffer) => serverOut.push(...b.toString().split('\n').filter(Boolean)));
  serverExit = new Promise((r) => server!.on('exit', (code) => r(code)));
  let exited = false;
  void serverExit.then(() => {
    exited = true;
  });
  const end = Date.now() + 30_000; // includes the esbuild bundle of the apps
  for (;;) {
    if (exited) throw new Error(`the server exited before it was up:\n${tail()}`);
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > end) throw new Error(`the server did not answer /healthz within 30 s:\n${tail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close().catch(() => {});
  if (server && server.exitCode === null && server.signalCode === null) {
    server.kill('SIGTERM');
    const done = await Promise.race([serverExit, new Promise((r) => setTimeout(() => r('timeout'), 5000))]);
    if (done === 'timeout') {
      server.kill('SIGKILL');
      await serverExit;
    }
  }
  dataDir?.cleanup();
});

// ------------------------------------------------------------------- the in-page recorder

/** What a watch records: for every element matching `sel` (and, with `textSel`, whose
 *  `textSel` child's text equals `text`), the listed properties: 'text' (trimmed textContent),
 *  'left'/'top' (inline style) or an attribute name. */
interface Watch {
  name: string;
  sel: string;
  textSel?: string;
  text?: string;
  props: string[];
}
type Props = Record<string, string | null>;
interface Entry {
  load: number;
  name: string;
  value?: Props[];
  t: number;
  status?: string | null;
}

/** Runs in every page before the app (an init script): records changes of the watches. */
function recorder() {
  const KEY = 'e2e-recorder';
  const w = window as any;
  w.__name ??= (f: unknown) => f; // tsx's keepNames helper, for functions we send to the page
  const st: { loads: number; watches: Watch[]; log: Entry[] } = JSON.parse(sessionStorage.getItem(KEY) ?? '{"loads":0,"watches":[],"log":[]}');
  st.loads++;
  const load = st.loads;
  const save = () => sessionStorage.setItem(KEY, JSON.stringify(st));
  const read = (el: Element, p: string) =>
    p === 'text' ? (el.textContent ?? '').trim() : p === 'left' || p === 'top' ? (el as HTMLElement).style[p] : el.getAttribute(p);
  const value = (x: Watch): Props[] =>
    Array.from(document.querySelectorAll(x.sel))
      .filter((el) => !x.textSel || (el.querySelector(x.textSel)?.textContent ?? '') === x.text)
      .map((el) => Object.fromEntries(x.props.map((p) => [p, read(el, p)])));
  const last = new Map<string, string>();
  const check = () => {
    let changed = false;
    for (const x of st.watches) {
      const v = value(x);
      const j = JSON.stringify(v);
      if (last.get(x.name) === j) continue;
      last.set(x.name, j);
      st.log.push({ load, name: x.name, value: v, t: Date.now(), status: w.hercules?.status?.() ?? null });
      changed = true;
    }
    if (changed) save();
  };
  w.__e2eWatch = (x: Watch) => {
    st.watches.push(x);
    check();
  };
  w.__e2eLog = () => {
    check();
    return st.log;
  };
  addEventListener('pagehide', () => {
    st.log.push({ load, name: '#pagehide', t: Date.now() });
    save();
  });
  save();
  new MutationObserver(check).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
}

// ------------------------------------------------------------------------------ helpers

interface Client {
  tag: string;
  ctx: BrowserContext;
  page: Page;
  errors: string[];
}
const uniqueRoom = (name: string) => `e2e-${name}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 7)}`;

/** A user (a browser context) with one page of `app` in `room`; `name`, if given, is their name before they change it. */
async function openClient(app: string, room: string, tag: string, opts: { name?: string; width?: number; clientId?: string } = {}): Promise<Client> {
  const ctx = await browser!.newContext({ viewport: { width: opts.width ?? 1280, height: 800 } });
  await ctx.addInitScript(recorder);
  await ctx.addInitScript(
    ({ name, clientId }) => {
      if (name && localStorage.getItem('hercules-name') === null) localStorage.setItem('hercules-name', name);
      if (clientId) (window as any).herculesClientId = clientId; // taken by a new client only
    },
    { name: opts.name, clientId: opts.clientId },
  );
  const page = await ctx.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`${tag}: ${e.message}`));
  await page.goto(`${base}/${app}?room=${room}`);
  return { tag, ctx, page, errors };
}

/** Wait (in the page, every animation frame) until `fn(arg)` is truthy; fail after WAIT ms saying what. */
async function until<A>(c: Client, what: string, fn: (arg: A) => unknown, arg?: A, ms = WAIT): Promise<void> {
  try {
    await c.page.waitForFunction(fn as any, arg, { timeout: ms });
  } catch (e) {
    const placeholder = await c.page.evaluate(() => document.body.textContent?.includes('coming in this change')).catch(() => false);
    throw new Error(
      `${c.tag}: timed out after ${ms} ms waiting for ${what}` +
        (placeholder ? ' (the app is still the "coming in this change" placeholder)' : '') +
        `\n  page error(s): ${c.errors.join(' | ') || 'none'}\n  server output: ${tail() || 'none'}\n  (${(e as Error).message.split('\n')[0]})`,
    );
  }
}

/** The clients online, in each other's visibility set, and each among the others' people here (presence). */
async function ready(...cs: Client[]) {
  for (const c of cs) {
    await until(
      c,
      `status online, ${cs.length} members and ${cs.length - 1} other people here`,
      (n: number) => {
        const h = (window as any).hercules;
        return h?.status() === 'online' && h.members().length === n && document.querySelectorAll('[data-testid=person]').length === n - 1;
      },
      cs.length,
    );
  }
}

/** Whether the people list shows someone called `name`. */
const hasPerson = (name: string) => Array.from(document.querySelectorAll('[data-testid=person]')).some((p) => p.textContent?.trim() === name);
const lacksPerson = (name: string) => !Array.from(document.querySelectorAll('[data-testid=person]')).some((p) => p.textContent?.trim() === name);
/** Log lengths of the Submitted view: a cursor, a drag or typing must not add to it. */
const submittedOps = (c: Client) => c.page.evaluate(() => (window as any).hercules.positions().submitted as number);
/** Write a screenshot for the docs (docs/screenshots/NAME.png). */
const shoot = (c: Client, name: string) => c.page.screenshot({ path: join(SHOTS, `${name}.png`) });

const watch = (c: Client, x: Watch) => c.page.evaluate((x) => (window as any).__e2eWatch(x), x);
const log = async (c: Client, name: string): Promise<Entry[]> =>
  ((await c.page.evaluate(() => (window as any).__e2eLog())) as Entry[]).filter((e) => e.name === name || e.name === '#pagehide');
const show = (es: Entry[]) => es.map((e) => `${e.load}:${e.name}@${e.t % 100000} ${JSON.stringify(e.value ?? '')} ${e.status ?? ''}`).join('\n    ');

/** Screenshot, and whether the watched `name` satisfied `uncertain` for the whole time it took. */
async function screenshot(c: Client, app: string, name: string, uncertain: (v: Props[]) => boolean): Promise<{ held: boolean; ms: number }> {
  const t0 = Date.now();
  await c.page.screenshot({ path: join(SHOTS, `${app}-e2e.png`) });
  const t1 = Date.now();
  const es = (await log(c, name)).filter((e) => e.name === name);
  const atStart = es.filter((e) => e.t <= t0).at(-1);
  const held = !!atStart?.value && uncertain(atStart.value) && es.filter((e) => e.t > t0 && e.t <= t1).every((e) => uncertain(e.value!));
  return { held, ms: t1 - t0 };
}

async function closeAll(...cs: Client[]) {
  for (const c of cs) await c.ctx.close().catch(() => {});
}

const STAGES = ['submitted', 'durable', 'authoritative', 'visible'];
const messagesText = (c: Client) => c.page.locator('[data-testid=message] [data-testid=text]').allTextContents();
async function say(c: Client, text: string) {
  await c.page.fill('[data-testid=input]', text);
  await c.page.click('[data-testid=send]');
}
const stageWatch = (name: string, text: string): Watch => ({ name, sel: '[data-testid=message]', textSel: '[data-testid=text]', text, props: ['data-stage'] });
const stageIs = ([text, ss]: [string, string[]]) =>
  Array.from(document.querySelectorAll('[data-testid=message]')).some(
    (li) => li.querySelector('[data-testid=text]')?.textContent === text && ss.includes(li.getAttribute('data-stage') ?? ''),
  );
const shows = ([text, n]: [string, number]) =>
  Array.from(document.querySelectorAll('[data-testid=message] [data-testid=text]')).filter((x) => x.textContent === text).length >= n;

// ------------------------------------------------------------------------------------ chat

// spec: VIS-DELIVERED
test("chat: A sees its message marked not-yet-visible, B receives it, then A's mark turns visible", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('chat-send');
  const A = await openClient('chat', room, 'A', { name: 'Ada' });
  const B = await openClient('chat', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const text = `hello from A ${Math.random().toString(36).slice(2, 8)}`;
  await watch(A, stageWatch('m', text));
  await watch(B, stageWatch('m', text));

  await say(A, text);
  await until(A, 'its message with a non-visible mark', stageIs, [text, STAGES.slice(0, 3)] as [string, string[]]);
  const shot = await screenshot(A, 'chat', 'm', (v) => v.length === 1 && v[0]['data-stage'] !== 'visible');
  await until(B, 'the message from A', shows, [text, 1] as [string, number]);
  await until(A, 'its mark to turn visible', stageIs, [text, ['visible']] as [string, string[]]);

  const a = (await log(A, 'm')).filter((e) => e.value!.length > 0);
  const stages = a.map((e) => e.value![0]['data-stage']!);
  assert.ok(
    a.every((e) => e.value!.length === 1),
    `A shows its message once:\n    ${show(a)}`,
  );
  assert.notEqual(stages[0], 'visible', `A's first mark must not be visible:\n    ${show(a)}`);
  assert.equal(stages.at(-1), 'visible');
  const order = stages.map((s) => STAGES.indexOf(s));
  assert.ok(
    order.every((k, i) => k >= 0 && (i === 0 || k > order[i - 1])),
    `A's marks advance through the stages in order: ${stages.join(' → ')}`,
  );
  const bFirst = (await log(B, 'm')).find((e) => e.value && e.value.length > 0);
  const aVisible = a.find((e) => e.value![0]['data-stage'] === 'visible')!;
  assert.ok(bFirst, 'B shows the message');
  assert.ok(bFirst.t <= aVisible.t, `B showed the message (t=${bFirst.t}) before A's mark turned visible (t=${aVisible.t})`);
  assert.deepEqual(await messagesText(B), [text]);
  assert.deepEqual([...A.errors, ...B.errors], []);
  t.diagnostic(`A's marks: ${stages.join(' → ')} in ${aVisible.t - a[0].t} ms; B had it ${aVisible.t - bFirst.t} ms before A's ✓✓`);
  t.diagnostic(`screenshot ${shot.held ? 'shows' : 'MAY NOT show'} the non-visible mark (${shot.ms} ms)`);
});

// spec: RECEIPT-LIVE
test('chat: "seen by" under A\'s latest message names B by the name B shows, once B holds it; B, which wrote nothing, shows none', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('chat-seen');
  const A = await openClient('chat', room, 'A', { name: 'Ada' });
  const B = await openClient('chat', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const text = `seen? ${Math.random().toString(36).slice(2, 8)}`;
  await say(A, text);
  await until(B, 'the message from A', shows, [text, 1] as [string, number]);
  const seenBy = (want: string) => document.querySelector('[data-testid=seen-by]')?.textContent === want;
  await until(A, '"seen by Grace" under its message', seenBy, 'seen by Grace');
  assert.equal(await B.page.$('[data-testid=seen-by]'), null);
  assert.deepEqual([...A.errors, ...B.errors], []);
});

// spec: VIS-DROP-DEAD
test("chat: closing B removes it from A's visibility set", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('chat-leave');
  const A = await openClient('chat', room, 'A');
  const B = await openClient('chat', room, 'B');
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const count = (n: string) => document.querySelector('[data-testid=member-count]')?.textContent === n;
  await until(A, 'inspector member-count 2', count, '2');
  await until(B, 'inspector member-count 2', count, '2');
  const t0 = Date.now();
  await B.ctx.close();
  await until(A, 'inspector member-count 1 after B closed', count, '1');
  const left = Date.now() - t0;
  // With B gone, A's next message needs no one else's ack: it turns visible.
  const text = `alone ${Math.random().toString(36).slice(2, 8)}`;
  await say(A, text);
  await until(A, 'its message to turn visible with B gone', stageIs, [text, ['visible']] as [string, string[]]);
  assert.equal(await A.page.textContent('[data-testid=member-count]'), '1');
  assert.deepEqual(A.errors, []);
  t.diagnostic(`B left A's visibility set ${left} ms after its context closed`);
});

// spec: DUR-SURVIVES-RESTART, LOG-EXACTLY-ONCE
test('chat: reloading A mid-flight keeps its durable ops and delivers them exactly once', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('chat-reload');
  const A = await openClient('chat', room, 'A');
  const B = await openClient('chat', room, 'B');
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const idBefore = await A.page.textContent('[data-testid=client-id]');
  const tag = Math.random().toString(36).slice(2, 8);
  const m1 = `before reload ${tag}`;
  const m2 = `after reload ${tag}`;
  await watch(A, stageWatch('m1', m1)); // kept in sessionStorage: recorded from the first paint after the reload too

  await say(A, m1);
  await until(A, 'its message durable (or authoritative), not yet visible', stageIs, [m1, ['durable', 'authoritative']] as [string, string[]]);
  await A.page.reload();

  // Before the reload: the message was durable or authoritative, never visible.
  const es = await log(A, 'm1');
  const hide = es.find((e) => e.name === '#pagehide' && e.load === 1);
  assert.ok(hide, `the reload was recorded:\n    ${show(es)}`);
  const beforeReload = es.filter((e) => e.load === 1 && e.name === 'm1' && e.value!.length > 0);
  const lastStage = beforeReload.at(-1)?.value?.[0]['data-stage'];
  assert.ok(
    lastStage === 'durable' || lastStage === 'authoritative',
    `at the reload A's message was ${lastStage} (want durable or authoritative):\n    ${show(es)}`,
  );

  // After the reload: the same client, and the message is on screen from IndexedDB before the server answered.
  await until(A, 'the message back after the reload', shows, [m1, 1] as [string, number]);
  assert.equal(await A.page.textContent('[data-testid=client-id]'), idBefore, 'a reload is the same client');
  const after1 = (await log(A, 'm1')).filter((e) => e.load === 2 && e.name === 'm1' && e.value!.length > 0);
  assert.ok(after1.length > 0);
  assert.equal(after1[0].value!.length, 1);
  assert.equal(after1[0].value![0]['data-stage'], 'durable', `first paint after the reload shows the message as durable:\n    ${show(after1)}`);
  assert.notEqual(after1[0].status, 'online', `the message was shown before the server answered (status ${after1[0].status})`);

  await until(A, 'the message visible after the reload', stageIs, [m1, ['visible']] as [string, string[]]);
  await until(B, 'the message from A', shows, [m1, 1] as [string, number]);

  // A second message after the reload; once it is visible (and so is every op before it), and a
  // little more than a round trip has passed for any late duplicate, each text is there once.
  await ready(A, B);
  await say(A, m2);
  await until(A, 'the second message visible', stageIs, [m2, ['visible']] as [string, string[]]);
  await until(B, 'the second message', shows, [m2, 1] as [string, number]);
  await new Promise((r) => setTimeout(r, 2 * RTT));
  await until(A, 'nothing pending', () => document.querySelector('[data-testid=pending-count]')?.textContent === '0');
  assert.deepEqual(await messagesText(B), [m1, m2], 'B shows each message exactly once');
  assert.deepEqual(await messagesText(A), [m1, m2], 'A shows each message exactly once');
  assert.deepEqual(await A.page.locator('[data-testid=message]').evaluateAll((ls) => ls.map((l) => l.getAttribute('data-stage'))), ['visible', 'visible']);
  assert.deepEqual([...A.errors, ...B.errors], []);
  t.diagnostic(`A reloaded with its message ${lastStage}; first paint after the reload: ${after1[0].value![0]['data-stage']} while ${after1[0].status}`);
});

// ------------------------------------------------------------------ tabs of one browser

/** A browser profile (context) whose WebSockets can be cut: `offline.on` refuses every new one. */
async function profile(t: { after: (fn: () => unknown) => void }) {
  const ctx = await browser!.newContext();
  t.after(() => ctx.close().catch(() => {}));
  await ctx.addInitScript(recorder);
  const offline = { on: false };
  await ctx.routeWebSocket(/.*/, (ws) => {
    if (offline.on) ws.close();
    else ws.connectToServer();
  });
  const tab = async (tag: string, room: string, app = 'chat'): Promise<Client> => {
    const page = await ctx.newPage();
    const c: Client = { tag, ctx, page, errors: [] };
    page.on('pageerror', (e) => c.errors.push(`${tag}: ${e.message}`));
    await page.goto(`${base}/${app}?room=${room}`);
    await until(c, 'the room open', () => !!(window as any).hercules);
    return c;
  };
  return { ctx, offline, tab };
}
/** The server's open client connections (its /healthz). */
const serverConnections = async () => ((await (await fetch(`${base}/healthz`)).json()) as { connections: number }).connections;
const leading = (c: Client) => c.page.evaluate(() => (window as any).hercules.leading as boolean);
/** Submit through the page's room (faster than typing: many ops in flight at once). */
const sayAll = (c: Client, texts: string[]) =>
  c.page.evaluate((ts) => {
    for (const text of ts) (window as any).hercules.ops.say({ text });
  }, texts);
/** The messages of the room's log, as a fresh user (another browser context) gets them. */
async function onServer(t: { after: (fn: () => unknown) => void }, room: string, n: number): Promise<string[]> {
  const B = await openClient('chat', room, 'fresh');
  t.after(() => closeAll(B));
  await until(B, `${n} messages`, (k: number) => (window as any).hercules?.getState('authoritative').messages.length >= k, n);
  await new Promise((r) => setTimeout(r, 3 * RTT)); // a late duplicate would be here by now
  return B.page.evaluate(() => (window as any).hercules.getState('authoritative').messages.map((m: any) => m.text as string));
}

// spec: DUR-HANDOVER
test('tabs: three tabs of one browser are one client: one WebSocket between them, one client id, and every tab shows every message', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('tabs-one');
  const p = await profile(t);
  const tabs = [await p.tab('T1', room), await p.tab('T2', room), await p.tab('T3', room)];
  for (const c of tabs) await until(c, 'online', () => (window as any).hercules?.status() === 'online');
  await new Promise((r) => setTimeout(r, RTT)); // another socket, if any, would be open by now
  // (Sockets of the tests before may take a moment to be counted closed.)
  const end = Date.now() + 3000;
  while ((await serverConnections()) > 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  const open = await serverConnections();
  assert.equal(open, 1, 'one connection to the server for three tabs');
  assert.deepEqual(await Promise.all(tabs.map(leading)), [true, false, false], 'the first tab leads');
  const ids = new Set(await Promise.all(tabs.map((c) => c.page.evaluate(() => (window as any).hercules.clientId as string))));
  assert.equal(ids.size, 1, 'one client id');
  const tag = Math.random().toString(36).slice(2, 8);
  for (const [i, c] of tabs.entries()) await say(c, `from T${i + 1} ${tag}`);
  const all = tabs.map((_, i) => `from T${i + 1} ${tag}`);
  for (const c of tabs) for (const m of all) await until(c, `${m} visible`, stageIs, [m, ['visible']] as [string, string[]]);
  const order = await messagesText(tabs[0]);
  for (const c of tabs) assert.deepEqual(await messagesText(c), order, `${c.tag} shows the same messages in the same order`);
  assert.deepEqual([...order].sort(), [...all].sort());
  // Undo is the leader's (docs/tabs.md): its buttons work, a follower's stay disabled.
  assert.deepEqual(await Promise.all(tabs.map((c) => c.page.isDisabled('[data-testid=undo]'))), [false, true, true], 'Undo enabled in the leader tab only');
  assert.equal(await serverConnections(), 1);
  assert.deepEqual(
    tabs.flatMap((c) => c.errors),
    [],
  );
  t.diagnostic(`server connections with 3 tabs open: ${open}`);
});

/** Three tabs, ops in flight in each, the leader tab closed without unload handlers or crashed. */
async function killLeader(t: { after: (fn: () => unknown) => void; diagnostic: (s: string) => void }, how: 'close' | 'crash') {
  const room = uniqueRoom(`tabs-${how}`);
  const p = await profile(t);
  const [L, F1, F2] = [await p.tab('L', room), await p.tab('F1', room), await p.tab('F2', room)];
  for (const c of [L, F1, F2]) await until(c, 'online', () => (window as any).hercules?.status() === 'online');
  assert.ok(await leading(L));
  const tag = Math.random().toString(36).slice(2, 8);
  const batch = (who: string, n: number) => Array.from({ length: n }, (_, i) => `${who} ${i} ${tag}`);
  // In flight when the leader goes: the followers' requests, some not yet durable, none yet ordered (400 ms round trip).
  const sent = [...batch('F1', 10), ...batch('F2', 10), ...batch('L', 5)];
  await Promise.all([sayAll(F1, batch('F1', 10)), sayAll(F2, batch('F2', 10)), sayAll(L, batch('L', 5))]);
  const [notDurable, notOrdered] = await F1.page.evaluate(() => {
    const ps = (window as any).hercules.pending();
    return [ps.filter((h: any) => h.stage === 'submitted').length, ps.filter((h: any) => h.stage === 'submitted' || h.stage === 'durable').length];
  });
  assert.equal(notOrdered, 10, 'the kill comes while none of F1’s ops is ordered (the premise of the test)');
  const t0 = Date.now();
  if (how === 'close') await L.page.close({ runBeforeUnload: false });
  else {
    const cdp = await p.ctx.newCDPSession(L.page);
    const crashed = L.page.waitForEvent('crash');
    void cdp.send('Page.crash').catch(() => {}); // the renderer dies: no answer comes
    await crashed;
  }
  // A follower leads within a second (the browser frees the dead tab's lock).
  let tookOver = -1;
  for (;;) {
    const lead = (await Promise.all([F1, F2].map(leading))).filter(Boolean).length;
    if (lead === 1) {
      tookOver = Date.now() - t0;
      break;
    }
    assert.ok(lead === 0, 'never two leaders');
    if (Date.now() - t0 > WAIT) assert.fail('no follower took over');
    await new Promise((r) => setTimeout(r, 10));
  }
  // And ops submitted during and after the handover are kept too.
  const later = [...batch('F1 later', 3), ...batch('F2 later', 3)];
  await Promise.all([sayAll(F1, batch('F1 later', 3)), sayAll(F2, batch('F2 later', 3))]);
  const expected = [...batch('F1', 10), ...batch('F2', 10), ...later];
  for (const c of [F1, F2])
    await until(c, 'every follower op visible', (n: number) => (window as any).hercules.getState('visible').messages.length >= n, expected.length);
  const got = await onServer(t, room, expected.length);
  const counts = new Map<string, number>();
  for (const m of got) counts.set(m, (counts.get(m) ?? 0) + 1);
  assert.deepEqual(
    [...counts.values()].filter((n) => n !== 1),
    [],
    `no message twice: ${JSON.stringify(got)}`,
  );
  for (const m of expected) assert.equal(counts.get(m), 1, `${m} arrived once`);
  // The dead leader's own ops: each at most once (those it had not stored died with it, as in a single tab).
  const leaders = sent.filter((m) => m.startsWith('L '));
  assert.ok(leaders.every((m) => (counts.get(m) ?? 0) <= 1));
  assert.deepEqual([...F1.errors, ...F2.errors], []);
  t.diagnostic(
    `${how}: a follower led ${tookOver} ms after; F1 had ${notDurable} of 10 ops not yet durable and none ordered then; the dead leader's own ops on the server: ${leaders.filter((m) => counts.has(m)).length} of 5`,
  );
}

// spec: DUR-HANDOVER, DUR-ONE-WRITER, LOG-EXACTLY-ONCE
test(
  'tabs: the leader tab closed mid-flight (no unload handlers): a follower takes over, and every op of every tab arrives exactly once',
  { skip, timeout: TEST_TIMEOUT },
  (t) => killLeader(t, 'close'),
);

// spec: DUR-HANDOVER, DUR-ONE-WRITER, LOG-EXACTLY-ONCE
test(
  'tabs: the leader tab’s renderer crashes mid-flight: a follower takes over, and every op of every tab arrives exactly once',
  { skip, timeout: TEST_TIMEOUT },
  (t) => killLeader(t, 'crash'),
);

// spec: DUR-HANDOVER, DUR-NOT-STRANDED, LOG-EXACTLY-ONCE
test('tabs: offline, each of three tabs types; two are closed; back online every message arrives once, and a page opened later shows them all', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('tabs-offline');
  const p = await profile(t);
  p.offline.on = true;
  const tabs = [await p.tab('T1', room), await p.tab('T2', room), await p.tab('T3', room)];
  await until(tabs[0], 'status offline', () => document.querySelector('[data-testid=connection]')?.getAttribute('data-status') === 'offline');
  const tag = Math.random().toString(36).slice(2, 8);
  const texts = tabs.map((c) => `offline ${c.tag} ${tag}`);
  for (const [i, c] of tabs.entries()) {
    await say(c, texts[i]);
    await until(c, `${texts[i]} saved (durable) while offline`, stageIs, [texts[i], ['durable']] as [string, string[]]);
  }
  for (const c of tabs) for (const m of texts) await until(c, `${m} in every tab`, shows, [m, 1] as [string, number]);
  // The leader and one follower closed: the last tab takes the store over, still offline.
  await tabs[0].page.close();
  await tabs[1].page.close();
  const last = tabs[2];
  await until(last, 'the last tab leads', () => (window as any).hercules.leading === true);
  p.offline.on = false;
  await until(last, 'online', () => (window as any).hercules?.status() === 'online', undefined, 30_000);
  for (const m of texts) await until(last, `${m} visible`, stageIs, [m, ['visible']] as [string, string[]]);
  await last.page.close();
  // A day later: a new page of the same browser, and another browser, see each message once.
  const N = await p.tab('N', room);
  await until(N, 'online', () => (window as any).hercules?.status() === 'online');
  for (const m of texts) await until(N, `${m} shown`, shows, [m, 1] as [string, number]);
  const got = await onServer(t, room, texts.length);
  assert.deepEqual([...got].sort(), [...texts].sort(), 'each message once on the server');
  assert.deepEqual(await messagesText(N), got, 'the new page shows the server’s order');
  assert.deepEqual([...tabs.flatMap((c) => c.errors), ...N.errors], []);
});

// spec: DUR-HANDOVER, DUR-NOT-STRANDED
test('tabs: the only tab closed while offline; the app opened again later (a new page) sends its messages, once', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('tabs-later');
  const p = await profile(t);
  p.offline.on = true;
  const A = await p.tab('A', room);
  await until(A, 'status offline', () => document.querySelector('[data-testid=connection]')?.getAttribute('data-status') === 'offline');
  const tag = Math.random().toString(36).slice(2, 8);
  const texts = [`later 1 ${tag}`, `later 2 ${tag}`];
  for (const m of texts) {
    await say(A, m);
    await until(A, `${m} durable`, stageIs, [m, ['durable']] as [string, string[]]);
  }
  const id = await A.page.evaluate(() => (window as any).hercules.clientId as string);
  await A.page.close();
  p.offline.on = false;
  const N = await p.tab('N', room);
  await until(N, 'online', () => (window as any).hercules?.status() === 'online');
  assert.equal(await N.page.evaluate(() => (window as any).hercules.clientId), id, 'the same client: the profile’s store');
  for (const m of texts) await until(N, `${m} visible`, stageIs, [m, ['visible']] as [string, string[]]);
  assert.deepEqual(await onServer(t, room, 2), texts);
  assert.deepEqual([...A.errors, ...N.errors], []);
});

// spec: PRESENCE-PER-KEY
test('tabs: two tabs of one browser are two cursors to another browser (one client, a presence each); a closed tab’s goes', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('tabs-cursors');
  const p = await profile(t);
  const [T1, T2] = [await p.tab('T1', room, 'sheet'), await p.tab('T2', room, 'sheet')];
  const B = await openClient('sheet', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(B));
  for (const c of [T1, T2, B]) await until(c, 'online', () => (window as any).hercules?.status() === 'online');
  await T1.page.click('[data-testid=cell-1-1]');
  await T2.page.click('[data-testid=cell-3-2]');
  const other = (id: string) => document.querySelector(`[data-testid=${id}]`)?.getAttribute('data-cursor') === 'other';
  await until(B, 'T1’s cursor on cell 1-1', other, 'cell-1-1');
  await until(B, 'T2’s cursor on cell 3-2', other, 'cell-3-2');
  const peers = await B.page.evaluate(() => (window as any).hercules.presence.others().map((o: any) => [o.client, o.key ?? null]));
  assert.equal(peers.length, 2, `two peers for the two tabs: ${JSON.stringify(await B.page.evaluate(() => (window as any).hercules.presence.others()))}`);
  assert.equal(new Set(peers.map(([c]: string[]) => c)).size, 1, 'of one client');
  assert.equal(new Set(peers.map(([, k]: string[]) => k)).size, 2, 'each under a key of its own');
  assert.equal(await B.page.locator('[data-testid=person]').count(), 2, 'two people in the list');
  // Each tab shows the other tab's cursor too.
  await until(T1, 'T2’s cursor on cell 3-2 in T1', other, 'cell-3-2');
  await until(T2, 'T1’s cursor on cell 1-1 in T2', other, 'cell-1-1');
  // A tab moves: only its cursor moves.
  await T2.page.click('[data-testid=cell-4-0]');
  await until(B, 'T2’s cursor on cell 4-0', other, 'cell-4-0');
  assert.equal(await B.page.evaluate(other, 'cell-1-1'), true, 'T1’s stays');
  // A follower tab closes (without unload handlers): its cursor goes.
  const follower = (await leading(T1)) ? T2 : T1;
  const kept = follower === T1 ? 'cell-4-0' : 'cell-1-1';
  const gone = follower === T1 ? 'cell-1-1' : 'cell-4-0';
  await follower.page.close({ runBeforeUnload: false });
  await until(B, 'the closed tab’s cursor gone', (id: string) => document.querySelector(`[data-testid=${id}]`)?.getAttribute('data-cursor') === 'none', gone);
  assert.equal(await B.page.evaluate(other, kept), true, 'the open tab’s stays');
  assert.deepEqual([...T1.errors, ...T2.errors, ...B.errors], []);
});

// ---------------------------------------------------------------------- interior design

// spec: VIS-DELIVERED
test('design: A drags chair-1; it is uncertain on A until B has the new position', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('design');
  const A = await openClient('design', room, 'A', { name: 'Ada' });
  const B = await openClient('design', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  const item = '[data-testid=item-chair-1]';
  for (const c of [A, B]) {
    await until(c, 'the room with chair-1', (sel: string) => !!document.querySelector(`[data-testid=room] ${sel}`), item);
  }
  await ready(A, B);
  const pos = (c: Client) =>
    c.page.locator(item).evaluate((el) => ({
      left: parseFloat((el as HTMLElement).style.left),
      top: parseFloat((el as HTMLElement).style.top),
      uncertain: el.getAttribute('data-uncertain'),
    }));
  const start = await pos(A);
  assert.deepEqual(await pos(B), start, 'A and B start with chair-1 at the same place');
  assert.equal(start.uncertain, 'false');
  assert.equal(await A.page.locator('[data-testid=compare-view]').inputValue(), 'visible', 'compare-view defaults to visible');
  await watch(A, { name: 'chair', sel: item, props: ['data-uncertain', 'left', 'top'] });
  await watch(B, { name: 'chair', sel: item, props: ['data-uncertain', 'left', 'top'] });

  const box = (await A.page.locator(item).boundingBox())!;
  const x = box.x + box.width / 2,
    y = box.y + box.height / 2;
  await A.page.mouse.move(x, y);
  await A.page.mouse.down();
  await A.page.mouse.move(x + 40, y + 20, { steps: 8 });
  await A.page.mouse.move(x + 80, y + 40, { steps: 8 });
  await A.page.mouse.up();

  await until(A, 'chair-1 data-uncertain="true"', (sel: string) => document.querySelector(sel)?.getAttribute('data-uncertain') === 'true', item);
  const shot = await screenshot(A, 'design', 'chair', (v) => v[0]?.['data-uncertain'] === 'true');
  const moved = await pos(A);
  assert.ok(
    Math.abs(moved.left - (start.left + 80)) <= 8 && Math.abs(moved.top - (start.top + 40)) <= 8,
    `A's chair-1 moved by about (+80, +40): from (${start.left}, ${start.top}) to (${moved.left}, ${moved.top})`,
  );
  await until(
    B,
    `chair-1 at (${moved.left}, ${moved.top})`,
    ([sel, l, tp]: [string, number, number]) => {
      const el = document.querySelector(sel) as HTMLElement | null;
      return !!el && parseFloat(el.style.left) === l && parseFloat(el.style.top) === tp;
    },
    [item, moved.left, moved.top] as [string, number, number],
  );
  await until(A, 'chair-1 data-uncertain="false" again', (sel: string) => document.querySelector(sel)?.getAttribute('data-uncertain') === 'false', item);

  const final = await pos(A);
  assert.deepEqual({ left: final.left, top: final.top }, { left: moved.left, top: moved.top }, "A's chair stays where it was dropped");
  assert.deepEqual(await pos(B), { ...final, uncertain: 'false' });
  const a = (await log(A, 'chair')).filter((e) => e.name === 'chair');
  const b = (await log(B, 'chair')).filter((e) => e.name === 'chair');
  const firstTrue = a.find((e) => e.value![0]?.['data-uncertain'] === 'true');
  const lastFlip = a.findLast((e) => e.value![0]?.['data-uncertain'] === 'false');
  const bArrived = b.find((e) => parseFloat(e.value![0]?.left ?? '') === moved.left && parseFloat(e.value![0]?.top ?? '') === moved.top);
  assert.ok(firstTrue && lastFlip && bArrived && lastFlip.t > firstTrue.t, `A: uncertain, then certain:\n    ${show(a)}`);
  assert.ok(bArrived.t <= lastFlip.t, `B had the final position (t=${bArrived.t}) before A's chair turned certain (t=${lastFlip.t})`);
  assert.deepEqual([...A.errors, ...B.errors], []);
  t.diagnostic(`A's chair-1 uncertain for ${lastFlip.t - firstTrue.t} ms; screenshot ${shot.held ? 'shows' : 'MAY NOT show'} the uncertainty (${shot.ms} ms)`);
});

// -------------------------------------------------------------------------- spreadsheet

// spec: VIS-DELIVERED
test("sheet: A types 42 into cell 1-1; red on A until B has it; B sees A's cursor move down", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('sheet');
  const A = await openClient('sheet', room, 'A', { name: 'Ada' });
  const B = await openClient('sheet', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  const cell = '[data-testid=cell-1-1]';
  const below = '[data-testid=cell-2-1]';
  for (const c of [A, B]) await until(c, 'the grid with cell 1-1', (sel: string) => !!document.querySelector(`[data-testid=grid] ${sel}`), cell);
  await ready(A, B);
  await watch(A, { name: 'cell', sel: cell, props: ['text', 'data-uncertain', 'data-cursor'] });
  await watch(B, { name: 'cell', sel: cell, props: ['text', 'data-uncertain', 'data-cursor'] });
  const attr = ([sel, name, want]: [string, string, string]) => document.querySelector(sel)?.getAttribute(name) === want;

  await A.page.click(cell);
  await until(A, 'its cursor on cell 1-1', ([sel]: [string]) => /^mine/.test(document.querySelector(sel)?.getAttribute('data-cursor') ?? ''), [cell]);
  await A.page.keyboard.type('42');
  await until(A, 'the cell editor', () => !!document.querySelector('[data-testid=cell-editor]'));
  await A.page.keyboard.press('Enter');

  await until(A, 'cell 1-1 = 42', ([sel]: [string]) => document.querySelector(sel)?.textContent?.trim() === '42', [cell]);
  await until(A, 'cell 1-1 data-uncertain="true"', attr, [cell, 'data-uncertain', 'true'] as [string, string, string]);
  const shot = await screenshot(A, 'sheet', 'cell', (v) => v[0]?.['data-uncertain'] === 'true');
  await until(B, 'cell 1-1 = 42', ([sel]: [string]) => document.querySelector(sel)?.textContent?.trim() === '42', [cell]);
  await until(A, 'cell 1-1 data-uncertain="false" again', attr, [cell, 'data-uncertain', 'false'] as [string, string, string]);
  await until(A, 'its cursor moved down to cell 2-1', attr, [below, 'data-cursor', 'mine'] as [string, string, string]);
  await until(B, "A's cursor (other) on cell 2-1", attr, [below, 'data-cursor', 'other'] as [string, string, string]);
  assert.equal(await B.page.getAttribute(below, 'data-others'), 'Ada', "B names A's cursor");
  assert.equal(await submittedOps(A), 1, 'one op (the edit): moving the cursor is no op');

  assert.equal((await A.page.textContent(cell))?.trim(), '42');
  assert.equal(await A.page.locator('[data-testid=cell-editor]').count(), 0, 'Enter closed the editor');
  assert.equal(await B.page.getAttribute(cell, 'data-uncertain'), 'false', 'B never edited: nothing uncertain on B');
  const a = (await log(A, 'cell')).filter((e) => e.name === 'cell');
  const b = (await log(B, 'cell')).filter((e) => e.name === 'cell');
  const red = a.find((e) => e.value![0]?.text === '42' && e.value![0]?.['data-uncertain'] === 'true');
  const black = a.findLast((e) => e.value![0]?.text === '42' && e.value![0]?.['data-uncertain'] === 'false');
  const bGot = b.find((e) => e.value![0]?.text === '42');
  assert.ok(red && black && bGot && black.t > red.t, `A: 42 red, then black:\n    ${show(a)}`);
  assert.ok(a.indexOf(red) === a.findIndex((e) => e.value![0]?.text === '42'), `A's 42 was red when it first appeared:\n    ${show(a)}`);
  assert.ok(bGot.t <= black.t, `B had 42 (t=${bGot.t}) before A's turned black (t=${black.t})`);
  assert.deepEqual([...A.errors, ...B.errors], []);
  t.diagnostic(`A's 42 red for ${black.t - red.t} ms; screenshot ${shot.held ? 'shows' : 'MAY NOT show'} the uncertainty (${shot.ms} ms)`);
});

// spec: UNDO-OWN
test("sheet: Ctrl+Z takes back A's cell on A and B and keeps B's; Ctrl+Shift+Z puts it back", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('sheet');
  const A = await openClient('sheet', room, 'A', { name: 'Ada' });
  const B = await openClient('sheet', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  const mine = '[data-testid=cell-1-1]';
  const theirs = '[data-testid=cell-1-2]';
  for (const c of [A, B]) await until(c, 'the grid with cell 1-1', (sel: string) => !!document.querySelector(`[data-testid=grid] ${sel}`), mine);
  await ready(A, B);
  const text = ([sel, want]: [string, string]) => (document.querySelector(sel)?.textContent?.trim() ?? '') === want;
  const type = async (c: typeof A, sel: string, value: string) => {
    await c.page.click(sel);
    await c.page.keyboard.type(value);
    await until(c, 'the cell editor', () => !!document.querySelector('[data-testid=cell-editor]'));
    await c.page.keyboard.press('Enter');
  };
  await type(A, mine, '42');
  await until(B, 'cell 1-1 = 42', text, [mine, '42'] as [string, string]);
  await type(B, theirs, '7');
  await until(A, 'cell 1-2 = 7', text, [theirs, '7'] as [string, string]);
  assert.equal(await A.page.isDisabled('[data-testid=undo]'), false, 'A can undo');

  await A.page.keyboard.press('Control+z');
  for (const c of [A, B]) await until(c, 'cell 1-1 empty again', text, [mine, ''] as [string, string]);
  for (const c of [A, B]) assert.equal((await c.page.textContent(theirs))?.trim(), '7', "B's cell stays");
  assert.equal(await A.page.isDisabled('[data-testid=redo]'), false, 'A can redo');

  await A.page.keyboard.press('Control+Shift+z');
  for (const c of [A, B]) await until(c, 'cell 1-1 = 42 again', text, [mine, '42'] as [string, string]);
  assert.deepEqual([...A.errors, ...B.errors], []);
});

/** The document's text (blocks joined by "|"), read from the page's ProseMirror state. */
const docText = (c: Client) =>
  c.page.evaluate(() => {
    const d = (window as any).editor.state.doc;
    return d.textBetween(0, d.content.size, '|') as string;
  });
const docJson = (c: Client) => c.page.evaluate(() => JSON.stringify((window as any).editor.state.doc.toJSON()));

// spec: RICH-MARK
test("doc: A and B type at once; A's text underlined until ordered; both end with one document, words whole; B sees A's caret named; bold; Ctrl+Z takes back A's word only", {
  skip,
  timeout: TEST_TIMEOUT * 2,
}, async (t) => {
  const room = uniqueRoom('doc');
  const A = await openClient('doc', room, 'A', { name: 'Ada' });
  const B = await openClient('doc', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  for (const c of [A, B]) await until(c, 'the editor', () => !!document.querySelector('[data-testid=editor] .ProseMirror'));
  await ready(A, B);
  await watch(A, { name: 'unordered', sel: '.pm-hercules-unauthoritative', props: ['text'] });
  await A.page.click('.ProseMirror');
  await B.page.click('.ProseMirror');
  const aWords = 'Hello from Ada. ';
  const bWords = 'Grace here. ';
  await Promise.all([A.page.keyboard.type(aWords, { delay: 20 }), B.page.keyboard.type(bWords, { delay: 20 })]);
  const same = async (ok: (s: string) => boolean) => {
    const end = Date.now() + WAIT;
    while (Date.now() < end) {
      const [a, b] = [await docText(A), await docText(B)];
      if (a === b && ok(a) && (await docJson(A)) === (await docJson(B))) return a;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`the documents differ: A ${JSON.stringify(await docText(A))}, B ${JSON.stringify(await docText(B))}`);
  };
  const text = await same((s) => s.length === aWords.length + bWords.length);
  assert.ok(text === aWords + bWords || text === bWords + aWords, `each one's words whole: ${JSON.stringify(text)}`);
  // A's text was underlined (not yet ordered) while it waited, and the marks clear.
  const marked = (await log(A, 'unordered')).some((e) => (e.value ?? []).length > 0);
  assert.ok(marked, "A's text was underlined while the server had not ordered it");
  for (const c of [A, B]) await until(c, 'no marks left', () => document.querySelectorAll('.pm-hercules-unauthoritative, .pm-hercules-invisible').length === 0);
  // B sees A's caret with A's name (presence, no op).
  await until(B, "A's caret named Ada", () => Array.from(document.querySelectorAll('.pm-hercules-caret-name')).some((e) => e.textContent === 'Ada'));
  // A types a bold word at the end, then takes it back with Ctrl+Z; B's words stay.
  await A.page.keyboard.press('End');
  await new Promise((r) => setTimeout(r, 600)); // a new undo step (prosemirror-history joins edits 500 ms apart)
  await A.page.keyboard.press('Control+b');
  await A.page.keyboard.type('BOLD', { delay: 20 });
  // Read from the editor's document, not the DOM: the document is what converges. (The DOM query
  // failed 1 run in 3 when B's caret sat right before the word: its name label was drawn inside
  // the <strong>, fixed in the binding and tested in packages/prosemirror/test/editor.test.ts.)
  const boldWord = () => {
    let found = false;
    (window as any).editor.state.doc.descendants((n: any) => {
      if (n.isText && n.text === 'BOLD' && n.marks.some((m: any) => m.type.name === 'strong')) found = true;
    });
    return found;
  };
  for (const c of [A, B]) await until(c, 'the bold word', boldWord);
  await A.page.keyboard.press('Control+z');
  for (const c of [A, B]) await until(c, 'the bold word gone', () => !document.querySelector('.ProseMirror')?.textContent?.includes('BOLD'));
  const after = await same((s) => !s.includes('BOLD'));
  assert.ok(after.includes(bWords.trim()) && after.includes(aWords.trim()), `B's and A's words stay: ${JSON.stringify(after)}`);
  await shoot(A, 'doc');
  assert.deepEqual([...A.errors, ...B.errors], []);
});

// Presence (cursors, drags, typing, names): apart from the log, so nothing here may add an op.

// spec: PRESENCE-EPHEMERAL
test("sheet: B sees A's cursor move within about a round trip, through presence (no op); arrows and Tab move it; it goes when A leaves", {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('sheet-cursors');
  // Two client ids whose own colours are the same: one of the two must take another.
  const ids = [randomUUID()];
  while (ids.length < 2) {
    const id = randomUUID();
    if (colorOf(id) === colorOf(ids[0])) ids.push(id);
  }
  const A = await openClient('sheet', room, 'A', { name: 'Ada', clientId: ids[0] });
  const B = await openClient('sheet', room, 'B', { name: 'Grace', clientId: ids[1] });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  // Some content for the screenshot, and Tab in the editor: commit and move right.
  await B.page.click('[data-testid=cell-0-0]');
  await B.page.keyboard.type('Budget');
  await B.page.keyboard.press('Tab');
  await B.page.keyboard.type('Q3');
  await B.page.keyboard.press('Enter');
  await until(
    B,
    'its cursor on cell 1-1 after Tab and Enter',
    (id: string) => document.querySelector('[data-cursor=mine]')?.getAttribute('data-testid') === id,
    'cell-1-1',
  );
  await until(A, "B's two edits", () => (window as any).hercules.positions().submitted === 2);
  const theirs = ([id, name]: [string, string]) => document.querySelector(`[data-testid=${id}]`)?.getAttribute('data-others') === name;
  const mine = (id: string) => document.querySelector('[data-cursor=mine]')?.getAttribute('data-testid') === id;
  await until(B, "A's cursor, named, on cell 0-0", theirs, ['cell-0-0', 'Ada'] as [string, string]);
  // Whichever of the two has the larger id moves to another colour once it sees the other's.
  const colorsOf = () => [
    document.querySelector('[data-testid=me]')?.getAttribute('data-color'),
    document.querySelector('[data-testid=person]')?.getAttribute('data-color'),
  ];
  await until(B, 'B and Ada in different colours, though their ids hash to the same', () => {
    const [me, ada] = ['me', 'person'].map((id) => document.querySelector(`[data-testid=${id}]`)?.getAttribute('data-color'));
    return me && ada && me !== ada;
  });
  const colors = await B.page.evaluate(colorsOf);
  await until(A, "Grace's colour on A is B's", (c: string) => document.querySelector('[data-testid=person]')?.getAttribute('data-color') === c, colors[0]!);
  await watch(A, { name: 'cur', sel: '[data-cursor=mine]', props: ['data-testid'] });
  await watch(B, { name: 'cur', sel: '[data-cursor=other]', props: ['data-testid', 'data-others'] });

  await A.page.click('[data-testid=cell-3-2]');
  await until(A, 'its cursor on cell 3-2', mine, 'cell-3-2');
  await until(B, "A's cursor on cell 3-2", theirs, ['cell-3-2', 'Ada'] as [string, string]);
  const at = (es: Entry[], id: string) => es.find((e) => e.name === 'cur' && e.value![0]?.['data-testid'] === id);
  const aMoved = at(await log(A, 'cur'), 'cell-3-2');
  const bSaw = at(await log(B, 'cur'), 'cell-3-2');
  assert.ok(aMoved && bSaw, 'both pages recorded the move');
  const lag = bSaw.t - aMoved.t;
  assert.ok(lag < 2 * RTT, `B saw A's cursor move ${lag} ms after A did: about one round trip (${RTT} ms), not the log's path`);

  // The keyboard: arrows, Tab along the row and on to the next, Shift+Tab back; the grid keeps the focus.
  const keys = ['ArrowDown', 'ArrowRight', 'Tab', 'Tab', 'Tab', 'Shift+Tab', 'ArrowLeft'];
  for (const k of keys) await A.page.keyboard.press(k);
  await until(A, 'its cursor on cell 4-4', mine, 'cell-4-4');
  const path = (await log(A, 'cur')).filter((e) => e.name === 'cur' && e.t >= aMoved.t).map((e) => e.value![0]?.['data-testid']);
  assert.deepEqual(path, ['cell-3-2', 'cell-4-2', 'cell-4-3', 'cell-4-4', 'cell-4-5', 'cell-5-0', 'cell-4-5', 'cell-4-4'], `keys ${keys.join(', ')}`);
  assert.equal(await A.page.evaluate(() => document.activeElement?.getAttribute('data-testid')), 'grid', 'the keyboard stays in the grid');
  await until(B, "A's cursor on cell 4-4", theirs, ['cell-4-4', 'Ada'] as [string, string]);
  assert.equal(await B.page.locator('[data-cursor=other]').count(), 1, "B shows A's cursor once");
  await shoot(B, 'sheet');
  assert.deepEqual(await B.page.locator('[data-testid=grid] tbody tr:nth-child(1) td').allTextContents(), ['Budget', 'Q3', '', '', '', '']);
  assert.deepEqual([await submittedOps(A), await submittedOps(B)], [2, 2], "no op for the cursors: the two are B's edits");

  const t0 = Date.now();
  await A.ctx.close();
  await until(B, "A's cursor gone after A closed", () => document.querySelector('[data-cursor=other]') === null);
  const gone = Date.now() - t0;
  await until(B, 'A gone from the people here', lacksPerson, 'Ada');
  assert.deepEqual(B.errors, []);
  t.diagnostic(`B saw A's cursor move ${lag} ms after A (RTT ${RTT} ms); A's cursor left B's page ${gone} ms after A's context closed`);
});

// spec: PRESENCE-EPHEMERAL
test("design: B sees a ghost of A's drag (A's colour and name) before any op; on release the item moves and the ghost goes; Escape cancels", {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('design-ghost');
  const A = await openClient('design', room, 'A', { name: 'Ada' });
  const B = await openClient('design', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  await until(B, 'Ada among the people here', hasPerson, 'Ada');
  const item = '[data-testid=item-chair-1]';
  const ghost = '[data-testid=ghost-chair-1]';
  const style = (c: Client, sel: string) =>
    c.page.locator(sel).evaluate((el) => ({ left: parseFloat((el as HTMLElement).style.left), top: parseFloat((el as HTMLElement).style.top) }));
  const start = await style(B, item);
  await watch(B, { name: 'ghost', sel: ghost, props: ['left', 'top', 'data-by'] });

  const box = (await A.page.locator(item).boundingBox())!;
  const x = box.x + box.width / 2,
    y = box.y + box.height / 2;
  await A.page.mouse.move(x, y);
  await A.page.mouse.down();
  await A.page.mouse.move(x + 60, y - 30, { steps: 6 });
  await A.page.mouse.move(x + 120, y - 60, { steps: 6 });
  const want = { left: start.left + 120, top: start.top - 60 };
  await until(
    B,
    `A's ghost of chair-1 at about (${want.left}, ${want.top}), still dragging`,
    ([sel, w]: [string, { left: number; top: number }]) => {
      const g = document.querySelector(sel) as HTMLElement | null;
      return !!g && Math.abs(parseFloat(g.style.left) - w.left) <= 4 && Math.abs(parseFloat(g.style.top) - w.top) <= 4;
    },
    [ghost, want] as [string, { left: number; top: number }],
  );
  assert.equal(await B.page.getAttribute(ghost, 'data-by'), 'Ada', 'the ghost carries its dragger’s name');
  assert.equal(await B.page.textContent(`${ghost} span`), 'Ada');
  assert.deepEqual(await style(B, item), start, 'the chair itself has not moved on B: no op yet');
  assert.deepEqual([await submittedOps(A), await submittedOps(B)], [0, 0], 'no op while dragging');
  await shoot(B, 'design');

  await A.page.mouse.up();
  await until(A, 'its move op', () => (window as any).hercules.positions().submitted === 1);
  const moved = await style(A, item);
  await until(
    B,
    `chair-1 at (${moved.left}, ${moved.top}) and no ghost`,
    ([sel, g, m]: [string, string, { left: number; top: number }]) => {
      const el = document.querySelector(sel) as HTMLElement | null;
      return !!el && parseFloat(el.style.left) === m.left && parseFloat(el.style.top) === m.top && !document.querySelector(g);
    },
    [item, ghost, moved] as [string, string, { left: number; top: number }],
  );
  const ghosts = (await log(B, 'ghost')).filter((e) => e.name === 'ghost');
  assert.ok(ghosts.some((e) => e.value!.length === 1) && ghosts.at(-1)!.value!.length === 0, `B showed the ghost, then none:\n    ${show(ghosts)}`);

  // Escape mid-drag: the ghost goes and nothing moves.
  const lamp = (await A.page.locator('[data-testid=item-lamp]').boundingBox())!;
  await A.page.mouse.move(lamp.x + 10, lamp.y + 10);
  await A.page.mouse.down();
  await A.page.mouse.move(lamp.x - 100, lamp.y + 100, { steps: 6 });
  await until(B, "A's ghost of the lamp", () => !!document.querySelector('[data-testid=ghost-lamp]'));
  await A.page.keyboard.press('Escape');
  await until(B, 'the lamp ghost gone after Escape', () => !document.querySelector('[data-testid=ghost-lamp]'));
  await A.page.mouse.up();
  assert.equal(await submittedOps(A), 1, 'a cancelled drag submits nothing');
  assert.deepEqual([...A.errors, ...B.errors], []);
});

test("chat: B sees 'Ada is typing…' while A types; it goes when A sends, and after 3 s without a keystroke", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('chat-typing');
  const A = await openClient('chat', room, 'A', { name: 'Ada' });
  const B = await openClient('chat', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const typingIs = (want: string) => document.querySelector('[data-testid=typing]')?.textContent === want;
  await say(A, 'Hi Grace!');
  await until(B, "A's message", shows, ['Hi Grace!', 1] as [string, number]);
  await say(B, 'Shall we meet on Thursday?');
  await until(A, "B's message", shows, ['Shall we meet on Thursday?', 1] as [string, number]);
  assert.equal(await B.page.textContent('[data-testid=typing]'), '', 'no one is typing yet');

  await A.page.click('[data-testid=input]');
  await A.page.keyboard.type('Thursday works, 3 pm?', { delay: 20 });
  await until(B, "'Ada is typing…'", typingIs, 'Ada is typing…');
  assert.equal(await submittedOps(A), 2, 'typing is no op (the two ops are the messages)');
  await shoot(B, 'chat');
  await A.page.keyboard.press('Enter');
  await until(B, "A's message", shows, ['Thursday works, 3 pm?', 1] as [string, number]);
  await until(B, 'the typing line cleared after the send', typingIs, '');

  await A.page.keyboard.type('one more', { delay: 20 });
  const typed = Date.now();
  await until(B, "'Ada is typing…' again", typingIs, 'Ada is typing…');
  await until(B, 'the typing line cleared after A stopped typing', typingIs, '', 8000);
  const idle = Date.now() - typed;
  assert.ok(idle >= 2500, `it cleared ${idle} ms after the last keystroke: from idleness (3 s), not at once`);
  assert.equal(await A.page.inputValue('[data-testid=input]'), 'one more', 'the unsent text stays in the box');
  assert.deepEqual([...A.errors, ...B.errors], []);
  t.diagnostic(`typing cleared on B ${idle} ms after A's last keystroke`);
});

test('chat: the whole history scrolls; the list sticks to the bottom unless the reader scrolled up', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('chat-history');
  const A = await openClient('chat', room, 'A', { name: 'Ada' });
  const B = await openClient('chat', room, 'B', { name: 'Grace' });
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const N = 30;
  for (let i = 1; i <= N; i++) await say(A, `message ${i}`);
  await until(B, `all ${N} messages`, (n: number) => document.querySelectorAll('[data-testid=message]').length === n, N);
  const scroll = (c: Client) =>
    c.page.locator('[data-testid=messages]').evaluate((el) => ({ top: el.scrollTop, height: el.scrollHeight, client: el.clientHeight }));
  const atBottom = (s: { top: number; height: number; client: number }) => s.height - s.top - s.client < 2;
  await until(B, 'the list scrolled to the last message', () => {
    const el = document.querySelector('[data-testid=messages]')!;
    return el.scrollHeight > el.clientHeight && el.scrollHeight - el.scrollTop - el.clientHeight < 2;
  });
  assert.equal((await messagesText(B))[0], 'message 1', 'the oldest message is still there (scrolled out of view)');

  await B.page.locator('[data-testid=messages]').evaluate((el) => el.scrollTo({ top: 0 }));
  await until(B, 'scrolled to the top', () => document.querySelector('[data-testid=messages]')!.scrollTop === 0);
  await say(A, 'while B reads');
  await until(B, 'the new message', shows, ['while B reads', 1] as [string, number]);
  assert.equal((await scroll(B)).top, 0, 'B scrolled up: a new message does not pull the list down');

  await B.page.locator('[data-testid=messages]').evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
  await say(A, 'back at the bottom');
  await until(B, 'the last message', shows, ['back at the bottom', 1] as [string, number]);
  await until(B, 'the list following the new message', () => {
    const el = document.querySelector('[data-testid=messages]')!;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 2;
  });
  assert.ok(atBottom(await scroll(A)), "A's own messages keep A's list at the bottom");
  assert.deepEqual([...A.errors, ...B.errors], []);
});

test("names: a name set on A shows on B (people here, message authors), survives A's reload; a departed author falls back to the short id", {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('chat-names');
  const A = await openClient('chat', room, 'A');
  const B = await openClient('chat', room, 'B');
  t.after(() => closeAll(A, B));
  await ready(A, B);
  const defaultName = await A.page.inputValue('[data-testid=name-input]');
  assert.match(defaultName, /^Guest \d{4}$/, 'a friendly default name');
  await until(B, `A's default name ${defaultName} among the people here`, hasPerson, defaultName);

  await A.page.fill('[data-testid=name-input]', 'Ada Lovelace');
  await until(B, 'Ada Lovelace among the people here', hasPerson, 'Ada Lovelace');
  assert.ok(!(await B.page.evaluate(hasPerson, defaultName)), 'the old name is gone');
  await say(A, 'hello, I am Ada');
  const authorOf = ([text, name]: [string, string]) =>
    Array.from(document.querySelectorAll('[data-testid=message]')).some(
      (m) => m.querySelector('[data-testid=text]')?.textContent === text && m.querySelector('[data-testid=author]')?.textContent === name,
    );
  await until(B, "A's message signed Ada Lovelace", authorOf, ['hello, I am Ada', 'Ada Lovelace'] as [string, string]);

  await A.page.reload();
  await until(A, 'online after the reload', () => (window as any).hercules?.status() === 'online');
  assert.equal(await A.page.inputValue('[data-testid=name-input]'), 'Ada Lovelace', 'the name is kept (localStorage)');
  await until(B, 'Ada Lovelace still here after her reload', hasPerson, 'Ada Lovelace');

  const idA = await A.page.evaluate(() => (window as any).hercules.clientId as string);
  await A.ctx.close();
  await until(B, 'A gone from the people here', lacksPerson, 'Ada Lovelace');
  await until(B, `A's message signed with the short id ${idA.slice(0, 4)}`, authorOf, ['hello, I am Ada', idA.slice(0, 4)] as [string, string]);
  assert.deepEqual([...A.errors, ...B.errors], []);
});

test('a bad ?room= shows what is wrong and a link to a valid room, not a blank page; a room of another app says so', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const A = await openClient('chat', uniqueRoom('unused'), 'A');
  t.after(() => closeAll(A));
  const cases: [string, string, string][] = [
    ['', 'is empty', 'demo-chat'],
    ['my room!', '“my room!” is not a valid room name', 'my-room'],
    ['ünïcode', '“ünïcode” is not a valid room name', 'unicode'],
    ['x'.repeat(129), 'is not a valid room name', 'x'.repeat(128)],
  ];
  for (const [bad, says, fix] of cases) {
    await A.page.goto(`${base}/chat?room=${encodeURIComponent(bad)}`);
    await until(A, `the problem page for ?room=${bad.slice(0, 20)}`, () => !!document.querySelector('[data-testid=problem]'));
    const text = (await A.page.textContent('[data-testid=problem]')) ?? '';
    assert.ok(text.includes(says) && text.includes('1 to 128 letters'), `it says what is wrong: ${text}`);
    assert.equal(await A.page.getAttribute('[data-testid=problem-link]', 'href'), `?room=${fix}`);
  }
  await A.page.click('[data-testid=problem-link]');
  await until(
    A,
    'the chat online in the suggested room',
    (search: string) => (window as any).hercules?.status() === 'online' && location.search === search,
    `?room=${'x'.repeat(128)}`,
  );

  // A room holds one app's machine: the chat opened on a design room stops, and says why.
  const shared = uniqueRoom('mixed');
  await A.page.goto(`${base}/design?room=${shared}`);
  await until(A, 'the design room online', () => (window as any).hercules?.status() === 'online');
  await A.page.goto(`${base}/chat?room=${shared}`);
  await until(A, 'the stopped banner', () => !!document.querySelector('[data-testid=stopped]'));
  assert.match((await A.page.textContent('[data-testid=stopped]')) ?? '', /runs interior-design@1, not chat@1/);
  assert.equal(await A.page.getAttribute('[data-testid=stopped] a', 'href'), '?room=demo-chat');
  assert.equal(await A.page.getAttribute('[data-testid=connection]', 'data-status'), 'failed');
  assert.deepEqual(A.errors, []);
});

test('a narrow window (400 px): nothing widens the page; the grid and the room scroll sideways; the inspector moves below', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('narrow');
  const N = await openClient('sheet', `${room}-sheet`, 'N', { name: 'Ada', width: 400 });
  t.after(() => closeAll(N));
  for (const app of ['sheet', 'design', 'chat']) {
    if (app !== 'sheet') await N.page.goto(`${base}/${app}?room=${room}-${app}`);
    await until(N, `${app} online`, () => (window as any).hercules?.status() === 'online');
    const m = await N.page.evaluate(() => {
      const rect = (sel: string) => document.querySelector(sel)?.getBoundingClientRect();
      const scroller = document.querySelector('[data-testid=scroll]');
      return {
        page: document.documentElement.scrollWidth,
        main: rect('main')!.bottom,
        inspector: rect('[data-testid=inspector]')!.top,
        scrolls: scroller ? scroller.scrollWidth > scroller.clientWidth : null,
      };
    });
    assert.ok(m.page <= 400, `${app}: the page is ${m.page} px wide in a 400 px window`);
    assert.ok(m.inspector >= m.main, `${app}: the inspector (top ${m.inspector}) is below the app (bottom ${m.main})`);
    if (app !== 'chat') assert.equal(m.scrolls, true, `${app}: the wide content scrolls sideways`);
    if (app === 'sheet') await shoot(N, 'sheet-narrow');
  }
  assert.deepEqual(N.errors, []);
});

test('the connection state shows: online; offline (changes are saved and will sync) while the server cannot be reached; online again', {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const A = await openClient('chat', uniqueRoom('offline'), 'A');
  t.after(() => closeAll(A));
  await ready(A);
  const state = (c: Client) => c.page.locator('[data-testid=connection]').evaluate((el) => [el.getAttribute('data-status'), el.textContent]);
  assert.deepEqual(await state(A), ['online', 'online']);
  // Cut the WebSocket from here: the open one closes, and new ones are refused until we stop.
  let cut = true;
  await A.page.routeWebSocket(/.*/, (ws) => {
    if (cut) return void ws.close();
    ws.connectToServer();
  });
  await A.page.reload();
  await until(A, 'status offline', () => document.querySelector('[data-testid=connection]')?.getAttribute('data-status') === 'offline');
  assert.deepEqual(await state(A), ['offline', 'offline — changes are saved and will sync']);
  await say(A, 'written offline');
  await until(A, 'the message saved (durable) while offline', stageIs, ['written offline', ['durable']] as [string, string[]]);
  cut = false;
  await until(A, 'status online again', () => document.querySelector('[data-testid=connection]')?.getAttribute('data-status') === 'online');
  await until(A, 'the message visible once back online', stageIs, ['written offline', ['visible']] as [string, string[]]);
  assert.deepEqual(A.errors, []);
});
