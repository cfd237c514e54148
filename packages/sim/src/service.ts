/**
 * The room service in the simulator: each server process (and each cluster node) runs the real
 * `createRoomService` of @hercules/server, its sessions (session.ts: inbox, token buckets, hello
 * and expiry timers, flow control, membership) and its input scheduler (input-scheduler.ts: fair
 * rounds, the decoding budget, chunking ops frames into runs), on the simulated clock, over
 * simulated connections (`SimConnection`, a `Connection` on the simulator's network). What goes
 * over a connection is bytes, in the wire format of @hercules/core (the client's `ClientCodec`
 * at the client's end, the service's `ServerCodec` at the other), so a frame takes the path it
 * takes in production: admission (authenticate and access hooks), hello, join, the scheduler's
 * turns, the room.
 *
 * What the service hands its rooms is observed (`RoomHost.join`, `RoomHost.receive`), so the
 * SEC checkers (sec-checkers.ts) can hold it to what each connection sent.
 */
import { ClientCodec, type ClientMessage, type ServerMessage } from '@hercules/core';
// The service's entry point (it loads `ws` and SQLite's binding too; the pipeline's does not).
import { type Limits, type Metrics, type RoomService, type RoomServiceOptions, createMetrics, createRoomService } from '@hercules/server';
import {
  type Clock,
  type Connection,
  type ConnectionEvents,
  RoomHost,
  type RoomHostOptions,
  RoomRegistry,
  type RoomRegistryEvents,
  type RoomRegistryOptions,
  type RoomStore,
} from '@hercules/server/pipeline';
import type { HostileFrame, HostilePeer } from './hostile-peer.ts';
import type { Ledger } from './machine.ts';
import { ROOM, type Simulation } from './sim.ts';

/** Who a connection authenticates as, and until when its credential holds (absent: anonymous). */
export interface SimCredential {
  user: string;
  /** Simulated ms at which the credential expires (Identity.expiresAt); Infinity: never. */
  expiresAt: number;
  /** The access hook answers `none` for the user now (its access is revoked). */
  denied: boolean;
}

/** How a run authenticates its clients (SimConfig.auth). */
export interface AuthConfig {
  /** Client `c<i>` authenticates as user `u<i mod users>`: a user may have several clients. */
  users: number;
  /** A credential expires this long after it is issued (as the client connects); absent: never. */
  ttlMs?: number;
  /** Per-ms probability that a backend revokes a random user's access, for revokeMs. */
  revokeRate: number;
  revokeMs: [number, number];
}

/** Users, their credentials and revocations in one run (absent config: anonymous clients). */
export class SimAuth {
  readonly on: boolean;
  /** Revoked users, until when their access stays 'none'. */
  private readonly until = new Map<string, number>();
  private readonly everRevoked = new Set<string>();
  /** The faults stopped: credentials issued from now on do not expire. */
  private healed = false;

  constructor(
    private readonly sim: { readonly now: number },
    private readonly cfg: AuthConfig | undefined,
  ) {
    this.on = cfg !== undefined;
  }

  users(): string[] {
    return Array.from({ length: this.cfg?.users ?? 0 }, (_, i) => `u${i}`);
  }

  /** The user a client authenticates as. */
  userOf(client: string): string {
    return `u${Number(client.slice(1)) % (this.cfg?.users ?? 1)}`;
  }

  /** What the server stamps as the author of the client's ops (SEC-AUTHOR). */
  authorOf(client: string): string {
    return this.on ? this.userOf(client) : client;
  }

  /** The credential a client connects with now (undefined: anonymous). */
  credential(client: string): SimCredential | undefined {
    if (!this.cfg) return undefined;
    const ttl = this.cfg.ttlMs;
    const user = this.userOf(client);
    return { user, expiresAt: this.healed || ttl === undefined ? Infinity : this.sim.now + ttl, denied: this.revokedNow(user) };
  }

  /** The access hook's answer for `user` now: none while revoked. */
  revokedNow(user: string): boolean {
    return (this.until.get(user) ?? -Infinity) > this.sim.now;
  }

  revoke(user: string, forMs: number): void {
    this.until.set(user, this.sim.now + forMs);
    this.everRevoked.add(user);
  }

