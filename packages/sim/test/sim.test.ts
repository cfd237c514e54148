import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientDriver, ClientRoom, ViewEngine, RoomEngine, current, type RoomOutput } from '@hercules/core';
import { RoomHost } from '@hercules/server/pipeline';
import { InputScheduler } from '../../server/src/input-scheduler.ts';
import { Session } from '../../server/src/session.ts';
import { runSeed, Simulation, configFor, type SimConfig, type SimOptions, type SimResult } from '../src/sim.ts';
import { richImpl } from '../src/machine.ts';
import { RichEditor } from '../src/rich-edits.ts';

test('a seed replays exactly: same events, same global log', async () => {
  const run = async (seed: number) => {
    const sim = new Simulation(seed, configFor(seed));
    await sim.run();
    return { events: sim.events, now: sim.now, log: sim.global.map((e) => `${e.pos}:${e.client}:${e.seq}:${e.error ?? ''}`).join(',') };
  };
  for (const seed of [3, 11]) assert.deepEqual(await run(seed), await run(seed));
});

test('different seeds explore different faults', async () => {
  const wanted = [
    'crash',
    'disconnect',
    'server-restart',
    'stall',
    'server-crash-before-commit',
    'revoke',
    'client-revoked',
    'credential-expired',
    'room-ops-runs',
  ];
  const kinds = new Set<string>();
  // Seeds from 1 until every kind has happened (seed 6 on 2026-11-28), at most 40: `npm test` runs
  // seeds 1..300 through the checkers anyway (npm run sim), so this test asks only for the kinds.
  let s = 1;
  for (; s <= 40 && wanted.some((k) => !kinds.has(k)); s++) {
    const r = await runSeed(s);
    assert.ok(r.ok, r.error);
    for (const k of Object.keys(r.counts)) kinds.add(k);
  }
  for (const k of wanted) assert.ok(kinds.has(k), `no seed in 1..${s - 1} exercised ${k}`);
});

/**
 * Break one piece of the engine and expect the simulator to notice within a few seeds, naming one
 * of `rules`. The seeds run without a machine upgrade unless `overrides` say (the rules a planted
 * bug is expected to break first were chosen over those runs).
 */
async function expectCaught(
  patch: () => () => void,
  rules: string[],
  opts: SimOptions = {},
  overrides: Partial<SimConfig> = { upgradeAt: undefined },
  from = 1,
): Promise<void> {
  const undo = patch();
  try {
    let caught: SimResult | undefined;
    for (let s = from; s <= 60 && !caught; s++) {
      const r = await runSeed(s, overrides, opts);
      if (!r.ok) caught = r;
    }
    assert.ok(caught, 'the planted bug went unnoticed');
    assert.ok(caught.rule !== undefined && rules.includes(caught.rule), `expected a violation of ${rules.join(' or ')}, got ${caught.error}`);
    assert.ok(caught.error!.startsWith(`[${caught.rule}] `), caught.error);
  } finally {
    undo();
  }
}

const proto = (c: object) => (c as { prototype: Record<string, unknown> }).prototype;

// Without the rebase the speculative logs stop extending Authoritative: the prefix chain breaks
// first, at the same step as the fold.
test('the checker catches a client that skips the rebase after a remote op', async () => {
  await expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.rebase as () => void;
    p.rebase = function (this: { needRebase: boolean }) {
      this.needRebase = false;
    };
    return () => {
      p.rebase = orig;
    };
  }, ['VIEW-PREFIX', 'VIEW-SPECULATIVE']);
});

// A restarted client without the floor takes its text clocks from a view that may lack its own
// inserts (held but not run offline, or sent and lost in a crash): seed 1094's bug.
test('the checker catches a restarted client that takes text clocks its earlier process used', async () => {
  await expectCaught(
    () => {
      const p = proto(ViewEngine);
      const floor = p.textClockFloor;
      const check = p.checkTextClock;
      p.textClockFloor = () => 0;
      p.checkTextClock = () => {};
      return () => {
        p.textClockFloor = floor;
        p.checkTextClock = check;
      };
      // Seed 42 is the first of 1..60 to meet it since the simulator runs the room service; the
      // search starts just below it to keep the default test run short (from 1: 177 s, loaded).
    },
    ['TEXT-ID-ONCE'],
    {},
    { upgradeAt: undefined },
    40,
  );
});

