/**
 * The first hour with the client: op.stable, until(), delays, a server that is down or a host
 * that does not exist, a connection that never gets welcomed, a fatal refusal, no onError.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer as netServer, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HerculesError, VIEWS, defineMachine } from '@hercules/core';
import { createServer } from '@hercules/server';
import { connect } from '../src/index.ts';
import { freePort, tempDir, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');

async function server(t: { after: (fn: () => unknown) => void }) {
  const { dir, cleanup } = tempDir('connect');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

// spec: HANDLE-STAGES
test('op.stable, until() and subscribe({ immediate }) settle on state that already holds the op; delays are measured from submit', async (t) => {
  const srv = await server(t);
  const room = await connect({ url: srv.url, room: 'q', machine: chat, onError: () => {} });
  t.after(() => room.close());
  await room.whenOnline({ timeoutMs: 5000 });
  const op = room.ops.say({ text: 'hi' });
  await op.visible;
  // Alone in the room, the op is Stable as soon as it is Visible: what hung the old Quick start.
  await op.stable;
  assert.ok(room.getState('stable').messages.some((m) => m.id === op.id));
  const s = await room.until('stable', (st) => st.messages.some((m) => m.id === op.id), { timeoutMs: 1000 });
  assert.equal(s, room.getState('stable'), 'until resolves at once with the current state when it already matches');
  let seen = 0;
  const off = room.subscribe(
    'stable',
    () => {
      seen++;
    },
    { immediate: true },
  );
  off();
  assert.equal(seen, 1, 'immediate reports the current state once');
  assert.ok(op.times.stable! >= op.times.visible!, 'a stable time after the visible one');
  for (const k of ['durable', 'authoritative', 'visible', 'stable'] as const) {
    assert.ok(op.delays[k]! >= 0 && Math.abs(op.delays[k]! - (op.times[k]! - op.times.submitted!)) < 1e-9, `delays.${k} is times.${k} - times.submitted`);
  }
  await assert.rejects(
    room.until('visible', () => false, { timeoutMs: 20 }),
    (e: unknown) => e instanceof HerculesError && e.code === 'timeout',
  );
  const waiting = room.until('visible', () => false);
  await room.close();
  await assert.rejects(waiting, (e: unknown) => e instanceof HerculesError && e.code === 'closed');
});

test('a server that is down: one error that says connection refused (not one per retry), and whenOnline times out naming it', async () => {
  const port = await freePort();
  const errors: HerculesError[] = [];
  const room = await connect({
    url: `ws://127.0.0.1:${port}`,
    room: 'x',
    machine: chat,
    backoff: { minMs: 5, maxMs: 20 },
    onError: (e) => errors.push(e as HerculesError),
  });
  try {
    await assert.rejects(
      room.whenOnline({ timeoutMs: 400 }),
      (e: unknown) => e instanceof HerculesError && e.code === 'timeout' && /connection refused by 127\.0\.0\.1:\d+/.test(e.message),
    );
    assert.equal(errors.length, 1, `reported once for the whole run of refusals: ${errors.map((e) => e.message).join(' | ')}`);
    assert.equal(errors[0].code, 'unreachable');
    assert.match(room.status(), /connecting|offline/);
    room.ops.say({ text: 'works offline' });
    assert.equal(room.getState('submitted').messages.length, 1);
  } finally {
    await room.close();
  }
});

test('a host that does not resolve is named as a DNS failure', async () => {
  const errors: Error[] = [];
  const room = await connect({
    url: 'ws://no-such-host.invalid:8787',
    room: 'x',
    machine: chat,
    backoff: { minMs: 50, maxMs: 200 },
    onError: (e) => errors.push(e),
  });
  try {
    await assert.rejects(room.whenOnline({ timeoutMs: 3000 }), (e: unknown) => e instanceof HerculesError && /DNS lookup failed|cannot reach/.test(e.message));
    assert.match(errors[0]?.message ?? '', /no-such-host\.invalid/);
  } finally {
    await room.close();
  }
});

test('a connection that is accepted but never welcomed is given up after connectTimeoutMs, and retried', async (t) => {
  const sockets = new Set<import('node:net').Socket>();
  const silent: Server = netServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
  }); // takes the TCP connection, says nothing
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const errors: Error[] = [];
  const room = await connect({
    url: `ws://127.0.0.1:${(silent.address() as { port: number }).port}`,
    room: 'x',
    machine: chat,
    connectTimeoutMs: 100,
    backoff: { minMs: 5, maxMs: 10 },
    onError: (e) => errors.push(e),
  });
  try {
    await assert.rejects(
      room.whenOnline({ timeoutMs: 1000 }),
      (e: unknown) => e instanceof HerculesError && /no welcome from .* within 100 ms/.test(e.message),
    );
    assert.ok(sockets.size >= 2, `it tried again (${sockets.size} connections)`);
  } finally {
    await room.close();
  }
});

// spec: HANDLE-STAGES
test('a fatal refusal rejects every pending op and whenOnline with the reason; the status says failed', async (t) => {
  const srv = await server(t);
  const other = defineMachine({
    name: 'not-served',
    version: 1,
    initial: { n: 0 },
    ops: {
      inc(s) {
        s.n++;
      },
    },
  });
  const room = await connect({ url: srv.url, room: 'f', machine: other, onError: () => {} });
  t.after(() => room.close());
  const h = room.ops.inc();
  await assert.rejects(h.visible, (e: unknown) => e instanceof HerculesError && e.code === 'machine-mismatch');
  await assert.rejects(h.stable, (e: unknown) => e instanceof HerculesError && e.code === 'machine-mismatch');
  await assert.rejects(room.whenOnline(), (e: unknown) => e instanceof HerculesError && e.code === 'machine-mismatch');
  assert.equal(room.status(), 'failed');
});

test('without onError, the first error is printed once with console.warn', async () => {
  const port = await freePort();
  const warned: string[] = [];
  const orig = console.warn;
  console.warn = (m: string) => {
    warned.push(String(m));
  };
  try {
    const room = await connect({ url: `ws://127.0.0.1:${port}`, room: 'x', machine: chat, backoff: { minMs: 5, maxMs: 10 } });
    await assert.rejects(room.whenOnline({ timeoutMs: 200 }));
    await room.close();
  } finally {
    console.warn = orig;
  }
  assert.equal(warned.length, 1, warned.join('\n'));
  assert.match(warned[0], /connection refused.*pass onError/);
});

test('the README Quick start runs to completion twice in a row against a real server, the second continuing the first', async (t) => {
  const srv = await server(t);
  const { dir: cwd, cleanup } = tempDir('quickstart');
  t.after(cleanup);
  const run = () =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), join(root, 'apps/quickstart/client.ts')], {
        cwd,
        env: { ...process.env, HERCULES_URL: srv.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      p.stdout.on('data', (d) => {
        out += d;
      });
      p.stderr.on('data', (d) => {
        out += d;
      });
      const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
      p.on('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, out });
      });
    });
  const first = await run();
  assert.equal(first.code, 0, first.out);
  const second = await run();
  assert.equal(second.code, 0, second.out);
  for (const v of VIEWS) assert.match(first.out, new RegExp(`${v}\\s+1 messages`), `the first run shows its message in ${v}`);
  assert.match(first.out, /delays after submit \(ms\):.*stable/s);
  assert.match(second.out, /stable +2 messages/, "the second run sees the first run's message");
});

// spec: PRESENCE-EPHEMERAL
test('presence through real sockets: B sees A set it, the latest wins, a joiner sees it, and it is gone when A closes; nothing of it in the log or any view', async (t) => {
  const srv = await server(t);
  const a = await connect({ url: srv.url, room: 'p', machine: chat, clientId: 'pa', onError: () => {} });
  const b = await connect({ url: srv.url, room: 'p', machine: chat, clientId: 'pb', onError: () => {} });
  t.after(() => b.close());
  await Promise.all([a.whenOnline({ timeoutMs: 5000 }), b.whenOnline({ timeoutMs: 5000 })]);
  const seen: unknown[] = [];
  b.presence.subscribe((others) => seen.push(others.map((p) => [p.client, p.value])));
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(ok(), what);
  };
  a.presence.set({ cursor: { row: 1, col: 1 }, name: 'Ada' });
  a.presence.update({ cursor: { row: 2, col: 3 } }); // same turn: one message, the latest
  await until('B sees A', () => b.presence.others().length === 1);
  assert.deepEqual(b.presence.others(), [{ client: 'pa', value: { cursor: { row: 2, col: 3 }, name: 'Ada' } }]);
  assert.deepEqual(a.presence.get(), { cursor: { row: 2, col: 3 }, name: 'Ada' });
  assert.deepEqual(a.presence.others(), [], 'B set none');
  assert.equal(b.presence.others(), b.presence.others(), 'the same array until it changes');
  // A joiner gets it in its welcome.
  const c = await connect({ url: srv.url, room: 'p', machine: chat, clientId: 'pc', onError: () => {} });
  t.after(() => c.close());
  await c.whenOnline({ timeoutMs: 5000 });
  assert.deepEqual(c.presence.others(), [{ client: 'pa', value: { cursor: { row: 2, col: 3 }, name: 'Ada' } }]);
  // Too large: a clear error at the call, nothing sent.
  assert.throws(
    () => a.presence.set({ name: 'x'.repeat(5000) }),
    (e: unknown) => e instanceof HerculesError && e.code === 'too-large',
  );
  // Not in the log, not in any view, on any client.
  for (const r of [a, b, c]) {
    assert.equal(r.positions().submitted, 0, 'no op was made');
    for (const v of VIEWS) assert.equal(JSON.stringify(r.getState(v)).includes('Ada'), false, `${v} view holds no presence`);
  }
  await a.close();
  await until('A is gone for B and C', () => b.presence.others().length === 0 && c.presence.others().length === 0);
  assert.deepEqual(seen.at(-1), []);
});

test("receiveStats: a reader's decode, apply and notify time grow with the frames it is sent, and a window is two samples apart", async (t) => {
  const srv = await server(t);
  const a = await connect({ url: srv.url, room: 'rs', machine: chat, onError: () => {} });
  const b = await connect({ url: srv.url, room: 'rs', machine: chat, onError: () => {} });
  t.after(async () => {
    await a.close();
    await b.close();
  });
  await a.whenOnline({ timeoutMs: 5000 });
  await b.whenOnline({ timeoutMs: 5000 });
  const first = b.receiveStats();
  assert.ok(first.frames >= 1, 'the welcome is a frame');
  for (let i = 0; i < 20; i++) {
    const op = a.ops.say({ text: `m${i}` });
    await b.until('authoritative', (s) => s.messages.some((m) => m.id === op.id), { timeoutMs: 5000 });
  }
  const then = b.receiveStats();
  assert.ok(then.frames >= first.frames + 20, `at least a frame per op: ${first.frames} -> ${then.frames}`);
  assert.ok(then.decodeMs > first.decodeMs, 'decoding took time');
  assert.ok(then.applyMs > first.applyMs, 'applying took time');
  assert.ok(then.notifies >= first.notifies + 20 && then.notifyMs > first.notifyMs, 'a notification round per op that changed a view');
  // A copy: what was returned does not move afterwards.
  const copy = b.receiveStats();
  a.ops.say({ text: 'one more' });
  await b.until('authoritative', (s) => s.messages.length === 21, { timeoutMs: 5000 });
  assert.equal(copy.frames, then.frames);
  assert.ok(b.receiveStats().frames > copy.frames);
});

// spec: OP-REJECTED-TOLD
test('an op saved offline and refused in a later session is told: to onRejected, or else as a warning, never dropped without a word', async (t) => {
  const { dir, cleanup } = tempDir('rejected-later');
  t.after(cleanup);
  const { memoryStorage } = await import('../src/index.ts');
  // Offline: nothing listens on the port, the op waits in the store.
  const storage = memoryStorage();
  const keep = { ...storage, close: async () => {} }; // the "device": the same store across sessions
  const port = await freePort();
  const offline = await connect({ url: `ws://127.0.0.1:${port}`, room: 'later', machine: chat, storage: keep, onError: () => {} });
  offline.ops.say({ text: 'refused later' });
  await offline.flushed();
  await offline.close();
  // The next session, with a server whose policy refuses that text now (as a migration might).
  const srv = await createServer({
    port,
    dataDir: dir,
    machines: [chat],
    log: 'silent',
    authorize: (op) => ((op.args as { text?: string }).text === 'refused later' ? 'no longer allowed' : true),
  });
  t.after(() => srv.close());
  const told: { seq: number; name: string; error?: string; refused?: boolean }[] = [];
  const warnings: string[] = [];
  const room = await connect({ url: srv.url, room: 'later', machine: chat, storage: keep, onError: (e) => warnings.push(e.message) });
  room.onRejected((h) => told.push({ seq: h.seq, name: h.name, error: h.error, refused: h.refused }));
  await until(() => told.length > 0, 10_000, 'the rejection told');
  assert.deepEqual(told, [{ seq: 1, name: 'say', error: 'not authorized: no longer allowed', refused: true }]);
  assert.deepEqual(room.getState('authoritative').messages, []);
  // A later op refused in this session is told too (its own handle rejects as well).
  const now = room.ops.say({ text: 'refused later' });
  await assert.rejects(now.authoritative, (e: unknown) => e instanceof HerculesError && e.code === 'op-rejected');
  assert.equal(told.length, 2);
  await room.close();

  // Without a listener, the rejection of an op kept from an earlier session is a warning.
  const dead = await freePort();
  const offline2 = await connect({ url: `ws://127.0.0.1:${dead}`, room: 'later2', machine: chat, storage: keep, onError: () => {} });
  offline2.ops.say({ text: 'refused later' });
  await offline2.flushed();
  await offline2.close();
  const quiet = await connect({ url: srv.url, room: 'later2', machine: chat, storage: keep, onError: (e) => warnings.push(e.message) });
  await until(() => warnings.some((w) => w.includes('kept from before this session')), 10_000, 'the warning');
  await quiet.close();
  assert.ok(
    warnings.some((w) => /op 1 \(say\), kept from before this session, was rejected: not authorized: no longer allowed \[pass onRejected/.test(w)),
    warnings.join('\n'),
  );
});
