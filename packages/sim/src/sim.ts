/**
 * Deterministic simulation of N Hercules clients and one room server (or, with `cluster`, the
 * room on a cluster of nodes over a replicated log: cluster.ts), driven by one seed.
 *
 * Everything runs on a simulated clock in one event queue: per-link latency and jitter with
 * FIFO per connection, disconnects that drop what is in flight, client crashes that lose
 * volatile state and keep what the simulated disk confirmed, client and server restarts, slow
 * clients that trip the ack timeout. Each client is a ClientRoom under the real ClientDriver
 * (the one connect() runs), whose clock is the event queue and whose store is the simulated disk
 * (which may fail a write). The named checkers (checkers.ts, one per rule of
 * docs/spec.md) run after every event and wherever something observable happens; the first
 * violation stops the run naming its rule, and the seed replays it exactly.
 *
 * The server is the room service the server runs (`createRoomService`, service.ts): admission
 * with the authenticate and access hooks, a session per connection (its inbox, token buckets,
 * hello and credential-expiry timers, flow control, membership) and the input scheduler (fair
 * rounds, the decoding budget, ops frames handed to the room in runs), over its RoomRegistry and
 * RoomHost, over a MemoryStore whose appends land after a simulated disk latency. Its Clock is
 * the simulated one (moving on with the ops the server executes, serverOpMs), its connections
 * simulated ones that carry the wire format's bytes. So hello, join, chunking, limits,
 * revocation and credential expiry run here, and what the checkers check is the code the server
 * runs, not a copy of its policy. In cluster mode each node runs the same service over its
 * `ClusterStore` (cluster.ts), serving the connections routed to it by the cluster's rule and
 * those relayed to it; its seeds authenticate users, revoke access, run small op rates and add
 * hostile peers as single-server seeds do (credentials do not expire there: a paused node's
 * expiry timer fires late). Store completions and admission are promises: after an event that
 * settles one, the run lets the reactions to it run (microtasks) before the next event, so a
 * run is still one deterministic sequence.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  ClientDriver,
  ClientRoom,
  HerculesError,
  applyOp,
  deepFreeze,
  isMigrationEntry,
  migrateState,
  textIndexOf,
  textNextClock,
  type BaseSnapshot,
  type Batching,
  type ClientMessage,
  type Clock,
  type DriverStore,
  type LogEntry,
  type OpHandle,
  type OpRecord,
  type RoomEngine,
  type ServerMessage,
} from '@hercules/core';
import {
  MemoryDisk,
  MemoryStore,
  type Appended,
  type LoadedRoom,
  type RoomAppend,
  type RoomHost,
  type RoomInit,
  type RoomRegistryOptions,
  type RoomStore,
} from '@hercules/server/pipeline';
import { Rng } from './rng.ts';
import { LEDGERS, ledger, ledgerAt, type ledgerV2, work, type AnyLedgerState, type Ledger } from './machine.ts';
import { API_AUTHOR, CHECKERS, Checks, Violation, type Checker, type ClientState, type SimState } from './checkers.ts';
import { ClusterServer, clusterConfigFor, type ClusterConfig } from './cluster.ts';
import type { ShardLog } from '@hercules/cluster/pipeline';
import type { Limits } from '@hercules/server';
import { ServiceLinks, SimAuth, type AuthConfig, type ClientEnd, type SimCredential } from './service.ts';
import { hostilePeer, type HostilePeer } from './hostile-peer.ts';
import { RichEditor, type RichRoom } from './rich-edits.ts';

export { CHECKERS, Violation };

export interface SimConfig {
  clients: number;
  /** Simulated ms of random activity before healing and checking convergence. */
  activeMs: number;
  ackTimeoutMs: number;
  latencyMs: [number, number];
  jitterMs: number;
  diskMs: [number, number];
  batching: Batching;
  /** Per-ms probabilities of each kind of event. */
  rates: { submit: number; disconnect: number; crash: number; serverRestart: number; slow: number };
  /**
   * Probability, per append the server makes, that it dies right then: its clients got what it
   * had sent (bookkeeping outputs go out before their commit: RoomOutput.sendFirst), the disk
   * never gets the append nor any after it.
   */
  crashBeforeCommit: number;
  /** Probability that a client->server frame is delivered twice (a retrying transport or proxy). */
  duplicateFrame: number;
  /** Probability that a client's disk write fails (nothing written; the driver retries). */
  diskFailure: number;
  /** The client driver's base period (ClientDriverOptions.baseEveryMs). */
  baseEveryMs: number;
  /** Check the reference fold of speculative views every `deepCheckEvery` events (1 = always). */
  deepCheckEvery: number;
  /** The server writes a checkpoint once the stable frontier is this many ops past the stored one. */
  checkpointEvery: number;
  /** The server unloads the room this long after its last member left (Infinity: never). */
  idleUnloadMs: number;
  /** Cluster mode: the room on N nodes over a replicated log (cluster.ts); absent, one server over one disk. */
  cluster?: ClusterConfig;
  /**
   * Client stores reserve seqs in blocks of this many (ClientDriverOptions.seqBlock), so ops go
   * out before they are durable; 0: stores without reservations, ops go out once durable
   * (both DUR-BEFORE-SEND).
   */
  seqBlock: number;
  /**
   * Simulated ms into the load at which the server restarts running `ledgerV2` (docs/migrations.md):
   * the room migrates as it loads, clients on v1 are refused `client-too-old` and reload with v2
   * code over their disk at random later moments, some offline holding v1 ops. Absent: no upgrade.
   */
  upgradeAt?: number;
  /**
   * Authentication (SEC-AUTHN, SEC-AUTHOR, SEC-ACCESS): clients connect as users, credentials may
   * expire, a backend revokes users' access now and then. Absent: anonymous clients.
   */
  auth?: AuthConfig;
  /** The room service's limits in this run (SEC-LIMITS); absent ones are the defaults. */
  limits: Partial<Limits>;
  /**
   * A server process's clock moves on by this many ms for each op its code executes within an
   * event (0: it stands still within an event), so the input scheduler's turns and rounds end
   * and an ops frame is handed to the room in runs (chunks), as on a loaded server.
   */
  serverOpMs: number;
}

export interface SimResult {
  seed: number;
  ok: boolean;
  /** The rule of docs/spec.md the run broke (absent for a crash of the simulator or an engine). */
  rule?: string;
  error?: string;
  events: number;
  submitted: number;
  sequenced: number;
  simMs: number;
  config: SimConfig;
  counts: Record<string, number>;
}

/** SIM_TRACE=1: print every event as it runs (time, number, label), to follow a replayed seed. */
const TRACE = Boolean(process.env.SIM_TRACE);

/** What a store gives back: the JSON text of what it was given. */
const fromJson = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/**
 * Pick a configuration from the seed, so one number reproduces a run. `cluster`: run the room on
 * a cluster of nodes over a replicated log (its configuration drawn from the seed too).
 */
export function configFor(seed: number, overrides: Partial<SimConfig> = {}, mode: { cluster?: boolean } = {}): SimConfig {
  const r = new Rng(seed ^ 0x5eed);
  const batchingKind = r.int(0, 2);
  const batching: Batching =
    batchingKind === 0 ? 'off' : batchingKind === 1 ? { intervalMs: r.int(5, 60) } : { auto: true, budgetMs: r.pick([0, 0.05, 0.5]), intervalMs: r.int(5, 40) };
  const lo = r.int(1, 40);
  return {
    clients: r.int(2, 5),
    activeMs: r.int(1500, 4000),
    ackTimeoutMs: r.pick([150, 300, 600, 2000]),
    latencyMs: [lo, lo + r.int(0, 60)],
    jitterMs: r.int(0, 15),
    diskMs: [r.pick([0, 1]), r.int(1, 8)],
    batching,
    rates: {
      submit: r.pick([0.02, 0.05, 0.1]),
      disconnect: r.pick([0, 0.0005, 0.002]),
      crash: r.pick([0, 0.0003, 0.001]),
      serverRestart: r.pick([0, 0.0002, 0.0006]),
      slow: r.pick([0, 0.0005, 0.001]),
    },
    duplicateFrame: r.pick([0, 0, 0.02, 0.1]),
    crashBeforeCommit: r.pick([0, 0, 0.002, 0.01]),
    diskFailure: r.pick([0, 0, 0.02, 0.1]),
    baseEveryMs: r.pick([0, 20, 200, 2000]),
    deepCheckEvery: 1,
    checkpointEvery: r.pick([1, 1, 4, 50]),
    idleUnloadMs: r.pick([Infinity, Infinity, 100]),
    // Drawn last: a seed's other choices are the same with or without it.
    ...(mode.cluster ? { cluster: clusterConfigFor(r), crashBeforeCommit: 0 } : {}),
    seqBlock: r.pick([0, 2, 5, 1000, 1000]),
    ...upgradeFor(seed),
    ...(mode.cluster ? clusterSecurityFor(seed) : securityFor(seed)),
    ...overrides,
  };
}

