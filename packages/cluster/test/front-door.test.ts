/**
 * One front door (issue 36, item 2): a cluster node is the server's `createServer` over a
 * `ClusterStore` and the cluster's room locator, so the admin HTTP API and webhooks work on a node
 * as on an embedded server. Two nodes in this process over a private 3-server NATS cluster; the
 * admin API on node B for rooms whose shard node A owns (forwarded to A over NATS), each answer
 * compared with an embedded server's for the same calls; webhooks POSTed from the node that
 * serves the room to a receiver in this process.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from '@hercules/client';
import type { LogEntry } from '@hercules/core';
import { createServer, MemoryStore, newWebhookSecret, standardWebhookSignature, type HerculesServer } from '@hercules/server/core';
import { until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { createClusterNode, type ClusterNode } from '../src/node.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';

const ADMIN = 'an-admin-token-of-at-least-32-characters-long';
const byToken = (req: IncomingMessage) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' });

let cluster: NatsCluster;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
});
after(async () => {
  await cluster?.close();
});

let prefixes = 0;
// Placement off: these tests pin which node owns a room (placement would move it once a node
// settles, after 5 s); placement.test.ts and placement-nodes.test.ts test it.
async function nodes(n: number, extra: Partial<Parameters<typeof createClusterNode>[0]> = {}): Promise<ClusterNode[]> {
  const prefix = `fd${++prefixes}`;
  const out: ClusterNode[] = [];
  for (let i = 0; i < n; i++)
    out.push(
      await createClusterNode({
        nats: cluster.urls,
        nodeId: `node-${i}`,
        port: 0,
        machines: [chat],
        prefix,
        shards: 4,
        log: 'warn',
        placement: false,
        ...extra,
      }),
    );
  return out;
}

/** An admin API client of a server at `url` (ws://...): each call's status and JSON body. */
function admin(url: string) {
  const base = url.replace('ws:', 'http:');
  return async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: await res.json() };
  };
}

/** `count` room names (besides `room`) in the same shard as `room`. */
function sameShard(node: ClusterNode, room: string, count: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) if (node.store.shardOf(`${room}-${i}`) === node.store.shardOf(room)) out.push(`${room}-${i}`);
  return out;
}

/** What of a log entry both servers must agree on (not when it was written). */
const entryOf = (e: LogEntry) => ({ pos: e.pos, client: e.client, seq: e.seq, name: e.name, args: e.args });

