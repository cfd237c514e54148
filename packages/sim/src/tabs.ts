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
  // The same interleaving whatever the crash point, so crashing after step k cuts one run at k.
  const rng = new Rng(seed);
  const fate = new Rng((seed * 7919 + crashAt) >>> 0);
  const trace: string[] = [];
  const store = { ops: new Map<number, Op>(), marks: new Map<string, number>(), lastSeq: 0, reserved: 0 };
  const server = { log: [] as Op[], seqs: new Set<number>(), high: 0 };
  let channel: ChannelMsg[] = [];
  const b = { nextReq: 0, durable: new Set<number>(), leader: 'A' as 'A' | 'B' | undefined };
  let leader: Leader = open('A');

  function open(tab: 'A' | 'B'): Leader {
    const next = plant === 'no-marks' ? new Map<string, number>() : new Map(store.marks);
    // A restart numbers past every seq an earlier process may have sent (a reservation, with send-ahead).
    const lastSeq = plant === 'send-ahead' ? Math.max(store.lastSeq, store.reserved) : store.lastSeq;
    if (plant === 'send-ahead') store.reserved = lastSeq + RESERVE_BLOCK;
    const l: Leader = { tab, next, lastSeq, queue: [], socket: [], own: 0 };
    // The welcome: the store's ops the server lacks are sent again (DUR-DELIVERED).
    for (const op of [...store.ops.values()].sort((x, y) => x.seq - y.seq)) if (op.seq > server.high) l.socket.push(op);
    return l;
  }

  function submit(l: Leader, tag?: Tag): void {
    const op: Op = { seq: ++l.lastSeq, ...(tag ? { tag } : {}) };
    l.queue.push(op);
    if (plant === 'send-ahead') l.socket.push(op);
  }

  /** The leader handles a tab's requests (leader.ts: LeaderService.submit). */
  function requests(l: Leader, tab: string, reqs: readonly number[]): void {
    for (const req of reqs) {
      const step = admit(l.next.get(tab) ?? 0, req);
      if (step === 'repeat') {
        if (tab === 'B' && (store.marks.get('B') ?? 0) >= req) ack(l, req);
        continue;
      }
      l.next.set(tab, req);
      submit(l, { tab, req });
    }
  }

  function ack(l: Leader, req: number): void {
    if (l.tab === 'B') b.durable.add(req);
    else channel.push({ to: 'B', durable: req });
  }

  /** The store's atomic write of everything queued, then (without send-ahead) the frames. */
  function write(l: Leader): void {
    const ops = l.queue.splice(0);
    for (const op of ops) {
      store.ops.set(op.seq, op);
      store.lastSeq = Math.max(store.lastSeq, op.seq);
      if (op.tag) store.marks.set(op.tag.tab, Math.max(store.marks.get(op.tag.tab) ?? 0, op.tag.req));
    }
    for (const op of ops) {
      if (plant !== 'send-ahead') l.socket.push(op);
      if (op.tag) ack(l, op.tag.req);
    }
  }

  function serverReads(l: Leader): void {
    const op = l.socket.shift()!;
    if (server.seqs.has(op.seq)) return; // (client, seq) known: a duplicate frame, kept once
    server.seqs.add(op.seq);
    server.high = Math.max(server.high, op.seq);
    server.log.push(op);
  }

  const unconfirmed = () => Array.from({ length: b.nextReq }, (_, i) => i + 1).filter((r) => !b.durable.has(r));

  /** The steps possible now, each a name and what it does. */
  function steps(): [string, () => void][] {
    const out: [string, () => void][] = [];
    const l = leader;
    if (b.nextReq < REQUESTS)
      out.push([
        'B submits',
        () => {
          const req = ++b.nextReq;
          if (l.tab === 'B') requests(l, 'B', [req]);
          else if (b.leader === 'A') channel.push({ to: 'A', reqs: [req] });
        },
      ]);
    if (l.tab === 'A' && l.own < 2)
      out.push([
        'A submits its own',
        () => {
          l.own++;
          submit(l);
        },
      ]);
    if (l.queue.length) out.push(['store write', () => write(l)]);
    if (l.socket.length) out.push(['server reads', () => serverReads(l)]);
    if (channel.length)
      out.push([
        'channel delivers',
        () => {
          const m = channel.shift()!;
          if (m.to === 'A' && l.tab === 'A') requests(l, 'B', m.reqs);
          if (m.to === 'B' && l.tab === 'A') b.durable.add(m.durable);
        },
      ]);
    return out;
  }

  function crash(): void {
    trace.push('A crashes');
    // What A posted may or may not reach B; its socket's unread frames may or may not reach the server.
    channel = channel.filter((m) => m.to === 'B' && fate.float() < 0.5);
    // A socket delivers a prefix of what was written to it.
    for (let n = fate.int(0, leader.socket.length); n > 0; n--) serverReads(leader);
    // B is granted the lock: it opens the store (a restart), then hands itself its unconfirmed requests.
    for (const m of channel.splice(0)) if (m.to === 'B') b.durable.add(m.durable);
    leader = open('B');
    b.leader = 'B';
    requests(leader, 'B', unconfirmed());
  }

  let step = 0;
  for (;;) {
    if (step === crashAt && leader.tab === 'A') crash();
    const possible = steps();
    if (possible.length === 0) break;
    const [name, run] = possible[rng.int(0, possible.length - 1)];
    trace.push(name);
    run();
    step++;
  }
  return { seed, crashAt, trace, violation: check() };

  /** DUR-HANDOVER, once all is quiet. */
  function check(): string | undefined {
    for (let req = 1; req <= b.nextReq; req++) {
      const n = server.log.filter((op) => op.tag?.tab === 'B' && op.tag.req === req).length;
      if (n !== 1) return `[${TABS_RULE}] request B/${req} is in the server's log ${n} times (want once)`;
    }
    for (const seq of store.ops.keys()) if (!server.seqs.has(seq)) return `[${TABS_RULE}] op ${seq} is in the store and not on the server`;
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
