/**
 * The room service's metrics (issue 36, item 1: one of the service's named parts): what each
 * delivered output adds to the counters and histograms, the per-room bookkeeping behind the
 * visible and stable delays, and how a failed room is counted. The service calls it from the
 * registry's events and its tick; it sets no timers of its own.
 */
import type { RoomOutput } from '@hercules/core';
import type { Clock } from './clock.ts';
import type { Metrics } from './metrics.ts';
import type { OutputPath } from './room-host.ts';
import { FencedError, StorageError } from './store/room-store.ts';

/** When one of a client's ops was ordered: its seq, its log position, and the time. */
interface Ordered {
  seq: number;
  pos: number;
  t: number;
}

/** Per room: when each client's ops were ordered, when the stable frontier last moved, and the engine's cost per op. */
export interface RoomStats {
  orderedAt: Map<string, Ordered[]>;
  lastStableAt: number;
  /** Recent engine time per op (ms, moving average): sizes this room's runs of ops to a turn. */
  costPerOp: number;
}

/** Visible-delay bookkeeping of ops whose client never came back is dropped after this long. */
export const VISIBLE_DELAY_KEEP_MS = 300_000;

export class ServiceMetrics {
  private readonly rooms = new Map<string, RoomStats>();

  /** `clientOf(conn)`: the client id of an open connection, if it has said hello. */
  constructor(
    readonly metrics: Metrics,
    private readonly clock: Clock,
    private readonly clientOf: (conn: string) => string | undefined,
  ) {}

  /** A room was loaded: start its bookkeeping. */
  roomLoaded(room: string): void {
    this.rooms.set(room, { orderedAt: new Map(), lastStableAt: this.clock.now(), costPerOp: 0.01 });
  }

  /** A room left memory (unloaded or failed): forget it. */
  roomGone(room: string): void {
    this.rooms.delete(room);
  }

  /** A loaded room's stats (undefined once it has gone). */
  room(room: string): RoomStats | undefined {
    return this.rooms.get(room);
  }

  /** Count a room's failure by its cause: a value JSON cannot hold, a lost fence, the store, or the stage that threw. */
  roomFailed(stage: string, e: unknown): void {
    const m = this.metrics;
    if (e instanceof StorageError && e.kind === 'value') m.outputFailures.inc({ stage: 'serialize' });
    else if (e instanceof FencedError) m.outputFailures.inc({ stage: 'fenced' });
    else if (e instanceof StorageError) m.storageErrors.inc();
    else m.outputFailures.inc({ stage });
  }

  /** Metrics of an output of `room` that went out: asked at `at`, sent at `now`. */
  delivered(room: string, out: RoomOutput, at: number, now: number, path: OutputPath): void {
    const stats = this.rooms.get(room);
    if (out.persist.appended.length) this.ordered(stats, out, now, path);
    if (out.persist.checkpoint && stats) {
      this.metrics.stableDelay.observe((now - stats.lastStableAt) / 1000);
      stats.lastStableAt = now;
    }
    for (const { conn, msg } of out.send) {
      if (msg.t === 'log' && msg.entries.some((w) => w.k === 'own')) this.metrics.authoritativeDelay.observe((now - at) / 1000);
      else if ((msg.t === 'visible' || msg.t === 'stable') && stats) {
        // A stable frontier makes the receiver's own ops up to it visible (VIS-BY-STABLE).
        const client = this.clientOf(conn);
        if (client !== undefined)
          dropVisibleDelays(stats, client, (o) => {
            if (msg.t === 'visible' ? o.seq > msg.seq : o.pos > msg.pos) return false;
            this.metrics.visibleDelay.observe((now - o.t) / 1000);
            return true;
          });
      }
    }
  }

  /** Drop the visible-delay entries older than VISIBLE_DELAY_KEEP_MS (their client never came back). */
  dropStale(now: number): void {
    const cutoff = now - VISIBLE_DELAY_KEEP_MS;
    for (const stats of this.rooms.values()) {
      for (const client of [...stats.orderedAt.keys()]) dropVisibleDelays(stats, client, (o) => o.t < cutoff);
    }
  }

  /** Ops that were ordered: where their time went, how many, and when, for their visible delay. */
  private ordered(stats: RoomStats | undefined, out: RoomOutput, now: number, path: OutputPath): void {
    const m = this.metrics;
    const appended = out.persist.appended;
    m.opPath.observe({ stage: 'engine' }, path.engine / 1000);
    m.opPath.observe({ stage: 'tentative' }, path.tentative / 1000);
    m.opPath.observe({ stage: 'apply' }, path.apply / 1000);
    if (path.commit !== undefined) {
      m.opPath.observe({ stage: 'commit_wait' }, path.commitWait! / 1000);
      m.opPath.observe({ stage: 'commit' }, path.commit / 1000);
    }
    m.opPath.observe({ stage: 'send' }, path.send / 1000);
    m.opsSequenced.inc(appended.length);
    let rejected = 0;
    let refused = 0;
    for (const e of appended) {
      if (e.error !== undefined) rejected++;
      if (e.refused) refused++;
    }
    if (rejected) m.opsRejected.inc(rejected);
    if (refused) m.opsRefused.inc(refused);
    if (!stats) return;
    for (const e of appended) {
      let q = stats.orderedAt.get(e.client);
      if (!q) stats.orderedAt.set(e.client, (q = []));
      q.push({ seq: e.seq, pos: e.pos, t: now });
    }
  }
}

/** Drop the leading entries of a client's visible-delay queue while `take` says so. */
function dropVisibleDelays(stats: RoomStats, client: string, take: (o: Ordered) => boolean): void {
  const q = stats.orderedAt.get(client);
  if (!q) return;
  let n = 0;
  while (n < q.length && take(q[n]!)) n++;
  if (n === q.length) stats.orderedAt.delete(client);
  else if (n > 0) q.splice(0, n);
}
