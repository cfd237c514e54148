/**
 * Deterministic simulation of N Hercules clients and one room server, driven by one seed.
 *
 * Everything runs on a simulated clock in one event queue: per-link latency and jitter with
 * FIFO per connection, disconnects that drop what is in flight, client crashes that lose
 * volatile state and keep what the simulated disk confirmed, client and server restarts, slow
 * clients that trip the ack timeout. Each client is a ClientRoom under the real ClientDriver
 * (the one connect() runs), whose clock is the event queue and whose store is the simulated disk
 * (which may fail a write). The named checkers (checkers.ts, one per rule of
 * docs/spec.md) run after every event and wherever something observable happens; the first
 * violation stops the run naming its rule, and the seed replays it exactly.
 */
import {
  ClientDriver,
  ClientRoom,
  HerculesError,
  RoomEngine,
  applyOp,
  type BaseSnapshot,
  type Batching,
  type ClientMessage,
  type Clock,
  type DriverStore,
  type ClientRecord,
  type LogEntry,
  type OpHandle,
  type OpRecord,
  type RoomDurableState,
  type RoomOutput,
  type ServerMessage,
} from '@hercules/core';
import { Rng } from './rng.ts';
import { ledger, work, type LedgerState } from './machine.ts';
import { CHECKERS, Checks, Violation, type Checker, type SimState } from './checkers.ts';

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
   * Probability that the server dies right after sending a bookkeeping-only output and before
   * committing it (RoomOutput.sendFirst): its clients got the messages, the disk never got the
   * writes.
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

/** What a store gives back: the JSON text of what it was given. */
const fromJson = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Pick a configuration from the seed, so one number reproduces a run. */
export function configFor(seed: number, overrides: Partial<SimConfig> = {}): SimConfig {
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
    ...overrides,
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
  ops: OpRecord[];
  base?: BaseSnapshot;
}

interface SimClient {
  id: string;
  /** Incremented per process start: a crash makes a new incarnation. */
  incarnation: number;
  alive: boolean;
  room?: ClientRoom<typeof ledger>;
  /** The real client driver (as in connect()), on the simulated clock and disk. */
  driver?: ClientDriver<typeof ledger>;
  disk: Disk;
  /** Disk writes not yet confirmed; lost on crash. */
  writing: number;
  /** Connection: epoch increments on every break; in-flight messages of old epochs are dropped. */
  epoch: number;
  conn?: string;
  link: { up: number; down: number };
  /** While > now, inbound delivery is delayed (a stalled client). */
  stalledUntil: number;
  handles: OpHandle[];
  reconnectScheduled: boolean;
}

export class Simulation implements SimState {
  readonly rng: Rng;
  readonly cfg: SimConfig;
  readonly q = new Queue();
  now = 0;
  events = 0;
  server!: RoomEngine<LedgerState>;
  serverUp = true;
  serverEpoch = 0;
  clients: SimClient[] = [];
  /** Oracle: the global log as sequenced, never compacted, and the state after each prefix. */
  global: LogEntry[] = [];
  oracle: LedgerState[] = [ledger.initial];
  /** Global position of each sequenced op, by id. */
  posOf = new Map<string, number>();
  /** Ops the simulated disk confirmed: they must reach the global log exactly once. */
  durableEver = new Set<string>();
  /** Highest log position each connection's client incarnation processed. */
  processed = new Map<string, number>();
  connOwner = new Map<string, SimClient>();
  /** This run's checkers. */
  readonly checks: Checks;
  /**
   * The server's disk, beside the log (every sequenced op is on it: `global`): the checkpoint
   * position, the stable position and the client records, as committed. A restarted server
   * starts from this, not from the memory of the one that died.
   */
  serverDisk = { checkpointPos: 0, stable: 0, clients: new Map<string, ClientRecord>() };
  submitted = 0;
  counts: Record<string, number> = {};
  private stopSubmitting = false;
  private healing = false;
  private workAtStart = 0;
  /** Events past this simulated time mean the run never converged. */
  private limit = 0;

