/**
 * The simulator's cluster mode: the room on 2-3 nodes over a simulated replicated log, each node
 * running the room service over its own real ClusterStore. A seed replays exactly, the
 * faults happen, every checker's hooks are reached, and stores that break the cluster's rules
 * (planted through the log every node sees) are caught, naming a rule.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RECORD_HEADERS, type ShardLog } from '@hercules/cluster/pipeline';
import type { Checker, Hooks } from '../src/checkers.ts';
import { Session } from '../../server/src/session.ts';
import { CHECKERS, configFor, runSeed, Simulation, type SimResult } from '../src/sim.ts';

const CLUSTER = { cluster: true };

test('a cluster seed replays exactly: same events, same global log', async () => {
  const run = async (seed: number) => {
    const sim = new Simulation(seed, configFor(seed, {}, CLUSTER));
    await sim.run();
    return { events: sim.events, now: sim.now, log: sim.global.map((e) => `${e.pos}:${e.client}:${e.seq}:${e.error ?? ''}`).join(',') };
  };
  for (const seed of [3, 17]) {
    const a = await run(seed);
    assert.ok(a.log.length > 0, `seed ${seed} ordered nothing`);
    assert.deepEqual(await run(seed), a);
  }
});

// spec: CLUSTER-ONE-SEQUENCER, CLUSTER-CHAIN
test('cluster seeds pass every checker, and between them every fault happens and the room moves between nodes', async () => {
  const wanted = [
    'cluster-node-crash',
    'cluster-node-pause',
    'cluster-partition',
    'cluster-election',
    'cluster-lease-election',
    'cluster-relay-open',
    'cluster-shard-lost',
    'room-failed',
    'client-watchdog',
  ];
  const kinds = new Map<string, number>();
  // From seed 1, up to 120, until every kind of fault has happened. The rarer ones (a pause
  // longer than a client's watchdog) fall where the seeds' schedules put them, and any change to
  // what the servers send moves those schedules. `npm test` runs seeds 1..100 through every
  // checker anyway (npm run sim -- --cluster), so this test asks only for the kinds.
  let s = 1;
  for (; s <= 120 && wanted.some((k) => !kinds.get(k)); s++) {
    const r = await runSeed(s, {}, CLUSTER);
    assert.ok(r.ok, `seed ${s}: ${r.error}`);
    for (const [k, v] of Object.entries(r.counts)) kinds.set(k, (kinds.get(k) ?? 0) + v);
  }
  for (const k of wanted) assert.ok((kinds.get(k) ?? 0) > 0, `no seed in 1..${s - 1} exercised ${k}: ${JSON.stringify(Object.fromEntries(kinds))}`);
});

test('in cluster mode the simulation reaches the cluster hooks: a node loading the room, a node announcing to a client', async () => {
  const kinds = ['step', 'sequenced', 'sent', 'serverStarted', 'roomLoaded', 'announced', 'end'] as const;
  const calls = Object.fromEntries(kinds.map((k) => [k, 0])) as Record<(typeof kinds)[number], number>;
  const loaders = new Set<string>();
  const spy: Checker = {
    rule: 'TEST-SPY',
    description: 'counts the hooks the simulation calls',
    create: () =>
      Object.fromEntries(
        kinds.map((k) => [
          k,
          (...args: unknown[]) => {
            calls[k]++;
            if (k === 'roomLoaded') loaders.add(args[1] as string);
          },
        ]),
      ) as Hooks,
  };
  for (let seed = 1; seed <= 20 && loaders.size < 2; seed++) {
    const sim = new Simulation(seed, configFor(seed, {}, CLUSTER), [...CHECKERS, spy]);
    await sim.run();
  }
  for (const k of kinds) assert.ok(calls[k] > 0, `the simulation never called ${k}`);
  assert.ok(loaders.size >= 2, `the room was loaded by ${[...loaders].join(', ')} only`);
});

/** Run cluster seeds `from`..`to` with a planted log until one fails; expect it to name one of `rules`. */
async function expectCaught(plant: (log: ShardLog) => ShardLog, rules: string[], from = 1, to = 120): Promise<SimResult> {
  let caught: SimResult | undefined;
  for (let s = from; s <= to && !caught; s++) {
    const r = await runSeed(s, {}, { cluster: true, clusterLog: plant });
    if (!r.ok) caught = r;
  }
  assert.ok(caught, 'the planted bug went unnoticed');
  assert.ok(caught.rule !== undefined && rules.includes(caught.rule), `expected a violation of ${rules.join(' or ')}, got ${caught.error}`);
  return caught;
}

/** A log whose calls all go to `log` except those `over` replaces. */
function wrap(log: ShardLog, over: Partial<ShardLog>): ShardLog {
  return new Proxy(log, {
    get: (target, prop, receiver) => (prop in over ? over[prop as keyof ShardLog] : Reflect.get(target, prop, receiver)),
  });
}