// The rich text's ops, each with a bug every replica runs alike (so the states agree, and the
// views' checkers see nothing): only the rich text's own checkers can tell.
// spec: RICH-BLOCK
test('the checker catches a block op that does not overwrite an earlier one (the first op wins)', async () => {
  await expectCaught(() => {
    const orig = richImpl.richBlock;
    richImpl.richBlock = (state, a) => {
      const blocks = (state as { rich: { blocks: Record<string, unknown> } }).rich.blocks;
      if (blocks[`${a.b[0]}:${a.b[1]}`] === undefined) orig(state, a);
    };
    return () => {
      richImpl.richBlock = orig;
    };
  }, ['RICH-BLOCK']);
});

// spec: RICH-MARK
test('the checker catches a format op that drops every earlier span of its mark, not only those it covers', async () => {
  await expectCaught(() => {
    const orig = richImpl.richFormat;
    richImpl.richFormat = (state, a) => {
      orig(state, a);
      // Keep only the newest span of each mark: characters outside it lose what older spans set.
      const rich = (state as { rich: { marks: { m: string }[] } }).rich;
      const marks = current(rich.marks);
      rich.marks = marks.filter((sp, i) => sp.m !== a.m || i === marks.length - 1);
    };
    return () => {
      richImpl.richFormat = orig;
    };
  }, ['RICH-MARK']);
});

// The binding never deletes nor types before the first block's separator (ops.ts: at >= 1); an
// editor that does leaves a text that no longer opens with a block.
// spec: RICH-CONVERGE
test('the checker catches an editor that deletes the first block separator', async () => {
  await expectCaught(() => {
    const p = proto(RichEditor);
    const first = p.first;
    p.first = () => 0;
    return () => {
      p.first = first;
    };
  }, ['RICH-CONVERGE']);
});

test('the checker catches a client that claims visibility too early', async () => {
  await expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.onVisible as (seq: number) => void;
    p.onVisible = function (this: unknown, seq: number) {
      orig.call(this, seq + 1);
    };
    return () => {
      p.onVisible = orig;
    };
  }, ['VIS-DELIVERED']);
});

test('the checker catches a server that forgets deduplication', async () => {
  await expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.onOps as (s: { client: string }, ops: { seq: number }[], now: number) => void;
    p.onOps = function (this: { clients: Map<string, { highWater: number }> }, s: { client: string }, ops: { seq: number }[], now: number) {
      const rec = this.clients.get(s.client)!;
      const first = ops[0]?.seq;
      if (first !== undefined && first <= rec.highWater) rec.highWater = first - 1; // accept resends
      orig.call(this, s, ops, now);
    };
    return () => {
      p.onOps = orig;
    };
  }, ['LOG-EXACTLY-ONCE']);
});

test('the checker catches a stable frontier that ignores a lagging member', async () => {
  await expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.finish as (now: number) => unknown;
    p.finish = function (this: { stable: number; head(): number; compact(): void }, now: number) {
      const out = orig.call(this, now);
      if (this.head() > this.stable) {
        this.stable = this.head();
        this.compact();
      }
      return out;
    };
    return () => {
      p.finish = orig;
    };
  }, ['STABLE-RECEIVED']);
});

test('the checker catches a server that sends new ops before they are on disk', async () => {
  await expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.finish as (now: number) => { sendFirst: boolean };
    // Every output goes out before its commit, ops included; a crash in between loses them.
    p.finish = function (this: unknown, now: number) {
      const out = orig.call(this, now);
      out.sendFirst = true;
      return out;
    };
    return () => {
      p.finish = orig;
    };
  }, ['AUTH-STORED']);
});

test('the checker catches a room that notifies subscribers again with the same snapshot', async () => {
  // (Before the named checkers, this went unnoticed: the room catches a listener's throw.)
  await expectCaught(() => {
    const p = proto(ClientRoom);
    const orig = p.flushNotifications as () => void;
    p.flushNotifications = function (this: { notified: Map<string, unknown> }) {
      this.notified.clear();
      orig.call(this);
    };
    return () => {
      p.flushNotifications = orig;
    };
  }, ['VIEW-NOTIFY']);
});

test('the checker catches a client that takes an op for durable before its store confirmed it', async () => {
  await expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.submit as (name: string, args: unknown) => { seq: number };
    p.submit = function (this: { durable(seq: number): void }, name: string, args: unknown) {
      const op = orig.call(this, name, args);
      this.durable(op.seq);
      return op;
    };
    return () => {
      p.submit = orig;
    };
  }, ['DUR-BEFORE-SEND']);
});

