/**
 * Cluster nodes in this process over a private 3-node NATS cluster, with real clients
 * (`connect()`): any node serves any room (the owner's node directly, the others by relay),
 * and when the owner goes away its rooms move and their clients resume exactly once.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type ConnectedRoom } from '@hercules/client';
import { ClientCodec, PROTOCOL_VERSION } from '@hercules/core';
import { Socket } from 'node:net';
import { WebSocket } from 'ws';
import { StorageError } from '@hercules/server';
import { faultProxy, freePort, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { auditRoomOnNats, createClusterNode, type ClusterNode } from '../src/node.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';

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
  const prefix = `n${++prefixes}`;
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

const texts = (room: ConnectedRoom<typeof chat>, view: 'authoritative' | 'submitted' = 'authoritative') =>
  (room.getState(view) as { messages: { text: string }[] }).messages.map((m) => m.text);

test('a room is served by its shard owner; a client on another node is relayed to it; both see one order', async () => {
  const [a, b] = await nodes(2);
  try {
    const x = await connect({ url: a.url, room: 'r1', machine: chat, onError: () => {} });
    await until(() => x.status() === 'online', 10_000, 'x online');
    assert.deepEqual(a.store.owned(), [a.store.shardOf('r1')], 'node-0 took the shard of r1');
    const y = await connect({ url: b.url, room: 'r1', machine: chat, onError: () => {} });
    await until(() => y.status() === 'online', 10_000, 'y online through the relay');
    assert.deepEqual(b.relay.counts(), { edge: 1, owner: 0 });
    assert.deepEqual(a.relay.counts(), { edge: 0, owner: 1 });
    for (let i = 0; i < 5; i++) {
      x.submit('say', { text: `x${i}` } as never);
      y.submit('say', { text: `y${i}` } as never);
    }
    await until(() => texts(x).length === 10 && texts(y).length === 10, 10_000, 'both see all ten');
    assert.deepEqual(texts(x), texts(y), 'one order');
    // The owner's /metrics: one shard owned, its lease fresh, appends timed, one relayed client.
    const metricsA = await (await fetch(`${a.url.replace('ws:', 'http:')}/metrics`)).text();
    const value = (text: string, series: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${series} `))
          ?.split(' ')[1],
      );
    assert.equal(value(metricsA, 'hercules_cluster_shards_owned'), 1);
    const age = value(metricsA, `hercules_cluster_lease_age_seconds{shard="${a.store.shardOf('r1')}"}`);
    assert.ok(age >= 0 && age < 2, `lease age ${age} s`);
    assert.ok(value(metricsA, 'hercules_cluster_append_seconds_count') > 0, 'appends timed');
    assert.equal(value(metricsA, 'hercules_cluster_claims_total'), 1);
    assert.equal(value(metricsA, 'hercules_cluster_relayed_connections{side="owner"}'), 1);
    assert.ok(value(metricsA, 'hercules_cluster_reads_total{via="consumer"}') > 0, 'reads counted');
    const metricsB = await (await fetch(`${b.url.replace('ws:', 'http:')}/metrics`)).text();
    assert.equal(value(metricsB, 'hercules_cluster_shards_owned'), 0);
    assert.equal(value(metricsB, 'hercules_cluster_relayed_connections{side="edge"}'), 1);
    x.close();
    y.close();
  } finally {
    await b.close();
    await a.close();
  }
});

test('when the owner node goes away, its rooms move: a client with both URLs resumes on the other node, exactly once', async () => {
  const [a, b] = await nodes(2);
  let closedA = false;
  try {
    const x = await connect({ url: [a.url, b.url], room: 'r2', machine: chat, onError: () => {}, backoff: { minMs: 50, maxMs: 300 } });
    await until(() => x.status() === 'online', 10_000, 'x online');
    for (let i = 0; i < 3; i++) x.submit('say', { text: `before${i}` } as never);
    await until(() => texts(x).length === 3, 10_000, 'before ops authoritative');
    await a.close();
    closedA = true;
    for (let i = 0; i < 3; i++) x.submit('say', { text: `after${i}` } as never);
    await until(() => texts(x).length === 6, 15_000, 'after ops authoritative on the other node');
    assert.deepEqual(texts(x), ['before0', 'before1', 'before2', 'after0', 'after1', 'after2'], 'each op once, in order');
    assert.ok(b.store.owned().includes(b.store.shardOf('r2')), 'node-1 owns the shard now');
    x.close();
  } finally {
    await b.close();
    if (!closedA) await a.close();
  }
});

// spec: CLUSTER-ONE-SEQUENCER, CLUSTER-CHAIN
test('the owner cut off from NATS: another node takes the room after its lease, the client resumes there exactly once; healed, the old owner gives the shard up and wrote nothing that counts', async () => {
  const proxies = await Promise.all(cluster.servers.map((s) => faultProxy(s.port)));
  const prefix = `n${++prefixes}`;
  const common = { port: 0, machines: [chat], prefix, shards: 4, leaseMs: 1000, log: 'warn' as const, placement: false };
  const a = await createClusterNode({ ...common, nats: proxies.map((p) => `nats://127.0.0.1:${p.port}`), nodeId: 'cut' });
  const b = await createClusterNode({ ...common, nats: cluster.urls, nodeId: 'whole' });
  try {
    const x = await connect({ url: [a.url, b.url], room: 'rp', machine: chat, onError: () => {}, backoff: { minMs: 50, maxMs: 300 } });
    await until(() => x.status() === 'online', 10_000, 'x online');
    const shard = a.store.shardOf('rp');
    assert.deepEqual(a.store.owned(), [shard], 'the node reached first owns the room');
    for (let i = 0; i < 3; i++) x.submit('say', { text: `before${i}` } as never);
    await until(() => texts(x).length === 3, 10_000, 'before the cut');
    for (const p of proxies) p.cut();
    for (let i = 0; i < 3; i++) x.submit('say', { text: `during${i}` } as never);
    await until(() => texts(x).length === 6, 20_000, 'the ops during the cut Authoritative on the other node');
    assert.ok(b.store.owned().includes(shard), 'the other node owns the shard');
    for (const p of proxies) p.heal();
    // Healed, the old owner finds its lease taken and gives the shard up.
    await until(() => !a.store.owned().includes(shard), 20_000, 'the old owner to give the shard up');
    for (let i = 0; i < 3; i++) x.submit('say', { text: `after${i}` } as never);
    await until(() => texts(x).length === 9, 10_000, 'after the heal');
    assert.deepEqual(
      texts(x),
      ['before', 'during', 'after'].flatMap((w) => [0, 1, 2].map((i) => `${w}${i}`)),
      'each op once, in order',
    );
    x.close();
    const audit = await auditRoomOnNats({ nats: cluster.urls, room: 'rp', prefix, shards: 4 });
    assert.deepEqual(audit.problems, []);
    assert.equal(audit.ops, 9);
    assert.ok(audit.claims >= 2, `a claim by each owner (${audit.claims})`);
  } finally {
    await b.close();
    await a.close();
    await Promise.all(proxies.map((p) => p.close()));
  }
});

// JetStream drops a publish whose id it saw within its duplicate window (2 min by default); the
// room engine drops an op it has, by client and seq, whenever it comes back. A client that lost
// its acknowledgements resends on a new connection: after the window, only the engine can tell.
test("an op resent after JetStream's duplicate window is still ordered once: exactly-once is the engine's, by (client, seq)", async () => {
  const [a] = await nodes(1, { duplicateWindowMs: 1000 });
  const say = (seq: number) => ({ seq, name: 'say', args: { text: `m${seq}` } });
  /** A raw client: hello, the ops, then what the room says until its own ops are Authoritative. */
  const session = async (ops: ReturnType<typeof say>[], ownExpected: number) => {
    const ws = new WebSocket(`${a.url}/?room=rd`);
    const codec = new ClientCodec();
    let own = 0;
    const got = new Promise<void>((resolve, reject) => {
      ws.on('message', (d: Buffer) => {
        const m = codec.decode(d);
        if (m.t === 'welcome') ws.send(codec.encode({ t: 'ops', ops }));
        if (m.t === 'log') own += m.entries.filter((e) => e.k === 'own').length;
        if (m.t === 'error') reject(new Error(`${m.code}: ${m.message}`));
        if (own >= ownExpected) resolve();
      });
    });
    await new Promise((r) => ws.once('open', r));
    ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: 'resender', machine: { name: chat.name, version: chat.version }, have: 0 }));
    await got;
    ws.close();
  };
  try {
    await session([say(1), say(2), say(3)], 3);
    await new Promise((r) => setTimeout(r, 1500)); // past the stream's duplicate window
    // Resent, with one new op: the welcome says the engine has 1..3; the resent ones are dropped.
    await session([say(1), say(2), say(3), say(4)], 1);
    const y = await connect({ url: a.url, room: 'rd', machine: chat, onError: () => {} });
    await until(() => texts(y).length >= 4, 10_000, 'a reader sees the room');
    assert.deepEqual(texts(y), ['m1', 'm2', 'm3', 'm4'], 'each op once');
    y.close();
  } finally {
    await a.close();
  }
});

