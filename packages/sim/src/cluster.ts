/**
 * The simulation's cluster mode: the room served by N nodes over a replicated log, as
 * `hercules serve --nats` runs it. Each node runs the room service the server runs
 * (`createRoomService` through service.ts: admission with the authenticate and access hooks,
 * sessions, the input scheduler, over a RoomRegistry and its RoomHost) over its own real
 * `ClusterStore`, as deployment.ts plugs them in, on a shared simulated shard log and lease
 * table (`@hercules/cluster/pipeline`: stream-wide fence, duplicate ids, elections, lost acks,
 * stale reads, lease revisions going back, two winners of one create). A client's connection
 * lands on a random node (a load balancer without affinity), which routes it with the
 * cluster's own `routeRoom` (what its locator answers): served there by that node's service, or
 * relayed to the shard's live owner, whose service serves it once it took the shard (relay.ts
 * `accept`), or held until a dead owner's lease expires. A backend's revocation reaches every
 * node's service; hostile peers connect to a node's service directly.
 *
 * Faults, on the simulated clock: node crashes (SIGKILL: nothing more is sent or answered; a new
 * process starts later under the same id), pauses (SIGSTOP: timers, answers and frames wait
 * until it resumes; clients' watchdogs give up on it), partitions from NATS (calls fail after a
 * timeout, answers in flight are lost, the relay and heartbeats stop), and NATS elections of the
 * stream and of the lease bucket.
 *
 * The global log the checkers hold every client to is the room's chain in the stream, walked by
 * the replay rule as every message lands: a record counts if its epoch is at least that of every
 * claim before it, its parts are whole, its rev follows the chain's and its first entry the
 * head. That walk is written here again, from docs/deployment.md, not taken from the store.
 */
import type { LogEntry } from '@hercules/core';
import {
  ClusterStore,
  type LeaseTable,
  type LogMessage,
  RECORD_HEADERS as H,
  routeRoom,
  type ShardLog,
  SimLeaseTable,
  SimShardLog,
  type SimFaults,
  type SimLeaseFaults,
  subjectOf,
} from '@hercules/cluster/pipeline';
import type { ClientMessage, ServerMessage } from '@hercules/core';
import { type Clock, type LoadedRoom, reconnectToResume, type RoomHost, type RoomInit, type RoomStore } from '@hercules/server/pipeline';
import type { Rng } from './rng.ts';
import type { HostilePeer } from './hostile-peer.ts';
import { type ClientEnd, ServiceLinks, type SimCredential } from './service.ts';
import { type Endpoint, ROOM, type ServerSide, type SimClient, type Simulation } from './sim.ts';

export interface ClusterConfig {
  nodes: number;
  leaseMs: number;
  /** ClusterStore's leaseMarginMs and leaseGraceMs. */
  marginMs: number;
  graceMs: number;
  /** ClusterStore's checkpointEvery (a checkpoint record once this many ops past the last). */
  storeCheckpointEvery: number;
  /** ClusterStore's purge: drop a room's messages before its previous checkpoint. */
  purge: boolean;
  /** The log's largest message: small ones split records into parts. */
  maxPayload: number;
  /** A hop between two nodes (the relay), ms. */
  hopMs: [number, number];
  /** A client drops a connection whose server went silent after this long. */
  watchdogMs: number;
  /** A call to NATS from a node cut off from it fails after this long. */
  natsTimeoutMs: number;
  log: SimFaults;
  lease: SimLeaseFaults;
  /** Per-ms probabilities. */
  rates: { crash: number; pause: number; partition: number; election: number; leaseElection: number };
}

/** A cluster's configuration, drawn from the seed's own random source. */
export function clusterConfigFor(r: Rng): ClusterConfig {
  const leaseMs = r.pick([500, 1000, 2000]);
  return {
    nodes: r.int(2, 3),
    leaseMs,
    marginMs: Math.floor(leaseMs / r.pick([4, 8])),
    graceMs: r.pick([leaseMs, 3000]),
    storeCheckpointEvery: r.pick([2, 5, 50]),
    purge: r.chance(0.5),
    maxPayload: r.pick([1500, 4096, 64 * 1024]),
    hopMs: [0, r.int(1, 4)],
    watchdogMs: r.pick([1000, 2500]),
    natsTimeoutMs: r.pick([500, 2000]),
    log: {
      failBeforeLanding: r.pick([0, 0.005, 0.02]),
      loseAck: r.pick([0, 0.01, 0.03]),
      staleRead: r.pick([0, 0.2]),
      maxLag: 6,
      maxAckMs: r.int(1, 4),
    },
    lease: { goBack: r.pick([0, 0.05]), doubleCreate: r.pick([0, 0.1]) },
    rates: {
      crash: r.pick([0, 0.0002, 0.0006]),
      pause: r.pick([0, 0.0002, 0.0006]),
      partition: r.pick([0, 0.0002, 0.0006]),
      election: r.pick([0, 0.0001, 0.0003]),
      leaseElection: r.pick([0, 0.0001, 0.0003]),
    },
  };
}

