/**
 * Whether a cluster node can serve, for /healthz (issue 42, item 3): before this, a node
 * answered 200 `ok: true` with no JetStream quorum, no shards and no connections. A node is
 * ready when its NATS connections are open, JetStream answered a probe recently (an account
 * info request, which needs the meta leader, and a write to the lease bucket, which needs that
 * stream's quorum: the write every lease renewal makes), and every lease it holds was renewed
 * within the lease's ttl. The decision is a pure function of those facts (`notReady`); the
 * probe that gathers them runs on timers in the deployment (`ReadinessProbe`).
 */

export interface ReadinessFacts {
  /** Now, ms (the clock the other times are on). */
  now: number;
  /** Whether the node's NATS connections are closed. */
  closed: boolean;
  /** When the last probe succeeded (the node opened with one), and the last failure's message since. */
  lastOkAt: number;
  lastError?: string;
  /** For each shard this node holds: ms since its lease was last written. */
  leaseAges: readonly { shard: number; ms: number }[];
  leaseMs: number;
  /** A probe older than this counts as failing, ms. */
  staleMs: number;
}

/** Why the node cannot serve, or undefined if it can. */
export function notReady(f: ReadinessFacts): string | undefined {
  if (f.closed) return 'the connection to NATS is closed';
  const silent = f.now - f.lastOkAt;
  if (silent > f.staleMs)
    return `JetStream has not answered for ${Math.round(silent)} ms (no connection, or no quorum for its meta leader or the lease bucket)${f.lastError ? `: ${f.lastError}` : ''}`;
  const late = f.leaseAges.filter((l) => l.ms > f.leaseMs);
  if (late.length > 0)
    return `the leases of ${late.length} shard(s) were not renewed within ${f.leaseMs} ms (shards ${late
      .map((l) => l.shard)
      .slice(0, 8)
      .join(', ')}): their writes are paused`;
  return undefined;
}

/**
 * Probes JetStream every `everyMs` (one probe at a time: a probe that hangs on a frozen server
 * holds the next back, and its silence is what `notReady` reports).
 */
export class ReadinessProbe {
  lastOkAt: number;
  lastError: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private running = false;

  constructor(
    private readonly check: () => Promise<void>,
    everyMs = 1000,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.lastOkAt = this.now();
    this.timer = setInterval(() => void this.run(), everyMs);
    this.timer.unref?.();
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.check();
      this.lastOkAt = this.now();
      this.lastError = undefined;
    } catch (e) {
      this.lastError = e instanceof Error ? e.message : String(e);
    } finally {
      this.running = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