test('the checker catches a room that lets a joiner count before it holds what was announced', async () => {
  await expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.onHello as (s: { status: string }, ...rest: unknown[]) => void;
    p.onHello = function (this: unknown, s: { status: string }, ...rest: unknown[]) {
      orig.call(this, s, ...rest);
      if (s.status === 'joining') s.status = 'member';
    };
    return () => {
      p.onHello = orig;
    };
    // Or, since the sixth sitting of 2026-11-28's merges, at seed 1 (which passes without the
    // plant) as receipts that never settle (LIVE-CONVERGE): the member counted too early told
    // its positions before it held what they cover.
  }, ['VIS-DELIVERED', 'VIS-JOIN-GATE', 'STABLE-RECEIVED', 'LIVE-CONVERGE']);
});

test('the checker catches a connection that loses a log frame on the way', async () => {
  await expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.receive as (msg: { t: string }) => void;
    let n = 0;
    p.receive = function (this: unknown, msg: { t: string }) {
      if (msg.t === 'log' && ++n % 50 === 0) return;
      orig.call(this, msg);
    };
    return () => {
      p.receive = orig;
    };
  }, ['LOG-FIFO']);
});

test('the checker catches a room that sends an honest client an error', async () => {
  await expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.dispatch as (s: { conn: string }, msg: { t: string }, now: number) => void;
    let n = 0;
    p.dispatch = function (this: { error(conn: string, code: string, m: string, fatal: boolean): void }, s: { conn: string }, msg: { t: string }, now: number) {
      if (msg.t === 'ack' && ++n % 100 === 0) this.error(s.conn, 'internal', 'planted', false);
      orig.call(this, s, msg, now);
    };
    return () => {
      p.dispatch = orig;
    };
  }, ['LIVE-HONEST']);
});

// The simulated clients run the real ClientDriver (as connect() does), so a bug in it is the
// simulator's to find: before, the simulator had its own copy of the persist policy.
// spec: DUR-BEFORE-SEND
test('the checker catches a client driver that reports ops durable before its store confirmed them', async () => {
  await expectCaught(() => {
    const p = proto(ClientDriver);
    const orig = p.write as () => void;
    p.write = function (this: { queue: { seq: number }[]; room: { durable(seq: number): void } }) {
      const q = this.queue;
      if (q.length) this.room.durable(q[q.length - 1].seq);
      orig.call(this);
    };
    return () => {
      p.write = orig;
    };
  }, ['DUR-BEFORE-SEND']);
});

// spec: DUR-BEFORE-SEND
test('the checker catches a client driver that lets ops go out under a reservation its store never got', async () => {
  await expectCaught(() => {
    const p = proto(ClientDriver);
    const orig = p.write as () => void;
    p.write = function (this: { queue: { seq: number }[]; room: { reserved(seq: number): void } }) {
      const q = this.queue;
      if (q.length) this.room.reserved(q[q.length - 1].seq + 1000);
      orig.call(this);
    };
    return () => {
      p.write = orig;
    };
  }, ['DUR-BEFORE-SEND']);
});

// spec: DUR-BEFORE-SEND
test('the checker catches a client driver that drops the ops of a failed write instead of retrying them', async () => {
  await expectCaught(
    () => {
      const p = proto(ClientDriver);
      const orig = p.written as (ops: unknown[], error: unknown, ...rest: unknown[]) => void;
      p.written = function (this: unknown, ops: unknown[], error: unknown, ...rest: unknown[]) {
        orig.call(this, ops, error, ...rest);
        if (error !== undefined) (this as { queue: unknown[] }).queue.splice(0, ops.length);
      };
      return () => {
        p.written = orig;
      };
      // Or the dropped ops leave a hole in the seqs the client sends, which the room refuses
      // (seq-gap, fatal for an honest client): which shows first depends on the seed's timing.
      // Receipts off: the runs as they were before receipts changed the timing of half the seeds
      // (with them, seed 1..60's first failure is a dropped op left Submitted when the run ends,
      // LIVE-CONVERGE: the same bug, told by the generic rule).
    },
    ['DUR-BEFORE-SEND', 'DUR-DELIVERED', 'LIVE-HONEST'],
    { receipts: false },
  );
});

