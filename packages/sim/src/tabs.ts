/**
 * A model of the leader handover of a shared tab client (packages/client/src/tabs, docs/tabs.md),
 * checked at every step: two tabs of one browser, A leading (the connection and the store) and B
 * following, B's requests going through A; A crashes after step k, for every k, and B takes
 * over as a restarted client of the same store. The leader's decision on each request is the
 * client's own `admit`; the store writes an op, its tag and the tab's mark in one atomic write;
 * the server keeps one op per (client, seq). The checker DUR-HANDOVER: once all is quiet, every
 * request B made is in the server's log exactly once, and so is every op the store holds.
 *
 * Plants (each must make the checker fail): 'no-marks', a new leader that does not read the
 * marks; 'send-ahead', a leader that sends an op before its store write completes (the new
 * leader numbers past a reservation, as DUR-BEFORE-SEND's restart does, and B resends).
 *
 *   npm run sim -- --tabs --seeds 300          npm run sim -- --tabs --seed 7 (replay, verbose)
 */
import { admitTabRequest as admit } from '@hercules/client';
import { Rng } from './rng.ts';

/** The rule of docs/spec.md the model's checker checks. */
export const TABS_RULE = 'DUR-HANDOVER';

export type TabsPlant = 'no-marks' | 'send-ahead';

interface Tag {
  tab: string;
  req: number;
}
interface Op {
  seq: number;
  tag?: Tag;
}
type ChannelMsg = { to: 'A'; reqs: number[] } | { to: 'B'; durable: number };

/** A leader tab's memory: lost when it crashes. */
interface Leader {
  tab: 'A' | 'B';
  next: Map<string, number>;
  lastSeq: number;
  /** Submitted, not yet written. */
  queue: Op[];
  /** Frames on its socket, not yet read by the server. */
  socket: Op[];
  /** Own ops submitted (untagged): they die with the tab unless durable. */
  own: number;
}

export interface TabsResult {
  seed: number;
  crashAt: number;
  violation?: string;
  trace: string[];
}

const REQUESTS = 3;
const RESERVE_BLOCK = 1000;

/** One run: the interleaving from `seed`, A crashing after `crashAt` steps (never, if past the end). */
export function runTabs(seed: number, crashAt: number, plant?: TabsPlant): TabsResult {
  return new TabsRun(seed, crashAt, plant).run();
}

/** The two tabs, the store, the server and the channel of one run. */
class TabsRun {
  // The same interleaving whatever the crash point, so crashing after step k cuts one run at k.
  readonly rng: Rng;
  readonly fate: Rng;
  readonly trace: string[] = [];
  readonly store = { ops: new Map<number, Op>(), marks: new Map<string, number>(), lastSeq: 0, reserved: 0 };
  readonly server = { log: [] as Op[], seqs: new Set<number>(), high: 0 };
  channel: ChannelMsg[] = [];
  readonly b = { nextReq: 0, durable: new Set<number>(), leader: 'A' as 'A' | 'B' | undefined };
  leader: Leader;

  constructor(
    readonly seed: number,
    readonly crashAt: number,
    readonly plant: TabsPlant | undefined,
  ) {
    this.rng = new Rng(seed);
    this.fate = new Rng((seed * 7919 + crashAt) >>> 0);
    this.leader = this.open('A');
  }

  run(): TabsResult {
    let step = 0;
    for (;;) {
      if (step === this.crashAt && this.leader.tab === 'A') this.crash();
      const possible = this.steps();
      if (possible.length === 0) break;
      const [name, run] = possible[this.rng.int(0, possible.length - 1)];
      this.trace.push(name);
      run();
      step++;
    }
    return { seed: this.seed, crashAt: this.crashAt, trace: this.trace, violation: this.check() };
  }

  open(tab: 'A' | 'B'): Leader {
    const { store, plant } = this;
    const next = plant === 'no-marks' ? new Map<string, number>() : new Map(store.marks);
    // A restart numbers past every seq an earlier process may have sent (a reservation, with send-ahead).
    const lastSeq = plant === 'send-ahead' ? Math.max(store.lastSeq, store.reserved) : store.lastSeq;
    if (plant === 'send-ahead') store.reserved = lastSeq + RESERVE_BLOCK;
    const l: Leader = { tab, next, lastSeq, queue: [], socket: [], own: 0 };
    // The welcome: the store's ops the server lacks are sent again (DUR-DELIVERED).
    for (const op of [...store.ops.values()].sort((x, y) => x.seq - y.seq)) if (op.seq > this.server.high) l.socket.push(op);
    return l;
  }

  submit(l: Leader, tag?: Tag): void {
    const op: Op = { seq: ++l.lastSeq, ...(tag ? { tag } : {}) };
    l.queue.push(op);
    if (this.plant === 'send-ahead') l.socket.push(op);
  }