// spec: CLUSTER-CHAIN, AUTH-STORED
// A client library that answered every publish at the sequence it was expected at (whatever it
// landed at): the owner then takes appends for confirmed that landed after another node's claim
// (or not in one run), and announces entries that are not on the chain.
test('the simulator catches a store that confirms appends whose acks were not where it predicted', async () => {
  const r = await expectCaught(
    (log) =>
      wrap(log, {
        publish: (shard, subject, data, opts) =>
          log.publish(shard, subject, data, opts).then(
            (ack) => (opts.expectLastSeq !== undefined ? { seq: opts.expectLastSeq + 1, duplicate: false } : ack),
            (e) => {
              // A refused expectation answered as if it had landed where expected.
              if (opts.expectLastSeq !== undefined && /wrong last sequence/.test(String((e as Error).message)))
                return { seq: opts.expectLastSeq + 1, duplicate: false };
              throw e;
            },
          ),
      }),
    ['CLUSTER-CHAIN', 'AUTH-STORED', 'VIEW-GLOBAL-PREFIX', 'OP-VERDICT', 'LOG-FIFO', 'LIVE-HONEST', 'LIVE-CONVERGE', 'DUR-DELIVERED', 'STABLE-CHECKPOINT'],
  );
  assert.ok(r.error!.startsWith(`[${r.rule}] `), r.error);
});

/** Hide the claims from the read a node makes before its first claim: it then claims under epoch 1 first (the previous store did). */
const firstClaimBlind = (log: ShardLog) => (shard: number, subject: string, from?: number, until?: number) =>
  subject.endsWith('.claim') && until === undefined ? Promise.resolve([]) : log.read(shard, subject, from, until);

// spec: CLUSTER-CHAIN
// The previous store, as the cluster simulator found it: a node taking a shard first claimed it
// under epoch 1 (it did not read the claims before), messages were judged by their epoch (so a
// claim of a lower epoch fenced nothing) and loads started from the newest such checkpoint,
// confirmed or not. A junk claim could take the place of an owner's append while the checkpoint
// right behind it landed: the next owner loaded entries the log never got. Reproduced by hiding
// the claims from the read before a first claim, and the claim headers from every reader (which
// then fall back to the rule for old data).
test('the simulator catches the previous store: a checkpoint whose appends never landed, loaded', async () => {
  const r = await expectCaught(
    (log) =>
      wrap(log, {
        read: (shard, subject, from, until) =>
          firstClaimBlind(log)(shard, subject, from, until).then((msgs) =>
            msgs.map((m) => {
              const { [RECORD_HEADERS.claim]: _claim, ...headers } = m.headers;
              return { ...m, headers };
            }),
          ),
      }),
    // The text's checkers read the same broken fold: at seed 620 an insert anchored on text whose
    // appends the log lost lands where its author never saw it, and TEXT-NO-INTERLEAVE is the
    // first to say so (the same seed without the plant passes).
    [
      'CLUSTER-CHAIN',
      'AUTH-STORED',
      'LOG-CONTIGUOUS',
      'VIEW-GLOBAL-PREFIX',
      'LIVE-HONEST',
      'LIVE-CONVERGE',
      'STABLE-CHECKPOINT',
      'TEXT-NO-INTERLEAVE',
      'TEXT-INTACT',
      'TEXT-CONVERGE',
      // Since cluster seeds run the room service (and its SEC checkers), the first seed the plant
      // fails (674; it passes without the plant) fails SEC-LIMITS first: a room got an ops frame
      // from a connection before it joined that room. How the broken fold leads there is not
      // yet traced (an open item of issue 42's notes).
      'SEC-LIMITS',
      // Since the sixth sitting of 2026-11-28 (a shard handed over is taken at once, placement
      // refreshed on a hand-off), the first seed the plant fails (754; it passes without the
      // plant) says it as a welcome from a node that holds no claim on the shard: the blind
      // claim read's other face.
      'CLUSTER-ONE-SEQUENCER',
    ],
    // About one seed in 200 meets it (measured: 341, 445, 616, 680, 1354 of 1..2000, before the
    // simulated clients edited a text; 620 since; 652 since the simulator runs the room service; 674 since cluster seeds run it too).
    // The search starts just below the first so that the default test run stays short (from 330 it
    // took 590 s on a loaded machine); a change that moves it only makes the search longer.
    640,
    1400,
  );
  assert.ok(r.error!.startsWith(`[${r.rule}] `), r.error);
});

// spec: CLUSTER-CHAIN
// The same claims under epoch 1 with the replay rule as it is (a message counts only under the
// last claim before it, a load starts from a confirmed checkpoint): they fence, and lose nothing.
test('claims made under too low an epoch (a node that read the claims short) break nothing under the claim rule', async () => {
  // 40 seeds in the default test run (100 took 214 s on a loaded machine); the plain cluster seeds
  // of `npm run test:long` cover the rest of the schedule space without the plant.
  for (let s = 330; s < 370; s++) {
    const r = await runSeed(s, {}, { cluster: true, clusterLog: (log) => wrap(log, { read: firstClaimBlind(log) }) });
    assert.ok(r.ok, `seed ${s}: ${r.error}`);
  }
});

