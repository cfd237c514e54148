/**
 * The JetStream adapter against a private 3-node nats-server cluster (the machine's binary, free
 * ports; never a NATS service already running): the facts the store relies on.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { jetstreamManager } from '@nats-io/jetstream';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { JetStreamLeases, JetStreamShardLog, natsAtLeast, natsShortcomings } from '../src/jetstream-log.ts';
import { findNatsServer, startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';
import { LeaseConflictError, WrongLastSequenceError } from '../src/shard-log.ts';

let cluster: NatsCluster;
let nc: NatsConnection;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
  nc = await connect({ servers: cluster.urls });
});
after(async () => {
  await nc?.close();
  await cluster?.close();
});

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

test('appends are fenced by the stream-wide last sequence; a retry with the same id answers duplicate with its seq', async () => {
  const log = await JetStreamShardLog.open(nc);
  await log.ensure(0);
  await log.ensure(0); // idempotent
  const a = await log.publish(0, log.subject(0, 'log.r'), enc('a'), { msgId: 'm1' });
  const b = await log.publish(0, log.subject(0, 'log.r'), enc('b'), { msgId: 'm2', expectLastSeq: a.seq });
  assert.equal(b.seq, a.seq + 1);
  await assert.rejects(log.publish(0, log.subject(0, 'log.r'), enc('c'), { msgId: 'm3', expectLastSeq: a.seq }), WrongLastSequenceError);
  const again = await log.publish(0, log.subject(0, 'log.r'), enc('b'), { msgId: 'm2', expectLastSeq: a.seq });
  assert.deepEqual(again, { seq: b.seq, duplicate: true });
  await log.publish(0, log.subject(0, 'log.other'), enc('x'), { msgId: 'm4', expectLastSeq: b.seq });
  const read = await log.read(0, log.subject(0, 'log.r'));
  assert.deepEqual(
    read.map((m) => [m.seq, dec(m.data)]),
    [
      [a.seq, 'a'],
      [b.seq, 'b'],
    ],
  );
  assert.deepEqual(await log.read(0, log.subject(0, 'log.none')), []);
  assert.deepEqual(
    (await log.read(0, log.subject(0, 'log.r'), b.seq)).map((m) => m.seq),
    [b.seq],
  );
  // nats-server before 2.9.18 (Debian's 2.9.10 here) replays a filtered purge as a full one when
  // a server restarts (nats-server#4196; it wiped shard streams in the cluster soak): refused.
  assert.equal(natsAtLeast(log.serverVersion, '2.9.18'), false, `this test expects the machine's nats-server 2.9.x, got ${log.serverVersion}`);
  await assert.rejects(log.purge(0, log.subject(0, 'log.r'), b.seq), /refusing to purge .*nats-server#4196.*2\.9\.18/);
  assert.deepEqual(
    (await log.read(0, log.subject(0, 'log.r'))).map((m) => m.seq),
    [a.seq, b.seq],
    'nothing purged',
  );
  const c = await log.publish(0, log.subject(0, 'log.r'), enc('c'), { msgId: 'm5', expectLastSeq: b.seq + 1 });
  assert.equal(c.seq, b.seq + 2);
});

test('what a nats-server version lacks for a Hercules cluster', () => {
  assert.equal(natsAtLeast('2.9.10', '2.9.18'), false);
  assert.equal(natsAtLeast('2.9.18', '2.9.18'), true);
  assert.equal(natsAtLeast('v2.10.3', '2.9.18'), true);
  assert.equal(natsAtLeast('2.11.0-beta', '2.11.0'), true);
  assert.equal(natsShortcomings('2.9.10').length, 3);
  assert.match(natsShortcomings('2.9.10')[0], /never purges/);
  assert.equal(natsShortcomings('2.10.7').length, 1);
  assert.deepEqual(natsShortcomings('2.12.1'), []);
});

test('a lease: one creator wins, renewals name the revision, it expires after its ttl', async () => {
  // A ttl of 3 s: with 1 s, a loaded machine (the whole suite on 2 cores) once took longer than
  // that between the renewal and the read, and the lease had expired.
  const leases = await JetStreamLeases.open(nc, { bucket: 'test_leases', ttlMs: 3000 });
  const [x, y] = await Promise.allSettled([leases.create('s1', 'a'), leases.create('s1', 'b')]);
  assert.equal([x, y].filter((r) => r.status === 'fulfilled').length, 1, 'one creator');
  const won = (x.status === 'fulfilled' ? x : y) as PromiseFulfilledResult<number>;
  assert.ok((x.status === 'rejected' ? x : (y as PromiseRejectedResult)).reason instanceof LeaseConflictError);
  const r2 = await leases.update('s1', 'a', won.value);
  await assert.rejects(leases.update('s1', 'a', won.value), LeaseConflictError, 'a stale revision');
  assert.equal((await leases.get('s1'))?.rev, r2);
  await new Promise((r) => setTimeout(r, 3600));
  assert.equal(await leases.get('s1'), undefined, 'expired');
  const r3 = await leases.create('s1', 'b');
  assert.ok(r3 > r2, 'revisions only grow');
  await assert.rejects(leases.update('s1', 'a', r2), LeaseConflictError, 'the old holder cannot renew');
});

test('while a stream peer is down, reads still come back whole: message by message when a consumer cannot be set up', async () => {
  const log = await JetStreamShardLog.open(nc, { consumerSetupTimeoutMs: 300 });
  await log.ensure(1);
  let last = 0;
  for (let i = 0; i < 30; i++) last = (await log.publish(1, log.subject(1, `log.${i % 3}`), enc(`m${i}`), { msgId: `p${i}` })).seq;
  const jsm = await jetstreamManager(nc);
  const leader = (await jsm.streams.info(log.stream(1))).cluster?.leader;
  const connectedPort = Number(nc.getServer().split(':').pop());
  const peer = cluster.servers.find((s) => s.name !== leader && s.port !== connectedPort);
  assert.ok(peer, 'a peer that neither leads the stream nor serves this connection');
  await peer.kill();
  try {
    // A consumer lands on a random peer of the stream, the dead one too: about one read in three
    // cannot set one up. Every read must still return the subject's 10 messages, in order.
    for (let i = 0; i < 20; i++) {
      const got = await log.read(1, log.subject(1, 'log.1'));
      assert.deepEqual(
        got.map((m) => dec(m.data)),
        Array.from({ length: 10 }, (_, k) => `m${3 * k + 1}`),
      );
      assert.ok(got.every((m) => m.seq <= last));
    }
    assert.equal(log.readStats.reads, 20);
    assert.ok(log.readStats.byGet > 0, `no read went message by message (${JSON.stringify(log.readStats)})`);
    console.log(`# reads while a peer was down: ${JSON.stringify(log.readStats)}`);
  } finally {
    await peer.start();
    await cluster.ready();
  }
});

test('a read asks again while JetStream answers "temporarily unavailable" (a peer down, a leader being elected); any other error fails it', async () => {
  const log = await JetStreamShardLog.open(nc, { consumerSetupTimeoutMs: 1 });
  await log.ensure(2);
  for (let i = 0; i < 4; i++) await log.publish(2, log.subject(2, 'log.u'), enc(`u${i}`), { msgId: `u${i}` });
  // The answer a stream leader gives while it cannot serve (what a CI run met mid-read).
  const streams = (log as unknown as { jsm: { streams: { getMessage: (...a: unknown[]) => Promise<unknown> } } }).jsm.streams;
  const real = streams.getMessage.bind(streams);
  let unavailable = 3;
  streams.getMessage = (...a) => {
    if (unavailable-- > 0) return Promise.reject(Object.assign(new Error('JetStream system temporarily unavailable'), { code: 10008 }));
    return real(...a);
  };
  try {
    const got = await log.read(2, log.subject(2, 'log.u'));
    assert.deepEqual(
      got.map((m) => dec(m.data)),
      ['u0', 'u1', 'u2', 'u3'],
    );
    assert.equal(log.readStats.retriedUnavailable, 3);
    streams.getMessage = () => Promise.reject(Object.assign(new Error('insufficient resources'), { code: 10023 }));
    await assert.rejects(log.read(2, log.subject(2, 'log.u')), /insufficient resources/);
    assert.equal(log.readStats.retriedUnavailable, 3, 'another error is not asked again');
  } finally {
    streams.getMessage = real;
  }
});

test('a server started again on a port another process took says so at once (its log line), not after a timeout', async () => {
  const s = cluster.servers[2];
  await s.kill();
  const squatter = createServer();
  await new Promise<void>((r) => squatter.listen(s.port, '127.0.0.1', r));
  try {
    const t0 = Date.now();
    await assert.rejects(s.start(), /n3 .*exited \(1\) before it listened: .*address already in use/);
    assert.ok(Date.now() - t0 < 9000, 'not the 10 s listen timeout');
  } finally {
    await new Promise((r) => squatter.close(r));
    await s.start();
    await cluster.ready();
  }
});

/**
 * A stand-in for nats-server that fails its first `failures` starts the way a server that lost a
 * port race does (exits before it listens), then runs the real one; it counts its starts.
 */