/** One node: a process that crashes and restarts under the same id. */
interface SimNode {
  readonly id: string;
  incarnation: number;
  running: boolean;
  /** Paused (SIGSTOP) until then; since when, while it lasts. */
  pausedUntil: number;
  pausedSince: number | undefined;
  /** Cut off from NATS until then; since when, while it lasts. */
  cutUntil: number;
  cutSince: number | undefined;
  clock: Clock;
  store: ClusterStore;
  /** The node's room service (service.ts) and its ends of the connections it serves. */
  links: ServiceLinks;
  /** Client connections that landed here, by connection id. */
  edges: Map<string, EdgeConn>;
  /** Connections served here for clients on other nodes: by connection id, their edge and the edge's relay attempt. */
  relayed: Map<string, { edge: SimNode; edgeInc: number; attempt: number }>;
  /**
   * Relayed connections it ended because their edge went silent, which that edge was not told
   * of: told once the edge is heard again (relay.ts), so their clients reconnect.
   */
  orphans: { conn: string; edge: SimNode; edgeInc: number }[];
  /** What arrived while it was paused, in order: it runs once it resumes, one callback per event. */
  backlog: { inc: number; label: string; fn: () => void }[];
  /** An event to work through the backlog is queued. */
  draining: boolean;
}

/** A client connection at the node it landed on: being routed, served there, or relayed to the owner. */
interface EdgeConn {
  c: SimClient;
  conn: string;
  epoch: number;
  state: 'routing' | 'local' | 'relayed' | 'closed';
  owner?: SimNode;
  ownerInc?: number;
  /** Frames that arrived while it was routed. */
  early: unknown[];
  /** When the last frame relayed to the owner arrives there: NATS keeps one publisher's order. */
  upAt: number;
  /** Routing gives up after this (simulated ms). */
  deadline: number;
  /** The relay request in flight: an answer to an earlier one (it timed out) is not taken. */
  attempt: number;
  /** The relay attempt the owner accepted (the owner's side is keyed by it). */
  relayAttempt?: number;
  /** A frame from the owner was lost: the edge delivers none after it (it closes the client's socket). */
  broken?: boolean;
  /**
   * When the edge accepted it, whole ms (as Date.now gives; the hello's `at` must be): the
   * service that serves it orders it by this (routed-upgrade.ts; relay.ts carries it to the
   * owner), not by when routing or a relay's take of the shard ended. Stamped later, a relayed
   * connection opened before its client's next one replaced that one (seeds 70, 157).
   */
  acceptedAt: number;
}

/** Beats every 500 ms; a node silent for 3 of them is taken for dead (relay.ts). */
const BEAT_MS = 500;
const DEAD_AFTER_MS = 3 * BEAT_MS;
const PREFIX = 'sim';

export class ClusterServer implements ServerSide {
  readonly endless = true;
  private readonly log: SimShardLog;
  /** What the nodes' stores see of it (a test may plant a faulty one in between). */
  private readonly shared: ShardLog;
  private readonly leases: SimLeaseTable;
  private readonly nodes: SimNode[] = [];
  /** Which node each endpoint handed out belongs to (for crashes and pauses). */
  private readonly endpointNode = new WeakMap<Endpoint, { node: SimNode; inc: number }>();
  private readonly chain: Chain;

  constructor(
    private readonly sim: Simulation,
    private readonly cfg: ClusterConfig,
    plant?: (log: ShardLog) => ShardLog,
    /** Extra ms before an owner answers relay attempt `attempt` of connection `conn` once it took the shard (a test's planted slow answer). */
    private readonly relayDelay?: (conn: string, attempt: number) => number,
  ) {
    const rng = () => sim.rng.float();
    const schedule = (fn: () => void, ms: number) => sim.q.push(sim.now + ms, 'nats', fn);
    this.chain = new Chain(
      (e) => sim.onSequenced(e),
      (m) => sim.note(m),
      (k) => sim.count(k),
    );
    // The faults are copied: healing turns them off.
    this.log = new SimShardLog(
      rng,
      () => sim.now,
      { ...cfg.log },
      {
        subjectPrefix: PREFIX,
        maxPayload: cfg.maxPayload,
        schedule,
        onLanded: (_k, m) => this.chain.landed(m),
      },
    );
    this.shared = plant ? plant(this.log) : this.log;
    this.leases = new SimLeaseTable(cfg.leaseMs, rng, () => sim.now, { ...cfg.lease }, schedule);
    for (let i = 0; i < cfg.nodes; i++) {
      const n = { id: `n${i}`, incarnation: 0, running: false, pausedUntil: 0, pausedSince: undefined, cutUntil: 0, cutSince: undefined } as SimNode;
      this.nodes.push(n);
      this.start(n);
    }
  }

  // -------------------------------------------------------------- nodes

  private alive(n: SimNode, inc: number): boolean {
    return n.running && n.incarnation === inc;
  }

  /**
   * Run `fn` as incarnation `inc` of `n`: never if it died; if it is paused (or still working
   * through what arrived during a pause), after everything before it, in order, once it resumes.
   */
  private run(n: SimNode, inc: number, label: string, fn: () => void): void {
    if (!this.alive(n, inc)) return;
    if (this.sim.now < n.pausedUntil || n.backlog.length > 0) {
      n.backlog.push({ inc, label, fn });
      this.drain(n);
      return;
    }
    this.sim.reactions = true;
    this.sim.callback(fn);
  }