// spec: AUTH-STORED
// The server's own pipeline runs in the simulator, so a bug in it is caught: here a host that
// takes a commit for confirmed once it has handed it to the store (fire and forget). The
// simulator before RoomHost ran its own copy of the policy and could not see this.
test('the checker catches a room host that announces a commit before the store confirmed it', async () => {
  await expectCaught(() => () => {}, ['AUTH-STORED'], {
    createHost(opts) {
      const host = new RoomHost(opts);
      const h = host as unknown as { commit(): void; sendReady(): void; confirmed: number; issued: number };
      const commit = h.commit.bind(host);
      h.commit = () => {
        commit();
        h.confirmed = h.issued;
        h.sendReady();
      };
      return host;
    },
  });
});

// spec: LOG-TENTATIVE
test('the checker catches a room host that sends entries ahead of their commit and never confirms them', async () => {
  await expectCaught(() => () => {}, ['LOG-TENTATIVE', 'LIVE-CONVERGE'], {
    createHost(opts) {
      const host = new RoomHost(opts);
      const h = host as unknown as { deliver(q: { early?: unknown }, direct: boolean): void };
      const deliver = h.deliver.bind(host);
      h.deliver = (q, direct) => deliver({ ...q, early: undefined }, direct);
      return host;
    },
  });
});

// spec: LOG-TENTATIVE
test('the checker catches a room host that sends entries ahead of their commit past a message queued before them', async () => {
  await expectCaught(() => () => {}, ['LOG-TENTATIVE', 'LOG-FIFO', 'LIVE-CONVERGE'], {
    createHost(opts) {
      const host = new RoomHost(opts);
      (host as unknown as { queuedFor: Map<string, number> }).queuedFor.get = () => undefined;
      return host;
    },
  });
});

// spec: VIS-DROP-DEAD
// A busy server: a member's acks wait in the service's input behind its burst of ops past its
// rate limit. A host that ignores what waits (RoomMember.heardUntil) deregisters it although its
// ack came in time.
test("the checker catches a room host that counts an ack waiting in the server's input as late", async () => {
  await expectCaught(() => () => {}, ['VIS-DROP-DEAD'], {
    createHost(opts) {
      const host = new RoomHost(opts);
      const join = host.join.bind(host);
      host.join = (member, principal) => join({ ...member, heardUntil: undefined }, principal);
      return host;
    },
  });
});

/** A server disk slower than the links: members ack entries sent ahead before their commit lands. */
const slowDisk: Partial<SimConfig> = { upgradeAt: undefined, diskMs: [10, 40], latencyMs: [1, 10] };

// spec: LOG-TENTATIVE, AUTH-STORED
test('a server disk slower than the links: members ack entries before their commit lands, and every rule holds', async () => {
  let ahead = 0;
  // Ten seeds (20 took 135 s of a loaded unit run): the slow disk's configuration runs nowhere else.
  for (let s = 1; s <= 10; s++) {
    const r = await runSeed(s, slowDisk);
    assert.ok(r.ok, `seed ${s} (slow disk): ${r.error}`);
    ahead += r.counts['ack-ahead-of-commit'] ?? 0;
  }
  assert.ok(ahead > 0, 'no ack came ahead of its commit');
});

// spec: AUTH-STORED
test('the checker catches a room host whose bookkeeping outputs overtake one waiting for its commit (an ack of a tentative entry counted before it is stored)', async () => {
  await expectCaught(
    () => () => {},
    ['AUTH-STORED'],
    {
      createHost(opts) {
        const host = new RoomHost(opts);
        const h = host as unknown as {
          queuedFor: Map<string, number>;
          enqueue(out: RoomOutput, at: number, done?: unknown): void;
          deliver(q: { out: RoomOutput; at: number; made: number; needs: number }, direct: boolean): void;
        };
        const enqueue = h.enqueue.bind(host);
        h.enqueue = (out, at, done) => {
          const announces = out.send.length > 0 && out.send.every((x) => x.msg.t === 'stable' || x.msg.t === 'visible');
          if (out.sendFirst && !done && announces && out.close.length === 0) {
            // Counted as queued first, as enqueue does: deliver counts each message off.
            for (const { conn } of out.send) h.queuedFor.set(conn, (h.queuedFor.get(conn) ?? 0) + 1);
            return h.deliver({ out, at, made: at, needs: 0 }, true);
          }
          enqueue(out, at, done);
        };
        return host;
      },
    },
    slowDisk,
  );
});

