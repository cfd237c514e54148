import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync } from 'node:fs';
import { WebSocket } from 'ws';
import { Packr } from 'msgpackr';
import { connect, memoryStorage } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { ClientCodec, PROTOCOL_VERSION, VIEWS, type ServerMessage } from '@hercules/core';
import { MemoryStore, createServer } from '../src/index.ts';
import { chat, interiorDesign } from '../../../apps/machines.ts';
import { tempDir, until, online } from './helpers.ts';

// spec: LIVE-CONVERGE
test('two clients converge; every stage is reached; views agree at rest', async (t) => {
  const { dir, cleanup } = tempDir('conv');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const a = await connect({ url: srv.url, room: 'lobby', machine: chat, clientId: 'alice' });
  const b = await connect({ url: srv.url, room: 'lobby', machine: chat, clientId: 'bob' });
  await online(a);
  await online(b);
  const hs = [a.ops.say({ text: 'one' }), b.ops.say({ text: 'two' }), a.ops.say({ text: 'three' })];
  await Promise.all(hs.map((h) => h.visible));
  for (const h of hs)
    assert.ok(h.times.submitted! <= h.times.durable! && h.times.durable! <= h.times.authoritative! && h.times.authoritative! <= h.times.visible!);
  await until(() => VIEWS.every((v) => b.getState(v).messages.length === 3 && a.getState(v).messages.length === 3), 5000, 'convergence');
  assert.deepEqual(a.getState('stable'), b.getState('stable'));
  const rejected = a.ops.say({ text: '   ' });
  await assert.rejects(rejected.authoritative, /empty message/);
  await a.close();
  await b.close();
});

// spec: AUTH-STORED, REC-RESTORE
test('a server restart loses nothing authoritative; clients reconnect and resume by themselves', async (t) => {
  const { dir, cleanup } = tempDir('restart');
  t.after(cleanup);
  let srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const port = srv.port;
  const a = await connect({ url: srv.url, room: 'r', machine: chat, clientId: 'a', backoff: { minMs: 20, maxMs: 200 } });
  await online(a);
  for (let i = 0; i < 20; i++) a.ops.say({ text: `m${i}` });
  await until(() => a.getState('authoritative').messages.length === 20, 5000, 'authoritative');
  await srv.close();
  await until(() => a.status() === 'offline', 5000, 'offline');
  // Offline: still submits and reads.
  const offline = a.ops.say({ text: 'while down' });
  assert.equal(a.getState('submitted').messages.length, 21);
  srv = await createServer({ port, dataDir: dir, machines: [chat], log: 'silent' });
  await offline.visible;
  assert.deepEqual(
    a.getState('visible').messages.map((m) => m.text),
    [...Array.from({ length: 20 }, (_, i) => `m${i}`), 'while down'],
  );
  // A fresh client sees the same history from the restored room.
  const c = await connect({ url: srv.url, room: 'r', machine: chat, clientId: 'c' });
  await until(() => c.getState('authoritative').messages.length === 21, 5000, 'catch-up');
  await a.close();
  await c.close();
  await srv.close();
});

