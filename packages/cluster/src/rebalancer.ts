/**
 * A node's side of shard placement (placement.ts), on timers: every `everyMs` it updates whom it
 * hears (heartbeats, and who says it drains), and hands each shard it holds that a settled other
 * node should own over to that node, as a clean close does (ClusterStore.handOver: the rooms'
 * members are told to reconnect, checkpoints are written, the lease is released), at most `max`
 * at a time so a joining node is not handed every room in one burst.
 */
import { assign, handOvers, Membership } from './placement.ts';

export interface RebalancerOptions {
  nodeId: string;
  shards: number;
  /** How long a node must be heard without a break before shards move to it, ms. */
  settleMs: number;
  /** The other nodes heard now, and the nodes (this one included) that say they drain. */
  heard(): string[];
  draining(): string[];
  owned(): number[];
  handOver(shard: number, to: string): Promise<unknown>;
  everyMs?: number;
  max?: number;
  now?: () => number;
  onWarning?(message: string): void;
}

export class Rebalancer {
  private readonly membership: Membership;
  private readonly now: () => number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private running = false;
  private cached: (string | undefined)[] = [];
  private cachedFor: string | undefined;

  constructor(private readonly opts: RebalancerOptions) {
    this.membership = new Membership(opts.nodeId, opts.settleMs);
    this.now = opts.now ?? (() => performance.now());
    this.update();
    this.timer = setInterval(() => void this.tick(), opts.everyMs ?? 500);
    this.timer.unref?.();
  }

  /** The owner of each shard among the settled nodes, computed again only when they change (a connection asks for one). */
  private owners(): (string | undefined)[] {
    const settled = this.membership.settled(this.now());
    const key = settled.join('\u0000');
    if (key !== this.cachedFor) {
      this.cached = assign(this.opts.shards, settled);
      this.cachedFor = key;
    }
    return this.cached;
  }
  /** The node that should own `shard` now, among the settled ones (this node if it alone is). */
  preferred(shard: number): string | undefined {
    return this.owners()[shard];
  }

  /** The shards this node holds that belong elsewhere: how many would move now. */
  misplaced(): number {
    return handOvers(this.opts.nodeId, this.opts.owned(), this.owners(), Number.POSITIVE_INFINITY).length;
  }

  /** Hear whom the relay hears now (a handoff arrived: the node that sent it may have just said it drains). */
  refresh(): void {
    this.update();
  }

  private update(): void {
    this.membership.update(this.now(), this.opts.heard(), this.opts.draining());
  }

  /** One round: the shards to move go, in parallel; the next round waits for them. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      this.update();
      const moves = handOvers(this.opts.nodeId, this.opts.owned(), this.owners(), this.opts.max ?? 8);
      await Promise.all(
        moves.map((m) =>
          this.opts.handOver(m.shard, m.to).catch((e) => this.opts.onWarning?.(`shard ${m.shard}: handing it over to ${m.to} failed: ${(e as Error).message}`)),
        ),
      );
    } finally {
      this.running = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