test('the admin HTTP API on a node, for rooms the OTHER node owns: list, state, submit, export, import, delete and revoke answer as an embedded server does', async (t) => {
  const [a, b] = await nodes(2, { admin: { token: ADMIN }, authenticate: byToken });
  const embedded: HerculesServer = await createServer({
    port: 0,
    store: new MemoryStore(),
    machines: [chat],
    log: 'warn',
    admin: { token: ADMIN },
    authenticate: byToken,
  });
  t.after(async () => {
    await embedded.close();
    await b.close();
    await a.close();
  });
  // Node A takes the room's shard: its client connects there.
  const x = await connect({ url: a.url, room: 'owned', machine: chat, clientId: 'x', token: 'xavier', onError: () => {} });
  t.after(() => x.close().catch(() => {}));
  await until(() => x.status() === 'online', 10_000, 'x online at A');
  assert.deepEqual(a.store.owned(), [a.store.shardOf('owned')], 'A owns the shard');
  const [imported, missing] = sameShard(a, 'owned', 2);
  const e = await connect({ url: embedded.url, room: 'owned', machine: chat, clientId: 'x', token: 'xavier', onError: () => {} });
  t.after(() => e.close().catch(() => {}));
  await until(() => e.status() === 'online', 10_000, 'x online at the embedded server');
  await x.ops.say({ text: 'from x' }).authoritative;
  await e.ops.say({ text: 'from x' }).authoritative;

  const onB = admin(b.url);
  const onE = admin(embedded.url);
  /** The same call on node B and on the embedded server: the same status and body (less what `strip` removes). */
  const same = async (method: string, path: string, body?: unknown, strip: (v: any) => any = (v) => v) => {
    const [fromB, fromE] = [await onB(method, path, body), await onE(method, path, body)];
    assert.equal(fromB.status, fromE.status, `${method} ${path}: status on the node ${fromB.status} (${JSON.stringify(fromB.body)}), embedded ${fromE.status}`);
    assert.deepEqual(strip(fromB.body), strip(fromE.body), `${method} ${path}: the same answer`);
    return fromB;
  };

  const submitted = await same('POST', '/admin/rooms/owned/ops', { op: 'say', args: { text: 'from the backend' }, author: 'bot', key: 'k1' });
  assert.equal(submitted.status, 200);
  assert.equal(submitted.body.position, 2, 'ordered after the client op, at A');
  // A repeat under the same key orders nothing, as on the embedded server.
  const repeat = await same('POST', '/admin/rooms/owned/ops', { op: 'say', args: { text: 'from the backend' }, author: 'bot', key: 'k1' });
  assert.equal(repeat.body.duplicate, true);
  await same('POST', '/admin/rooms/owned/ops', { op: 'nope', args: {}, author: 'bot' });
  const state = await same('GET', '/admin/rooms/owned/state');
  assert.deepEqual(
    state.body.state.messages.map((m: { text: string }) => m.text),
    ['from x', 'from the backend'],
  );
  await until(() => (x.getState('authoritative') as { messages: unknown[] }).messages.length === 2, 10_000, "the backend's op reached the client at A");
  await same('GET', `/admin/rooms/${missing}/state`);

  const exported = await same('GET', '/admin/rooms/owned/export', undefined, (f) => ({ ...f, entries: f.entries?.map(entryOf) }));
  assert.equal(exported.body.format, 'hercules-room');
  const imp = await same('PUT', `/admin/rooms/${imported}`, exported.body);
  assert.equal(imp.status, 201);
  await same('PUT', `/admin/rooms/${imported}`, exported.body); // it exists now: refused alike
  const importedState = await same('GET', `/admin/rooms/${imported}/state`);
  assert.deepEqual(importedState.body, state.body, 'the imported room has the exported state');
  assert.equal(a.service.loadedRooms().includes(imported), true, 'the imported room is served at A, its shard owner');
  assert.equal(b.service.loadedRooms().length, 0, 'B served nothing itself');

  const summary = (page: { rooms: Record<string, unknown>[] }) =>
    page.rooms.map((r) => ({ name: r.name, loaded: r.loaded, machine: r.machine, version: r.version, head: r.head, stable: r.stable, members: r.members }));
  // A room just imported and loaded moves its stable position when its host next checkpoints:
  // on each server at its own moment (the listing differed 0 against 2 in 2 runs of 5), so wait
  // until both tell the same, then compare.
  await until(
    async () => JSON.stringify(summary((await onB('GET', '/admin/rooms')).body)) === JSON.stringify(summary((await onE('GET', '/admin/rooms')).body)),
    10_000,
    'the node and the embedded server list the rooms alike',
  );
  const listed = await same('GET', '/admin/rooms', undefined, summary);
  assert.deepEqual(
    listed.body.rooms.map((r: { name: string; loaded: boolean }) => [r.name, r.loaded]),
    [
      ['owned', true],
      [imported, true],
    ].sort(),
    'both rooms, loaded (at A)',
  );

  // Revoke on B closes xavier's connection at A, as on the embedded server.
  const revoked = await same('POST', '/admin/revoke', { user: 'xavier', reason: 'left' });
  assert.deepEqual(revoked.body, { closed: 1 });
  await until(() => x.status() === 'failed', 10_000, 'x stopped at A');

  const deleted = await same('DELETE', `/admin/rooms/${imported}`);
  assert.deepEqual(deleted.body, { deleted: true });
  await same('DELETE', `/admin/rooms/${imported}`); // { deleted: false } on both
  await same('GET', `/admin/rooms/${imported}/state`); // 404 bad-room on both
  await same('GET', '/admin/rooms', undefined, summary);
  const wrong = await fetch(`${b.url.replace('ws:', 'http:')}/admin/rooms`, { headers: { authorization: 'Bearer wrong' } });
  assert.equal(wrong.status, 401, 'the token is checked on a node too');
});