  /** `checkers`: the rules to check (default all); tests run a subset or wrapped ones. */
  constructor(
    readonly seed: number,
    cfg: SimConfig,
    checkers: readonly Checker[] = CHECKERS,
  ) {
    this.rng = new Rng(seed);
    this.cfg = cfg;
    this.checks = new Checks(checkers);
    this.server = this.newServer();
    for (let i = 0; i < cfg.clients; i++) {
      const c: SimClient = {
        id: `c${i}`,
        incarnation: 0,
        alive: false,
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

  private count(k: string): void {
    this.counts[k] = (this.counts[k] ?? 0) + 1;
  }

  private newServer(): RoomEngine<LedgerState> {
    const d = this.serverDisk;
    const restore: RoomDurableState | undefined = this.server && {
      checkpoint: { pos: d.checkpointPos, state: this.oracle[d.checkpointPos] },
      suffix: this.global.slice(d.checkpointPos).map((e) => structuredClone(e)),
      clients: Object.fromEntries([...d.clients].map(([k, v]) => [k, structuredClone(v)])),
      stable: d.stable,
    };
    this.checks.serverStarted(this, restore);
    return new RoomEngine(ledger, { ackTimeoutMs: this.cfg.ackTimeoutMs }, restore);
  }

  /** The server's commit of one output. */
  private commitToDisk(o: RoomOutput): void {
    for (const e of o.persist.appended) this.onSequenced(e);
    for (const [id, rec] of Object.entries(o.persist.clients)) this.serverDisk.clients.set(id, structuredClone(rec));
    const cp = o.persist.checkpoint;
    if (cp) {
      this.serverDisk.checkpointPos = cp.pos;
      this.serverDisk.stable = Math.max(this.serverDisk.stable, cp.pos);
    }
  }

  private latency(): number {
    const [lo, hi] = this.cfg.latencyMs;
    return this.rng.int(lo, hi) + this.rng.int(0, this.cfg.jitterMs);
  }

  // -------------------------------------------------------------- client processes

  private startClient(c: SimClient): void {
    c.incarnation++;
    c.alive = true;
    c.handles = [];
    c.writing = 0;
    const disk = c.disk;
    const room = new ClientRoom(ledger, {
      clientId: c.id,
      now: () => this.now,
      cpuNow: () => (work.ops - this.workAtStart) * 0.01,
      batching: this.cfg.batching,
      notify: 'sync',
      restore: fromJson({
        lastSeq: disk.lastSeq,
        durable: disk.ops,
        ...(disk.lastDigest !== undefined ? { lastDigest: disk.lastDigest } : {}),
        ...(disk.base ? { base: disk.base } : {}),
      }),
    });
    this.checks.clientStarted(this, c, room);
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
          if (alive()) fn();
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
      basePos: disk.base?.pos ?? 0,
      baseEveryMs: this.cfg.baseEveryMs,
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
      fatal: (code, m) => this.checks.fatal(this, c, code, m),
    });
    c.room = room;
    this.connect(c);
  }

  private crashClient(c: SimClient): void {
    if (!c.alive) return;
    this.count('crash');
    c.alive = false;
    c.room?.close();
    c.room = undefined;
    c.driver = undefined;
    const conn = c.conn;
    this.breakLink(c, false);
    // The server learns of the dead connection later (socket close or heartbeat timeout).
    if (conn) {
      const se = this.serverEpoch;
      this.q.push(this.now + this.rng.pick([5, 50, 800]), `close ${conn}`, () => {
        if (this.serverUp && this.serverEpoch === se) this.serverOut(this.server.close(conn, this.now));
      });
    }
    this.q.push(this.now + this.rng.int(50, 600), `restart ${c.id}`, () => {
      if (!c.alive) this.startClient(c);
    });
  }

  // -------------------------------------------------------------- network

  private connect(c: SimClient): void {
    c.reconnectScheduled = false;
    if (!c.alive || c.conn) return;
    if (!this.serverUp) {
      this.scheduleReconnect(c);
      return;
    }
    c.epoch++;
    const conn = `${c.id}#${c.incarnation}.${c.epoch}`;
    c.conn = conn;
    c.link = { up: 0, down: 0 };
    this.connOwner.set(conn, c);
    this.processed.set(conn, c.room!.positions().authoritative);
    const se = this.serverEpoch;
    const epoch = c.epoch;
    // TCP/WebSocket open completes after one way; then the client says hello on the same link.
    const t = this.now + this.latency();
    c.link.up = t;
    this.q.push(t, `open ${conn}`, () => {
      if (!this.serverUp || this.serverEpoch !== se || c.epoch !== epoch || !c.alive) return;
      this.serverOut(this.server.open(conn, this.now));
    });
    c.driver!.opened({ send: (msg) => this.clientSend(c, msg) });
  }

  private scheduleReconnect(c: SimClient): void {
    if (c.reconnectScheduled || !c.alive) return;
    c.reconnectScheduled = true;
    this.q.push(this.now + this.rng.int(20, 400), `reconnect ${c.id}`, () => this.connect(c));
  }

  /** Break c's connection. Messages in flight are dropped (their epoch no longer matches). */
  private breakLink(c: SimClient, tellServer: boolean): void {
    const conn = c.conn;
    if (!conn) return;
    c.conn = undefined;
    c.epoch++;
    if (c.alive && c.driver) {
      c.driver.closed();
      this.scheduleReconnect(c);
    }
    if (tellServer && this.serverUp) {
      const se = this.serverEpoch;
      this.q.push(this.now + this.rng.int(1, 30), `close ${conn}`, () => {
        if (this.serverUp && this.serverEpoch === se) this.serverOut(this.server.close(conn, this.now));
      });
    }
  }

  private clientSend(c: SimClient, msg: ClientMessage): void {
    const conn = c.conn;
    if (!conn) return;
    this.checks.clientSent(this, c, msg);
    const epoch = c.epoch;
    const se = this.serverEpoch;
    const frame = structuredClone(msg);
    const t = Math.max(c.link.up, this.now + this.latency());
    c.link.up = t;
    const deliver = () => {
      if (!this.serverUp || this.serverEpoch !== se || c.epoch !== epoch) return;
      this.serverOut(this.server.message(conn, structuredClone(frame), this.now));
    };
    this.q.push(t, `up ${conn} ${msg.t}`, deliver);
    if (msg.t === 'ops' && this.rng.chance(this.cfg.duplicateFrame)) {
      this.count('duplicate-frame');
      this.q.push(t, `up ${conn} ${msg.t} (duplicate)`, deliver);
    }
  }

  private serverOut(o: RoomOutput): void {
    // Storage is synchronous in the simulation: a commit is durable at once. As in the server,
    // a bookkeeping-only output is sent first and committed after; anything else the reverse.
    if (!o.sendFirst) this.commitToDisk(o);
    this.sendOutput(o);
    if (o.sendFirst) {
      if (this.cfg.crashBeforeCommit > 0 && this.rng.chance(this.cfg.crashBeforeCommit)) this.crashServerBeforeCommit();
      else this.commitToDisk(o);
    }
  }

  private sendOutput(o: RoomOutput): void {
    for (const { conn, msg } of o.send) {
      const c = this.connOwner.get(conn);
      if (!c || c.conn !== conn) continue;
      this.checks.sent(this, conn, c.id, msg);
      const epoch = c.epoch;
      const frame = structuredClone(msg);
      const t = Math.max(c.link.down, this.now + this.latency(), c.stalledUntil);
      c.link.down = t;
      this.q.push(t, `down ${conn} ${msg.t}`, () => {
        if (c.epoch !== epoch || !c.alive || !c.driver) return;
        c.driver.received(frame as ServerMessage);
        this.afterClientInput(c);
      });
    }
    for (const { conn } of o.close) {
      const c = this.connOwner.get(conn);
      if (c && c.conn === conn) {
        // The client sees the close after the frames sent before it.
        const epoch = c.epoch;
        const t = Math.max(c.link.down, this.now + 1);
        c.link.down = t;
        this.q.push(t, `closed ${conn}`, () => {
          if (c.epoch === epoch && c.conn === conn) this.breakLink(c, false);
        });
      }
    }
  }

  /** After the client took an input (a frame, a timer): how far its connection has processed the log. */
  private afterClientInput(c: SimClient): void {
    if (!c.room || !c.conn) return;
    const pos = c.room.positions().authoritative;
    const prev = this.processed.get(c.conn) ?? 0;
    if (pos > prev) this.processed.set(c.conn, pos);
  }

  private onSequenced(e: LogEntry): void {
    const r = applyOp(ledger, this.oracle[this.oracle.length - 1], e, e.pos);
    this.checks.sequenced(this, e, r.error);
    this.posOf.set(`${e.client}:${e.seq}`, e.pos);
    this.global.push(structuredClone(e));
    this.oracle.push(r.state);
  }

  // -------------------------------------------------------------- faults and load

  /**
   * The server dies between sending and committing: what it sent still arrives (it was in the
   * sockets), then every link closes; the next server starts from the disk without those writes.
   */
  private crashServerBeforeCommit(): void {
    this.count('server-crash-before-commit');
    this.serverUp = false;
    this.serverEpoch++;
    const closeAt = Math.max(this.now, ...this.clients.map((c) => c.link.down)) + 1;
    this.q.push(closeAt, 'dead server links close', () => {
      for (const c of this.clients) this.breakLink(c, false);
    });
    this.q.push(closeAt + this.rng.int(20, 300), 'server up', () => {
      if (this.serverUp) return; // a restart already brought it up
      this.server = this.newServer();
      this.serverUp = true;
    });
  }

  private restartServer(): void {
    this.count('server-restart');
    this.serverUp = false;
    this.serverEpoch++;
    for (const c of this.clients) this.breakLink(c, false);
    this.q.push(this.now + this.rng.int(20, 300), 'server up', () => {
      this.server = this.newServer();
      this.serverUp = true;
    });
  }

  private randomEvent(): void {
    const r = this.cfg.rates;
    const c = this.rng.pick(this.clients);
    if (!this.stopSubmitting && this.rng.chance(r.submit * 10) && c.alive && c.room) {
      this.submitRandom(c);
    }
    if (this.rng.chance(r.disconnect * 10) && c.conn) {
      this.count('disconnect');
      this.breakLink(c, true);
    }
    if (this.rng.chance(r.crash * 10)) this.crashClient(c);
    if (this.rng.chance(r.serverRestart * 10) && this.serverUp) this.restartServer();
    if (this.rng.chance(r.slow * 10) && c.alive) {
      this.count('stall');
      c.stalledUntil = this.now + this.rng.int(100, 3 * this.cfg.ackTimeoutMs);
    }
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
    else if (roll < 9) h = room.ops.stamp({ key: k });
    else h = room.ops.boom();
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

  private step(ev: Event): void {
    this.now = Math.max(this.now, ev.at);
    this.events++;
    try {
      ev.run();
    } catch (e) {
      if (e instanceof Violation) throw e;
      throw new Error(`exception in event "${ev.label}" at t=${this.now}: ${(e as Error).stack ?? e}`);
    }
    this.check(this.events % this.cfg.deepCheckEvery === 0);
  }

  run(): void {
    this.start();
    while (this.advance());
    this.checks.end(this, undefined);
  }

  /** Schedule the load, the faults, the server's ticks and the healing. */
  start(): void {
    this.workAtStart = work.ops;
    // Load and faults: one random draw per simulated 10 ms; server ticks every 25 ms.
    for (let t = 0; t < this.cfg.activeMs; t += 10) this.q.push(t, 'random', () => this.randomEvent());
    const tickEvery = Math.max(10, Math.floor(this.cfg.ackTimeoutMs / 4));
    const tick = () => {
      if (this.serverUp) this.serverOut(this.server.tick(this.now));
      if (!this.finished()) this.q.push(this.now + tickEvery, 'server tick', tick);
    };
    this.q.push(tickEvery, 'server tick', tick);
    this.q.push(this.cfg.activeMs, 'heal', () => this.heal());
    this.limit = this.cfg.activeMs + 120_000;
  }

  /** Run the next event and the checks after it; false once the queue is empty. */
  advance(): boolean {
    const ev = this.q.pop();
    if (!ev) return false;
    if (ev.at > this.limit) {
      this.checks.end(this, this.limit - this.cfg.activeMs);
      throw new Error(`an event at ${ev.at} ms is past the run's end (${this.limit} ms)`);
    }
    this.step(ev);
    return true;
  }

  private heal(): void {
    this.healing = true;
    this.stopSubmitting = true;
    for (const c of this.clients) c.stalledUntil = 0;
  }

  /** Quiescent: nothing in flight, everyone connected, everything settled. */
  finished(): boolean {
    if (!this.healing || !this.serverUp) return false;
    for (const c of this.clients) {
      if (!c.alive) return false; // its restart is queued
      const room = c.room!;
      if (room.connection() !== 'ready' || c.writing > 0 || room.nextDeadline() !== Infinity) return false;
      const p = room.positions();
      if (p.submitted !== p.stable || p.authoritative !== this.global.length) return false;
    }
    return this.server.stableFrontier() === this.global.length && this.server.members().length === this.clients.length;
  }

  describe(): string {
    return (
      this.clients.map((c) => `${c.id}:${c.alive ? c.room!.connection() : 'dead'} ${JSON.stringify(c.room?.positions())}`).join('; ') +
      ` server head ${this.server.head()} stable ${this.server.stableFrontier()} members ${this.server.members()}`
    );
  }
}

export function runSeed(seed: number, overrides: Partial<SimConfig> = {}): SimResult {
  const cfg = configFor(seed, overrides);
  const sim = new Simulation(seed, cfg);
  try {
    sim.run();
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