  /** Work through a resumed node's backlog: one callback per event, as a process handles its queued I/O. */
  private drain(n: SimNode): void {
    if (n.draining) return;
    n.draining = true;
    const sim = this.sim;
    sim.q.push(Math.max(sim.now, n.pausedUntil), `${n.id} backlog`, () => {
      n.draining = false;
      if (sim.now < n.pausedUntil) return this.drain(n);
      const next = n.backlog.shift();
      if (next && this.alive(n, next.inc)) {
        sim.reactions = true;
        sim.callback(next.fn);
      }
      if (n.backlog.length > 0) this.drain(n);
    });
  }

  private later(n: SimNode, inc: number, ms: number, label: string, fn: () => void): void {
    this.sim.q.push(this.sim.now + ms, label, () => this.run(n, inc, label, fn));
  }

  /**
   * A node's connection to NATS. Every call is a message on it: sent in order, each after a
   * small delay; held in the process while it is paused (a publish in its buffer goes out when
   * it resumes, after everyone else moved on: the stale writer of docs/deployment.md); lost if
   * the process dies first or is cut off from NATS then. Its answer comes back through the
   * node (after its pause), and is lost if the node is cut off by then. A call without an answer
   * fails after `natsTimeoutMs`, as the client library's does: then it may or may not have landed.
   */
  private nats<T extends object>(n: SimNode, inc: number, inner: T): T {
    const sim = this.sim;
    /** When this connection's last message reaches NATS: it keeps their order. */
    let upAt = 0;
    return new Proxy(inner, {
      get: (target, prop, receiver) => {
        const v = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (!this.alive(n, inc)) return new Promise(() => {});
          return new Promise((resolve, reject) => {
            let settled = false;
            const settle = (fn: () => void) => {
              if (settled) return;
              settled = true;
              fn();
            };
            this.later(n, inc, this.cfg.natsTimeoutMs, `${n.id} nats timeout`, () =>
              settle(() => reject(new Error(`timeout: ${String(prop)} got no answer (simulated)`))),
            );
            upAt = Math.max(upAt, sim.now + sim.rng.int(0, 3));
            // On its way: from the process (which must run to flush it) to NATS.
            sim.q.push(upAt, `${n.id} nats send`, () =>
              this.run(n, inc, `${n.id} nats send`, () => {
                if (sim.now < n.cutUntil) return; // lost: the caller times out
                let p: Promise<unknown>;
                try {
                  p = Promise.resolve(v.apply(target, args));
                } catch (e) {
                  p = Promise.reject(e);
                }
                const answer = (fn: () => void) =>
                  this.run(n, inc, `${n.id} nats answer`, () => {
                    if (sim.now >= n.cutUntil) settle(fn); // else lost: the caller times out
                  });
                p.then(
                  (x) => answer(() => resolve(x)),
                  (e) => answer(() => reject(e)),
                );
              }),
            );
          });
        };
      },
    });
  }

  /** A node's clock for one incarnation: its timers die with it. */
  private nodeClock(n: SimNode, inc: number): SimNode['clock'] {
    const sim = this.sim;
    return {
      now: () => sim.now,
      after: (ms, fn) => {
        let live = true;
        this.later(n, inc, Math.max(0, ms), `${n.id} timer`, () => {
          if (live) fn();
        });
        return () => {
          live = false;
        };
      },
      // A microtask, as on the system clock: the run lets microtasks run before the next event.
      defer: (fn) => queueMicrotask(fn),
    };
  }

  private start(n: SimNode): void {
    const sim = this.sim;
    n.incarnation++;
    n.running = true;
    n.pausedUntil = 0;
    n.pausedSince = undefined;
    n.cutUntil = 0;
    n.cutSince = undefined;
    n.edges = new Map();
    n.relayed = new Map();
    n.orphans = [];
    n.backlog = [];
    n.draining = false;
    const inc = n.incarnation;
    n.clock = this.nodeClock(n, inc);
    const store = new ClusterStore({
      log: this.nats<ShardLog>(n, inc, this.shared),
      leases: this.nats<LeaseTable>(n, inc, this.leases),
      nodeId: n.id,
      shards: 1,
      subjectPrefix: PREFIX,
      checkpointEvery: this.cfg.storeCheckpointEvery,
      leaseMarginMs: this.cfg.marginMs,
      leaseGraceMs: this.cfg.graceMs,
      purge: this.cfg.purge,
      // No history kept: a purge drops what the previous confirmed checkpoint covers, as before history.
      retention: { ops: 0 },
      clock: n.clock,
      wallClock: () => sim.now,
      onShardLost: (_k, why) => {
        sim.count('cluster-shard-lost');
        n.links.service.failRooms(() => true, reconnectToResume(`the room moved to another server (${why})`));
      },
    });
    n.store = store;
    // What the registry sees: the store, with each load shown to the checkers.
    const observed: RoomStore = {
      open: ((room: string, init?: RoomInit) =>
        (init ? store.open(room, init) : store.open(room)).then((loaded: LoadedRoom | undefined) => {
          if (loaded) {
            sim.serverStarted(loaded);
            sim.callback(() => sim.checks.roomLoaded(sim, n.id, store.claimOf(0)?.seq, this.chain.lastClaim, loaded));
          }
          return loaded;
        })) as RoomStore['open'],
      append: (room, write) => store.append(room, write),
      release: (room) => store.release(room),
      // A join the node would have welcomed from memory, refused: it could not confirm it still writes the room.
      confirmWriter: (room) =>
        store.confirmWriter(room).catch((e) => {
          sim.count('cluster-join-unconfirmed');
          throw e;
        }),
      rooms: () => store.rooms(),
      close: () => store.close(),
    };
    // The room service the server runs, over the node's store (as deployment.ts plugs it in):
    // admission, hello, join, limits, chunking; a room it cannot load now (not the owner after
    // all, NATS electing) closes the client with storage-failed, and it comes back.
    n.links = new ServiceLinks(sim, {
      store: observed,
      clock: n.clock,
      running: () => this.alive(n, inc),
      machine: sim.serverMachine,
      events: {
        failed: (_h, stage, e) => {
          sim.count('room-failed');
          sim.note(`${n.id}: the room failed (${stage}): ${(e as Error)?.message}`);
        },
        unloaded: () => sim.count('room-unloaded'),
      },
    });
    const beat = () => {
      this.checkPeers(n);
      n.clock.after(BEAT_MS, beat);
    };
    n.clock.after(BEAT_MS, beat);
  }

  /**
   * Deploy the machine's new version: every node stops at once and starts again later on it (a
   * stop-the-world deploy; a rolling one, where old and new nodes run side by side, is not
   * simulated). A node that is down comes up on it.
   */
  upgrade(): void {
    this.sim.count('server-upgrade');
    for (const n of this.nodes) if (n.running) this.crash(n, 'cluster-node-upgrade');
  }

  /** SIGKILL: nothing more runs; its clients see their connections reset; it starts again later. */
  private crash(n: SimNode, why = 'cluster-node-crash'): void {
    const sim = this.sim;
    sim.count(why);
    sim.note(`${n.id} crashed`);
    n.running = false;
    n.links.died();
    for (const c of sim.clients) if (c.endpoint && this.endpointNode.get(c.endpoint)?.node === n) sim.breakLink(c, false);
    sim.q.push(sim.now + sim.rng.int(100, 1500), `${n.id} up`, () => {
      if (!n.running) this.start(n);
    });
  }

  /** SIGSTOP for `ms`: its clients' watchdogs give up on it if it stays silent long enough. */
  private pause(n: SimNode, ms: number): void {
    const sim = this.sim;
    sim.count('cluster-node-pause');
    sim.note(`${n.id} paused for ${ms} ms`);
    n.pausedUntil = Math.max(n.pausedUntil, sim.now + ms);
    n.pausedSince ??= sim.now;
    for (const c of sim.clients) if (c.conn && c.endpoint && this.endpointNode.get(c.endpoint)?.node === n) this.watchdog(c, c.conn, n);
    sim.q.push(n.pausedUntil, `${n.id} resumes`, () => {
      if (n.pausedUntil <= sim.now) n.pausedSince = undefined;
    });
  }

  /** A client's watchdog on connection `conn`: if its node is still paused then, the client drops the connection. */
  private watchdog(c: SimClient, conn: string, n: SimNode): void {
    const sim = this.sim;
    sim.q.push(sim.now + this.cfg.watchdogMs, `watchdog ${c.id}`, () => {
      if (c.conn === conn && sim.now < n.pausedUntil) {
        sim.count('client-watchdog');
        sim.breakLink(c, true);
      }
    });
  }

  /** Cut off from NATS for `ms` (the log, the lease table, the relay and the heartbeats). */
  private partition(n: SimNode, ms: number): void {
    const sim = this.sim;
    sim.count('cluster-partition');
    sim.note(`${n.id} cut off from NATS for ${ms} ms`);
    n.cutUntil = Math.max(n.cutUntil, sim.now + ms);
    n.cutSince ??= sim.now;
    sim.q.push(n.cutUntil, `${n.id} healed`, () => {
      if (n.cutUntil <= sim.now) n.cutSince = undefined;
    });
  }

  /** Whether `viewer` hears `id`'s heartbeats (relay.ts: alive while they arrive). */
  private hears(viewer: SimNode, id: string): boolean {
    if (id === viewer.id) return true;
    const now = this.sim.now;
    if (viewer.cutSince !== undefined && now - viewer.cutSince > DEAD_AFTER_MS) return false;
    const n = this.nodes.find((x) => x.id === id);
    if (!n || !n.running) return false;
    if (n.pausedSince !== undefined && now - n.pausedSince > DEAD_AFTER_MS) return false;
    if (n.cutSince !== undefined && now - n.cutSince > DEAD_AFTER_MS) return false;
    return true;
  }

  /** A node's heartbeat round: relayed connections to or from a node it no longer hears are closed. */
  private checkPeers(n: SimNode): void {
    for (const ec of [...n.edges.values()]) {
      if (ec.state !== 'relayed') continue;
      const o = ec.owner!;
      if (!this.hears(n, o.id) || o.incarnation !== ec.ownerInc) this.closeClient(n, ec, 'relay-owner-silent');
    }
    for (const [conn, r] of [...n.relayed]) {
      if (this.hears(n, r.edge.id) && r.edge.incarnation === r.edgeInc) continue;
      n.relayed.delete(conn);
      n.links.close(conn);
      if (r.edge.incarnation === r.edgeInc) n.orphans.push({ conn, edge: r.edge, edgeInc: r.edgeInc });
    }
    n.orphans = n.orphans.filter((x) => {
      if (x.edge.incarnation !== x.edgeInc) return false; // its sockets died with it
      if (!this.hears(n, x.edge.id)) return true;
      this.tellEdgeClosed(n, x.edge, x.edgeInc, x.conn);
      return false;
    });
  }

  /** The owner tells an edge it no longer serves `conn` (a close over the relay): its client reconnects. */
  private tellEdgeClosed(o: SimNode, e: SimNode, eInc: number, conn: string): void {
    if (this.sim.now < o.cutUntil) return; // (lost: NATS delivers at most once)
    this.later(e, eInc, this.hop(), `${e.id} relay closed by owner`, () => {
      const ec = e.edges.get(conn);
      if (ec && ec.state === 'relayed' && ec.owner === o) this.closeClient(e, ec, 'cluster-relay-orphan');
    });
  }

  // -------------------------------------------------------------- client connections

  endpoint(): Endpoint | undefined {
    const sim = this.sim;
    const n = sim.rng.pick(this.nodes);
    if (!n.running) {
      sim.count('cluster-refused');
      return undefined; // connection refused: the client tries again (another node, maybe)
    }
    const inc = n.incarnation;
    const ep: Endpoint = {
      alive: () => this.alive(n, inc),
      open: (cl, conn) => {
        // A paused process does not answer the upgrade: the client gives up on it after its watchdog.
        if (sim.now < n.pausedUntil) this.watchdog(cl, conn, n);
        this.run(n, inc, `${n.id} open`, () => this.edgeOpen(n, cl, conn));
      },
      receive: (conn, frame) => this.run(n, inc, `${n.id} frame`, () => this.edgeReceive(n, conn, frame)),
      close: (conn) => this.run(n, inc, `${n.id} close`, () => this.edgeClose(n, conn)),
    };
    this.endpointNode.set(ep, { node: n, inc });
    return ep;
  }

  private hop(): number {
    const [lo, hi] = this.cfg.hopMs;
    return this.sim.rng.int(lo, hi);
  }

  private edgeOpen(n: SimNode, c: SimClient, conn: string): void {
    const ec: EdgeConn = {
      c,
      conn,
      epoch: c.epoch,
      state: 'routing',
      early: [],
      upAt: 0,
      attempt: 0,
      deadline: this.sim.now + this.cfg.leaseMs + 3000,
      acceptedAt: Math.floor(this.sim.now),
    };
    n.edges.set(conn, ec);
    this.route(n, ec);
  }

  /** Route with the cluster's own rule: here, at the live owner, or wait for a dead owner's lease. */
  private route(n: SimNode, ec: EdgeConn): void {
    const sim = this.sim;
    const inc = n.incarnation;
    routeRoom(ROOM, { store: n.store, nodeId: n.id, alive: (id) => this.hears(n, id), clock: n.clock, waitMs: this.cfg.leaseMs + 10_000 }).then(
      (r) =>
        this.run(n, inc, `${n.id} routed`, () => {
          if (ec.state !== 'routing') return;
          sim.note(`${n.id} routes ${ec.conn}: ${r.local ? 'here' : `to ${r.owner}`}`);
          if (r.local) {
            ec.state = 'local';
            const end: ClientEnd = {
              down: (msg) => {
                sim.checks.announced(sim, n.id, n.store.claimOf(0)?.epoch, msg);
                sim.sendDown(ec.c, ec.conn, ec.epoch, msg);
              },
              closed: () => {
                ec.state = 'closed';
                n.edges.delete(ec.conn);
                sim.closeDown(ec.c, ec.conn, ec.epoch);
              },
              ping: sim.clientEnd(ec.c, ec.conn).ping,
            };
            n.links.open(ec.conn, end, sim.auth.credential(ec.c.id), ec.acceptedAt);
            for (const f of ec.early.splice(0)) n.links.receive(ec.conn, f as ClientMessage);
            return;
          }
          const owner = this.nodes.find((x) => x.id === r.owner)!;
          this.relayOpen(n, ec, owner);
        }),
      () => this.run(n, inc, `${n.id} unroutable`, () => this.closeClient(n, ec, 'cluster-unroutable')),
    );
  }

  /**
   * Ask the owner to serve the connection (relay.ts `open`): it takes the shard first, or
   * refuses; a request not answered within 2 beats (the owner died, paused, or a side is cut off)
   * times out, and the edge routes again.
   */
  private relayOpen(e: SimNode, ec: EdgeConn, o: SimNode): void {
    const sim = this.sim;
    const eInc = e.incarnation,
      oInc = o.incarnation;
    const attempt = ++ec.attempt;
    const current = () => ec.state === 'routing' && ec.attempt === attempt;
    const again = () => {
      if (!current()) return;
      ec.attempt++;
      if (sim.now > ec.deadline) this.closeClient(e, ec, 'cluster-relay-refused');
      else this.route(e, ec);
    };
    this.later(e, eInc, 2 * BEAT_MS, `${e.id} relay timeout`, again);
    if (!this.alive(o, oInc) || sim.now < e.cutUntil || sim.now < o.cutUntil) return; // the request is lost
    sim.count('cluster-relay-open');
    this.later(o, oInc, this.hop(), `${o.id} relay request`, () => {
      const accept = () => {
        // The owner already serves a later attempt of this connection: this one's take of the
        // shard answered late (a pause, NATS timeouts), and the edge gave up on it. relay.ts
        // gives every attempt an id of its own, so a late accept is another connection, which
        // the edge ignores; here attempts share the connection's id, so it must not replace
        // the later one (that was closed without a word to the edge, and the client, its
        // hello sent, waited forever: seed 5236 of the cluster simulator).
        if ((o.relayed.get(ec.conn)?.attempt ?? 0) > attempt) {
          sim.count('cluster-relay-late-accept');
          return;
        }
        // An earlier attempt of the same connection accepted late: the edge gave up on it.
        this.dropRelayed(o, ec.conn);
        o.relayed.set(ec.conn, { edge: e, edgeInc: eInc, attempt });
        const down = (msg: ServerMessage) => {
          // Owner -> edge -> client. Lost if either side is dead or cut off: the edge then
          // sees a gap in the relay's frame numbers (or stops hearing the owner) and closes
          // the client's socket; no frame after the lost one reaches the client.
          if (!this.alive(e, eInc) || ec.broken) return;
          // The edge forwards frames of the relay attempt it waits for or relays, no other:
          // relay.ts gives each attempt an id, and an attempt the edge gave up on is unknown
          // to it (a late accept's connection waits out its hello timeout on the owner, and
          // that error is no frame of the client's socket).
          const known = ec.state === 'relayed' ? ec.relayAttempt === attempt : ec.state === 'routing' && ec.attempt === attempt;
          if (!known) return;
          if (sim.now < e.cutUntil || sim.now < o.cutUntil) {
            ec.broken = true;
            this.run(e, eInc, `${e.id} relay gap`, () => this.closeClient(e, ec, 'cluster-relay-gap'));
            return;
          }
          sim.checks.announced(sim, o.id, o.store.claimOf(0)?.epoch, msg);
          sim.sendDown(ec.c, ec.conn, ec.epoch, msg, this.hop() + Math.max(0, e.pausedUntil - sim.now));
        };
        const closed = () => {
          o.relayed.delete(ec.conn);
          this.later(e, eInc, this.hop(), `${e.id} relay closed`, () => this.closeClient(e, ec, undefined));
        };
        // The owner's service serves it (relay.ts `accept`: handleConnection once the shard is taken).
        o.links.open(ec.conn, { down, closed, ping: sim.clientEnd(ec.c, ec.conn).ping }, sim.auth.credential(ec.c.id), ec.acceptedAt);
        this.later(e, eInc, this.hop(), `${e.id} relay accepted`, () => {
          if (!current()) {
            // Given up on (timed out, or the client left): the owner drops it.
            this.later(o, oInc, this.hop(), `${o.id} relay gone`, () => this.dropRelayed(o, ec.conn, attempt));
            return;
          }
          ec.attempt++;
          ec.relayAttempt = attempt;
          ec.state = 'relayed';
          ec.owner = o;
          ec.ownerInc = oInc;
          for (const f of ec.early.splice(0)) this.forward(e, ec, f);
        });
      };
      o.store.acquire(0).then(
        () => {
          const late = this.relayDelay?.(ec.conn, attempt) ?? 0;
          if (late > 0) this.later(o, oInc, late, `${o.id} relay accept (delayed)`, accept);
          else this.run(o, oInc, `${o.id} relay accept`, accept);
        },
        () => this.later(e, eInc, this.hop(), `${e.id} relay refused`, again),
      );
    });
  }

  /** The owner stops serving a relayed connection (only the given relay attempt's, if named). */
  private dropRelayed(o: SimNode, conn: string, attempt?: number): void {
    const r = o.relayed.get(conn);
    if (!r || (attempt !== undefined && r.attempt !== attempt)) return;
    o.relayed.delete(conn);
    o.links.close(conn);
  }

  /** A client frame through the edge to the owner; a relay that lost a frame is closed (the client reconnects). */
  private forward(e: SimNode, ec: EdgeConn, frame: unknown): void {
    const o = ec.owner!;
    const oInc = ec.ownerInc!;
    const eInc = e.incarnation;
    if (this.sim.now < e.cutUntil || this.sim.now < o.cutUntil) {
      this.closeClient(e, ec, 'cluster-relay-cut');
      return;
    }
    ec.upAt = Math.max(ec.upAt, this.sim.now + this.hop());
    this.sim.q.push(ec.upAt, `${o.id} relayed frame`, () =>
      this.run(o, oInc, `${o.id} relayed frame`, () => {
        if (o.relayed.has(ec.conn)) o.links.receive(ec.conn, frame as ClientMessage);
        // A frame for a connection the owner ended unbeknownst to the edge: say so (relay.ts).
        else if (ec.state === 'relayed' && ec.owner === o) this.tellEdgeClosed(o, e, eInc, ec.conn);
      }),
    );
  }

  private edgeReceive(n: SimNode, conn: string, frame: unknown): void {
    const ec = n.edges.get(conn);
    if (!ec) return;
    if (ec.state === 'routing') ec.early.push(frame);
    else if (ec.state === 'local') n.links.receive(conn, frame as ClientMessage);
    else if (ec.state === 'relayed') this.forward(n, ec, frame);
  }

  /** The client closed its connection. */
  private edgeClose(n: SimNode, conn: string): void {
    const ec = n.edges.get(conn);
    if (!ec) return;
    const was = ec.state;
    ec.state = 'closed';
    n.edges.delete(conn);
    if (was === 'local') n.links.close(conn);
    else if (was === 'relayed')
      this.later(ec.owner!, ec.ownerInc!, this.hop(), `${ec.owner!.id} relay client left`, () => this.dropRelayed(ec.owner!, conn, ec.relayAttempt));
  }

  /** The edge closes a client's connection (it reconnects): routing failed, or the relay broke. */
  private closeClient(n: SimNode, ec: EdgeConn, counter: string | undefined): void {
    if (ec.state === 'closed') return;
    if (counter) this.sim.count(counter);
    const was = ec.state;
    ec.state = 'closed';
    n.edges.delete(ec.conn);
    if (was === 'local') n.links.close(ec.conn);
    if (was === 'relayed')
      this.later(ec.owner!, ec.ownerInc!, this.hop(), `${ec.owner!.id} relay cut`, () => this.dropRelayed(ec.owner!, ec.conn, ec.relayAttempt));
    this.sim.closeDown(ec.c, ec.conn, ec.epoch);
  }

  // -------------------------------------------------------------- the side's duties

  /** The host of the node holding the last claim in the stream: its writes are the ones that count now. */
  host(): RoomHost | undefined {
    const last = this.chain.lastClaim;
    for (const n of this.nodes) {
      if (!n.running || n.store.claimOf(0)?.seq !== last) continue;
      const h = n.links.registry.get(ROOM);
      if (h && h.state === 'serving') return h;
    }
    return undefined;
  }

  /**
   * A backend revokes `user`'s access (RoomService.revoke on every node, as the admin API's
   * revoke reaches each peer): each node's service cuts the user's connections it serves. Not
   * made while a node is paused or still working through what arrived meanwhile: the call would
   * wait there, and its connections stay open past the revocation (the backend's call fails;
   * new connections are still refused at the door, the access hook answering none).
   */
  revoke(user: string): void {
    const sim = this.sim;
    const running = this.nodes.filter((n) => n.running);
    if (running.some((n) => sim.now < n.pausedUntil || n.backlog.length > 0)) {
      sim.count('cluster-revoke-unreachable');
      return;
    }
    let cut = 0;
    for (const n of running) cut += n.links.service.revoke({ user, reason: 'the simulation revoked this user' });
    sim.checks.revoked(sim, user, cut);
  }

  /**
   * A hostile peer connects to a node's service (its first frame is refused before any room is
   * loaded, so the node need not own the room): the node by its number, so the run's own draws
   * stay as they were.
   */
  hostile(conn: string, peer: HostilePeer, cred: SimCredential | undefined, gapMs: readonly number[]): boolean {
    const n = this.nodes[Number(conn.replace(/\D/g, '')) % this.nodes.length];
    if (!n.running || this.sim.now < n.pausedUntil || n.backlog.length > 0) return false;
    const inc = n.incarnation;
    n.links.openHostile(conn, peer, cred, gapMs, (label, fn) => this.run(n, inc, `${n.id} ${label}`, fn));
    return true;
  }

  /** Every running node that believes it owns the shard, and its epoch. */
  owners(): { node: string; epoch: number }[] {
    const out: { node: string; epoch: number }[] = [];
    for (const n of this.nodes) {
      const epoch = n.running ? n.store.claimOf(0)?.epoch : undefined;
      if (epoch !== undefined) out.push({ node: n.id, epoch });
    }
    return out;
  }

  /** Each node's service ticks on its node's clock (ack timeouts, idle unloads, heartbeats). */
  tick(): void {}

  fault(): void {
    const sim = this.sim;
    const r = this.cfg.rates;
    const n = sim.rng.pick(this.nodes);
    if (sim.rng.chance(r.crash * 10) && n.running) this.crash(n);
    if (sim.rng.chance(r.pause * 10) && n.running) this.pause(n, sim.rng.int(100, 3 * this.cfg.leaseMs));
    if (sim.rng.chance(r.partition * 10) && n.running) this.partition(n, sim.rng.int(100, 3 * this.cfg.leaseMs));
    if (sim.rng.chance(r.election * 10)) {
      sim.count('cluster-election');
      this.log.elect(0, sim.rng.int(300, 5000));
    }
    if (sim.rng.chance(r.leaseElection * 10)) {
      sim.count('cluster-lease-election');
      this.leases.elect(sim.rng.int(300, 5000));
    }
  }

  heal(): void {
    const now = this.sim.now;
    for (const n of this.nodes) {
      n.pausedUntil = Math.min(n.pausedUntil, now);
      n.pausedSince = undefined;
      n.cutUntil = Math.min(n.cutUntil, now);
      n.cutSince = undefined;
      if (n.backlog.length > 0) {
        n.draining = false; // its queued drain may be far off: drain from now
        this.drain(n);
      }
    }
    this.log.heal();
    this.leases.heal();
  }

  describe(): string {
    const now = this.sim.now;
    return ` cluster: ${this.nodes
      .map(
        (n) =>
          `${n.id}#${n.incarnation}${n.running ? '' : ' dead'}${now < n.pausedUntil ? ' paused' : ''}${now < n.cutUntil ? ' cut' : ''} claim ${n.store.claimOf(0)?.seq ?? '-'} ${n.links.registry.get(ROOM)?.state ?? 'no room'}`,
      )
      .join(', ')}; last claim ${this.chain.lastClaim}; chain rev ${this.chain.rev}`;
  }
}

/** A batch message's records (docs/deployment.md, restated): a 4-byte big-endian index length, the index `[[room, rev, bytes], ...]`, the bodies in order. */
function batchOf(m: LogMessage): { room: string; rev: number; body: Uint8Array }[] {
  const n = Buffer.from(m.data).readUInt32BE(0);
  const index = JSON.parse(Buffer.from(m.data.subarray(4, 4 + n)).toString('utf8')) as [string, number, number][];
  let at = 4 + n;
  return index.map(([room, rev, len]) => ({ room, rev, body: m.data.subarray(at, (at += len)) }));
}

/**
 * The room's chain as a fresh reader finds it, walked as each message lands (the stream only
 * grows at its end, and a later claim never changes what counted before it): the replay rule of
 * docs/deployment.md, restated. A record counts if it was sent under the last claim before it,
 * its parts are whole, its rev follows the chain's and its first entry the head; checkpoints add
 * nothing (a load starts from a confirmed one, which the log reaches). Each entry it adds is the
 * global log's next.
 */
class Chain {
  /** The sequence of the last claim in the stream. */
  lastClaim = 0;
  rev = 0;
  head = 0;
  private parts: LogMessage[] = [];
  private readonly claimSubject = subjectOf(PREFIX, 0, 'claim');
  private readonly logSubject = subjectOf(PREFIX, 0, 'log', ROOM);
  private readonly batchSubject = subjectOf(PREFIX, 0, 'batch');

  constructor(
    private readonly sequenced: (e: LogEntry) => void,
    private readonly note: (text: string) => void,
    private readonly count: (what: string) => void,
  ) {}

  landed(m: LogMessage): void {
    const epoch = Number(m.headers[H.epoch]);
    const kind = m.subject.split('.')[2];
    let what = '';
    if (kind !== 'claim' && !m.headers[H.mark] && m.headers[H.parts] === '1') {
      try {
        const b = JSON.parse(Buffer.from(m.data).toString('utf8')) as { entries?: LogEntry[]; pos?: number; suffix?: LogEntry[] };
        what = b.entries ? `entries ${b.entries.map((e) => e.pos).join(',')}` : `ckpt pos ${b.pos} suffix ${b.suffix?.length}`;
      } catch {}
    }
    this.note(
      `landed #${m.seq} ${kind} epoch ${epoch}${m.headers[H.mark] ? ' mark' : ` rev ${m.headers[H.rev]} part ${m.headers[H.part]}/${m.headers[H.parts]} ${what}`}`,
    );
    if (m.subject === this.claimSubject) {
      this.lastClaim = m.seq;
      return;
    }
    // Sent under a claim that another one followed: a stale owner's, or from before a re-claim.
    const stale = Number(m.headers[H.claim]) !== this.lastClaim;
    if (stale) this.count('cluster-stale-landed');
    if (m.subject === this.batchSubject && !m.headers[H.mark] && !stale) {
      // A batch: the room's records in it, each whole (one part), in order.
      for (const r of batchOf(m)) if (r.room === ROOM) this.take(r.rev, r.body);
      return;
    }
    if (m.subject !== this.logSubject || m.headers[H.mark]) return;
    if (stale) {
      this.parts = [];
      return;
    }
    const part = Number(m.headers[H.part]),
      parts = Number(m.headers[H.parts]),
      rev = Number(m.headers[H.rev]);
    const first = this.parts[0];
    if (part === 0) this.parts = [m];
    else if (first && part === this.parts.length && first.headers[H.rev] === m.headers[H.rev] && first.headers[H.claim] === m.headers[H.claim])
      this.parts.push(m);
    else {
      this.parts = [];
      return;
    }
    if (this.parts.length < parts) return;
    const bytes = Buffer.concat(this.parts.map((p) => p.data));
    this.parts = [];
    this.take(rev, bytes);
  }

  /** A whole record that counts: onto the chain if it follows it. */
  private take(rev: number, bytes: Uint8Array): void {
    const body = JSON.parse(Buffer.from(bytes).toString('utf8')) as { entries: LogEntry[] };
    if (rev !== this.rev + 1) return;
    if (body.entries.length > 0 && body.entries[0].pos !== this.head + 1) return;
    this.rev = rev;
    for (const e of body.entries) {
      this.head++;
      this.sequenced(e);
    }
  }
}