test('a node serves /healthz and /metrics as an embedded server does (same fields, plus its own)', async (t) => {
  const [a] = await nodes(1);
  const embedded = await createServer({ port: 0, store: new MemoryStore(), machines: [chat], log: 'warn' });
  t.after(async () => {
    await embedded.close();
    await a.close();
  });
  const health = async (url: string) => (await fetch(`${url.replace('ws:', 'http:')}/healthz`)).json() as Promise<Record<string, unknown>>;
  const [fromNode, fromEmbedded] = [await health(a.url), await health(embedded.url)];
  for (const k of Object.keys(fromEmbedded)) assert.ok(k in fromNode, `/healthz on a node has ${k}`);
  assert.equal(fromNode.ok, true);
  assert.equal(fromNode.node, 'node-0');
  const metrics = async (url: string) => (await fetch(`${url.replace('ws:', 'http:')}/metrics`)).text();
  const names = (text: string) => new Set(text.split('\n').flatMap((l) => (l.startsWith('# TYPE ') ? [l.split(' ')[2]] : [])));
  const [mNode, mEmbedded] = [names(await metrics(a.url)), names(await metrics(embedded.url))];
  for (const n of mEmbedded) assert.ok(mNode.has(n), `/metrics on a node has ${n}`);
  assert.ok(mNode.has('hercules_cluster_shards_owned'), 'and the cluster metrics');
});

test("webhooks from cluster nodes: each room's commits POSTed, in order, signed, from the node that serves it; a room that moves continues from the position its last node saved", async (t) => {
  const secret = newWebhookSecret();
  const got: { id: string; timestamp: string; signature: string; raw: string; body: { room: string; entries: LogEntry[] } }[] = [];
  let failing = false;
  const rx = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    if (!failing)
      got.push({
        id: String(req.headers['webhook-id']),
        timestamp: String(req.headers['webhook-timestamp']),
        signature: String(req.headers['webhook-signature']),
        raw,
        body: JSON.parse(raw),
      });
    res.writeHead(failing ? 500 : 200).end();
  });
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', () => r()));
  t.after(() => {
    rx.close();
    rx.closeAllConnections();
  });
  const url = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
  const [a, b] = await nodes(2, { webhooks: [{ url, secret, retryMinMs: 20 }] });
  t.after(async () => {
    await b.close();
    await a.close();
  });
  const x = await connect({ url: a.url, room: 'hooked', machine: chat, clientId: 'x', onError: () => {} });
  t.after(() => x.close().catch(() => {}));
  await until(() => x.status() === 'online', 10_000, 'x online at A');
  // A client of B, relayed to A: its ops are committed, and delivered, at A.
  const y = await connect({ url: b.url, room: 'hooked', machine: chat, clientId: 'y', onError: () => {} });
  t.after(() => y.close().catch(() => {}));
  await until(() => y.status() === 'online', 10_000, 'y online through B');
  for (let i = 0; i < 3; i++) {
    await x.ops.say({ text: `x${i}` }).authoritative;
    await y.ops.say({ text: `y${i}` }).authoritative;
  }
  const positions = () => got.flatMap((d) => d.body.entries.map((e) => e.pos));
  await until(() => positions().length === 6, 10_000, 'six delivered');
  // The receiver fails a while: retried until it answers, nothing lost or repeated.
  failing = true;
  await x.ops.say({ text: 'during' }).authoritative;
  await new Promise((r) => setTimeout(r, 200));
  failing = false;
  await until(() => positions().length === 7, 10_000, 'the seventh once the receiver answers');
  assert.deepEqual(positions(), [1, 2, 3, 4, 5, 6, 7], 'each position once, in order');
  assert.deepEqual(
    got.flatMap((d) => d.body.entries.map((e) => (e.args as { text: string }).text)),
    ['x0', 'y0', 'x1', 'y1', 'x2', 'y2', 'during'],
  );
  for (const d of got) {
    assert.equal(d.body.room, 'hooked');
    assert.equal(d.signature, standardWebhookSignature(secret, d.id, d.timestamp, d.raw), 'signed with the secret');
  }
  // The room moves to B while A has a commit undelivered (the receiver failing): B starts from
  // the position A saved in the cluster's KV bucket, so the eighth is sent by B, not skipped.
  failing = true;
  await x.ops.say({ text: 'undelivered at A' }).authoritative;
  await x.close();
  await a.close();
  failing = false;
  await until(() => y.status() === 'online' && b.store.owned().includes(b.store.shardOf('hooked')), 20_000, 'y back, the room at B');
  await y.ops.say({ text: 'at B' }).authoritative;
  await until(() => positions().includes(9), 20_000, 'the ninth, from B');
  assert.deepEqual([...new Set(positions())], [1, 2, 3, 4, 5, 6, 7, 8, 9], 'nothing skipped across the move (a repeat is allowed: at least once)');
});

