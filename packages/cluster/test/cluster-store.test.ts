/**
 * ClusterStore against a private 3-node nats-server cluster: the room store conformance suite
 * (every case on storage of its own: its own streams and lease keys), then what only a
 * replicated log has: two nodes, one shard, a stale owner.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { systemClock } from '@hercules/server/pipeline';
import { runRoomStoreTests, type StoreFactory, type StoreSetup } from '@hercules/server/store-conformance';
import { auditRoom } from '../src/audit.ts';
import { ClusterStore, roomToken } from '../src/cluster-store.ts';
import { JetStreamLeases, JetStreamShardLog } from '../src/jetstream-log.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';

let cluster: NatsCluster;
let nc: NatsConnection;
let leases: JetStreamLeases;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
  nc = await connect({ servers: cluster.urls });
  leases = await JetStreamLeases.open(nc, { bucket: 'test_owners', ttlMs: 2000 });
});
after(async () => {
  await nc?.close();
  await cluster?.close();
});

let cases = 0;
async function storeOver(prefix: string, nodeId: string, shards = 2, setup: StoreSetup = {}): Promise<ClusterStore> {
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  return new ClusterStore({ log, leases, nodeId, shards, subjectPrefix: prefix, retention: setup.retention, ...(setup.now ? { wallClock: setup.now } : {}) });
}

const factory: StoreFactory = async (setup) => {
  const prefix = `c${++cases}`;
  return { store: await storeOver(prefix, 'node-a', 2, setup), reopen: () => storeOver(prefix, 'node-a', 2, setup) };
};

runRoomStoreTests('ClusterStore', factory, test);

// ------------------------------------------------------------------ two nodes, one shard

const INIT = { machine: 'm', version: 1, initial: { n: 0 } };
const entry = (pos: number, tag = '') => ({ pos, client: 'c1', seq: pos, name: 'add', args: { tag }, author: 'c1' });

/** A lease table whose writes can be cut (a node cut off from the KV, or paused): they then hang. */
function cuttable(inner: JetStreamLeases) {
  let cut = false;
  const hang = () => new Promise<never>(() => {});
  return {
    table: {
      get ttlMs() {
        return inner.ttlMs;
      },
      create: (k: string, v: string) => (cut ? hang() : inner.create(k, v)),
      update: (k: string, v: string, rev: number) => (cut ? hang() : inner.update(k, v, rev)),
      get: (k: string) => inner.get(k),
      release: (k: string, rev: number) => (cut ? hang() : inner.release(k, rev)),
    },
    cut: () => {
      cut = true;
    },
  };
}

test('a shard has one owner: another node is refused, naming the owner; after the owner closes, it takes over and reads everything', async () => {
  const prefix = `t${++cases}`;
  const a = await storeOver(prefix, 'node-a', 1);
  const b = await storeOver(prefix, 'node-b', 1);
  await a.open('r', INIT);
  await a.append('r', { after: 0, entries: [entry(1), entry(2)] });
  await assert.rejects(b.open('r'), (e: Error) => e.name === 'NotOwnerError' && /node node-a serves/.test(e.message));
  await a.close();
  const r = (await b.open('r'))!;
  assert.deepEqual([r.rev, r.durable.suffix.map((e) => e.pos)], [1, [1, 2]]);
  assert.deepEqual(await b.append('r', { after: 1, entries: [entry(3)] }), { rev: 2, head: 3 });
  await b.close();
});