// spec: VIEW-TENTATIVE
test('the checker catches a client that takes a tentative entry for a stored one', async () => {
  await expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.onTentative as (from: number, entries: unknown[]) => void;
    p.onTentative = function (this: { promote(pos: number): void; tentList: { pos: number }[] }, from: number, entries: unknown[]) {
      orig.call(this, from, entries);
      const last = this.tentList[this.tentList.length - 1];
      if (last) this.promote(last.pos);
    };
    return () => {
      p.onTentative = orig;
    };
  }, ['AUTH-STORED', 'VIEW-GLOBAL-PREFIX']);
});

// spec: PRESENCE-EPHEMERAL
test('the checker catches a room that forgets a closed connection’s presence', async () => {
  // The bug shows only where a client that set presence crashes (a reconnecting one sets it
  // again, over the stale one) and does not set it again before the end: about 3 % of the
  // default seeds, so the first caught moved past 60 whenever the event order changed. With
  // crashes more frequent (and no server restarts) about a quarter of seeds catch it.
  const crashes = { rates: { submit: 0.05, disconnect: 0.0005, crash: 0.003, serverRestart: 0, slow: 0 }, upgradeAt: undefined };
  await expectCaught(
    () => {
      const p = proto(RoomEngine);
      const orig = p.drop as (s: { presence?: unknown }) => void;
      p.drop = function (this: unknown, s: { presence?: unknown }) {
        s.presence = undefined; // (so nobody is told it is gone)
        orig.call(this, s);
      };
      return () => {
        p.drop = orig;
      };
    },
    ['PRESENCE-EPHEMERAL', 'LIVE-CONVERGE'],
    {},
    crashes,
    // Seed 17 is the first of 1..60 to catch it since the rich-text edits (2026-11-28): the
    // search starts just below it (from 1 it took 203 s of a loaded unit run, 36 s before).
    15,
  );
});

// spec: LOG-ONE-HISTORY
test('seed 340: a client restarted twice past its reservations, whose older gap holds an op the server ordered, is not taken for another client', async () => {
  // Its held ops declare gaps after 1029 and after 2002; the server holds seq 1030, which the
  // process before last sent and never persisted. The client asks the server for its digest at
  // the op before each gap it holds, not only at its last restart's.
  const r = await runSeed(340);
  assert.ok(r.ok, r.error);
  assert.ok((r.counts['declared-gap'] ?? 0) > 0);
});

// spec: LOG-ONE-HISTORY
test('seed 231 on a slow disk with an upgrade: a client restarted past its reservation, whose gap the server held whole, is not taken for another client when it restarts again', async () => {
  // Its op after the gap started a new digest chain (ViewEngine.submit) while the server, holding
  // every seq in the gap, went on with the old one: the next restart's welcome compared the two
  // chains and the client stopped with client-id-conflict (found with slowDisk and an upgrade, as
  // seed 171 until protocol 6 moved the schedule; of seeds 100-400, 231 alone catches that bug
  // planted again, the server starting its chain again only at a gap real on its side).
  const r = await runSeed(231, { ...slowDisk, upgradeAt: 300 + 7 * 231 });
  assert.ok(r.ok, r.error);
  assert.ok((r.counts['declared-gap'] ?? 0) > 0);
});

// spec: REC-MIGRATE-ONCE, REC-MIGRATE-OPS, REC-MIGRATE-VIEWS
test('an upgrade in the middle of traffic: the room migrates once, clients reload on v2 (some refused first, some holding v1 ops), every rule holds', async () => {
  const totals: Record<string, number> = {};
  for (let s = 1; s <= 12; s++) {
    const r = await runSeed(s, { upgradeAt: 300 + 50 * s });
    assert.ok(r.ok, `seed ${s}: ${r.error}`);
    assert.ok((r.counts['room-migrated'] ?? 0) >= 1, `seed ${s} never migrated: ${JSON.stringify(r.counts)}`);
    for (const [k, v] of Object.entries(r.counts)) totals[k] = (totals[k] ?? 0) + v;
  }
  for (const k of ['client-too-old', 'client-reload-v2', 'client-upgraded-holding-v1', 'v1-op-translated', 'v1-op-refused'])
    assert.ok((totals[k] ?? 0) > 0, `no upgrade seed in 1..12 exercised ${k}: ${JSON.stringify(totals)}`);
});