// spec: HIST-REPLAY, HIST-RETAIN
test('history on a node, for a room the OTHER node owns: /state?at= and /log answer from the owner, with retention honoured by its checkpoints', async (t) => {
  const [a, b] = await nodes(2, { admin: { token: ADMIN }, idleUnloadMs: 100, history: { ops: 10 } });
  t.after(async () => {
    await b.close();
    await a.close();
  });
  // Node A takes the room's shard: the room is created and served there. Three rounds of 10 ops,
  // each ended by the room unloading (no member: after 100 ms), which writes its checkpoint: at 10, 20, 30.
  const room = a.service.room('annals', 'chat');
  for (let i = 1; i <= 30; i++) {
    assert.equal((await room.submit('say', { text: `line ${i}` }, { author: `user${i % 3}` })).position, i);
    if (i % 10 === 0) await until(() => !a.service.loadedRooms().includes('annals'), 10_000, `the room unloaded after ${i} ops`);
  }
  assert.deepEqual(a.store.owned(), [a.store.shardOf('annals')], 'A owns the shard');
  const onA = admin(a.url);
  const onB = admin(b.url);
  // History is read from the newest checkpoint (30) back to the first at or before 30 - 10.
  const log = await onB('GET', '/admin/rooms/annals/log');
  assert.equal(log.status, 200);
  assert.deepEqual(log, await onA('GET', '/admin/rooms/annals/log'), 'the same answer on both nodes');
  const { start, head, entries } = log.body as { start: number; head: number; entries: { pos: number; author: string; client: string; time: number }[] };
  assert.equal(start, 20, 'the last 10 ops behind the checkpoint at 30 are read, from the checkpoint at 20');
  assert.equal(head, 30);
  assert.deepEqual(
    entries.map((e) => [e.pos, e.author, e.client]),
    Array.from({ length: 30 - start }, (_, i) => [start + 1 + i, `user${(start + 1 + i) % 3}`, '~server']),
  );
  assert.ok(entries.every((e) => e.time > 1_600_000_000_000));
  for (const p of [start, start + 3, 30]) {
    const at = await onB('GET', `/admin/rooms/annals/state?at=${p}`);
    assert.equal(at.status, 200);
    assert.deepEqual(
      at.body.state.messages.map((m: { text: string }) => m.text),
      Array.from({ length: p }, (_, i) => `line ${i + 1}`),
      `the state at ${p}, on B`,
    );
  }
  const gone = await onB('GET', `/admin/rooms/annals/state?at=${start - 1}`);
  assert.deepEqual([gone.status, gone.body.error], [410, 'not-retained']);
  assert.equal(b.service.loadedRooms().length, 0, 'B served nothing itself');
});