  /** A refusal the run caused: `revoked` or `forbidden` of a user it revoked, `unauthenticated` once credentials expire. */
  refusedByDesign(client: string, code: string): boolean {
    if (!this.cfg) return false;
    if (code === 'revoked' || code === 'forbidden') return this.everRevoked.has(this.userOf(client));
    return code === 'unauthenticated' && this.cfg.ttlMs !== undefined;
  }

  heal(): void {
    this.healed = true;
    this.until.clear();
  }
}

/** The client's end of a connection, as the service's side sees it: where its frames and its close go. */
export interface ClientEnd {
  /** A message the service sent, decoded by the client's codec: it travels down the link. */
  down(msg: ServerMessage): void;
  /** The service closed its end (with its reason sent before, if any). */
  closed(): void;
  /** The service asked for a pong: answer it (after a round trip) if the client is still there. */
  ping(answer: () => void): void;
}

/** Metrics are counted, never read by the simulation: one registry for the process (prom-client's default collectors are costly to make per run). */
let metrics: Metrics | undefined;

/** The service's log: quiet, except that an error the service only logs (a bug it contained) fails the run. */
function simLog(sim: Simulation): NonNullable<RoomServiceOptions['log']> {
  const nop = () => {};
  const log = {
    level: 'error',
    trace: nop,
    debug: nop,
    info: nop,
    warn: nop,
    fatal: nop,
    error(obj: unknown, msg?: string) {
      sim.serviceError(obj, msg);
    },
    child: () => log,
  };
  return log as unknown as NonNullable<RoomServiceOptions['log']>;
}

/**
 * One server process's room service and its ends of the client connections (the API of the
 * links the simulator had before it ran the service: open, receive, close).
 */
export class ServiceLinks {
  readonly service: RoomService;
  registry!: RoomRegistry;
  readonly links = new Map<string, SimConnection>();

  constructor(
    private readonly sim: Simulation,
    o: {
      store: RoomStore;
      clock: Clock;
      /** The process still runs: a dead one sends nothing and learns nothing. */
      running: () => boolean;
      machine: Ledger;
      events?: RoomRegistryEvents;
      createHost?: RoomRegistryOptions['createHost'];
    },
  ) {
    this.running = o.running;
    const auth = sim.auth;
    this.service = createRoomService({
      store: o.store,
      clock: o.clock,
      wallClock: () => sim.now,
      machines: [o.machine],
      ackTimeoutMs: sim.cfg.ackTimeoutMs,
      checkpointEvery: sim.cfg.checkpointEvery,
      idleUnloadMs: sim.cfg.idleUnloadMs,
      log: simLog(sim),
      metrics: (metrics ??= createMetrics()),
      limits: sim.limits,
      ...(auth.on
        ? {
            authenticate: (req) => {
              const h = req.headers as Record<string, string>;
              const exp = Number(h['x-sim-expires']);
              return { user: h['x-sim-user'], ...(Number.isFinite(exp) ? { expiresAt: exp } : {}) };
            },
            access: (identity) => (identity && auth.revokedNow(identity.user) ? 'none' : 'write'),
          }
        : {}),
      sessionId: (conn) => conn.remote,
      createRegistry: (ro) => (this.registry = new RoomRegistry({ ...ro, events: both(ro.events, o.events), createHost: this.observedHost(o.createHost) })),
    });
  }

  private readonly running: () => boolean;

  /** Hosts made as `createHost` makes them (a test's planted one), with what the service hands them observed. */
  private observedHost(make: RoomRegistryOptions['createHost']): (opts: RoomHostOptions) => RoomHost {
    const sim = this.sim;
    return (opts) => {
      const host = make ? make(opts) : new RoomHost(opts);
      const join = host.join.bind(host);
      const receive = host.receive.bind(host);
      host.join = (member, principal) => {
        sim.callback(() => sim.checks.roomJoined(sim, member.id, principal?.user));
        join(member, principal);
      };
      host.receive = (conn, frame) => {
        if ((frame as { t?: unknown }).t === 'ops') sim.count('room-ops-runs');
        sim.callback(() => sim.checks.roomInput(sim, conn, frame));
        receive(conn, frame);
      };
      return host;
    };
  }

  /** The room's host, if this process serves it now. */
  host(): RoomHost | undefined {
    const h = this.registry.get(ROOM);
    return h && h.state === 'serving' ? h : undefined;
  }