test('a stale owner (paused past its lease, its clock stopped) can never get an append confirmed after the new owner claimed, and its writes are not read', async () => {
  const prefix = `t${++cases}`;
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const leasesA = cuttable(leases);
  let frozen: number | undefined;
  const clockA = () => frozen ?? performance.now();
  const warnings: string[] = [];
  const lost: number[] = [];
  const a = new ClusterStore({
    log,
    leases: leasesA.table,
    nodeId: 'node-a',
    shards: 1,
    subjectPrefix: prefix,
    clock: { ...systemClock, now: clockA },
    onWarning: (w) => warnings.push(w),
    onShardLost: (k) => lost.push(k),
  });
  const b = await storeOver(prefix, 'node-b', 1);
  await a.open('r', INIT);
  assert.deepEqual(await a.append('r', { after: 0, entries: [entry(1, 'a')] }), { rev: 1, head: 1 });
  // A is paused: its renewals never arrive and its clock stands still, so it believes it still owns the shard.
  leasesA.cut();
  frozen = performance.now();
  // B takes the shard once A's lease expired (B retries as a node would).
  let loaded: Awaited<ReturnType<ClusterStore['open']>>;
  for (;;) {
    try {
      loaded = await b.open('r');
      break;
    } catch (e) {
      if ((e as Error).name !== 'NotOwnerError') throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  assert.equal(loaded!.rev, 1, "B loads A's confirmed append");
  assert.deepEqual(await b.append('r', { after: 1, entries: [entry(2, 'b')] }), { rev: 2, head: 2 });
  // A resumes and appends at its rev: refused (the stream moved past what it predicted), never confirmed.
  await assert.rejects(a.append('r', { after: 1, entries: [entry(2, 'stale')] }), /storage-failed|not confirmed|wrong last sequence/i);
  // And whatever A does next is not confirmed either (it cannot claim again: its lease is gone).
  await assert.rejects(a.append('r', { after: 2, entries: [entry(3, 'stale')] }));
  // B's view, and a fresh reader's, hold only B's write at 2.
  assert.deepEqual(await b.append('r', { after: 2, entries: [entry(3, 'b')] }), { rev: 3, head: 3 });
  await b.release('r');
  const again = (await b.open('r'))!;
  assert.deepEqual(
    again.durable.suffix.map((e) => (e.args as { tag: string }).tag),
    ['a', 'b', 'b'],
  );
  await b.close();
});

test('a lease write that answers late (past the deadline, before the lease expires) holds appends until it answers; the shard is kept', async () => {
  const prefix = `t${++cases}`;
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  let delayMs = 0;
  const events: string[] = [];
  const slow = {
    get ttlMs() {
      return leases.ttlMs;
    },
    create: (k: string, v: string) => leases.create(k, v),
    update: async (k: string, v: string, rev: number) => {
      const d = delayMs;
      const r = await leases.update(k, v, rev); // written at once (so the lease never expires), answered late
      if (d) await new Promise((res) => setTimeout(res, d));
      if (d) events.push('slow renewal answered');
      return r;
    },
    get: (k: string) => leases.get(k),
    release: (k: string, rev: number) => leases.release(k, rev),
  };
  const lost: string[] = [];
  const store = new ClusterStore({ log, leases: slow, nodeId: 'node-a', shards: 1, subjectPrefix: prefix, onShardLost: (_k, why) => lost.push(why) });
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: [entry(1)] });
  // Renewals now answer 1.4 s late: past the deadline (ttl 2 s - margin 0.5 s, renewed every 0.67 s), within the lease.
  delayMs = 1400;
  await new Promise((res) => setTimeout(res, 2200));
  const done = store.append('r', { after: 1, entries: [entry(2)] }).then((a) => {
    events.push('append confirmed');
    return a;
  });
  assert.deepEqual(await done, { rev: 2, head: 2 });
  assert.ok(events.includes('slow renewal answered'), 'a slow renewal happened');
  assert.deepEqual(lost, [], 'the shard was kept');
  delayMs = 0;
  await store.close();
  const again = await storeOver(prefix, 'node-b', 1);
  assert.equal((await again.open('r'))!.rev, 2);
  await again.close();
});