test('a server on a store it is given (a MemoryStore): serves from it, writes no file, leaves it open on close, and a server started again on it finds the rooms', async (t) => {
  const { dir, cleanup } = tempDir('given-store');
  t.after(cleanup);
  const store = new MemoryStore();
  t.after(() => store.close());
  let srv = await createServer({ port: 0, store, machines: [chat], log: 'silent' });
  assert.equal(srv.store, store, 'the server reports the store it was given');
  const port = srv.port;
  const a = await connect({ url: srv.url, room: 'kept', machine: chat, clientId: 'a', backoff: { minMs: 20, maxMs: 200 } });
  await online(a);
  await Promise.all([a.ops.say({ text: 'one' }).visible, a.ops.say({ text: 'two' }).visible]);
  assert.deepEqual(await store.rooms(), ['kept'], 'the room is in the given store');
  const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
  assert.equal(health.ok, true);
  await srv.close();
  // The caller's store stays open: the room was handed back to it and can be read.
  const loaded = await store.open('kept');
  assert.ok(loaded, 'the room is in the store after close');
  assert.equal(loaded.durable.checkpoint.pos + loaded.durable.suffix.length, 2, 'both ops are in the store after close');
  await store.release('kept');
  srv = await createServer({ port, store, machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  const c = await connect({ url: srv.url, room: 'kept', machine: chat, clientId: 'c' });
  await until(() => c.getState('authoritative').messages.length === 2, 5000, 'catch-up from the given store');
  await until(() => a.getState('authoritative').messages.length === 2 && a.status() === 'online', 5000, 'the first client back');
  const three = a.ops.say({ text: 'three' });
  await three.visible;
  await until(() => c.getState('authoritative').messages.length === 3, 5000, 'delivery after the restart');
  await a.close();
  await c.close();
  assert.deepEqual(readdirSync(dir), [], 'nothing was written to disk');
});

test('createServer says what is missing: no dataDir and no store, a store that is not one, both a store and a deployment', async () => {
  const bad = [
    [{ machines: [chat] }, /`dataDir` is required \(a directory for the SQLite file\), unless you give a `store`/],
    [{ machines: [chat], store: { open: 1 } }, /`store` must be a RoomStore/],
    [{ machines: [chat], store: new MemoryStore(), deployment: { open: async () => ({}) } }, /give `store` or `deployment`, not both/],
  ] as const;
  for (const [opts, message] of bad) {
    await assert.rejects(
      createServer(opts as unknown as Parameters<typeof createServer>[0]),
      (e: Error & { code?: string }) => e.code === 'bad-argument' && message.test(e.message),
    );
  }
});

// spec: DUR-SURVIVES-RESTART, LOG-EXACTLY-ONCE
test('a restarted client shows its durable ops offline, then delivers them exactly once', async (t) => {
  const { dir, cleanup } = tempDir('client');
  t.after(cleanup);
  const srv = await createServer({ port: 0, dataDir: `${dir}/server`, machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  // Submit while the server is unreachable (wrong port): ops become durable, nothing is sent.
  const file = `${dir}/client.sqlite`;
  const dead = await connect({ url: 'ws://127.0.0.1:1', room: 'r', machine: chat, storage: sqliteStorage(file), backoff: { minMs: 1000, maxMs: 1000 } });
  const h1 = dead.ops.say({ text: 'offline 1' });
  const h2 = dead.ops.say({ text: 'offline 2' });
  await h2.durable;
  assert.equal(h1.stage, 'durable');
  const id = dead.clientId;
  await dead.close();
  // Restart against the live server: durable ops show at once, then arrive once.
  const back = await connect({ url: srv.url, room: 'r', machine: chat, storage: sqliteStorage(file) });
  assert.equal(back.clientId, id, 'the client id persists');
  assert.deepEqual(
    back.getState('durable').messages.map((m) => m.text),
    ['offline 1', 'offline 2'],
    'shown before any server contact',
  );
  const pend = back.pending();
  assert.deepEqual(
    pend.map((h) => h.stage),
    ['durable', 'durable'],
  );
  await Promise.all(pend.map((h) => h.visible));
  assert.deepEqual(
    back.getState('visible').messages.map((m) => m.text),
    ['offline 1', 'offline 2'],
  );
  await back.close();
  // And once more: a third start must not resend them.
  const again = await connect({ url: srv.url, room: 'r', machine: chat, storage: sqliteStorage(file) });
  await online(again);
  const h3 = again.ops.say({ text: 'later' });
  await h3.visible;
  assert.deepEqual(
    again.getState('visible').messages.map((m) => m.text),
    ['offline 1', 'offline 2', 'later'],
  );
  assert.equal(h3.seq, 3, 'sequence numbers continue after restarts');
  await again.close();
});

// spec: SEC-MALFORMED
test('incompatible clients are refused with a clear reason', async (t) => {
  const { dir, cleanup } = tempDir('refuse');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat, interiorDesign], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const raw = async (room: string, frames: Uint8Array[]) => {
    const ws = new WebSocket(`${srv.url}/?room=${room}`);
    const got: unknown[] = [];
    const codec = new ClientCodec();
    ws.on('message', (d: Buffer) => {
      try {
        got.push(codec.decode(d));
      } catch (e) {
        got.push(String(e));
      }
    });
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    await new Promise((r) => ws.on('open', r));
    for (const f of frames) ws.send(f);
    const c = await closed;
    return { ...c, got };
  };
  const enc = (m: unknown) => new ClientCodec().encode(m as never);
  const v = await raw('x', [enc({ t: 'hello', v: PROTOCOL_VERSION + 1, client: 'c', machine: { name: 'chat', version: 1 }, have: 0 })]);
  assert.match(JSON.stringify(v.got), /protocol-version.*upgrade the older side/);
  const m = await raw('x', [enc({ t: 'hello', v: PROTOCOL_VERSION, client: 'c', machine: { name: 'chess', version: 1 }, have: 0 })]);
  assert.match(JSON.stringify(m.got), /no machine chess@1; it serves chat@1, interior-design@1/);
  const junk = await raw('x', [new Uint8Array([0xc1, 0xff, 0x00])]);
  assert.match(JSON.stringify(junk.got), /malformed-frame/);
  const first = await raw('x', [new Packr({ useRecords: false }).pack([2, 5])]);
  assert.match(JSON.stringify(first.got), /first message must be hello/);
  const badRoom = await raw('..%2F..', []);
  assert.equal(badRoom.code, 4003);
  // A room keeps its machine: another machine under the same room name is refused.
  const ok = await connect({ url: srv.url, room: 'shared', machine: chat });
  await online(ok);
  let failure = '';
  const other = await connect({
    url: srv.url,
    room: 'shared',
    machine: interiorDesign,
    onStatus: (s, d) => {
      if (s === 'failed') failure = d ?? '';
    },
  });
  await until(() => other.status() === 'failed', 5000, 'refusal');
  assert.match(failure, /room shared runs chat@1, not interior-design@1/);
  await ok.close();
  await other.close();
  // The server is still fine.
  const h = await fetch(srv.url.replace('ws', 'http') + '/healthz');
  assert.equal(h.status, 200);
});

test('/metrics and /healthz report what the server is doing', async (t) => {
  const { dir, cleanup } = tempDir('metrics');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const a = await connect({ url: srv.url, room: 'm', machine: chat });
  t.after(async () => {
    await a.close(); // also when an assertion failed: an open client would hold the server open
    await srv.close();
    cleanup();
  });
  await online(a);
  await Promise.all([a.ops.say({ text: 'x' }).visible, a.ops.say({ text: 'y' }).visible]);
  const http = srv.url.replace('ws', 'http');
  const text = await (await fetch(`${http}/metrics`)).text();
  assert.match(text, /hercules_ops_sequenced_total 2/);
  // Frames sent by type add up to all frames sent, and name the kinds this client was sent.
  const sentAll = Number(/^hercules_frames_sent_total (\S+)$/m.exec(text)?.[1]);
  const byType = [...text.matchAll(/^hercules_frames_sent_by_type_total\{type="(\w+)"\} (\S+)$/gm)].map((m) => [m[1], Number(m[2])] as const);
  assert.equal(
    byType.reduce((x, [, n]) => x + n, 0),
    sentAll,
    text
      .split('\n')
      .filter((l) => l.startsWith('hercules_frames_sent'))
      .join('\n'),
  );
  for (const t of ['welcome', 'log', 'visible'])
    assert.ok(
      byType.some(([k, n]) => k === t && n >= 1),
      `frames of type ${t} counted`,
    );
  assert.match(text, /hercules_connections 1/);
  assert.match(text, /hercules_commit_seconds_count [1-9]/);
  assert.match(text, /hercules_commit_sync_seconds_count [1-9]/, "the WAL's fsync after a commit is timed too");
  assert.match(text, /hercules_authoritative_delay_seconds_count [1-9]/);
  // Each op's visible delay is observed exactly once, however many Notify-Visible cover it.
  assert.match(text, /hercules_visible_delay_seconds_count 2\n/);
  // The op path by stage: each stage seen for every ops frame, and the stages after the frame's
  // turn add up to no more than its whole Authoritative delay on the server.
  const metric = (name: string) => Number(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
  const stages = ['queued', 'decode', 'engine', 'tentative', 'apply', 'commit_wait', 'commit', 'send'];
  const frames = metric('hercules_op_path_seconds_count{stage="decode"}');
  assert.ok(frames >= 1, `ops frames seen: ${frames}`);
  for (const st of stages) assert.equal(metric(`hercules_op_path_seconds_count{stage="${st}"}`), frames, `${st} observed once per ops frame`);
  const after = ['engine', 'tentative', 'apply', 'commit_wait', 'commit', 'send'].reduce(
    (sum, st) => sum + metric(`hercules_op_path_seconds_sum{stage="${st}"}`),
    0,
  );
  assert.ok(
    after > 0 && after <= metric('hercules_authoritative_delay_seconds_sum') + 1e-9,
    `stages ${after} within ${metric('hercules_authoritative_delay_seconds_sum')}`,
  );
  // prom-client's process and Node.js metrics, prefixed once.
  assert.match(text, /^hercules_process_cpu_user_seconds_total /m);
  assert.match(text, /^hercules_nodejs_eventloop_lag_seconds /m);
  assert.doesNotMatch(text, /process_process_/);
  const health = (await (await fetch(`${http}/healthz`)).json()) as { ok: boolean; rooms: number };
  assert.deepEqual([health.ok, health.rooms], [true, 1]);
});

// spec: AUTH-STORED, SEC-CONTAINED
// spec: VIS-ACK-WITH-OPS
test("an ack riding in an ops frame reaches the room before the ops, through the server's queues; a bad one is refused on its own", async (t) => {
  const { dir, cleanup } = tempDir('ops-ack');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const ws = new WebSocket(`${srv.url}/?room=oa`);
  t.after(async () => {
    ws.terminate();
    await srv.close();
    cleanup();
  });
  const codec = new ClientCodec();
  const got: ServerMessage[] = [];
  ws.on('message', (d: Buffer) => got.push(codec.decode(d)));
  await new Promise((r) => ws.on('open', r));
  ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: 'raw', machine: { name: 'chat', version: 1 }, have: 0 }));
  await until(() => got.some((m) => m.t === 'welcome'), 5000, 'welcome');
  // An ack past the log's end: refused with its own error, the op still ordered.
  ws.send(codec.encode({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'a' } }], ack: { pos: 9 } }));
  await until(() => got.some((m) => m.t === 'log'), 5000, 'Notify-Auth of seq 1');
  assert.match(JSON.stringify(got.filter((m) => m.t === 'error')), /ack for position 9 but the log ends at 0/);
  // A good one (this frame's compact form, [3, pos, ...]): alone in the room, its ack moves the stable frontier.
  ws.send(codec.encode({ t: 'ops', ops: [{ seq: 2, name: 'say', args: { text: 'b' } }], ack: { pos: 1 } }));
  await until(() => got.some((m) => m.t === 'stable' && m.pos === 1), 5000, 'stable at 1 from the carried ack');
  await until(() => got.filter((m) => m.t === 'log').length === 2, 5000, 'Notify-Auth of seq 2');
});