  /**
   * A client connects as `cred` (undefined: anonymous): the service admits it (or refuses it,
   * telling why) and serves it. `acceptedAt`: when the connection reached the server (a cluster
   * node's edge, which routes and relays it first: relay.ts carries the edge's time), default now.
   */
  open(conn: string, end: ClientEnd, cred?: SimCredential, acceptedAt = Math.floor(this.sim.now)): void {
    const sim = this.sim;
    // A cluster node may open a connection id again (a relay's later attempt) before the
    // earlier link's close is told: that close forgets its own link only, not the new one (it
    // dropped the new link's hello: seed 23 of the cluster simulator).
    const link: SimConnection = new SimConnection(sim, conn, end, this.running, () => this.links.get(conn) === link && this.links.delete(conn));
    this.links.set(conn, link);
    const headers: Record<string, string> = cred ? { 'x-sim-user': cred.user, 'x-sim-expires': String(cred.expiresAt) } : {};
    sim.checks.opened(sim, conn, cred);
    sim.reactions = true; // admission answers in a promise
    this.service.handleConnection(link, { url: `/?room=${ROOM}`, headers, acceptedAt }).catch((e: unknown) =>
      sim.callback(() => {
        throw e;
      }),
    );
  }

  /**
   * A hostile peer (hostile-peer.ts) connects as `cred` and sends its frames, each `gapMs[i]`
   * after the one before; it never reads what the service sends and never answers a ping.
   * `run`: how a frame's arrival runs in the process (a cluster node's waits out its pauses).
   */
  openHostile(
    conn: string,
    peer: HostilePeer,
    cred: SimCredential | undefined,
    gapMs: readonly number[],
    run: (label: string, fn: () => void) => void = (_label, fn) => fn(),
  ): void {
    const sim = this.sim;
    const mute: ClientEnd = { down() {}, closed() {}, ping() {} };
    const link: SimConnection = new SimConnection(sim, conn, mute, this.running, () => this.links.get(conn) === link && this.links.delete(conn));
    this.links.set(conn, link);
    const headers: Record<string, string> = cred ? { 'x-sim-user': cred.user, 'x-sim-expires': String(cred.expiresAt) } : {};
    sim.checks.opened(sim, conn, cred);
    sim.checks.hostileOpened(sim, conn, peer.kind, peer.expect);
    sim.reactions = true; // admission answers in a promise
    this.service.handleConnection(link, { url: `/?room=${ROOM}`, headers, acceptedAt: Math.floor(sim.now) }).catch((e: unknown) =>
      sim.callback(() => {
        throw e;
      }),
    );
    let at = sim.now;
    peer.frames.forEach((frame, i) => {
      at += gapMs[i] ?? 0;
      const label = `hostile ${peer.kind} frame ${i} on ${conn}`;
      sim.q.push(at, label, () => run(label, () => link.deliverRaw(frame)));
    });
  }

  /** A frame from the client arrives at the service's end of `conn`. */
  receive(conn: string, msg: ClientMessage): void {
    this.links.get(conn)?.deliver(msg);
  }

  /** The process died: its connections are gone with it. */
  died(): void {
    for (const conn of this.links.keys()) this.sim.checks.closed(this.sim, conn, 'died');
    this.links.clear();
  }

  /** The client closed its end (or its socket died): the service sees the close. */
  close(conn: string): void {
    this.links.get(conn)?.clientClosed();
  }
}

/** Registry events of the service and of the simulation, both told. */
function both(a: RoomRegistryEvents | undefined, b: RoomRegistryEvents | undefined): RoomRegistryEvents {
  if (!a || !b) return a ?? b ?? {};
  const out: Record<string, (...args: unknown[]) => void> = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof RoomRegistryEvents>) {
    const fa = a[k] as ((...args: unknown[]) => void) | undefined;
    const fb = b[k] as ((...args: unknown[]) => void) | undefined;
    out[k] = (...args) => {
      fa?.(...args);
      fb?.(...args);
    };
  }
  return out as RoomRegistryEvents;
}

/**
 * The service's end of one simulated connection. Frames from the client arrive in order as bytes
 * (`deliver` encodes them with the client's codec, as its transport does); while the service
 * pauses reading, they wait here, as they would in the client's socket buffer. What the service
 * sends is decoded with the same client codec and handed to the client's link.
 */