// Last in this file: it freezes two of the three NATS servers for a while.
test('a node started while JetStream has no quorum waits (answering 503) and serves once NATS answers, instead of exiting', async () => {
  const port = await freePort();
  const [, b, c] = cluster.servers;
  b.signal('SIGSTOP');
  c.signal('SIGSTOP');
  let node: ClusterNode | undefined;
  let failed: unknown;
  const starting = createClusterNode({
    nats: [cluster.servers[0].url],
    nodeId: 'late',
    port,
    machines: [chat],
    prefix: `n${++prefixes}`,
    shards: 4,
    log: 'warn',
  }).then(
    (n) => (node = n),
    (e) => (failed = e),
  );
  try {
    await new Promise((r) => setTimeout(r, 6000)); // more than a JetStream request's 5 s timeout
    assert.equal(failed, undefined, `the node gave up: ${String(failed)}`);
    assert.equal(node, undefined, 'not ready without JetStream');
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { ok: false, starting: true });
  } finally {
    b.signal('SIGCONT');
    c.signal('SIGCONT');
  }
  await starting;
  const up = node as ClusterNode | undefined;
  assert.ok(up, `the node came up once NATS answered (${String(failed)})`);
  try {
    const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
    assert.equal(health.ok, true);
  } finally {
    await up.close();
  }
});

