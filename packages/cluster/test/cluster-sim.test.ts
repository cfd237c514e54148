/**
 * ClusterStore simulated: three nodes' real ClusterStores over an in-memory ShardLog and
 * LeaseTable (`sim-log.ts`) on mocked timers, with the faults met on nats-server 2.9.10 (stream
 * and lease-table elections, lost acks, publishes that never land, reads from a server that is
 * behind, lease revisions that go back, two winners of one create) plus node crashes. A writer
 * loads the room through whichever node will have it and appends one entry per append, as a
 * room host does. Named checkers, on what a fresh reader finds at the end:
 *   [CL-KEPT]    every append a node confirmed is in the room at the rev it was confirmed at;
 *   [CL-ONE]     no two appends were confirmed at one rev;
 *   [CL-ONCE]    no append is in the room twice;
 *   [CL-LOADS]   the room loads once the faults stop.
 *
 * Seeds: CLUSTER_SIM_SEEDS (default 12) from CLUSTER_SIM_FIRST (default 1); one seed:
 *   CLUSTER_SIM_SEED=n node --conditions=@hercules/source --import tsx --test packages/cluster/test/cluster-sim.test.ts
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '@hercules/core';
import { systemClock } from '@hercules/server/pipeline';
import { ClusterStore } from '../src/cluster-store.ts';
import { Rng } from '@hercules/test-utils';
import { SimLeaseTable, SimShardLog } from '../src/sim-log.ts';
import type { LeaseTable, ShardLog } from '../src/shard-log.ts';

const INIT = { machine: 'm', version: 1, initial: { tags: [] as string[] } };
const TTL = 1000;

interface Outcome {
  /** Violations seen while it ran ([CL-ONE]). */
  violations: string[];
  confirmed: Map<number, string>;
  final: string[];
  stats: Record<string, number>;
}

/** A node's way to the log and the lease table, cut when the node crashes (nothing it sends arrives any more). */
function cuttable<T extends object>(inner: T): { proxy: T; cut: () => void } {
  let dead = false;
  const proxy = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => (dead ? new Promise(() => {}) : v.apply(target, args));
    },
  });
  return { proxy, cut: () => (dead = true) };
}

async function simulate(seed: number, virtualMs = 30_000): Promise<Outcome> {
  const rng = new Rng(seed).source();
  const now = () => Date.now();
  const log = new SimShardLog(rng, now, { failBeforeLanding: 0.01, loseAck: 0.02, staleRead: 0.2, maxLag: 6, maxAckMs: 3 }, { subjectPrefix: 'sim' });
  const leases = new SimLeaseTable(TTL, rng, now, { goBack: 0.05, doubleCreate: 0.2 });
  const stats: Record<string, number> = { appends: 0, confirmed: 0, failed: 0, loads: 0, crashes: 0, elections: 0, leaseElections: 0 };

  interface Node {
    store: ClusterStore;
    cut: () => void;
  }
  let made = 0;
  const makeNode = (): Node => {
    const l = cuttable<ShardLog>(log);
    const t = cuttable<LeaseTable>(leases);
    const store = new ClusterStore({
      log: l.proxy,
      leases: t.proxy,
      nodeId: `n${made++}`,
      shards: 1,
      subjectPrefix: 'sim',
      checkpointEvery: 7,
      leaseMarginMs: 200,
      leaseGraceMs: 3000,
      clock: { ...systemClock, now },
    });
    return {
      store,
      cut: () => {
        l.cut();
        t.cut();
      },
    };
  };
  const nodes = [makeNode(), makeNode(), makeNode()];
  const confirmed = new Map<number, string>();
  const violations: string[] = [];
  let tagN = 0;

  // The writer: loads through a random node, then appends (up to 3 in flight) until one fails.
  let session: { node: Node; rev: number; head: number; tags: string[]; inFlight: number; broken: boolean } | undefined;
  let loading: Node | undefined;
  const step = () => {
    if (!session && !loading) {
      const node = nodes[Math.floor(rng() * nodes.length)];
      loading = node;
      node.store.open('r', INIT).then(
        (loaded) => {
          stats.loads++;
          const tags = [...(loaded.durable.checkpoint.state as { tags: string[] }).tags, ...loaded.durable.suffix.map((e) => (e.args as { tag: string }).tag)];
          if (loading === node)
            session = { node, rev: loaded.rev, head: loaded.durable.checkpoint.pos + loaded.durable.suffix.length, tags, inFlight: 0, broken: false };
          if (loading === node) loading = undefined;
        },
        (e) => {
          if (loading === node) loading = undefined;
          if (process.env.CLUSTER_SIM_DEBUG) console.log(`# open failed at ${Date.now()}: ${(e as Error).message}`);
        },
      );
      return;
    }
    if (!session || session.broken || session.inFlight >= 3) return;
    const s = session;
    const tag = `t${++tagN}`;
    const pos = s.head + 1;
    const e: LogEntry = { pos, client: 'c1', seq: pos, name: 'add', args: { tag }, author: 'c1' } as LogEntry;
    s.head = pos;
    s.tags = [...s.tags, tag];
    const after = s.rev++;
    const checkpoint = rng() < 0.15 ? { pos, state: Object.freeze({ tags: s.tags }) } : undefined;
    s.inFlight++;
    stats.appends++;
    s.node.store.append('r', { after, entries: [e], ...(checkpoint ? { checkpoint } : {}) }).then(
      (a) => {
        s.inFlight--;
        stats.confirmed++;
        const was = confirmed.get(a.rev);
        if (was !== undefined) violations.push(`[CL-ONE] seed ${seed}: rev ${a.rev} confirmed twice (${was}, then ${tag})`);
        else confirmed.set(a.rev, tag);
      },
      () => {
        s.inFlight--;
        stats.failed++;
        s.broken = true;
        if (session === s) session = undefined; // reload, as a room host does
      },
    );
  };

  const flush = async () => {
    for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
  };
  for (let t = 0; t < virtualMs && violations.length === 0; t++) {
    if (t % 5 === 0) step();
    const r = rng();
    if (r < 0.0004) {
      stats.elections++;
      log.elect(0, 300 + Math.floor(rng() * 5000));
    } else if (r < 0.0007) {
      stats.leaseElections++;
      leases.elect(300 + Math.floor(rng() * 5000));
    } else if (r < 0.0009) {
      // A node crashes (nothing it sends arrives any more) and a new one starts in its place.
      stats.crashes++;
      const i = Math.floor(rng() * nodes.length);
      nodes[i].cut();
      if (session?.node === nodes[i]) session = undefined;
      if (loading === nodes[i]) loading = undefined; // its open never answers now
      nodes[i] = makeNode();
    }
    await flush();
    mock.timers.tick(1);
  }
  // Heal: let every election end and every lease of a crashed node expire; close the live nodes.
  for (let t = 0; t < 6000; t++) {
    await flush();
    mock.timers.tick(1);
  }
  const closing = Promise.all(nodes.map((n) => n.store.close()));
  for (let t = 0; t < 10_000 && !(await Promise.race([closing.then(() => true), flush().then(() => false)])); t++) mock.timers.tick(1);
  await closing;

  const reader = makeNode();
  let final: string[] | undefined;
  // Open until it loads, for up to a minute of virtual time (a failed open is retried 200 ms later).
  const giveUpAt = Date.now() + 60_000;
  let lastError = '';
  while (!final && Date.now() < giveUpAt) {
    let done = false;
    reader.store
      .open('r')
      .then(
        (loaded) => {
          if (!loaded) {
            // Never created is fine only if no load ever succeeded.
            if (stats.loads > 0) violations.push(`[CL-LOADS] seed ${seed}: the room, loaded ${stats.loads} times, is not found`);
            final = [];
            return;
          }
          final = [...(loaded.durable.checkpoint.state as { tags: string[] }).tags, ...loaded.durable.suffix.map((e) => (e.args as { tag: string }).tag)];
        },
        (e) => {
          lastError = (e as Error).message;
        },
      )
      .finally(() => {
        done = true;
      });
    while (!done && Date.now() < giveUpAt) {
      await flush();
      mock.timers.tick(1);
    }
    for (let k = 0; k < 200 && !final; k++) mock.timers.tick(1);
  }
  assert.ok(final, `[CL-LOADS] seed ${seed}: the room did not load within a minute after the faults stopped (last error: ${lastError})`);
  reader.store.close().catch(() => {});
  for (let k = 0; k < 100; k++) {
    await flush();
    mock.timers.tick(1);
  }
  return { violations, confirmed, final, stats: { ...stats, ...prefixed('log.', log.stats), ...prefixed('lease.', leases.stats) } };
}

