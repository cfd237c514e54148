/**
 * Shard placement with real nodes (issue 42, item 3): a node joining a cluster whose one node
 * holds every shard takes its share, handed over as on SIGTERM, while clients keep writing; no
 * op is lost or duplicated, and the audit of every room is clean. Two nodes in this process over
 * a private 3-server NATS cluster.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdminClient } from '@hercules/admin-client';
import { connect, type ConnectedRoom } from '@hercules/client';
import { until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { createClusterNode, auditRoomOnNats } from '../src/node.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';
import { assign } from '../src/placement.ts';

let cluster: NatsCluster;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
});
after(async () => {
  await cluster?.close();
});

const texts = (room: ConnectedRoom<typeof chat>) => (room.getState('authoritative') as { messages: { text: string }[] }).messages.map((m) => m.text);

test('a node joining takes its share of the shards (handed over as on SIGTERM) while clients write; every op once, in order, audits clean', async () => {
  const prefix = 'place1';
  const common = { port: 0, machines: [chat], prefix, shards: 8, log: 'warn' as const, settleMs: 1000 };
  const a = await createClusterNode({ ...common, nats: cluster.urls, nodeId: 'pa' });
  const rooms = Array.from({ length: 16 }, (_, i) => `room-${i}`);
  const clients = await Promise.all(
    rooms.map((room) => connect({ url: a.url, room, machine: chat, clientId: `c-${room}`, backoff: { minMs: 50, maxMs: 300 }, onError: () => {} })),
  );
  let b: Awaited<ReturnType<typeof createClusterNode>> | undefined;
  try {
    await until(() => clients.every((c) => c.status() === 'online'), 20_000, 'every client online at A');
    const used = [...new Set(rooms.map((r) => a.store.shardOf(r)))].sort((x, y) => x - y);
    assert.deepEqual(
      a.store.owned().sort((x, y) => x - y),
      used,
      'alone, A holds every shard in use',
    );
    // Each client writes every 50 ms, through the join; the slowest op's wait is recorded.
    let sent = 0;
    let slowest = 0;
    let writing = true;
    const writers = clients.map(async (c, i) => {
      for (let n = 0; writing; n++) {
        const t0 = performance.now();
        sent++;
        await c.ops.say({ text: `${i}:${n}` }).authoritative;
        slowest = Math.max(slowest, performance.now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    await new Promise((r) => setTimeout(r, 500));
    const idleSlowest = slowest;
    b = await createClusterNode({ ...common, nats: cluster.urls, nodeId: 'pb' });
    const owners = assign(8, ['pa', 'pb']);
    const bShare = used.filter((k) => owners[k] === 'pb');
    assert.ok(bShare.length > 0, 'B has a share of the shards in use');
    await until(
      () => bShare.every((k) => b!.store.owned().includes(k)) && a.store.owned().every((k) => owners[k] === 'pa'),
      30_000,
      'B holds its share, A only its own',
    );
    await new Promise((r) => setTimeout(r, 1000));
    writing = false;
    await Promise.all(writers);
    console.log(
      `placement: B took shards ${bShare} of ${used}; ${sent} ops; slowest op ${Math.round(slowest)} ms (before the join ${Math.round(idleSlowest)} ms)`,
    );
    // Every op once, in order, in every room; the stream's audit agrees.
    for (const [i, c] of clients.entries()) {
      const got = texts(c);
      const mine = got.map((t) => Number(t.split(':')[1]));
      assert.deepEqual(
        mine,
        mine.map((_, n) => n),
        `room ${rooms[i]}: each op once, in order`,
      );
      const audit = await auditRoomOnNats({ nats: cluster.urls, room: rooms[i], prefix, shards: 8 });
      assert.deepEqual(audit.problems, [], `room ${rooms[i]} audits clean`);
      assert.equal(audit.ops, got.length);
    }
  } finally {
    for (const c of clients) c.close();
    await b?.close();
    await a.close();
  }
});

/** Each client writes an op every 50 ms until stopped; each op's wait (submit to Authoritative) is kept with when it was sent. */
function write(clients: ConnectedRoom<typeof chat>[]) {
  const waits: { at: number; ms: number }[] = [];
  let writing = true;
  const done = Promise.all(
    clients.map(async (c, i) => {
      for (let n = 0; writing; n++) {
        const t0 = performance.now();
        await c.ops.say({ text: `${i}:${n}` }).authoritative;
        waits.push({ at: t0, ms: performance.now() - t0 });
        await new Promise((r) => setTimeout(r, 50));
      }
    }),
  );
  return {
    waits,
    stop: async () => {
      writing = false;
      await done;
    },
  };
}