// spec: SEC-PROTOCOL-RANGE, LOG-TENTATIVE
test("through a real server: a protocol-3 client is served in its own version, with stored logs only; a protocol-4 one gets others' ops ahead of their commit, then committed; a protocol-1 one is refused", async (t) => {
  const { dir, cleanup } = tempDir('protocols');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const sockets: WebSocket[] = [];
  t.after(async () => {
    for (const ws of sockets) ws.terminate();
    await srv.close();
    cleanup();
  });
  const rawClient = async (client: string, v: number) => {
    const ws = new WebSocket(`${srv.url}/?room=pv`);
    sockets.push(ws);
    const codec = new ClientCodec();
    const got: ServerMessage[] = [];
    ws.on('message', (d: Buffer) => got.push(codec.decode(d)));
    await new Promise((r) => ws.on('open', r));
    ws.send(codec.encode({ t: 'hello', v, client, machine: { name: 'chat', version: 1 }, have: 0 }));
    await until(() => got.some((m) => m.t === 'welcome' || m.t === 'error'), 5000, `${client}'s answer`);
    return { ws, codec, got };
  };
  const old = await rawClient('old', 3);
  const now = await rawClient('now', PROTOCOL_VERSION);
  const welcome = (got: ServerMessage[]) => got.find((m) => m.t === 'welcome') as { v: number } | undefined;
  assert.equal(welcome(old.got)?.v, 3, 'the welcome speaks the client its own version');
  assert.equal(welcome(now.got)?.v, PROTOCOL_VERSION);
  const a = await connect({ url: srv.url, room: 'pv', machine: chat, clientId: 'a' });
  t.after(() => a.close());
  await online(a);
  await a.ops.say({ text: 'hello' }).authoritative;
  await until(() => now.got.some((m) => m.t === 'committed') && old.got.some((m) => m.t === 'log'), 5000, 'the op at both');
  const shape = (got: ServerMessage[]) =>
    got
      .filter((m) => m.t === 'log' || m.t === 'committed')
      .map((m) => (m.t === 'log' ? `log ${m.from}${m.tentative ? ' tentative' : ''}` : `committed ${m.pos}`));
  assert.deepEqual(shape(now.got), ['log 1 tentative', 'committed 1']);
  assert.deepEqual(shape(old.got), ['log 1']);
  const tooOld = await rawClient('ancient', 1);
  assert.match(
    JSON.stringify(tooOld.got),
    new RegExp(`protocol-version.*this server speaks protocol 2 to ${PROTOCOL_VERSION}, the client 1; upgrade the older side`),
  );
});

