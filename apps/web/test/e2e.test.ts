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
 *   node --import tsx --test apps/web/test/e2e.test.ts      (npm run test:e2e)
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { freePort, tempDir } from '@hercules/test-utils';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '../../..');
const SHOTS = join(root, 'docs/screenshots');
const RTT = 400;
const WAIT = 15_000; // per wait
const TEST_TIMEOUT = 60_000; // per test

// ------------------------------------------------------------------------------- the browser

function findChromium(): string | null {
  const env = process.env.CHROMIUM_PATH;
  if (env && existsSync(env)) return env;
  try {
    const p = execFileSync('which', ['chromium'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return p && existsSync(p) ? p : null;
  } catch {
    return null;
  }
}
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
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'] });
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

async function openClient(app: string, room: string, tag: string): Promise<Client> {
  const ctx = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
  await ctx.addInitScript(recorder);
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

/** Both clients online and in each other's visibility set. */
async function ready(...cs: Client[]) {
  for (const c of cs) {
    await until(
      c,
      `status online and ${cs.length} members`,
      (n: number) => {
        const h = (window as any).hercules;
        return h?.status() === 'online' && h.members().length === n;
      },
      cs.length,
    );
  }
}

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
  const A = await openClient('chat', room, 'A');
  const B = await openClient('chat', room, 'B');
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

// spec: DUR-ONE-WRITER
test("chat: a duplicated tab (same sessionStorage, so same client id) becomes its own client; both tabs' messages arrive once", {
  skip,
  timeout: TEST_TIMEOUT,
}, async (t) => {
  const room = uniqueRoom('chat-dup');
  const A = await openClient('chat', room, 'A');
  t.after(() => closeAll(A));
  await ready(A);
  const idA = await A.page.evaluate(() => sessionStorage.getItem('hercules-tab'));
  assert.ok(idA);
  // Duplicating a tab copies its sessionStorage: a second tab of A's browser that starts with A's id.
  const page = await A.ctx.newPage();
  const D: Client = { tag: 'D', ctx: A.ctx, page, errors: [] };
  page.on('pageerror', (e) => D.errors.push(`D: ${e.message}`));
  await page.addInitScript((id) => {
    if (!sessionStorage.getItem('hercules-tab')) sessionStorage.setItem('hercules-tab', id);
  }, idA);
  await page.goto(`${base}/chat?room=${room}`);
  await ready(A, D);
  const idD = await page.evaluate(() => (window as any).hercules.clientId as string);
  assert.notEqual(idD, idA, "the duplicate took its own client id (the store of A's id is held by A)");
  assert.equal(await page.evaluate(() => sessionStorage.getItem('hercules-tab')), idD, 'and keeps it across its reloads');
  const tag = Math.random().toString(36).slice(2, 8);
  await say(A, `from A ${tag}`);
  await say(D, `from D ${tag}`);
  for (const c of [A, D]) {
    for (const m of [`from A ${tag}`, `from D ${tag}`]) await until(c, `${m} visible`, stageIs, [m, ['visible']] as [string, string[]]);
  }
  const texts = await messagesText(A);
  assert.deepEqual([...texts].sort(), [`from A ${tag}`, `from D ${tag}`], 'each message once');
  assert.deepEqual(await messagesText(D), texts, 'both tabs show the same order');
  assert.deepEqual([...A.errors, ...D.errors], []);
});

// ---------------------------------------------------------------------- interior design

// spec: VIS-DELIVERED
test('design: A drags chair-1; it is uncertain on A until B has the new position', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const room = uniqueRoom('design');
  const A = await openClient('design', room, 'A');
  const B = await openClient('design', room, 'B');
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
  const A = await openClient('sheet', room, 'A');
  const B = await openClient('sheet', room, 'B');
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