/**
 * Whether (and when) a seed upgrades its machine mid-run: drawn from a stream of its own, so the
 * seed's other choices are the same either way. About a third of the seeds upgrade.
 */
function upgradeFor(seed: number): Pick<SimConfig, 'upgradeAt'> {
  const u = new Rng(seed ^ 0x0b9a2);
  return u.chance(0.35) ? { upgradeAt: u.int(100, 1400) } : {};
}

/**
 * Whether (and how) a seed authenticates its clients and limits their rates: drawn from a stream
 * of its own, so the seed's other choices are the same either way. Half the seeds authenticate
 * (some with credentials that expire, some with revocations); a third run small op rates.
 */
function securityFor(seed: number): Pick<SimConfig, 'auth' | 'limits' | 'serverOpMs'> {
  const r = new Rng(seed ^ 0x5ec0);
  const auth: AuthConfig | undefined = r.chance(0.5)
    ? {
        users: r.int(1, 3),
        ...(r.chance(0.5) ? { ttlMs: r.pick([600, 1200, 2500]) } : {}),
        revokeRate: r.pick([0, 0.0003, 0.001]),
        revokeMs: [50, r.pick([300, 1500])],
      }
    : undefined;
  const limits: Partial<Limits> = r.chance(0.3) ? { opsPerSecond: r.pick([20, 60, 200]), opsBurst: r.pick([3, 20, 100]) } : {};
  return { ...(auth ? { auth } : {}), limits, serverOpMs: r.pick([0, 0.02, 0.3, 1]) };
}

/**
 * A cluster seed's users and limits: securityFor's, without credentials that expire, and with
 * the nodes' clocks not moved by the ops they execute. A paused node (SIGSTOP) runs its timers
 * once it resumes, so an expiry it closes late cannot be told from a session that never closes
 * it (SEC-AUTHN holds the close to the credential's moment).
 */
function clusterSecurityFor(seed: number): Pick<SimConfig, 'auth' | 'limits' | 'serverOpMs'> {
  const { auth, limits } = securityFor(seed);
  if (!auth) return { limits, serverOpMs: 0 };
  const { ttlMs: _expiry, ...lasting } = auth;
  return { auth: lasting, limits, serverOpMs: 0 };
}

/**
 * A server process's time: the simulated clock, plus `opMs` for each op executed since the event
 * began (the CPU the server spends); never going back, so a busy server's clock runs ahead of the
 * simulated one until the next event after it.
 */
function cpuClock(sim: { readonly now: number; readonly events: number }, opMs: number): () => number {
  let event = -1,
    ops0 = 0,
    base = 0,
    last = 0;
  return () => {
    if (opMs === 0) return sim.now;
    if (sim.events !== event) {
      event = sim.events;
      ops0 = work.ops;
      base = Math.max(last, sim.now);
    }
    last = base + (work.ops - ops0) * opMs;
    return last;
  };
}

// ------------------------------------------------------------------ event queue

interface Event {
  at: number;
  order: number;
  run: () => void;
  label: string;
}

class Queue {
  private heap: Event[] = [];
  private order = 0;
  push(at: number, label: string, run: () => void): void {
    const e = { at, order: this.order++, run, label };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (less(h[p], h[i])) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }
  pop(): Event | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0];
    const last = h.pop()!;
    if (h.length) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1,
          r = l + 1;
        let m = i;
        if (l < h.length && less(h[l], h[m])) m = l;
        if (r < h.length && less(h[r], h[m])) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i], h[m]];
        i = m;
      }
    }
    return top;
  }
  get size(): number {
    return this.heap.length;
  }
}
const less = (a: Event, b: Event) => a.at < b.at || (a.at === b.at && a.order < b.order);

// ------------------------------------------------------------------ actors

/** A client's store, kept as JSON text like the real stores keep it. */
interface Disk {
  lastSeq: number;
  lastDigest?: number;
  reservedSeq?: number;
  ops: OpRecord[];
  base?: BaseSnapshot;
}

export interface SimClient {
  id: string;
  /** Incremented per process start: a crash makes a new incarnation. */
  incarnation: number;
  alive: boolean;
  /** The machine version its code runs (a reload after an upgrade starts it on the newer). */
  version: 1 | 2;
  /**
   * The server refused it `client-too-old` (it reloads on new code), or `revoked` or `forbidden`
   * (its app signs in again): it stops connecting and submitting until it restarts.
   */
  tooOld: boolean;
  /** It stays offline (connects to nothing) until then. */
  offlineUntil: number;
  /** Handles of the ops of an older version its disk held when this process started (REC-MIGRATE-OPS). */
  carried: OpHandle[];
  /** Handles of the ops its disk held when this process started (OP-VERDICT-KEPT). */
  restored: OpHandle[];
  room?: ClientRoom<Ledger>;
  /** The real client driver (as in connect()), on the simulated clock and disk. */
  driver?: ClientDriver<Ledger>;
  disk: Disk;
  /** Disk writes not yet confirmed; lost on crash. */
  writing: number;
  /** Connection: epoch increments on every break; in-flight messages of old epochs are dropped. */
  epoch: number;
  conn?: string;
  /** Where the current connection landed. */
  endpoint?: Endpoint;
  link: { up: number; down: number };
  /** While > now, inbound delivery is delayed (a stalled client). */
  stalledUntil: number;
  handles: OpHandle[];
  reconnectScheduled: boolean;
}

/** How far a client holds the log: Authoritative, and the entries sent ahead of their commit (it acks them, protocol 5). */
const held = (room: ClientRoom<Ledger>): number => room.positions().authoritative + room.engine.tentativeEntries().length;

/** The one room every simulated client joins. */
export const ROOM = 'sim';

/**
 * The server's store as the simulation runs it: a MemoryStore over the simulated disk, whose
 * calls take effect after a simulated disk latency, in call order. What an append writes is
 * observed the moment it lands (the global log). When its server process dies (`kill`), what it
 * has not written yet never is, and nothing it was asked settles.
 */
class SimStore implements RoomStore {
  private readonly inner: MemoryStore;
  /** When the last call takes effect: calls land in order. */
  private busyUntil = 0;
  dead = false;

  constructor(
    private readonly sim: Simulation,
    private readonly server: SingleServer,
    disk: MemoryDisk,
  ) {
    this.inner = new MemoryStore({ disk, now: () => sim.now });
  }

  /** Run `fn` after a disk latency, after every call before it; settle with its result then. */
  private later<T>(label: string, fn: () => Promise<T>): Promise<T> {
    const sim = this.sim;
    const [lo, hi] = sim.cfg.diskMs;
    this.busyUntil = Math.max(this.busyUntil, sim.now + sim.rng.int(lo, hi));
    return new Promise<T>((resolve, reject) => {
      sim.q.push(this.busyUntil, label, () => {
        if (this.dead) return; // the process died: nothing more is written, nobody is told
        sim.reactions = true;
        fn().then(resolve, reject);
      });
    });
  }

  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  open(room: string, init?: RoomInit): Promise<LoadedRoom | undefined> {
    return this.later(`disk open ${room}`, async () => {
      const loaded = init ? await this.inner.open(room, init) : await this.inner.open(room);
      if (loaded) this.sim.serverStarted(loaded);
      return loaded;
    });
  }