// spec: VIS-BY-STABLE
test("with two members, each op's visible delay is observed once, whether a Notify-Visible or a stable frontier said it", async (t) => {
  const { dir, cleanup } = tempDir('metrics-two');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const a = await connect({ url: srv.url, room: 'm2', machine: chat });
  // b steps through remote frames every 40 ms, so its ack comes after a's, and the stable frontier
  // is what tells a (protocol 4 sends b the op ahead of its commit, and b would often ack first).
  const b = await connect({ url: srv.url, room: 'm2', machine: chat, batching: { intervalMs: 40 } });
  t.after(async () => {
    await a.close();
    await b.close();
    await srv.close();
    cleanup();
  });
  await online(a);
  await online(b);
  await until(() => a.members().length === 2, 5000, 'both members');
  for (let i = 0; i < 5; i++) await a.ops.say({ text: `m${i}` }).visible;
  await until(() => b.positions().stable === 5 && a.positions().stable === 5, 5000, 'stable at 5');
  const text = await (await fetch(`${srv.url.replace('ws', 'http')}/metrics`)).text();
  assert.match(text, /hercules_visible_delay_seconds_count 5\n/);
  // A protocol-3 member hears of most of its ops' visibility from the stable frontier alone.
  const visible = Number(/^hercules_frames_sent_by_type_total\{type="visible"\} (\S+)$/m.exec(text)?.[1] ?? 0);
  assert.ok(visible < 5, `Notify-Visible frames: ${visible}`);
});