// spec: SEC-LIMITS
test('a node closes connections that never finish their upgrade request within limits.upgradeTimeoutMs, counted as the embedded server counts them', async () => {
  const [a] = await nodes(1, { limits: { upgradeTimeoutMs: 300 } });
  const open = (bytes: string) => {
    const s = new Socket();
    let closed = false;
    s.on('error', () => {});
    s.on('close', () => {
      closed = true;
    });
    s.resume(); // read what the node sends, so its end is seen
    s.connect(a.port, '127.0.0.1', () => bytes && s.write(bytes));
    return { s, closed: () => closed };
  };
  const silent = Array.from({ length: 10 }, () => open(''));
  const half = Array.from({ length: 10 }, () => open('GET /?room=r HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n'));
  try {
    await until(() => [...silent, ...half].every((c) => c.closed()), 10_000, 'every unfinished connection closed');
    const refused = (await a.service.metrics.refusedConnections.get()).values.find((v) => v.labels.reason === 'upgrade-timeout');
    assert.equal(refused?.value, 20);
    assert.equal((await a.service.metrics.pendingConnections.get()).values[0].value, 0);
    // A client that finishes its upgrade is served as before.
    const x = await connect({ url: a.url, room: 'r1', machine: chat, onError: () => {} });
    await until(() => x.status() === 'online', 10_000, 'x online');
    x.close();
  } finally {
    for (const c of [...silent, ...half]) c.s.destroy();
    await a.close();
  }
});

test("a node's /healthz reports a store that cannot commit: 503 and the reason while its appends fail, 200 once one succeeds", async () => {
  const [a] = await nodes(1);
  const health = async () => {
    const res = await fetch(`${a.url.replace('ws:', 'http:')}/healthz`);
    return { status: res.status, body: (await res.json()) as { ok: boolean; reason?: string; store: { failures: number } } };
  };
  const x = await connect({ url: a.url, room: 'h1', machine: chat, backoff: { minMs: 50, maxMs: 200 }, onError: () => {} });
  try {
    await until(() => x.status() === 'online', 10_000, 'x online');
    await x.ops.say({ text: 'one' }).authoritative;
    assert.deepEqual([(await health()).status, (await health()).body.ok], [200, true]);
    // Every append fails, as when JetStream has no leader: the room fails, its client retries and fails again.
    const real = a.store.append;
    a.store.append = () => Promise.reject(new StorageError('injected: JetStream has no leader for the shard'));
    const two = x.ops.say({ text: 'two' });
    try {
      await until(async () => (await health()).status === 503, 10_000, '503');
      const down = await health();
      assert.equal(down.body.ok, false);
      assert.match(down.body.reason ?? '', /^the room store cannot commit: injected: JetStream has no leader/);
      assert.ok(down.body.store.failures >= 1);
    } finally {
      a.store.append = real;
    }
    await two.authoritative;
    await until(async () => (await health()).status === 200, 10_000, 'healthy again');
    assert.deepEqual(texts(x), ['one', 'two']);
  } finally {
    x.close();
    await a.close();
  }
});