// spec: CLUSTER-ONE-SEQUENCER
test('a node that gets its lease back after another node claimed and wrote gives the shard up (seed 1795: it served a joiner a stale log)', async () => {
  // n2 claimed and appended while n1 was cut off; n1 then took the lapsed lease back and, with
  // its rooms still in memory, welcomed a client with a log that ended before n2's entries.
  const r = await runSeed(1795, {}, CLUSTER);
  assert.ok(r.ok, r.error);
});

// spec: CLUSTER-ONE-SEQUENCER
// Seeds 692 and 5375 (with 5 clients), found outside the default range: a node paused (692) or cut
// off (5375), still within its lease by its own clock, while the lease table let another node take
// the shard (a create that won while the node's lease was live); it then welcomed a joiner from
// the room in its memory with a log older than the one the joiner had seen (VIEW-SPECULATIVE,
// STABLE-MONOTONIC). A join served from memory now waits for a fenced barrier
// (ClusterStore.confirmWriter). Their draws changed with the fix (the barriers draw from the
// log's faults); packages/cluster/test/cluster-store-sim.test.ts meets the case directly.
test('a node that lost its shard without knowing it does not welcome a joiner from memory (seeds 692, 5375)', async () => {
  for (const [seed, clients] of [
    [692, undefined],
    [5375, 5],
  ] as const) {
    const r = await runSeed(seed, clients ? { clients } : {}, CLUSTER);
    assert.ok(r.ok, `seed ${seed}: ${r.error}`);
  }
});

// spec: CLUSTER-CHAIN
// Seed 5171 (found in a campaign of seeds 5000-5299): the machine's v2 was deployed before any node
// created the room; a v2 node created it but lost the ack of its creating checkpoint, so no load
// was `fresh`, and the simulator's reference kept v1's initial state at position 0 and took the next
// owner's v2 checkpoint there for a broken chain. The reference now switches on any load at 0
// under another created version (a migrated room keeps its created version, so this hides none).
// Since cluster seeds run the room service their draws changed, and 5171 no longer creates the
// room under v2: 5003, the first seed from 5000 that does (this test checks that such a seed
// passes, not that its creating node lost the checkpoint's ack).
test("a room created under v2 whose creating node never heard its checkpoint land is v2's from position 0 (seed 5171, now 5003)", async () => {
  const r = await runSeed(5003, {}, CLUSTER);
  assert.ok(r.ok, r.error);
  assert.ok((r.counts['room-created-v2'] ?? 0) > 0, `the seed no longer creates the room under v2: ${JSON.stringify(r.counts)}`);
});

// spec: LIVE-CONVERGE
// Seed 5236 (found in a campaign of seeds 5000-5299): the owner took the shard for a client's
// first relay attempts only after the edge had given up on them and relayed the client through a
// later one; those late accepts replaced the later attempt at the owner (the simulator keyed an
// owner's relayed connections by the client's connection, relay.ts keys them by attempt), which
// closed it without a word to the edge, so the client, its hello sent, stayed connecting. The
// seed's draws have changed since and no longer meet the case; answering every connection's first
// relay attempt 1.5 s late (past the edge's 1 s timeout) meets it in most seeds (without the
// fix, seeds 1, 3, 5, 8 and 11 of these never converged).
test('an owner answering a relay attempt the edge gave up on does not take over the attempt it relays through (seed 5236)', async () => {
  const r = await runSeed(5236, {}, CLUSTER);
  assert.ok(r.ok, r.error);
  let late = 0;
  for (let s = 1; s <= 12; s++) {
    const r = await runSeed(s, {}, { cluster: true, clusterRelayDelay: (_conn, attempt) => (attempt === 1 ? 1500 : 0) });
    assert.ok(r.ok, `seed ${s}, every first relay attempt answered 1.5 s late: ${r.error}`);
    late += r.counts['cluster-relay-late-accept'] ?? 0;
  }
  assert.ok(late > 0, 'no relay attempt was answered after a later one: the planted delay no longer meets the case');
});

// SEC-MALFORMED and SEC-LIMITS on cluster seeds.
// Each node runs the room service (service.ts): a session bug is caught by a cluster seed. The
// plant is the single-server one of sim.test.ts, a session that goes on after ops before its
// hello; hostile peers connect to the nodes in a third of the seeds (seed 3 catches it: a
// no-hello peer left open to the end of the run).
test('a cluster seed catches a session that goes on after ops before its hello', async () => {
  const p = (Session as unknown as { prototype: Record<string, unknown> }).prototype;
  const orig = p.cut as (this: unknown, reason: string, ...rest: unknown[]) => void;
  p.cut = function (this: unknown, reason: string, ...rest: unknown[]) {
    if (reason !== 'not-ready') orig.call(this, reason, ...rest);
  };
  try {
    let caught: SimResult | undefined;
    for (let s = 1; s <= 20 && !caught; s++) {
      const r = await runSeed(s, {}, CLUSTER);
      if (!r.ok) caught = r;
    }
    assert.ok(caught, 'the planted session bug went unnoticed');
    assert.ok(caught.rule === 'SEC-MALFORMED' || caught.rule === 'SEC-LIMITS', `expected SEC-MALFORMED or SEC-LIMITS, got ${caught.error}`);
  } finally {
    p.cut = orig;
  }
});