test('a full disk on the server: a clear error, nothing corrupted, nothing lost once space returns', async (t) => {
  const { dir, cleanup } = tempDir('full');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const errors: string[] = [];
  const a = await connect({
    url: srv.url,
    room: 'f',
    machine: chat,
    storage: memoryStorage(),
    backoff: { minMs: 20, maxMs: 100 },
    onError: (e) => errors.push(e.message),
  });
  await online(a);
  await a.ops.say({ text: 'before' }).visible;
  const health = async () => {
    const res = await fetch(`${srv.url.replace('ws', 'http')}/healthz`);
    return { status: res.status, body: (await res.json()) as { ok: boolean; reason?: string; store: { ok: boolean; failures: number; error?: string } } };
  };
  assert.deepEqual([(await health()).status, (await health()).body.ok], [200, true]);
  // SQLite's page cap makes the next writes fail with SQLITE_FULL, like a full disk.
  const pages = srv.store.db.pragma('page_count', { simple: true }) as number;
  srv.store.db.pragma(`max_page_count = ${pages}`);
  const big = 'x'.repeat(1500);
  const hs = Array.from({ length: 30 }, (_, i) => a.ops.say({ text: `${i} ${big}` }));
  try {
    await until(() => errors.some((e) => /storage write failed|could not write to its storage/.test(e)), 10_000, 'storage error');
    assert.ok(
      hs.every((h) => h.stage === 'durable'),
      'nothing was announced authoritative',
    );
    // A monitor sees it: 503, the reason, the store's last error (the client keeps retrying, and failing).
    const full = await health();
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.equal(full.body.ok, false);
    assert.match(full.body.reason ?? '', /^the room store cannot commit: .*(full|SQLITE_FULL)/i);
    assert.ok(full.body.store.failures >= 1 && full.body.store.ok === false, JSON.stringify(full.body.store));
  } catch (e) {
    await a.close(); // so that the server's close does not wait on a client retrying against a full disk
    throw e;
  } finally {
    srv.store.db.pragma('max_page_count = 1073741823');
  }
  await Promise.all(hs.map((h) => h.visible));
  assert.deepEqual([(await health()).status, (await health()).body.store.failures], [200, 0], 'healthy again once a commit succeeds');
  const texts = a.getState('visible').messages.map((m) => m.text.split(' ')[0]);
  assert.deepEqual(texts, ['before', ...Array.from({ length: 30 }, (_, i) => String(i))], 'each op exactly once, in order');
  assert.equal(srv.store.db.pragma('integrity_check', { simple: true }), 'ok');
  await a.close();
});

