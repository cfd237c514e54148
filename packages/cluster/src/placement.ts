/**
 * Which node should own each shard (issue 42, item 3): before this nothing placed shards, a
 * node took whatever shard a client asked it for, and after a run of faults one node held every
 * shard (`h1=[] h2=[] h3=[62,43,17]`) while a joining node took none.
 *
 * The rule is rendezvous hashing (highest random weight) with bounded loads, over the nodes that
 * are settled: alive without a break for `settleMs` (so a node that flaps does not pull shards
 * back and forth) and not draining. Shards in order take their highest-scoring node that holds
 * fewer than ceil(S/N): plain rendezvous left 64 shards over three nodes at 11/31/22 for names
 * node-0..2 and 15-28 for others (its binomial spread), the bound makes it 21/21/22. A node
 * joining three takes its share and few other shards move (18.6 moves on average for 64
 * shards over five name sets, 2.6 of them between the old nodes; the least possible is 16).
 * Every node computes the same answer from the same set. Pure: the caller says what time it is
 * and whom it hears.
 */

/** murmur3's 32-bit finalizer. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a of `node`, mixed with the shard through murmur3's finalizer (FNV alone scores similar names alike). */
export function score(node: string, shard: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < node.length; i++) {
    h ^= node.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return fmix(fmix(h) ^ fmix(Math.imul(shard + 1, 0x9e3779b1)));
}

/** The owner of each shard 0..shards-1 among `nodes` (empty: none): see the file comment. */
export function assign(shards: number, nodes: readonly string[]): (string | undefined)[] {
  if (nodes.length === 0) return new Array(shards).fill(undefined);
  const cap = Math.ceil(shards / nodes.length);
  const count = new Map(nodes.map((n) => [n, 0]));
  const out: string[] = [];
  for (let k = 0; k < shards; k++) {
    const ranked = [...nodes].sort((a, b) => score(b, k) - score(a, k) || (a < b ? -1 : 1));
    const n = ranked.find((x) => count.get(x)! < cap)!;
    count.set(n, count.get(n)! + 1);
    out.push(n);
  }
  return out;
}

/** The shards this node holds that another node should own (`owners`: assign's), with that node: at most `max`, lowest shard first. */
export function handOvers(me: string, owned: readonly number[], owners: readonly (string | undefined)[], max: number): { shard: number; to: string }[] {
  const out: { shard: number; to: string }[] = [];
  for (const shard of [...owned].sort((a, b) => a - b)) {
    const to = owners[shard];
    if (to !== undefined && to !== me) out.push({ shard, to });
    if (out.length >= max) break;
  }
  return out;
}

/**
 * The nodes heard from without a break, and since when. `update` with the nodes heard now
 * (heartbeats) and those that say they drain; `settled` lists the ones heard for `settleMs`
 * that do not drain, this node included unless it drains itself.
 */
export class Membership {
  private readonly since = new Map<string, number>();
  private draining = new Set<string>();

  constructor(
    readonly me: string,
    readonly settleMs: number,
  ) {}

  update(now: number, heard: readonly string[], draining: readonly string[] = []): void {
    const now_ = new Set(heard);
    for (const n of [...this.since.keys()]) if (!now_.has(n)) this.since.delete(n);
    for (const n of now_) if (n !== this.me && !this.since.has(n)) this.since.set(n, now);
    this.draining = new Set(draining);
  }

  settled(now: number): string[] {
    const out = this.draining.has(this.me) ? [] : [this.me];
    for (const [n, t] of this.since) if (now - t >= this.settleMs && !this.draining.has(n)) out.push(n);
    return out.sort();
  }
}