const ADMIN = 'an-admin-token-of-at-least-32-characters-long';

test('POST /admin/drain: the node hands every shard over (as on SIGTERM), says 503 draining, takes no new room; every op once, audits clean; op waits measured against idle', async () => {
  const prefix = 'drain1';
  const common = { port: 0, machines: [chat], prefix, shards: 8, log: 'warn' as const, settleMs: 1000, admin: { token: ADMIN } };
  const a = await createClusterNode({ ...common, nats: cluster.urls, nodeId: 'da' });
  const b = await createClusterNode({ ...common, nats: cluster.urls, nodeId: 'db' });
  const rooms = Array.from({ length: 16 }, (_, i) => `room-${i}`);
  const clients = await Promise.all(
    rooms.map((room) => connect({ url: a.url, room, machine: chat, clientId: `c-${room}`, backoff: { minMs: 50, maxMs: 300 }, onError: () => {} })),
  );
  try {
    await until(() => clients.every((c) => c.status() === 'online'), 20_000, 'every client online');
    await new Promise((r) => setTimeout(r, 1500)); // both settled: placement spread the shards
    await until(() => a.store.owned().length > 0, 20_000, 'A holds some shards');
    const w = write(clients);
    await new Promise((r) => setTimeout(r, 3000));
    const t0 = performance.now();
    const drained = await createAdminClient({ url: a.url, token: ADMIN }).drain();
    const drainMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 1000));
    await w.stop();
    assert.deepEqual(drained, { draining: true, shards: [] }, 'A holds no shard');
    assert.deepEqual(a.store.owned(), []);
    const health = await fetch(`${a.url.replace('ws:', 'http:')}/healthz`);
    assert.equal(health.status, 503);
    assert.match(((await health.json()) as { reason: string }).reason, /^draining/);
    // A new room asked of A goes to B.
    const late = await connect({ url: a.url, room: 'late-room', machine: chat, clientId: 'late', onError: () => {} });
    await late.ops.say({ text: 'late' }).authoritative;
    assert.ok(b.store.owned().includes(b.store.shardOf('late-room')) && !a.store.owned().includes(a.store.shardOf('late-room')));
    late.close();
    const idle = w.waits.filter((x) => x.at < t0).map((x) => x.ms);
    const during = w.waits.filter((x) => x.at >= t0).map((x) => x.ms);
    const max = (xs: number[]) => Math.round(Math.max(...xs));
    const p = (xs: number[], q: number) => Math.round([...xs].sort((x, y) => x - y)[Math.floor(q * (xs.length - 1))]);
    console.log(
      `drain: ${Math.round(drainMs)} ms to hand every shard over; op wait idle p50 ${p(idle, 0.5)} p99 ${p(idle, 0.99)} max ${max(idle)} ms (${idle.length} ops), during and after the drain p50 ${p(during, 0.5)} p99 ${p(during, 0.99)} max ${max(during)} ms (${during.length} ops)`,
    );
    for (const [i, c] of clients.entries()) {
      const mine = texts(c).map((t) => Number(t.split(':')[1]));
      assert.deepEqual(
        mine,
        mine.map((_, n) => n),
        `room ${rooms[i]}: each op once, in order`,
      );
      const audit = await auditRoomOnNats({ nats: cluster.urls, room: rooms[i], prefix, shards: 8 });
      assert.deepEqual(audit.problems, [], `room ${rooms[i]} audits clean`);
      assert.equal(audit.ops, mine.length);
    }
  } finally {
    for (const c of clients) c.close();
    await b.close();
    await a.close();
  }
});