test('createServer refuses an unusable data directory with a clear error', async (t) => {
  const { dir, cleanup } = tempDir('unusable');
  t.after(cleanup);
  writeFileSync(`${dir}/a-file`, 'not a directory');
  await assert.rejects(createServer({ port: 0, dataDir: `${dir}/a-file/data`, machines: [chat], log: 'silent' }), /cannot open the data directory .*writable/);
  await assert.rejects(createServer({ port: 0, dataDir: '', machines: [chat] }), /dataDir/);
  await assert.rejects(createServer({ port: 0, dataDir: '/tmp/x', machines: [] }), /no machines/);
});

// spec: DUR-ONE-WRITER
test('one server per data directory: a second is refused with a clear error, and starts once the first is gone', async (t) => {
  const { dir, cleanup } = tempDir('owned');
  t.after(cleanup);
  const first = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const a = await connect({ url: first.url, room: 'r', machine: chat, storage: memoryStorage() });
  await a.ops.say({ text: 'kept' }).visible;
  await a.close();
  await assert.rejects(createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' }), /in use by another Hercules server.*--data-dir/);
  assert.equal((await fetch(`${first.url.replace('ws', 'http')}/healthz`)).status, 200, 'the first server is unharmed');
  // The CLI says the same and exits 1, without the usage text (the arguments were fine).
  const { spawnSync } = await import('node:child_process');
  const cli = new URL('../src/cli.ts', import.meta.url).pathname;
  const machines = new URL('../../../apps/machines.ts', import.meta.url).pathname;
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', cli, 'serve', '--machines', machines, '--port', '0', '--data-dir', dir, '--log-level', 'silent'],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(run.status, 1, `exit status (stderr: ${run.stderr})`);
  assert.match(run.stderr, /^hercules: the data directory .* is in use by another Hercules server/);
  assert.doesNotMatch(run.stderr, /Usage:/);
  await first.close();
  const second = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  t.after(() => second.close());
  const b = await connect({ url: second.url, room: 'r', machine: chat, storage: memoryStorage() });
  await online(b);
  assert.deepEqual(
    b.getState('authoritative').messages.map((m) => m.text),
    ['kept'],
  );
  await b.close();
});