/** A lease table that answers every write with an error while `down` (a KV stream electing a leader answers "no responders"). */
function flaky(inner: JetStreamLeases) {
  const state = { down: false, refused: 0 };
  const refuse = () => {
    state.refused++;
    return Promise.reject(new Error('jetstream is not enabled (simulated: the lease stream has no leader)'));
  };
  return {
    state,
    table: {
      get ttlMs() {
        return inner.ttlMs;
      },
      create: (k: string, v: string) => (state.down ? refuse() : inner.create(k, v)),
      update: (k: string, v: string, rev: number) => (state.down ? refuse() : inner.update(k, v, rev)),
      get: (k: string) => (state.down ? refuse() : inner.get(k)),
      release: (k: string, rev: number) => (state.down ? refuse() : inner.release(k, rev)),
    },
  };
}

test('a lease table unreachable for longer than the ttl: the owner keeps the shard, holds appends, and takes its expired lease again when the table answers', async () => {
  const prefix = `t${++cases}`;
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const f = flaky(leases);
  const lost: string[] = [];
  const store = new ClusterStore({ log, leases: f.table, nodeId: 'node-a', shards: 1, subjectPrefix: prefix, onShardLost: (_k, why) => lost.push(why) });
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: [entry(1)] });
  f.state.down = true;
  // 3.5 s without a lease write: the bucket expires the entry (ttl 2 s) meanwhile.
  await new Promise((res) => setTimeout(res, 2600));
  assert.equal(await store.ownerOf(0).catch(() => 'unreachable'), 'unreachable');
  let confirmed = false;
  const held = store.append('r', { after: 1, entries: [entry(2)] }).then((a) => {
    confirmed = true;
    return a;
  });
  await new Promise((res) => setTimeout(res, 900));
  assert.equal(confirmed, false, 'nothing is confirmed while the lease cannot be renewed');
  assert.equal(await leases.get(`${prefix}_0`), undefined, 'the lease expired from the bucket');
  f.state.down = false;
  assert.deepEqual(await held, { rev: 2, head: 2 });
  assert.ok(f.state.refused > 5, `renewals were refused (${f.state.refused})`);
  assert.deepEqual(lost, [], 'the shard was kept');
  assert.equal(await store.ownerOf(0), 'node-a', 'the lease was taken again');
  await store.close();
  const again = await storeOver(prefix, 'node-b', 1);
  assert.equal((await again.open('r'))!.rev, 2);
  await again.close();
});

test('a lease table unreachable past the grace period: the owner gives the shard up and its held appends fail', async () => {
  const prefix = `t${++cases}`;
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const f = flaky(leases);
  const lost: string[] = [];
  const store = new ClusterStore({
    log,
    leases: f.table,
    nodeId: 'node-a',
    shards: 1,
    subjectPrefix: prefix,
    leaseGraceMs: 3000,
    onShardLost: (_k, why) => lost.push(why),
  });
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: [entry(1)] });
  f.state.down = true;
  await new Promise((res) => setTimeout(res, 2000));
  await assert.rejects(store.append('r', { after: 1, entries: [entry(2)] }), /given up/);
  assert.equal(lost.length, 1);
  assert.match(lost[0], /could not be renewed for \d+ ms/);
  f.state.down = false;
  await store.close();
  const again = await storeOver(prefix, 'node-b', 1);
  assert.equal((await again.open('r'))!.rev, 1, 'the held append was never written');
  await again.close();
});