  append(room: string, write: RoomAppend): Promise<Appended> {
    const sim = this.sim;
    if (!this.dead && sim.cfg.crashBeforeCommit > 0 && sim.rng.chance(sim.cfg.crashBeforeCommit)) this.server.crashBeforeCommit();
    const entries = [...(write.entries ?? [])];
    return this.later(`disk append ${room}`, () => {
      const revBefore = this.inner.disk.rooms.get(room)?.rev;
      const done = this.inner.append(room, write);
      // Landed (even if reported failed): its entries are in the global log from now on.
      if (this.inner.disk.rooms.get(room)?.rev === (revBefore ?? Number.NaN) + 1) for (const e of entries) sim.onSequenced(e);
      return done;
    });
  }

  release(room: string): Promise<void> {
    return this.later(`disk release ${room}`, () => this.inner.release(room));
  }
  rooms(): Promise<string[]> {
    return this.inner.rooms();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Where a client's connection lands: a server process, or a cluster node (its edge). */
export interface Endpoint {
  /** The process at the far end still holds this connection: frames sent to it can arrive. */
  alive(): boolean;
  open(c: SimClient, conn: string): void;
  receive(conn: string, frame: unknown): void;
  close(conn: string): void;
}

/** The server side of a simulation: one server process over one disk, or a cluster of nodes. */
export interface ServerSide {
  /** Where a new client connection goes; undefined if nothing accepts it (refused: retry later). */
  endpoint(): Endpoint | undefined;
  /** The room's host the checkers hold to the rules: serving, and the one whose writes count now. */
  host(): RoomHost | undefined;
  /** The servers' periodic work (ack timeouts, idle unloads). */
  tick(): void;
  /** One draw of this side's random faults, once per random event. */
  fault(): void;
  /** The faults stop: let everything come back. */
  heal(): void;
  describe(): string;
  /** Cluster mode: each running node that believes it owns the room's shard, with its claim's epoch. */
  owners?(): { node: string; epoch: number }[];
  /** Deploy the machine's new version (sim.serverMachine): restart its processes onto it. */
  upgrade(): void;
  /** A backend revokes `user`'s access on every running process (RoomService.revoke). */
  revoke?(user: string): void;
  /** A hostile peer connects to the running process, as `cred` (hostile-peer.ts); false if nothing accepts connections now. */
  hostile?(conn: string, peer: HostilePeer, cred: SimCredential | undefined, gapMs: readonly number[]): boolean;
  /** Its processes keep timers for good: the event queue never drains by itself. */
  readonly endless: boolean;
}

/**
 * The embedded server: one process at a time over one disk, running the room service
 * (service.ts). It restarts, and may die between sending and committing (`crashBeforeCommit`).
 */
class SingleServer implements ServerSide {
  /** The service's ticks and heartbeats run for good: a run ends once everything converged. */
  readonly endless = true;
  /** The running process, or undefined while it is down. */
  private proc: { epoch: number; store: SimStore; links: ServiceLinks } | undefined;
  private epoch = 0;
  /** The server's disk: it outlives every server process. */
  private readonly disk = new MemoryDisk();

  constructor(
    private readonly sim: Simulation,
    private readonly createHost: SimOptions['createHost'],
  ) {
    this.start();
  }

  host(): RoomHost | undefined {
    return this.proc?.links.host();
  }

  endpoint(): Endpoint | undefined {
    const proc = this.proc;
    if (!proc) return undefined;
    const sim = this.sim;
    return {
      alive: () => this.proc === proc,
      open: (c, conn) => proc.links.open(conn, sim.clientEnd(c, conn), sim.auth.credential(c.id)),
      receive: (conn, frame) => proc.links.receive(conn, frame as ClientMessage),
      close: (conn) => proc.links.close(conn),
    };
  }

  /** A backend revokes `user`'s access (RoomService.revoke): the service cuts the user's connections. */
  revoke(user: string): void {
    if (!this.proc) return;
    const sim = this.sim;
    const cut = this.proc.links.service.revoke({ user, reason: 'the simulation revoked this user' });
    sim.checks.revoked(sim, user, cut);
  }

  /** Start a server process over the disk: the room loads on its first connection. */
  private start(): void {
    const sim = this.sim;
    const epoch = this.epoch;
    const alive = () => this.proc?.epoch === epoch;
    // The server's timers are events on the simulated clock; a dead process's never fire.
    const clock: Clock = {
      now: cpuClock(sim, sim.cfg.serverOpMs),
      after: (ms, fn) => {
        let live = true;
        sim.q.push(sim.now + Math.max(0, ms), 'server timer', () => {
          if (live && alive()) fn();
        });
        return () => {
          live = false;
        };
      },
      // A microtask, as on the system clock: the run lets microtasks run before the next event.
      defer: (fn) => queueMicrotask(fn),
    };
    const store = new SimStore(sim, this, this.disk);
    const links = new ServiceLinks(sim, {
      store,
      clock,
      running: alive,
      machine: sim.serverMachine,
      ...(this.createHost ? { createHost: this.createHost } : {}),
      events: {
        failed: () => sim.count('room-failed'),
        unloaded: () => sim.count('room-unloaded'),
      },
    });
    this.proc = { epoch, store, links };
  }

  /** The server process dies: nothing it has not written is, and every link to it closes. */
  private kill(): void {
    if (this.proc) this.proc.store.dead = true;
    this.proc?.links.died();
    this.proc = undefined;
    this.epoch++;
  }

  /**
   * The server dies between sending and committing: what it sent still arrives (it was in the
   * sockets), then every link closes; the next server starts from the disk without those writes.
   */
  crashBeforeCommit(): void {
    const sim = this.sim;
    sim.count('server-crash-before-commit');
    this.kill();
    const closeAt = Math.max(sim.now, ...sim.clients.map((c) => c.link.down)) + 1;
    sim.q.push(closeAt, 'dead server links close', () => {
      for (const c of sim.clients) sim.breakLink(c, false);
    });
    sim.q.push(closeAt + sim.rng.int(20, 300), 'server up', () => {
      if (this.proc) return; // a restart already brought it up
      this.start();
    });
  }

  /** The server restarts running the machine's new version (sim.serverMachine). */
  upgrade(): void {
    this.restart('server-upgrade');
  }

  private restart(why = 'server-restart'): void {
    const sim = this.sim;
    sim.count(why);
    this.kill();
    for (const c of sim.clients) sim.breakLink(c, false);
    sim.q.push(sim.now + sim.rng.int(20, 300), 'server up', () => {
      if (!this.proc) this.start();
    });
  }

  fault(): void {
    if (this.sim.rng.chance(this.sim.cfg.rates.serverRestart * 10) && this.proc) this.restart();
  }

  hostile(conn: string, peer: HostilePeer, cred: SimCredential | undefined, gapMs: readonly number[]): boolean {
    if (!this.proc) return false;
    this.proc.links.openHostile(conn, peer, cred, gapMs);
    return true;
  }

  /** The service ticks on its own clock (ack timeouts, idle unloads, heartbeats). */
  tick(): void {}

  heal(): void {}

  describe(): string {
    return '';
  }
}

export interface SimOptions {
  /** The rules to check (default all); tests run a subset or wrapped ones. */
  checkers?: readonly Checker[];
  /** Delivery receipts on (true) or off (false) for every client process; default: drawn per seed. */
  receipts?: boolean;
  /** How the server makes its room host (tests plant a faulty one). */
  createHost?: RoomRegistryOptions['createHost'];
  /** Run the room on a cluster of nodes over a replicated log (configFor's `cluster`). */
  cluster?: boolean;
  /** Cluster mode: what every node's store sees of the shared log (tests plant a faulty one). */
  clusterLog?: (log: ShardLog) => ShardLog;
  /** Cluster mode: extra ms before an owner answers a relay attempt (1, 2, ... per connection) once it took the shard (tests plant slow answers). */
  clusterRelayDelay?: (conn: string, attempt: number) => number;
}

export class Simulation implements SimState {
  readonly rng: Rng;
  /** Presence draws (their own stream: a seed's other choices are the same with or without them). */
  private readonly presenceRng: Rng;
  /** Whether clients set presence in this run (drawn from presenceRng). */
  readonly presenceOn: boolean;
  /** Whether every client process listens to delivery receipts in this run (RECEIPT-*; its own draw, so other draws stay as they were). */
  readonly receiptsOn: boolean;
  /** Each live client's presence as it last set it (PRESENCE-EPHEMERAL); a crash clears it. */
  presenceNow = new Map<string, unknown>();
  private presenceN = 0;
  /** The server's own API (API-SUBMIT): drawn apart, like presence, so other draws stay as they were. */
  private readonly apiRng: Rng;
  /** Text edits (issue 38) draw from their own stream, so the other choices of a seed stay as they were. */
  private readonly textRng: Rng;
  readonly textOn: boolean;
  /** The id of the last character each client typed: a burst goes on after it (TEXT-NO-INTERLEAVE). */
  private readonly typed = new Map<string, number>();
  readonly apiOn: boolean;
  /**
   * Rich-text edits (rich-edits.ts; RICH-*) draw from their own stream, so a seed's other choices
   * stay as they were; about half the seeds make them.
   */
  private readonly richRng: Rng;
  readonly richOn: boolean;
  private readonly richEditor: RichEditor;
  /**
   * Bursts of ops past a client's rate limit in one turn, in seeds that set one (VIS-DROP-DEAD):
   * its later frames, acks among them, wait in the server's input. Drawn apart, like the rest.
   */
  private readonly burstRng: Rng;
  /** Hostile peers (hostile-peer.ts) connect in this run: drawn apart, so other draws stay as they were. */
  private readonly hostileRng: Rng;
  readonly hostileOn: boolean;
  private hostileN = 0;
  /** Each idempotency key used, with the args it was first submitted with. */
  private readonly apiKeys = new Map<string, { key: string; by: number; note: string }>();
  readonly cfg: SimConfig;
  readonly q = new Queue();
  now = 0;
  events = 0;
  /** One server process, or a cluster of nodes. */
  readonly side: ServerSide;
  /** Something settled a promise in this event: let the reactions run before the next one. */
  reactions = false;
  /** The first exception thrown where the server called back, thrown from the event. */
  private reactionError: unknown;
  clients: SimClient[] = [];
  /** Oracle: the global log as sequenced, never compacted, and the state after each prefix. */
  global: LogEntry[] = [];
  oracle: AnyLedgerState[] = [ledger.initial];
  /** oracleVersion[n]: the machine version of oracle[n] (it changes at a migration entry). */
  oracleVersion: number[] = [1];
  /** oracle[n] as a state of a newer version (what a client of that version shows at n), by `${n}@${version}`. */
  private readonly migrated = new Map<string, AnyLedgerState>();
  /** The machine version new server processes run: 2 from the upgrade (cfg.upgradeAt) on. */
  serverVersion: 1 | 2 = 1;
  /** Draws of the upgrade (its own stream: a seed without one makes the same draws as before). */
  private readonly upgradeRng: Rng;
  /** Users, credentials and revocations (cfg.auth), with draws of their own. */
  readonly auth: SimAuth;
  private readonly authRng: Rng;
  /** The room service's limits in this run (cfg.limits). */
  get limits(): Partial<Limits> {
    return this.cfg.limits;
  }
  get ackTimeoutMs(): number {
    return this.cfg.ackTimeoutMs;
  }
  /** Global position of each sequenced op, by id. */
  posOf = new Map<string, number>();
  /** Ops the simulated disk confirmed: they must reach the global log exactly once. */
  durableEver = new Set<string>();
  /** The seq reservation each client's disk holds (DUR-BEFORE-SEND). */
  reserved = new Map<string, number>();
  /** Highest log position each connection's client incarnation processed. */
  processed = new Map<string, number>();
  connOwner = new Map<string, SimClient>();
  /** This run's checkers. */
  readonly checks: Checks;
  submitted = 0;
  counts: Record<string, number> = {};
  private stopSubmitting = false;
  private healing = false;
  private workAtStart = 0;
  /** The machine version each op was sent as (for the summary's counts). */
  private readonly sentVersion = new Map<string, number>();
  /** Events past this simulated time mean the run never converged. */
  private limit = 0;

  /** `checkers`: the rules to check (default all); tests run a subset or wrapped ones. */
  constructor(
    readonly seed: number,
    cfg: SimConfig,
    checkers: readonly Checker[] = CHECKERS,
    opts: Omit<SimOptions, 'checkers'> = {},
  ) {
    this.rng = new Rng(seed);
    this.presenceRng = new Rng(seed ^ 0x9e5e);
    this.presenceOn = this.presenceRng.chance(0.5);
    this.receiptsOn = opts.receipts ?? new Rng(seed ^ 0x4ec1).chance(0.5);
    this.apiRng = new Rng(seed ^ 0xa91);
    this.apiOn = this.apiRng.chance(0.5);
    this.hostileRng = new Rng(seed ^ 0x4057);
    this.hostileOn = this.hostileRng.chance(0.3);
    this.upgradeRng = new Rng(seed ^ 0x0b9a3);
    this.textRng = new Rng(seed ^ 0x7e87);
    this.textOn = this.textRng.chance(0.6);
    this.richRng = new Rng(seed ^ 0x41c7);
    this.richOn = this.richRng.chance(0.5);
    this.richEditor = new RichEditor(this.richRng);
    this.burstRng = new Rng(seed ^ 0xb0257);
    this.cfg = cfg;
    this.auth = new SimAuth(this, cfg.auth);
    this.authRng = new Rng(seed ^ 0x5ec1);
    this.checks = new Checks(checkers);
    this.side = cfg.cluster ? new ClusterServer(this, cfg.cluster, opts.clusterLog, opts.clusterRelayDelay) : new SingleServer(this, opts.createHost);
    for (let i = 0; i < cfg.clients; i++) {
      const c: SimClient = {
        id: `c${i}`,
        incarnation: 0,
        alive: false,
        version: 1,
        tooOld: false,
        offlineUntil: 0,
        carried: [],
        restored: [],
        disk: { lastSeq: 0, ops: [] },
        writing: 0,
        epoch: 0,
        link: { up: 0, down: 0 },
        stalledUntil: 0,
        handles: [],
        reconnectScheduled: false,
      };
      this.clients.push(c);
      this.startClient(c);
    }
  }

  /** A line in the trace (SIM_TRACE=1), about what just happened. */
  note(text: string): void {
    if (TRACE) console.log(`${String(this.now).padStart(7)}   ${text}`);
  }

  count(k: string): void {
    if (TRACE) console.log(`${String(this.now).padStart(7)}   ${k}`);
    this.counts[k] = (this.counts[k] ?? 0) + 1;
  }

  // -------------------------------------------------------------- the server side

  /** The room's host the checkers look at (serving, and the one whose writes count). */
  private get host(): RoomHost | undefined {
    return this.side.host();
  }
  /** A server runs and holds the room (checkers look at it only then). */
  get serverUp(): boolean {
    return this.host !== undefined;
  }
  get server(): RoomEngine<AnyLedgerState> {
    const h = this.host;
    if (!h) throw new Error('no server is up: check serverUp first');
    return h.engine as RoomEngine<AnyLedgerState>;
  }
  get serverMachine(): Ledger {
    return LEDGERS[this.serverVersion];
  }

  /**
   * The fold of the first `n` entries of the global log as a client of `version` shows it: a
   * client of a newer version restarted from an older base migrates it locally (docs/migrations.md);
   * undefined if the fold is of a newer version than `version` (no client of it may hold it).
   */
  expected(n: number, version: number): AnyLedgerState | undefined {
    const at = this.oracleVersion[n];
    if (at === undefined || at === version) return this.oracle[n];
    // The fold of nothing, as any version shows it (a room created on v2 while a client runs v1).
    if (n === 0) return ledgerAt(version).initial;
    if (at > version) return undefined;
    const key = `${n}@${version}`;
    let st = this.migrated.get(key);
    if (!st) this.migrated.set(key, (st = deepFreeze(migrateState(ledgerAt(version), this.oracle[n], at))));
    return st;
  }
  get serverSettled(): boolean {
    return this.host?.settled ?? true;
  }
  get storeMayFail(): boolean {
    return this.cfg.cluster !== undefined;
  }
  owners(): { node: string; epoch: number }[] {
    return this.side.owners?.() ?? [];
  }

  /** A server loaded the room from its store (or created it). */
  serverStarted(loaded: LoadedRoom): void {
    const v = loaded.meta.version;
    // `meta.version` is the version the room was created under (a migrated room keeps its old
    // one), so a load at position 0 under another version is a creation of v2, also when the
    // creating node never learned its checkpoint landed (a lost ack: no load is `fresh` then).
    if ((loaded.fresh || loaded.durable.checkpoint.pos === 0) && this.global.length === 0 && v !== this.oracleVersion[0]) {
      // Cluster mode: the upgrade came before any node created the room; one of v2 did.
      this.count('room-created-v2');
      this.oracle[0] = ledgerAt(v).initial;
      this.oracleVersion[0] = v;
    }
    this.callback(() => this.checks.serverStarted(this, loaded.fresh ? undefined : loaded.durable));
  }

  latency(): number {
    const [lo, hi] = this.cfg.latencyMs;
    return this.rng.int(lo, hi) + this.rng.int(0, this.cfg.jitterMs);
  }

  /** Client `c`'s end of its connection `conn`, as a server's service sees it: its link down, its close, its pongs. */
  clientEnd(c: SimClient, conn: string): ClientEnd {
    const epoch = c.epoch;
    return {
      down: (msg) => this.sendDown(c, conn, epoch, msg),
      closed: () => this.closeDown(c, conn, epoch),
      ping: (answer) => {
        // The pong leaves once the ping got through (after what was sent before it), and comes back up the link.
        const t = Math.max(c.link.down, this.now + this.latency());
        this.q.push(t, `ping ${conn}`, () => {
          if (c.conn !== conn || c.epoch !== epoch || !c.alive) return;
          const back = Math.max(c.link.up, this.now + this.latency());
          c.link.up = back;
          this.q.push(back, `pong ${conn}`, answer);
        });
      },
    };
  }

  /** The room service logged an error: one it contains (a bug in a turn, a timer, a frame) fails the run; a room's failure is counted. */
  serviceError(obj: unknown, msg: string | undefined): void {
    const m = msg ?? '';
    if (/^room .* failed in|^cannot load room|^handing a room back/.test(m)) {
      this.count('service-logged-room-failure');
      return;
    }
    const detail = typeof obj === 'object' && obj !== null ? JSON.stringify(obj) : String(obj);
    this.reactionError ??= new Error(`the room service logged an error: ${m} ${detail}`);
  }

  /** The run made `c` be refused `code` on purpose: its user's access was revoked, or its credential expired (LIVE-HONEST). */
  refusedByDesign(c: ClientState, code: string): boolean {
    return this.auth.refusedByDesign(c.id, code);
  }

  /** The author the server stamps on `client`'s ops: its user when clients authenticate, else the client id (SEC-AUTHOR). */
  authorOf(client: string): string {
    return this.auth.authorOf(client);
  }

  /** A backend revokes a random user's access for a while (SEC-ACCESS): its connections are cut, new ones refused until it ends. */
  private revokeRandom(): void {
    const a = this.cfg.auth!;
    const user = this.authRng.pick(this.auth.users());
    this.auth.revoke(user, this.authRng.int(a.revokeMs[0], a.revokeMs[1]));
    this.count('revoke');
    this.side.revoke?.(user);
    if (this.hostileOn && this.hostileRng.chance(0.5)) this.hostileRandom(user);
  }

  /** Refused `revoked` or `forbidden`: the app signs in again later, a new process over the same disk (its durable ops go out then). */
  private signInAgain(c: SimClient, code: string): void {
    this.count(`client-${code}`);
    c.tooOld = true;
    const inc = c.incarnation;
    this.q.push(this.now + this.authRng.int(50, 800), `sign in ${c.id}`, () => {
      if (c.alive && c.incarnation === inc) this.crashClient(c, true, this.authRng);
    });
  }

  // -------------------------------------------------------------- client processes

  private startClient(c: SimClient): void {
    c.incarnation++;
    c.alive = true;
    c.handles = [];
    c.writing = 0;
    c.tooOld = false;
    const disk = c.disk;
    const machine: Ledger = LEDGERS[c.version];
    if (c.version === 2 && (disk.ops.some((o) => o.v === 1) || disk.base?.v === 1)) this.count('client-upgraded-holding-v1');
    const room: ClientRoom<Ledger> = new ClientRoom(machine, {
      clientId: c.id,
      now: () => this.now,
      cpuNow: () => (work.ops - this.workAtStart) * 0.01,
      batching: this.cfg.batching,
      notify: 'sync',
      restore: fromJson({
        lastSeq: disk.lastSeq,
        durable: disk.ops,
        ...(disk.lastDigest !== undefined ? { lastDigest: disk.lastDigest } : {}),
        ...(disk.reservedSeq !== undefined ? { reservedSeq: disk.reservedSeq } : {}),
        ...(disk.base ? { base: disk.base } : {}),
      }),
    });
    c.restored = room.pending();
    c.carried = c.restored.filter((h) => disk.ops.some((o) => o.seq === h.seq && o.v !== undefined && o.v < c.version));
    this.clientStarted(c, room);
    const inc = c.incarnation;
    /** Work of a dead process never happens: its timers and its disk writes die with it. */
    const alive = () => c.alive && c.incarnation === inc;
    const clock: Clock = {
      now: () => this.now,
      after: (ms, fn) => {
        let live = true;
        this.q.push(this.now + ms, `timer ${c.id}`, () => {
          if (!live || !alive()) return;
          fn();
          this.afterClientInput(c);
        });
        return () => {
          live = false;
        };
      },
      // As a microtask: after the current event, before any later one.
      defer: (fn) => {
        this.q.push(this.now, `defer ${c.id}`, () => {
          if (alive()) this.deferred(c, fn);
        });
      },
    };
    const diskDelay = () => this.rng.int(this.cfg.diskMs[0], this.cfg.diskMs[1]);
    const store: DriverStore = {
      append: (ops, done) => {
        c.writing++;
        const copy = structuredClone(ops);
        const fails = this.cfg.diskFailure > 0 && this.rng.chance(this.cfg.diskFailure);
        this.q.push(this.now + diskDelay(), `disk ${c.id}`, () => {
          if (!alive()) return; // the write died with the process
          c.writing--;
          if (fails) {
            this.count('disk-failure');
            return done(new Error('simulated disk failure'));
          }
          for (const op of copy) {
            disk.ops.push(fromJson(op));
            if (op.seq > disk.lastSeq) {
              disk.lastSeq = op.seq;
              disk.lastDigest = op.digest;
            }
            this.durableEver.add(`${op.client}:${op.seq}`);
          }
          done();
        });
      },
      ...(this.cfg.seqBlock > 0
        ? {
            reserve: (through: number, done: (e?: unknown) => void) => {
              const fails = this.cfg.diskFailure > 0 && this.rng.chance(this.cfg.diskFailure);
              this.q.push(this.now + diskDelay(), `reserve ${c.id}`, () => {
                if (!alive()) return;
                if (fails) {
                  this.count('disk-failure');
                  return done(new Error('simulated disk failure'));
                }
                disk.reservedSeq = through;
                this.reserved.set(c.id, through);
                done();
              });
            },
          }
        : {}),
      // The base and the deletion of our ops inside it, in one atomic step (ClientStorage.saveBase).
      saveBase: (b, done) => {
        const base = fromJson(b);
        this.q.push(this.now + diskDelay(), `base ${c.id}`, () => {
          if (!alive()) return;
          if (!disk.base || disk.base.pos < base.pos) {
            disk.base = base;
            disk.ops = disk.ops.filter((o) => o.seq > base.ownSeq);
          }
          done();
        });
      },
    };
    c.driver = new ClientDriver(room, {
      store,
      clock,
      wallClock: () => this.now,
      basePos: disk.base?.pos ?? 0,
      baseEveryMs: this.cfg.baseEveryMs,
      ...(this.cfg.seqBlock > 0 ? { seqBlock: this.cfg.seqBlock } : {}),
      report: (e) => {
        if (e instanceof HerculesError && e.code === 'storage-failed') return; // counted at the disk
        this.count('client-warning');
        this.checks.warned(this, c, e.message);
      },
      resync: (reason) => {
        this.count('client-resync');
        this.checks.resynced(this, c, reason);
        this.breakLink(c, true);
      },
      fatal: (code, m) => this.clientFatal(c, inc, code, m),
    });
    c.room = room;
    this.connect(c);
  }

  /** Client process `inc` of `c` was refused `code`, fatally: what its app does; false: it goes on (RoomDriver.fatal). */
  private clientFatal(c: SimClient, inc: number, code: string, m: string): false | undefined {
    this.checks.fatal(this, c, code, m);
    // A client whose token is a function comes back with a fresh one (connect()'s answer).
    if (code === 'unauthenticated' && this.auth.on) {
      this.count('credential-expired');
      return false;
    }
    if ((code === 'revoked' || code === 'forbidden') && c.incarnation === inc) this.signInAgain(c, code);
    if (code === 'client-too-old' && c.incarnation === inc) {
      // The app reloads to get the new code (docs/migrations.md): its store is untouched.
      this.count('client-too-old');
      c.tooOld = true;
      this.q.push(this.now + this.upgradeRng.int(20, 600), `reload ${c.id} (refused)`, () => this.reloadClient(c));
    }
    return undefined;
  }

  /**
   * The client reloads onto the new version's code, over the same disk: like a crash (what it had
   * not written is lost), then a start on v2. A client that is down just starts on v2.
   */
  private reloadClient(c: SimClient): void {
    if (c.version === 2) return;
    c.version = 2;
    this.count('client-reload-v2');
    if (c.alive) this.crashClient(c, true);
  }

  private crashClient(c: SimClient, reload = false, rng: Rng = this.upgradeRng): void {
    if (!c.alive) return;
    if (!reload) this.count('crash');
    c.alive = false;
    this.presenceNow.delete(c.id); // a new process starts with none
    c.room?.close();
    c.room = undefined;
    c.driver = undefined;
    const conn = c.conn;
    const ep = c.endpoint;
    this.breakLink(c, false);
    // The server learns of the dead connection later (socket close or heartbeat timeout).
    if (conn && ep) {
      this.q.push(Math.max(c.link.up, this.now + this.rng.pick([5, 50, 800])), `close ${conn}`, () => {
        if (ep.alive()) ep.close(conn);
      });
    }
    const after = reload ? rng.int(1, 100) : this.rng.int(50, 600);
    this.q.push(this.now + after, `restart ${c.id}`, () => {
      if (!c.alive) this.startClient(c);
    });
  }

  /**
   * The deploy of the machine's new version (cfg.upgradeAt): the server restarts on it, and each
   * client reloads on its own later (or once refused client-too-old, or at healing); some go
   * offline first and keep submitting v1 ops to their disk; some crash and come back on v2.
   */
  private upgrade(): void {
    this.serverVersion = 2;
    this.side.upgrade();
    const u = this.upgradeRng;
    for (const c of this.clients) {
      if (u.chance(0.4)) c.offlineUntil = this.now + u.int(100, 1500);
      if (u.chance(0.3)) this.q.push(this.now + u.int(0, 1500), `reload ${c.id}`, () => this.reloadClient(c));
      else if (u.chance(0.2)) this.q.push(this.now + u.int(0, 1000), `crash ${c.id} (upgrade)`, () => this.crashClient(c));
    }
  }

  // -------------------------------------------------------------- network

  private connect(c: SimClient): void {
    c.reconnectScheduled = false;
    if (!c.alive || c.conn || c.tooOld) return;
    if (c.offlineUntil > this.now) {
      c.reconnectScheduled = true;
      this.q.push(c.offlineUntil, `reconnect ${c.id} (back online)`, () => this.connect(c));
      return;
    }
    const ep = this.side.endpoint();
    if (!ep) {
      this.scheduleReconnect(c);
      return;
    }
    c.epoch++;
    const conn = `${c.id}#${c.incarnation}.${c.epoch}`;
    c.conn = conn;
    c.endpoint = ep;
    c.link = { up: 0, down: 0 };
    this.connOwner.set(conn, c);
    this.processed.set(conn, held(c.room!));
    const epoch = c.epoch;
    // TCP/WebSocket open completes after one way; then the client says hello on the same link.
    const t = this.now + this.latency();
    c.link.up = t;
    this.q.push(t, `open ${conn}`, () => {
      if (!ep.alive() || c.epoch !== epoch || !c.alive) return;
      ep.open(c, conn);
    });
    c.driver!.opened({ send: (msg) => this.clientSend(c, msg) });
  }

  scheduleReconnect(c: SimClient): void {
    if (c.reconnectScheduled || !c.alive) return;
    c.reconnectScheduled = true;
    this.q.push(this.now + this.rng.int(20, 400), `reconnect ${c.id}`, () => this.connect(c));
  }

  /** Break c's connection. Messages in flight are dropped (their epoch no longer matches). */
  breakLink(c: SimClient, tellServer: boolean): void {
    const conn = c.conn;
    const ep = c.endpoint;
    if (!conn) return;
    c.conn = undefined;
    c.endpoint = undefined;
    c.epoch++;
    if (c.alive && c.driver) {
      c.driver.closed();
      this.scheduleReconnect(c);
    }
    if (tellServer && ep?.alive()) {
      // After everything the client sent on it: a close does not overtake the connection's frames.
      this.q.push(Math.max(c.link.up, this.now + this.rng.int(1, 30)), `close ${conn}`, () => {
        if (ep.alive()) ep.close(conn);
      });
    }
  }

  private clientSend(c: SimClient, msg: ClientMessage): void {
    const conn = c.conn;
    const ep = c.endpoint;
    if (!conn || !ep) return;
    this.checks.clientSent(this, c, msg, conn);
    if (msg.t === 'ops') {
      for (const op of msg.ops) {
        this.sentVersion.set(`${c.id}:${op.seq}`, op.v ?? c.version);
        if (!this.durableEver.has(`${c.id}:${op.seq}`)) this.count('op-sent-before-durable');
        if (op.after !== undefined) this.count('declared-gap');
      }
    }
    const epoch = c.epoch;
    const frame = structuredClone(msg);
    const t = Math.max(c.link.up, this.now + this.latency());
    c.link.up = t;
    const ackPos = msg.t === 'ack' ? msg.pos : msg.t === 'ops' ? msg.ack?.pos : undefined;
    const deliver = () => {
      if (!ep.alive() || c.epoch !== epoch) return;
      // An ack of entries the server has not stored yet (sent ahead, LOG-TENTATIVE, protocol 5).
      if (ackPos !== undefined && ackPos > this.global.length) this.count('ack-ahead-of-commit');
      ep.receive(conn, structuredClone(frame));
    };
    this.q.push(t, `up ${conn} ${msg.t}`, deliver);
    if (msg.t === 'ops' && this.rng.chance(this.cfg.duplicateFrame)) {
      this.count('duplicate-frame');
      this.q.push(t, `up ${conn} ${msg.t} (duplicate)`, deliver);
    }
  }

  /**
   * The server puts `msg` on the link to `c`: it arrives after the link's latency (and `extraMs`
   * more: a relay's hop), in order.
   */
  sendDown(c: SimClient, conn: string, epoch: number, msg: ServerMessage, extraMs = 0): void {
    if (c.conn !== conn || c.epoch !== epoch) return;
    this.checks.sent(this, conn, c.id, msg);
    if (msg.t === 'log' && msg.tentative) this.count('log-tentative');
    if (msg.t === 'acks') this.count('acks-sent');
    const frame = structuredClone(msg);
    const t = Math.max(c.link.down, this.now + this.latency() + extraMs, c.stalledUntil);
    c.link.down = t;
    this.q.push(t, `down ${conn} ${msg.t}`, () => {
      if (c.epoch !== epoch || !c.alive || !c.driver) return;
      c.driver.received(frame as ServerMessage);
      this.afterClientInput(c);
    });
  }

  /** The server closes its end: the client sees the close after the frames sent before it. */
  closeDown(c: SimClient, conn: string, epoch: number): void {
    if (c.conn !== conn || c.epoch !== epoch) return;
    const t = Math.max(c.link.down, this.now + 1);
    c.link.down = t;
    this.q.push(t, `closed ${conn}`, () => {
      if (c.epoch === epoch && c.conn === conn) this.breakLink(c, false);
    });
  }

  /** A client process's room is made, before it hears from anyone: it listens to receipts if the run has them, and the checkers look. */
  private clientStarted(c: SimClient, room: ClientRoom<Ledger>): void {
    if (this.receiptsOn) room.onReceipts(() => {});
    this.checks.clientStarted(this, c, room);
  }

  /** Work a client deferred to the end of its turn: the frames of one turn are taken there (ClientDriver.received). */
  private deferred(c: SimClient, fn: () => void): void {
    fn();
    this.afterClientInput(c);
  }

  /** After the client took an input (a frame, a timer): how far its connection has processed the log. */
  private afterClientInput(c: SimClient): void {
    if (!c.room || !c.conn) return;
    const pos = held(c.room);
    const prev = this.processed.get(c.conn) ?? 0;
    if (pos > prev) this.processed.set(c.conn, pos);
  }

  onSequenced(e: LogEntry): void {
    const n = this.oracle.length - 1;
    let version = this.oracleVersion[n];
    const migration = isMigrationEntry(e);
    if (migration) {
      version = e.seq;
      this.count('room-migrated');
    }
    // A refusal is the server's admission decision (here: the translation's, which REC-MIGRATE-OPS
    // checks), not the fold's: the entry has no effect, with the reason it carries.
    const r = e.refused && e.error !== undefined ? { state: this.oracle[n], error: e.error } : applyOp(ledgerAt(version), this.oracle[n], e, e.pos);
    if (!migration && this.oracleVersion[n] > 1 && this.sentVersion.get(`${e.client}:${e.seq}`) === 1)
      this.count(e.refused ? 'v1-op-refused' : 'v1-op-translated');
    this.checks.sequenced(this, e, r.error);
    this.posOf.set(`${e.client}:${e.seq}`, e.pos);
    this.global.push(structuredClone(e));
    this.oracle.push(r.state);
    this.oracleVersion.push(version);
  }

  // -------------------------------------------------------------- faults and load

  private randomEvent(): void {
    const r = this.cfg.rates;
    const c = this.rng.pick(this.clients);
    if (!this.stopSubmitting && this.rng.chance(r.submit * 10) && c.alive && c.room && !c.tooOld) {
      this.submitRandom(c);
    }
    if (this.presenceOn && !this.stopSubmitting && c.alive && c.room && this.presenceRng.chance(0.2)) {
      // A cursor move (or, now and then, leaving the canvas), never an op.
      const value = this.presenceRng.chance(0.15) ? null : { mark: `presence:${c.id}:${++this.presenceN}`, x: this.presenceRng.int(0, 99) };
      c.room.presence.set(value);
      if (value === null) this.presenceNow.delete(c.id);
      else this.presenceNow.set(c.id, value);
      this.count('presence-set');
    }
    if (this.textOn && !this.stopSubmitting && c.alive && c.room && !c.tooOld && this.textRng.chance(0.3)) this.editText(c);
    if (this.richOn && !this.stopSubmitting && c.alive && c.room && !c.tooOld && this.richRng.chance(0.3)) this.editRich(c);
    if (this.apiOn && !this.stopSubmitting && this.apiRng.chance(0.04)) this.submitFromApi();
    if (this.cfg.limits.opsPerSecond !== undefined && !this.stopSubmitting && c.alive && c.room && !c.tooOld && this.burstRng.chance(0.004))
      this.burst(c, this.cfg.limits.opsPerSecond, this.cfg.limits.opsBurst ?? 1);
    if (this.rng.chance(r.disconnect * 10) && c.conn) {
      this.count('disconnect');
      this.breakLink(c, true);
    }
    if (this.rng.chance(r.crash * 10)) this.crashClient(c);
    this.side.fault();
    if (this.rng.chance(r.slow * 10) && c.alive) {
      this.count('stall');
      c.stalledUntil = this.now + this.rng.int(100, 3 * this.cfg.ackTimeoutMs);
    }
    if (this.cfg.auth && !this.stopSubmitting && this.authRng.chance(this.cfg.auth.revokeRate * 10)) this.revokeRandom();
    if (this.hostileOn && !this.stopSubmitting && this.hostileRng.chance(0.03)) this.hostileRandom();
  }

  /**
   * A hostile peer connects (hostile-peer.ts): as the user just revoked, with hello and ops, or
   * as a random user (anonymously without authentication) with one of the other kinds.
   */
  private hostileRandom(revoked?: string): void {
    const r = this.hostileRng;
    const users = this.auth.users();
    const conn = `x${++this.hostileN}`;
    const peer = hostilePeer(r, conn, this.serverMachine, revoked !== undefined ? 'revoked' : undefined);
    const user = revoked ?? (users.length > 0 ? r.pick(users) : undefined);
    const cred = user === undefined ? undefined : { user, expiresAt: Infinity, denied: this.auth.revokedNow(user) };
    // A user revoked now is refused at the door (SEC-ACCESS); a backend may revoke its user
    // before its bad frame is handled: then `revoked`.
    const expect = cred?.denied ? ['forbidden'] : this.auth.on ? [...peer.expect, 'revoked'] : peer.expect;
    const gaps = peer.frames.map(() => r.int(0, 5));
    if (this.side.hostile?.(conn, { ...peer, expect }, cred, gaps)) this.count(`hostile-${peer.kind}`);
  }

  /**
   * A backend submits through the server's own API (RoomHost.submit, what server.room().submit
   * calls), now and then again under a key it used before (a retry, or a duplicate delivery).
   */
  private submitFromApi(): void {
    const host = this.side.host();
    if (!host) return;
    const reuse = this.apiKeys.size > 0 && this.apiRng.chance(0.3);
    const key = reuse ? this.apiRng.pick([...this.apiKeys.keys()]) : `k${this.apiKeys.size + 1}`;
    let args = this.apiKeys.get(key);
    if (!args) this.apiKeys.set(key, (args = { key: this.apiRng.pick(['a', 'b', 'c']), by: this.apiRng.int(1, 3), note: `api:${key}` }));
    this.count(reuse ? 'api-submit-again' : 'api-submit');
    host.submit(API_AUTHOR, 'inc', args, key).then(
      (result) => {
        if (result.duplicate) this.count('api-duplicate');
        this.checks.apiAnswered(this, key, args, { result });
      },
      (e: unknown) => {
        this.count('api-failed');
        this.checks.apiAnswered(this, key, args, { error: e instanceof HerculesError ? e.code : String(e) });
      },
    );
  }

  /**
   * An edit of the shared text through `room.text('doc')`: mostly typing, in bursts that go on
   * after the client's last character (so clients type at one place concurrently), sometimes at a
   * random place, and deletes of 1 to 4 characters.
   */
  private editText(c: SimClient): void {
    const text = c.room!.text('doc');
    const doc = c.room!.getState('submitted').doc;
    const r = this.textRng;
    let h: OpHandle | undefined;
    if (doc.len > 0 && r.chance(0.3)) {
      const at = r.int(0, doc.len - 1);
      h = text.delete(at, Math.min(doc.len - at, r.int(1, 4)));
      this.count('text-delete');
    } else {
      const last = this.typed.get(c.id);
      const after = last !== undefined && r.chance(0.7) ? textIndexOf(doc, c.id, last) : -1;
      const at = after >= 0 ? after + 1 : r.int(0, doc.len);
      const word = `${c.id.slice(1)}${'abcdefgh'.slice(0, r.int(1, 3))}`;
      // The clock the handle gives its first character (at least the floor: TEXT-ID-ONCE), read
      // before the insert, which moves the floor past its own clocks.
      const k = Math.max(textNextClock(doc, c.id), c.room!.textClockFloor());
      h = text.insert(at, word);
      this.typed.set(c.id, k + word.length - 1);
      this.count('text-insert');
    }
    if (!h) return;
    c.handles.push(h);
    this.submitted++;
    this.checks.submitted(this, c, { kind: 'op', handle: h, after: c.room!.getState('submitted') });
  }

  /** An edit of the rich text as the ProseMirror binding makes it (rich-edits.ts): one to two ops. */
  private editRich(c: SimClient): void {
    const room = c.room!;
    const kind = this.richEditor.edit(room as unknown as RichRoom, (h) => {
      c.handles.push(h);
      this.submitted++;
      this.checks.submitted(this, c, { kind: 'op', handle: h, after: room.getState('submitted') });
    });
    this.count(kind);
  }

  /** A burst of ops in one turn, up to two seconds of the client's rate past its bucket: one frame that leaves the bucket owing. */
  private burst(c: SimClient, rate: number, bucket: number): void {
    const n = this.burstRng.int(bucket, bucket + 2 * rate);
    for (let i = 0; i < n && c.room; i++) this.submitRandom(c);
    this.count('ops-burst');
  }

  private submitRandom(c: SimClient): void {
    const room = c.room!;
    const k = this.rng.pick(['a', 'b', 'c']);
    const roll = this.rng.int(0, 9);
    let h: OpHandle;
    if (this.rng.chance(0.03)) {
      // Arguments outside the JSON domain never leave the stub: nothing is submitted.
      const before = room.getState('submitted');
      const bad = this.rng.pick([NaN, Infinity, new Date(0), undefined, new Uint8Array(1), 'a\uD800']);
      let returned = false,
        threw: unknown;
      try {
        room.ops.inc({ key: k, by: bad as number });
        returned = true;
      } catch (e) {
        threw = e;
      }
      this.checks.submitted(this, c, { kind: 'outside-domain', value: bad, returned, threw, before, after: room.getState('submitted') });
      this.count('stub-refused');
      return;
    }
    if (roll < 5) h = room.ops.inc({ key: k, by: this.rng.chance(0.05) ? -0 : this.rng.int(1, 3) });
    else if (roll < 8) h = room.ops.withdraw({ key: k, amount: this.rng.int(1, 4) });
    else if (c.version === 2)
      h = (room as ClientRoom<typeof ledgerV2>).ops.mark({ at: k }); // v2 has no boom
    else if (roll < 9) h = (room as ClientRoom<typeof ledger>).ops.stamp({ key: k });
    else h = (room as ClientRoom<typeof ledger>).ops.boom();
    c.handles.push(h);
    this.submitted++;
    this.checks.submitted(this, c, { kind: 'op', handle: h, after: room.getState('submitted') });
  }

  // -------------------------------------------------------------- checks

  /** The step checkers; their own op executions must not move the simulated CPU clock. */
  check(deep: boolean): void {
    const w = work.ops;
    try {
      this.checks.step(this, deep);
    } finally {
      work.ops = w;
    }
  }

  // -------------------------------------------------------------- driving

  private async step(ev: Event): Promise<void> {
    this.now = Math.max(this.now, ev.at);
    this.events++;
    if (TRACE) console.log(`${String(this.now).padStart(7)} #${this.events} ${ev.label}`);
    try {
      ev.run();
      if (this.reactions) {
        // The server's reactions to what settled (promise callbacks) belong to this event.
        this.reactions = false;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      if (this.reactionError !== undefined) throw this.reactionError;
    } catch (e) {
      if (e instanceof Violation) throw e;
      throw new Error(`exception in event "${ev.label}" at t=${this.now}: ${(e as Error).stack ?? e}`);
    }
    this.check(this.events % this.cfg.deepCheckEvery === 0);
  }

  /**
   * Run `fn` where the server called back (a member's send, a load completing): a violation or
   * crash there is kept, and thrown from the event, rather than lost in the server's promise.
   */
  callback(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.reactionError ??= e;
    }
  }

  async run(): Promise<void> {
    this.start();
    // A cluster's nodes keep timers for good (lease renewals, heartbeats): its run ends once
    // everything converged, not when the event queue drains.
    while ((await this.advance()) && !(this.side.endless && this.finished()));
    this.checks.end(this, undefined);
  }

  /** Schedule the load, the faults, the server's ticks and the healing. */
  start(): void {
    this.workAtStart = work.ops;
    // Load and faults: one random draw per simulated 10 ms; server ticks every 25 ms.
    for (let t = 0; t < this.cfg.activeMs; t += 10) this.q.push(t, 'random', () => this.randomEvent());
    const tickEvery = Math.max(10, Math.floor(this.cfg.ackTimeoutMs / 4));
    const tick = () => {
      this.side.tick();
      if (!this.finished()) this.q.push(this.now + tickEvery, 'server tick', tick);
    };
    this.q.push(tickEvery, 'server tick', tick);
    this.q.push(this.cfg.activeMs, 'heal', () => this.heal());
    if (this.cfg.upgradeAt !== undefined) this.q.push(this.cfg.upgradeAt, 'upgrade', () => this.upgrade());
    this.limit = this.cfg.activeMs + 120_000;
  }

  /** Run the next event and the checks after it; false once the queue is empty. */
  async advance(): Promise<boolean> {
    const ev = this.q.pop();
    if (!ev) return false;
    if (ev.at > this.limit) {
      this.checks.end(this, this.limit - this.cfg.activeMs);
      throw new Error(`an event at ${ev.at} ms is past the run's end (${this.limit} ms)`);
    }
    await this.step(ev);
    return true;
  }

  private heal(): void {
    this.healing = true;
    this.stopSubmitting = true;
    // Access comes back and credentials issued from now on last: the faults stop.
    this.auth.heal();
    for (const c of this.clients) {
      c.stalledUntil = 0;
      c.offlineUntil = 0;
      // Every client ends on the version the server runs.
      if (c.version < this.serverVersion) this.reloadClient(c);
    }
    this.side.heal();
  }

  /** Quiescent: nothing in flight, everyone connected, everything settled. */
  /** `c` shows exactly the presence every other client last set, and has sent its own. */
  presenceSettled(c: SimClient): boolean {
    const room = c.room!;
    if (room.engine.presencePending()) return false;
    const shown = room.presence.others();
    const want = [...this.presenceNow].filter(([id]) => id !== c.id);
    if (shown.length !== want.length) return false;
    return want.every(([id, v]) => shown.some((p) => p.client === id && isDeepStrictEqual(p.value, v)));
  }

  /** Receipts on: the client has heard every other member's ack of the whole log (a cluster's run ends at finished(), not when the queue drains). */
  receiptsSettled(c: SimClient): boolean {
    const at = new Map(c.room!.memberPositions().map((p) => [p.client, p.pos]));
    return this.server.members().every((m) => m === c.id || at.get(m) === this.global.length);
  }

  finished(): boolean {
    if (!this.healing || !this.serverUp || !this.serverSettled) return false;
    for (const c of this.clients) {
      if (!c.alive) return false; // its restart is queued
      const room = c.room!;
      if (room.connection() !== 'ready' || c.writing > 0 || room.nextDeadline() !== Infinity) return false;
      if (this.presenceOn && !this.presenceSettled(c)) return false;
      if (this.receiptsOn && !this.receiptsSettled(c)) return false;
      const p = room.positions();
      if (p.submitted !== p.stable || p.authoritative !== this.global.length) return false;
    }
    return this.server.stableFrontier() === this.global.length && this.server.members().length === this.clients.length;
  }

  describe(): string {
    return (
      this.clients
        .map(
          (c) =>
            `${c.id}:${c.alive ? c.room!.connection() : 'dead'} ${JSON.stringify(c.room?.positions())}${this.presenceOn && c.alive && !this.presenceSettled(c) ? ' presence unsettled' : ''}${this.receiptsOn && c.alive && this.serverUp && !this.receiptsSettled(c) ? ' receipts unsettled' : ''}`,
        )
        .join('; ') +
      (this.serverUp
        ? ` server head ${this.server.head()} stable ${this.server.stableFrontier()} members ${this.server.members()}${this.serverSettled ? '' : ' (store behind)'}`
        : ' server down or room not loaded') +
      this.side.describe()
    );
  }
}

export async function runSeed(seed: number, overrides: Partial<SimConfig> = {}, opts: SimOptions = {}): Promise<SimResult> {
  const cfg = configFor(seed, overrides, { cluster: opts.cluster });
  const sim = new Simulation(seed, cfg, opts.checkers, opts);
  try {
    await sim.run();
    return { seed, ok: true, events: sim.events, submitted: sim.submitted, sequenced: sim.global.length, simMs: sim.now, config: cfg, counts: sim.counts };
  } catch (e) {
    const at = `(t=${sim.now} event#${sim.events})`;
    const error = e instanceof Violation ? `${e.message} ${at}` : `crash ${at}: ${(e as Error).stack ?? e}`;
    return {
      seed,
      ok: false,
      ...(e instanceof Violation ? { rule: e.rule } : {}),
      error,
      events: sim.events,
      submitted: sim.submitted,
      sequenced: sim.global.length,
      simMs: sim.now,
      config: cfg,
      counts: sim.counts,
    };
  }
}