  /** The leader handles a tab's requests (leader.ts: LeaderService.submit). */
  requests(l: Leader, tab: string, reqs: readonly number[]): void {
    for (const req of reqs) {
      const step = admit(l.next.get(tab) ?? 0, req);
      if (step === 'repeat') {
        if (tab === 'B' && (this.store.marks.get('B') ?? 0) >= req) this.ack(l, req);
        continue;
      }
      l.next.set(tab, req);
      this.submit(l, { tab, req });
    }
  }

  ack(l: Leader, req: number): void {
    if (l.tab === 'B') this.b.durable.add(req);
    else this.channel.push({ to: 'B', durable: req });
  }

  /** The store's atomic write of everything queued, then (without send-ahead) the frames. */
  write(l: Leader): void {
    const { store } = this;
    const ops = l.queue.splice(0);
    for (const op of ops) {
      store.ops.set(op.seq, op);
      store.lastSeq = Math.max(store.lastSeq, op.seq);
      if (op.tag) store.marks.set(op.tag.tab, Math.max(store.marks.get(op.tag.tab) ?? 0, op.tag.req));
    }
    for (const op of ops) {
      if (this.plant !== 'send-ahead') l.socket.push(op);
      if (op.tag) this.ack(l, op.tag.req);
    }
  }

  serverReads(l: Leader): void {
    const { server } = this;
    const op = l.socket.shift()!;
    if (server.seqs.has(op.seq)) return; // (client, seq) known: a duplicate frame, kept once
    server.seqs.add(op.seq);
    server.high = Math.max(server.high, op.seq);
    server.log.push(op);
  }

  unconfirmed(): number[] {
    return Array.from({ length: this.b.nextReq }, (_, i) => i + 1).filter((r) => !this.b.durable.has(r));
  }

  /** The steps possible now, each a name and what it does. */
  steps(): [string, () => void][] {
    const out: [string, () => void][] = [];
    const { b } = this;
    const l = this.leader;
    if (b.nextReq < REQUESTS)
      out.push([
        'B submits',
        () => {
          const req = ++b.nextReq;
          if (l.tab === 'B') this.requests(l, 'B', [req]);
          else if (b.leader === 'A') this.channel.push({ to: 'A', reqs: [req] });
        },
      ]);
    if (l.tab === 'A' && l.own < 2)
      out.push([
        'A submits its own',
        () => {
          l.own++;
          this.submit(l);
        },
      ]);
    if (l.queue.length) out.push(['store write', () => this.write(l)]);
    if (l.socket.length) out.push(['server reads', () => this.serverReads(l)]);
    if (this.channel.length)
      out.push([
        'channel delivers',
        () => {
          const m = this.channel.shift()!;
          if (m.to === 'A' && l.tab === 'A') this.requests(l, 'B', m.reqs);
          if (m.to === 'B' && l.tab === 'A') b.durable.add(m.durable);
        },
      ]);
    return out;
  }

  crash(): void {
    this.trace.push('A crashes');
    // What A posted may or may not reach B; its socket's unread frames may or may not reach the server.
    this.channel = this.channel.filter((m) => m.to === 'B' && this.fate.float() < 0.5);
    // A socket delivers a prefix of what was written to it.
    for (let n = this.fate.int(0, this.leader.socket.length); n > 0; n--) this.serverReads(this.leader);
    // B is granted the lock: it opens the store (a restart), then hands itself its unconfirmed requests.
    for (const m of this.channel.splice(0)) if (m.to === 'B') this.b.durable.add(m.durable);
    this.leader = this.open('B');
    this.b.leader = 'B';
    this.requests(this.leader, 'B', this.unconfirmed());
  }

  /** DUR-HANDOVER, once all is quiet. */
  check(): string | undefined {
    const { server } = this;
    for (let req = 1; req <= this.b.nextReq; req++) {
      const n = server.log.filter((op) => op.tag?.tab === 'B' && op.tag.req === req).length;
      if (n !== 1) return `[${TABS_RULE}] request B/${req} is in the server's log ${n} times (want once)`;
    }
    for (const seq of this.store.ops.keys()) if (!server.seqs.has(seq)) return `[${TABS_RULE}] op ${seq} is in the store and not on the server`;
    return undefined;
  }
}

/** Every crash point of one seed's interleaving (the run without a crash included). */
export function checkTabsSeed(seed: number, plant?: TabsPlant): TabsResult | undefined {
  const steps = runTabs(seed, Number.MAX_SAFE_INTEGER, plant).trace.length;
  for (let k = 0; k <= steps; k++) {
    const r = runTabs(seed, k, plant);
    if (r.violation) return r;
  }
  return undefined;
}