test("a lease table whose revisions went back (seen on 2.9.10 after a leader kill) does not lower a claim's epoch: the next owner's confirmed appends are read", async () => {
  const prefix = `t${++cases}`;
  const a = await storeOver(prefix, 'node-a', 1);
  await a.open('r', INIT);
  for (let i = 1; i <= 3; i++) await a.append('r', { after: i - 1, entries: [entry(i, 'a')] });
  await a.close();
  // B's lease table answers revision 1 for every write, below the revision A claimed under.
  const backwards = {
    get ttlMs() {
      return leases.ttlMs;
    },
    create: async (k: string, v: string) => {
      await leases.create(k, v);
      return 1;
    },
    update: async (k: string, v: string, _rev: number) => {
      const held = await leases.get(k);
      await leases.update(k, v, held!.rev);
      return 1;
    },
    get: (k: string) => leases.get(k),
    release: async (k: string) => {
      const held = await leases.get(k);
      if (held) await leases.release(k, held.rev);
    },
  };
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const b = new ClusterStore({ log, leases: backwards, nodeId: 'node-b', shards: 1, subjectPrefix: prefix });
  // A's release and B's create race in the bucket: on a loaded machine B's create may still see
  // A's lease, gone by the time B reads it (NotOwnerError, no owner). A node retries; so does this.
  let opened = await b.open('r').catch((e: Error) => (e.name === 'NotOwnerError' ? undefined : Promise.reject(e)));
  for (const end = Date.now() + 5000; opened === undefined && Date.now() < end; ) {
    await new Promise((r) => setTimeout(r, 50));
    opened = await b.open('r').catch((e: Error) => (e.name === 'NotOwnerError' ? undefined : Promise.reject(e)));
  }
  assert.equal(opened?.rev, 3);
  assert.deepEqual(await b.append('r', { after: 3, entries: [entry(4, 'b')] }), { rev: 4, head: 4 });
  await b.close();
  const c = await storeOver(prefix, 'node-c', 1);
  const loaded = (await c.open('r'))!;
  assert.equal(loaded.rev, 4, "B's confirmed append counts");
  assert.deepEqual(
    loaded.durable.suffix.map((e) => (e.args as { tag: string }).tag),
    ['a', 'a', 'a', 'b'],
  );
  await c.close();
});