// spec: REC-MIGRATE-OPS
test('a client reloaded on v2 takes its own v1 op, met in full in a catch-up, as the translation the server ordered (seeds 2150, 2921, 2988 found it)', async () => {
  // Each failed with client-id-conflict ("the server ordered a different op (mark) than ours
  // (stamp)") before the client compared its v1 op's translation with the entry.
  for (const s of [2150, 2921, 2988]) {
    const r = await runSeed(s);
    assert.ok(r.ok, `seed ${s}: ${r.error}`);
    assert.ok((r.counts['v1-op-translated'] ?? 0) > 0, `seed ${s} translated no v1 op: ${JSON.stringify(r.counts)}`);
  }
});

// spec: REC-MIGRATE-OPS
test('the checker catches a server that orders an op of an older version untranslated', async () => {
  await expectCaught(
    () => {
      const p = proto(RoomEngine);
      const orig = p.onOps as (this: unknown, s: unknown, ops: { v?: number }[], now: number) => void;
      p.onOps = function (this: unknown, s: unknown, ops: { v?: number }[], now: number) {
        return orig.call(
          this,
          s,
          ops.map(({ v: _v, ...op }) => op),
          now,
        );
      };
      return () => {
        p.onOps = orig;
      };
    },
    ['REC-MIGRATE-OPS'],
    {},
    { upgradeAt: 500 },
  );
});

// The room service runs in the simulator (service.ts): a bug in a session or the input scheduler
// is caught by the SEC checkers (sec-checkers.ts). Each plants one in the service's own classes.
const withUsers = (auth: Partial<NonNullable<SimConfig['auth']>>): Partial<SimConfig> => ({
  upgradeAt: undefined,
  auth: { users: 1, revokeRate: 0, revokeMs: [50, 300], ...auth },
});

test('the checker catches a service that skips a revoked user’s cut', async () => {
  await expectCaught(
    () => {
      const p = proto(Session);
      const orig = p.cut as (this: unknown, reason: string, ...rest: unknown[]) => void;
      p.cut = function (this: unknown, reason: string, ...rest: unknown[]) {
        if (reason !== 'revoked') orig.call(this, reason, ...rest);
      };
      return () => {
        p.cut = orig;
      };
    },
    ['SEC-ACCESS'],
    {},
    withUsers({ revokeRate: 0.002 }),
  );
});

// Hostile peers (hostile-peer.ts) connect in some seeds: ops before hello, or none at all.
test('the checkers catch a session that goes on after ops before its hello (its hello then joins it, and its later ops reach the room)', async () => {
  await expectCaught(() => {
    const p = proto(Session);
    const orig = p.cut as (this: unknown, reason: string, ...rest: unknown[]) => void;
    p.cut = function (this: unknown, reason: string, ...rest: unknown[]) {
      if (reason !== 'not-ready') orig.call(this, reason, ...rest);
    };
    return () => {
      p.cut = orig;
    };
  }, ['SEC-MALFORMED', 'SEC-LIMITS']);
});

test('the checker catches a session that never arms its credential’s expiry', async () => {
  await expectCaught(
    () => {
      const p = proto(Session);
      const orig = p.armExpiry as () => void;
      p.armExpiry = () => {};
      return () => {
        p.armExpiry = orig;
      };
    },
    ['SEC-AUTHN'],
    {},
    withUsers({ ttlMs: 600 }),
  );
});

test('the checker catches an input scheduler that does not wait for a connection’s tokens', async () => {
  await expectCaught(
    () => {
      const p = proto(InputScheduler);
      const orig = p.hasTokens as () => boolean;
      p.hasTokens = () => true;
      return () => {
        p.hasTokens = orig;
      };
    },
    ['SEC-LIMITS'],
    {},
    { upgradeAt: undefined, limits: { opsPerSecond: 20, opsBurst: 3 } },
  );
});

test('the checker catches a service that joins an authenticated connection without its user', async () => {
  await expectCaught(
    () => {
      const p = proto(RoomHost);
      const orig = p.join as (this: unknown, member: unknown, principal?: { user?: string }) => void;
      p.join = function (this: unknown, member: unknown, principal: { user?: string } = {}) {
        const { user: _user, ...rest } = principal;
        orig.call(this, member, rest);
      };
      return () => {
        p.join = orig;
      };
    },
    ['SEC-AUTHOR'],
    {},
    withUsers({ users: 2 }),
  );
});