function prefixed(p: string, o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [p + k, v]));
}

function check(seed: number, o: Outcome): void {
  const replay = `CLUSTER_SIM_SEED=${seed} node --conditions=@hercules/source --import tsx --test packages/cluster/test/cluster-sim.test.ts`;
  assert.deepEqual(o.violations, [], `replay: ${replay}`);
  for (const [rev, tag] of o.confirmed)
    assert.equal(o.final[rev - 1], tag, `[CL-KEPT] seed ${seed}: ${tag}, confirmed at rev ${rev}, is not there (found ${o.final[rev - 1]}); replay: ${replay}`);
  const seen = new Set<string>();
  for (const t of o.final) {
    assert.ok(!seen.has(t), `[CL-ONCE] seed ${seed}: ${t} is in the room twice; replay: ${replay}`);
    seen.add(t);
  }
}

const one = process.env.CLUSTER_SIM_SEED;
const first = Number(process.env.CLUSTER_SIM_FIRST ?? 1);
const seeds = one ? [Number(one)] : Array.from({ length: Number(process.env.CLUSTER_SIM_SEEDS ?? 12) }, (_, i) => first + i);

test(`ClusterStore under simulated NATS faults and node crashes: ${seeds.length} seeds`, async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 1_000_000 });
  const totals: Record<string, number> = {};
  try {
    for (const seed of seeds) {
      if (process.env.CLUSTER_SIM_DEBUG) console.log(`# seed ${seed}`);
      const o = await simulate(seed);
      check(seed, o);
      for (const [k, v] of Object.entries(o.stats)) totals[k] = (totals[k] ?? 0) + v;
      totals.finalLength = (totals.finalLength ?? 0) + o.final.length;
      if (o.stats.loads === 0 && process.env.CLUSTER_SIM_DEBUG) console.log(`# seed ${seed}: never loaded`);
      if (o.stats.loads === 0) totals.seedsNeverLoaded = (totals.seedsNeverLoaded ?? 0) + 1;
    }
  } finally {
    mock.timers.reset();
  }
  // The faults happened, and the room still moved: otherwise the checks above prove little.
  for (const k of ['confirmed', 'failed', 'crashes', 'elections', 'leaseElections', 'log.lostAcks', 'log.staleReads', 'lease.wentBack', 'lease.doubleCreates'])
    assert.ok((totals[k] ?? 0) > 0 || seeds.length < 5, `no ${k} over ${seeds.length} seeds: ${JSON.stringify(totals)}`);
  console.log(`# cluster sim: ${JSON.stringify(totals)}`);
  assert.ok((totals.seedsNeverLoaded ?? 0) <= seeds.length / 10, `the room never loaded in ${totals.seedsNeverLoaded} of ${seeds.length} seeds`);
});