test("audit: a room's history checks out; a stale owner's message is counted as ignored; an op in the room twice is a problem", async () => {
  const prefix = `t${++cases}`;
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const store = new ClusterStore({ log, leases, nodeId: 'node-a', shards: 1, subjectPrefix: prefix, checkpointEvery: 2 });
  await store.open('r', INIT);
  for (let i = 1; i <= 6; i++) await store.append('r', { after: i - 1, entries: [entry(i)], checkpoint: { pos: i, state: { n: i } } });
  await store.close();
  const audit = () => auditRoom(log, 'r', { subjectPrefix: prefix, shards: 1 });
  let a = await audit();
  assert.deepEqual(a.problems, []);
  assert.equal(a.rev, 6);
  assert.equal(a.head, 6);
  assert.equal(a.ops, 6, 'ops from the oldest checkpoint: every one');
  assert.ok(a.checkpoints.length >= 2, `checkpoints: ${JSON.stringify(a.checkpoints)}`);
  assert.equal(a.ignored.stale, 0);
  assert.ok(
    a.checkpoints.every((c) => c.confirmed),
    `every checkpoint written was confirmed: ${JSON.stringify(a.checkpoints)}`,
  );
  const record = (claim: number, rev: number, e: object) => ({
    data: new TextEncoder().encode(JSON.stringify({ entries: [e], clients: {}, stable: 0 })),
    headers: { 'Hc-Claim': String(claim), 'Hc-Epoch': String(a.maxEpoch), 'Hc-Rev': String(rev), 'Hc-Part': '0', 'Hc-Parts': '1' },
  });
  const subject = `${prefix}.0.log.${roomToken('r')}`;
  // A stale owner's record (sent under a claim that another followed): ignored, not a problem.
  const stale = record(a.lastClaim - 1, 7, entry(7, 'stale'));
  await log.publish(0, subject, stale.data, { msgId: 'audit-stale', headers: stale.headers });
  a = await audit();
  assert.deepEqual(a.problems, []);
  assert.equal(a.ignored.stale, 1);
  assert.equal(a.rev, 6);
  // A record under the last claim that repeats op (c1, 6) at position 7: a double-ordered op.
  const dup = record(a.lastClaim, 7, { ...entry(7, 'dup'), seq: 6 });
  await log.publish(0, subject, dup.data, { msgId: 'audit-dup', headers: dup.headers });
  a = await audit();
  assert.equal(a.rev, 7);
  assert.equal(a.problems.length, 1);
  assert.match(a.problems[0], /op c1#6 is in the room twice: at 6 and at 7/);
});

test('reads apart from the writer (peek, export, listRooms) work on any node; import and delete only on the owner, and a delete ends the history a load or an audit reads', async () => {
  const prefix = `t${++cases}`;
  const a = await storeOver(prefix, 'node-a', 1);
  const logB = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const b = new ClusterStore({ log: logB, leases, nodeId: 'node-b', shards: 1, subjectPrefix: prefix });
  const r = await a.open('r', INIT);
  await a.append('r', { after: r.rev, entries: [entry(1), entry(2)], clients: { c1: { highWater: 2, visibleSeq: 2 } } });
  await a.append('r', { after: r.rev + 1, checkpoint: { pos: 1, state: { n: 1 } } });
  // Node B does not own the shard (A does, and has the room loaded): it reads the stream.
  const p = await b.peek('r', 1, 10);
  // Its checkpoint subject was read by headers (the bodies not sent), then the base checkpoint by sequence.
  assert.ok(logB.readStats.headerReads > 0 && logB.readStats.headerReadsWhole === 0, JSON.stringify(logB.readStats));
  assert.deepEqual([p?.meta.machine, p?.from, p?.entries.map((e) => e.pos)], ['m', 2, [2]]);
  assert.equal(await b.peek('nothing', 0, 10), undefined);
  const ex = await b.exportRoom('r');
  assert.deepEqual(
    [ex?.durable.checkpoint.pos, ex?.durable.suffix.map((e) => e.pos), ex?.durable.clients],
    [0, [1, 2], { c1: { highWater: 2, visibleSeq: 2 } }],
  );
  const [listed] = await b.listRooms({ limit: 10 });
  assert.deepEqual([listed.name, listed.machine, listed.head, listed.checkpoint], ['r', 'm', 2, 0]);
  // Writes apart from the writer go through the shard's owner.
  await assert.rejects(b.importRoom('x', ex!), (e: Error) => e.name === 'NotOwnerError' && /room x is in shard 0, which node node-a serves/.test(e.message));
  await assert.rejects(b.deleteRoom('r'), (e: Error) => e.name === 'NotOwnerError' && /node node-a serves/.test(e.message));
  await assert.rejects(a.deleteRoom('r'), /loaded on this node/);
  await a.release('r');
  // Released, its checkpoint at 1 is confirmed: a load (and an export) starts there, a peek from before it reads the older one.
  assert.equal((await b.exportRoom('r'))?.durable.checkpoint.pos, 1);
  assert.deepEqual((await b.listRooms({ limit: 1 }))[0].checkpoint, 1);
  const behind = await b.peek('r', 0, 10);
  assert.deepEqual([behind?.from, behind?.entries.map((e) => e.pos)], [1, [1, 2]]);
  assert.equal(await a.deleteRoom('r'), true);
  assert.equal(await b.peek('r', 0, 10), undefined);
  assert.equal(await b.exportRoom('r'), undefined);
  assert.deepEqual(await b.rooms(), []);
  assert.deepEqual(await b.listRooms({ limit: 10 }), []);
  assert.equal(await a.open('r'), undefined, 'a lookup of a deleted room finds none');
  assert.deepEqual(await a.rooms(), [], 'and writes nothing that would list it');
  // Imported again under its name: the export's log, nothing of the history before the deletion.
  await a.importRoom('r', ex!);
  const again = (await a.open('r'))!;
  assert.deepEqual([again.rev, again.durable.suffix.map((e) => e.pos)], [0, [1, 2]]);
  await a.append('r', { after: 0, entries: [entry(3)] });
  await a.release('r');
  const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
  const audit = await auditRoom(log, 'r', { subjectPrefix: prefix, shards: 1 });
  assert.deepEqual([audit.problems, audit.head, audit.deletedAt > 0], [[], 3, true]);
  // The history before the deletion is still in the stream (no purge); the audit covers what follows it.
  assert.ok(audit.ignored.stale === 0 && audit.checkpoints.every((c) => c.seq > audit.deletedAt), JSON.stringify(audit));
  assert.equal((await b.listRooms({ limit: 10 }))[0].head, 3);
  await a.close();
  await b.close();
});
