/**
 * Per node of the cluster soak: its memory (RSS, from /proc) and its ops' delay to
 * Authoritative as the node measures it (hercules_authoritative_delay_seconds: frame received to
 * Notify-Auth sent, the commit to JetStream included), sampled while the chaos runs. A node's
 * histogram starts again at each restart: the samples add up what each process counted, so the
 * figures cover the whole run, kills, drains and rolling restarts included.
 */
import { readFileSync } from 'node:fs';

export interface WatchedNode {
  name: string;
  port: number;
  pid(): number | undefined;
}

interface Seen {
  /** Cumulative bucket counts (le -> count) over the node's processes so far. */
  buckets: Map<number, number>;
  /** The current process's last scrape, to add only what it counted since. */
  last: Map<number, number>;
  pid: number | undefined;
  rssMax: number;
  rssLast: number;
  rss: number[];
}

const BUCKET = /^hercules_authoritative_delay_seconds_bucket\{le="([^"]+)"\} (\d+)/gm;

export function rssMbOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

export function watchNodes(nodes: readonly WatchedNode[]) {
  const seen = new Map<string, Seen>(nodes.map((n) => [n.name, { buckets: new Map(), last: new Map(), pid: undefined, rssMax: 0, rssLast: 0, rss: [] }]));
  async function sampleOne(n: WatchedNode): Promise<void> {
    const s = seen.get(n.name)!;
    const pid = n.pid();
    const mb = rssMbOf(pid);
    if (mb !== undefined) {
      s.rssMax = Math.max(s.rssMax, mb);
      s.rssLast = mb;
      s.rss.push(mb);
    }
    let text: string;
    try {
      text = await (await fetch(`http://127.0.0.1:${n.port}/metrics`, { signal: AbortSignal.timeout(1500) })).text();
    } catch {
      return; // down, paused or busy: its counts come with the next scrape of the same process
    }
    if (pid !== s.pid) {
      s.pid = pid;
      s.last = new Map();
    }
    for (const [, le, count] of text.matchAll(BUCKET)) {
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      const c = Number(count);
      s.buckets.set(bound, (s.buckets.get(bound) ?? 0) + c - (s.last.get(bound) ?? 0));
      s.last.set(bound, c);
    }
  }
  return {
    sample: () => Promise.all(nodes.map(sampleOne)),
    /** One line per node: RSS at the start, max and last; ops; the delay's p50 / p99 / max bucket (upper bounds). */
    report(): string[] {
      return nodes.map((n) => {
        const s = seen.get(n.name)!;
        const bounds = [...s.buckets.keys()].sort((a, b) => a - b);
        const total = s.buckets.get(Number.POSITIVE_INFINITY) ?? 0;
        const q = (f: number) => {
          const b = bounds.find((x) => (s.buckets.get(x) ?? 0) >= f * total);
          return b === undefined ? '-' : b === Number.POSITIVE_INFINITY ? '>1 s' : `<=${b * 1000} ms`;
        };
        const maxBound = [...bounds].reverse().find((x, i, r) => (s.buckets.get(x) ?? 0) > (s.buckets.get(r[i + 1]) ?? 0));
        const first = s.rss[0]?.toFixed(0) ?? '-';
        return `${n.name}: RSS first ${first} MB, max ${s.rssMax.toFixed(0)} MB, last ${s.rssLast.toFixed(0)} MB; ${total} log frames with its own ops, their delay to Authoritative at the node p50 ${q(0.5)}, p99 ${q(0.99)}, max ${maxBound === undefined ? '-' : maxBound === Number.POSITIVE_INFINITY ? '>1 s' : `<=${maxBound * 1000} ms`}`;
      });
    },
  };
}