function flakyBinary(failures: number): { binary: string; starts: () => number; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'hercules-flaky-nats-'));
  const count = join(dir, 'starts');
  const binary = join(dir, 'nats-server');
  writeFileSync(
    binary,
    [
      '#!/bin/sh',
      `echo x >> "${count}"`,
      `if [ "$(wc -l < "${count}")" -le ${failures} ]; then echo "listen: address already in use (simulated)" >&2; exit 1; fi`,
      `exec "${findNatsServer()}" "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(binary, 0o755);
  return {
    binary,
    starts: () => (existsSync(count) ? readFileSync(count, 'utf8').split('\n').filter(Boolean).length : 0),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

test('a cluster whose server exits before it listens starts again on fresh ports, up to three times, then says why', async () => {
  const once = flakyBinary(1);
  try {
    const c = await startNatsCluster({ nodes: 1, binary: once.binary });
    try {
      assert.equal(once.starts(), 2, 'the first start failed, the second served');
      const probe = await connect({ servers: c.urls });
      await probe.flush();
      await probe.close();
    } finally {
      await c.close();
    }
  } finally {
    once.remove();
  }
  const always = flakyBinary(99);
  try {
    await assert.rejects(
      startNatsCluster({ nodes: 1, binary: always.binary }),
      /n1 .*exited \(1\) before it listened: listen: address already in use \(simulated\)/,
    );
    assert.equal(always.starts(), 3, 'three attempts, no more');
  } finally {
    always.remove();
  }
});