export class SimConnection implements Connection {
  readonly remote: string;
  /** The service may still send: neither end closed. */
  isOpen = true;
  readonly bufferedAmount = 0;
  private events?: ConnectionEvents;
  private paused = false;
  private readonly waiting: { bytes: Uint8Array; isBinary: boolean; msg?: ClientMessage }[] = [];
  private closeTold = false;
  private frames = 0;
  /** The last error the service sent on it (told to the checkers with its close). */
  private lastError?: { code: string; fatal: boolean };
  /** The client's codec: it encodes what the client sends and decodes what the service sends. */
  private readonly codec = new ClientCodec();

  constructor(
    private readonly sim: Simulation,
    readonly id: string,
    private readonly end: ClientEnd,
    private readonly running: () => boolean,
    private readonly forget: () => void,
  ) {
    this.remote = id;
  }

  listen(events: ConnectionEvents): void {
    this.events = events;
    // Closed while it was being admitted: the close is told to whoever listens, once.
    if (!this.isOpen) this.sim.q.push(this.sim.now, `close ${this.id} (before served)`, () => this.tellClosed());
    this.flush();
  }

  send(frame: Uint8Array): void {
    if (!this.isOpen || !this.running()) return;
    const msg = this.codec.decode(frame);
    if (msg.t === 'ping') return; // the transport's own (the client's watchdog rearms on any frame)
    if (msg.t === 'error') this.lastError = { code: msg.code, fatal: msg.fatal === true };
    this.sim.callback(() => this.end.down(msg));
  }

  close(): void {
    this.serverClosed();
  }

  terminate(): void {
    this.serverClosed();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    // What waited is read after this turn, as a socket delivers it on the next read.
    if (this.waiting.length > 0) this.sim.q.push(this.sim.now, `read ${this.id}`, () => this.flush());
  }

  ping(): void {
    if (!this.isOpen) return;
    this.end.ping(() => {
      if (this.isOpen && this.running()) this.events?.pong?.();
    });
  }

  /** A frame from the client arrives: read now, unless the service paused reading. */
  deliver(msg: ClientMessage): void {
    if (!this.isOpen || !this.running()) return;
    const bytes = this.codec.encode(msg);
    if (msg.t === 'ops') this.sim.count('ops-frames-delivered');
    this.sim.checks.delivered(this.sim, this.id, msg);
    if (this.frames++ === 0) this.sim.reactions = true; // the hello: the service joins the room in a promise
    this.waiting.push({ bytes, isBinary: true, msg });
    this.flush();
  }

  /** A hostile peer's frame arrives as it sent it (bytes that may not decode, or a text frame). */
  deliverRaw(frame: HostileFrame): void {
    if (!this.isOpen || !this.running()) return;
    if (frame.msg) this.sim.checks.delivered(this.sim, this.id, frame.msg);
    this.sim.reactions = true; // a hello among them: the service joins the room in a promise
    this.waiting.push({ bytes: frame.bytes, isBinary: frame.isBinary, ...(frame.msg ? { msg: frame.msg } : {}) });
    this.flush();
  }

  /** The client's end closed: the service hears of it now, and what waited unread is gone. */
  clientClosed(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.sim.checks.closed(this.sim, this.id, 'client');
    this.waiting.length = 0;
    this.tellClosed();
  }

  private flush(): void {
    while (this.events && !this.paused && this.isOpen && this.running() && this.waiting.length > 0) {
      const { bytes, isBinary, msg } = this.waiting.shift()!;
      if (msg) this.sim.checks.read(this.sim, this.id, msg);
      this.events.message(bytes, isBinary);
    }
  }

  private serverClosed(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.waiting.length = 0;
    if (!this.running()) return;
    this.sim.checks.closed(this.sim, this.id, 'server', this.lastError);
    this.sim.callback(() => this.end.closed());
    // The close handshake: the service hears the close once the client's end has answered it.
    this.sim.q.push(this.sim.now + 1, `close handshake ${this.id}`, () => this.tellClosed());
  }

  private tellClosed(): void {
    if (this.closeTold || !this.events) return;
    this.closeTold = true;
    this.forget();
    if (this.running()) this.events.close();
  }
}

export type { Limits };
