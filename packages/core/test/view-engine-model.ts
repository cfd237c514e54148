/**
 * Model-based testing support for the ViewEngine (property tests in view-engine.property.test.ts).
 *
 * - `ledger`: a small machine whose state records every effective op (so equal states mean the
 *   same ops took effect in the same order), with a state-dependent op (`withdraw`), an op that
 *   records ctx.position/ctx.author (`stamp`) and one that always throws (`boom`).
 * - `Harness`: drives one ViewEngine with abstract actions. It holds a model of the server (the
 *   global log, own ops received, visibility and stability frontiers, connection state) so every
 *   message it feeds is valid, and a naive reference that recomputes each of the five views from
 *   its full log after every input and compares it with the engine.
 *
 * The reference tracks what the engine has *processed*: a server message the engine queued for
 * batching is held in `queued` until the engine flushes its inbox (seen as nextDeadline()
 * returning to Infinity), so views can be compared after every single input.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { unreachable } from '../src/errors.ts';
import {
  applyOp,
  defineMachine,
  PROTOCOL_VERSION,
  ViewEngine,
  VIEWS,
  type Batching,
  type ClientRestore,
  type EngineOutput,
  type LogEntry,
  type OpRecord,
  type OwnOp,
  type ServerMessage,
  type Stage,
  type ViewName,
  type WireEntry,
} from '../src/index.ts';

// ------------------------------------------------------------------ machine

export interface LedgerState {
  log: string[];
  counters: Record<string, number>;
  stamps: Record<string, string>;
}

export const ledger = defineMachine({
  name: 'prop-ledger',
  version: 1,
  initial: { log: [], counters: {}, stamps: {} } as LedgerState,
  ops: {
    inc(s, a: { key: string; by: number }, ctx) {
      s.counters[a.key] = (s.counters[a.key] ?? 0) + a.by;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
    withdraw(s, a: { key: string; amount: number }, ctx) {
      const have = s.counters[a.key] ?? 0;
      if (have < a.amount) throw new Error(`insufficient ${a.key}: have ${have}, need ${a.amount}`);
      s.counters[a.key] = have - a.amount;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
    stamp(s, a: { key: string }, ctx) {
      s.stamps[a.key] = `${ctx.author}/${ctx.client}:${ctx.seq}@${ctx.position}`;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
    boom(_s, _a: null, _ctx) {
      throw new Error('boom');
    },
    bump(s, _a: undefined, ctx) {
      s.counters.n = (s.counters.n ?? 0) + 1;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
  },
});

export const ME = 'me';
export const OTHER = 'other';
export const MEMBERS = [ME, OTHER];

// ------------------------------------------------------------------ abstract actions

export interface OpSpec {
  name: 'inc' | 'withdraw' | 'stamp' | 'boom' | 'bump';
  args: { key: string; by: number } | { key: string; amount: number } | { key: string } | null | undefined;
}

export type LogItem = { remote: OpSpec } | { own: true };

export type Action =
  | { t: 'submit'; op: OpSpec }
  | { t: 'durable'; k: number }
  /** The store confirms a reservation of our seqs up to lastSeq + k (ViewEngine.reserved). */
  | { t: 'reserve'; k: number }
  | { t: 'connect' }
  | { t: 'welcome' }
  | { t: 'disconnect' }
  | { t: 'log'; items: LogItem[] }
  | { t: 'visible'; k: number }
  | { t: 'stable'; k: number }
  | { t: 'tick'; dt: number }
  | { t: 'compact' }
  | { t: 'setBatching'; mode: number }
  | { t: 'meta'; kind: 'members' | 'deregister' | 'ping' };

/** Batching modes a run may switch between (`setBatching`). */
export const BATCHING_MODES: readonly Batching[] = ['off', { intervalMs: 10 }, { auto: true, budgetMs: 0 }, { auto: true, budgetMs: 0, intervalMs: 5 }];

const keyArb = fc.constantFrom('a', 'b');
export const opArb: fc.Arbitrary<OpSpec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ key: keyArb, by: fc.integer({ min: 1, max: 3 }) }, { noNullPrototype: true }).map((args): OpSpec => ({ name: 'inc', args })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({ key: keyArb, amount: fc.integer({ min: 1, max: 4 }) }, { noNullPrototype: true })
      .map((args): OpSpec => ({ name: 'withdraw', args })),
  },
  { weight: 2, arbitrary: keyArb.map((key): OpSpec => ({ name: 'stamp', args: { key } })) },
  { weight: 1, arbitrary: fc.constant<OpSpec>({ name: 'boom', args: null }) },
  { weight: 1, arbitrary: fc.constant<OpSpec>({ name: 'bump', args: undefined }) },
);

export const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: opArb.map((op): Action => ({ t: 'submit', op })) },
  { weight: 3, arbitrary: fc.nat(7).map((k): Action => ({ t: 'durable', k })) },
  { weight: 1, arbitrary: fc.nat(3).map((k): Action => ({ t: 'reserve', k })) },
  { weight: 1, arbitrary: fc.constant<Action>({ t: 'connect' }) },
  { weight: 2, arbitrary: fc.constant<Action>({ t: 'welcome' }) },
  { weight: 1, arbitrary: fc.constant<Action>({ t: 'disconnect' }) },
  {
    weight: 5,
    arbitrary: fc
      .array(
        fc.oneof(
          opArb.map((op): LogItem => ({ remote: op })),
          fc.constant<LogItem>({ own: true }),
          fc.constant<LogItem>({ own: true }),
        ),
        { minLength: 1, maxLength: 3 },
      )
      .map((items): Action => ({ t: 'log', items })),
  },
  { weight: 3, arbitrary: fc.nat(7).map((k): Action => ({ t: 'visible', k })) },
  { weight: 2, arbitrary: fc.nat(15).map((k): Action => ({ t: 'stable', k })) },
  { weight: 1, arbitrary: fc.constant<Action>({ t: 'compact' }) },
  { weight: 1, arbitrary: fc.nat(BATCHING_MODES.length - 1).map((mode): Action => ({ t: 'setBatching', mode })) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 30 }).map((dt): Action => ({ t: 'tick', dt })) },
  { weight: 1, arbitrary: fc.constantFrom<'members' | 'deregister' | 'ping'>('members', 'deregister', 'ping').map((kind): Action => ({ t: 'meta', kind })) },
);

/** Actions, optionally preceded by connect + welcome so most runs talk to the server early. */
export const actionsArb = (maxLength: number): fc.Arbitrary<Action[]> =>
  fc
    .tuple(fc.boolean(), fc.array(actionArb, { maxLength, size: 'max' }))
    .map(([early, rest]) => (early ? [{ t: 'connect' } as Action, { t: 'welcome' } as Action, ...rest] : rest));

// ------------------------------------------------------------------ restore scenarios

export interface RestoreSpec {
  /** History the server already has: remote ops and our ops (seq 1, 2, ... in order). */
  pre: LogItemWithOp[];
  /** Ops persisted after the last ordered one, never ordered. */
  extra: OpSpec[];
  prune: number;
  stable: number;
  visible: number;
  base: number | null;
  /** Where the server's checkpoint is (modulo the stable frontier + 1). */
  compact: number;
}
export type LogItemWithOp = { remote: OpSpec } | { own: OpSpec };

export const restoreArb: fc.Arbitrary<RestoreSpec> = fc.record({
  pre: fc.array(
    fc.oneof(
      opArb.map((op): LogItemWithOp => ({ remote: op })),
      opArb.map((op): LogItemWithOp => ({ own: op })),
    ),
    { maxLength: 8, size: 'max' },
  ),
  extra: fc.array(opArb, { maxLength: 4, size: 'max' }),
  prune: fc.nat(),
  stable: fc.nat(),
  visible: fc.nat(),
  base: fc.option(fc.nat(), { nil: null }),
  compact: fc.nat(),
});

// ------------------------------------------------------------------ harness

interface RefOwn {
  seq: number;
  name: string;
  args: unknown;
  durable: boolean;
  /** Position of its entry, once the engine has processed that entry (or a checkpoint over it). */
  pos?: number;
  /** Learned ordered from a checkpoint welcome: the engine cannot know its position. */
  compacted?: boolean;
  handle: OwnOp;
}

export interface HarnessOptions {
  batching: Batching;
  restore?: RestoreSpec;
  /** The author the server stamps on our ops (and names in its welcome). Default: the client id. */
  serverAuthor?: string;
  /** Also check the header's claim: adjacent views with equal logs share one snapshot object. */
  checkAdjacentIdentity?: boolean;
  /**
   * Require that disconnected() emits no client frames (the transport is closed). Off by default
   * because of a known engine issue: see the skipped test in view-engine.property.test.ts.
   */
  strictDisconnect?: boolean;
}

const STAGE_RANK: Record<Stage, number> = { submitted: 0, durable: 1, authoritative: 2, visible: 3, rejected: 4 };
const STAGE_ORDER: Stage[] = ['submitted', 'durable', 'authoritative', 'visible'];

/** An op in a view's log, for telling whether the log changed (its index gives its position). */
const token = (e: LogEntry) => `${e.author}|${e.client}:${e.seq}${e.error !== undefined ? '!' : ''}`;

function carriesRemote(msg: ServerMessage): boolean {
  return msg.t === 'log' && msg.entries.some((w) => w.k === 'op' && w.e.client !== ME);
}

const frozenSeen = new WeakSet<object>();
function assertDeepFrozen(v: unknown, path: string): void {
  if (v === null || typeof v !== 'object' || frozenSeen.has(v)) return;
  assert.ok(Object.isFrozen(v), `${path} is not frozen`);
  for (const [k, x] of Object.entries(v)) assertDeepFrozen(x, `${path}.${k}`);
  frozenSeen.add(v);
}

type Views<T> = Record<ViewName, T>;

/** How often interesting situations occur across runs (for judging the generators). */
export const coverage: Record<string, number> = {};
const cover = (k: string) => {
  coverage[k] = (coverage[k] ?? 0) + 1;
};

export class Harness {
  now = 0;
  cpu = 0;
  /** The engine's current batching mode. */
  batching: Batching;
  readonly engine: ViewEngine<LedgerState>;
  readonly trace: string[] = [];

  // ---- server model
  /** The global log, never compacted. */
  readonly log: LogEntry[] = [];
  /** Whether the engine keeps op digests (not when restored from records without them). */
  private digests = true;
  /** states[n] = fold of log[0..n], computed one op at a time with applyOp from the initial state. */
  readonly states: LedgerState[] = [ledger.initial];
  /** Our ops the server has received (seq -> op). */
  readonly srvReceived = new Map<number, OpRecord>();
  srvHighWater = 0;
  srvVisibleSeq = 0;
  srvStable = 0;
  /** The server's checkpoint: entries up to here are compacted away (§4.6). */
  srvCheckpoint = 0;
  readonly srvAuthor: string;
  otherSeq = 0;
  conn: 'offline' | 'hello' | 'ready' = 'offline';
  /** `have` from the client's last hello. */
  have = 0;
  /** Highest seq sent in an `ops` frame on this connection (starts at the welcome's highWater). */
  sentMax = 0;

  // ---- reference: what the engine has processed
  readonly own = new Map<number, RefOwn>();
  lastSeq = 0;
  /** Our ops up to here may be sent before they are durable (DUR-BEFORE-SEND). */
  reservedSeq = 0;
  recvLen = 0;
  visSeq = 0;
  stableRecv = 0;
  base = 0;
  /** The highest own seq inside the restored base (BaseSnapshot.ownSeq); this model saves no other. */
  baseOwnSeq = 0;
  refHighWater = 0;
  /** The author the engine knows for its own ops: the client id until a welcome names one. */
  refAuthor = ME;
  /** A checkpoint replaced the certain views during this step. */
  private checkpointThisStep = false;
  /** Deregister messages processed and not yet answered with a register. */
  deregistered = 0;
  /** Messages delivered to the engine that it has queued for batching, in order. */
  queued: ServerMessage[] = [];
  /** When the engine last applied remote ops, on its clock (auto batching allows one such step per interval). */
  lastRemoteStep = -Infinity;

  // ---- observations from the previous step
  private prevSnap: Views<LedgerState>;
  private prevSig: Views<string>;
  private readonly prevStage = new Map<number, Stage>();

  constructor(readonly opts: HarnessOptions) {
    const batching = (this.batching = opts.batching);
    this.srvAuthor = opts.serverAuthor ?? ME;
    let restore: ClientRestore | undefined;
    if (opts.restore) restore = this.setUpRestore(opts.restore);
    this.engine = new ViewEngine(ledger, { clientId: ME, now: () => this.now, cpuNow: () => (this.cpu += 0.25), batching }, restore);
    for (const op of this.engine.pending()) {
      const r = this.own.get(op.seq);
      assert.ok(r, `restored engine holds op ${op.id} that was not restored`);
      r.handle = op;
    }
    for (const r of this.own.values()) assert.ok(r.handle, `restored op ${r.seq} missing from pending()`);
    this.prevSnap = this.snaps();
    this.prevSig = this.refViews().sig;
    // The engine's starting point must already match the reference.
    this.check(this.engine.drain(), { t: 'tick', dt: 0 }, true);
  }

  private setUpRestore(spec: RestoreSpec): ClientRestore {
    let ownSeq = 0;
    const ownPos: number[] = [];
    for (const it of spec.pre) {
      if ('remote' in it) this.append(OTHER, ++this.otherSeq, it.remote);
      else {
        const e = this.append(ME, ++ownSeq, it.own);
        ownPos[ownSeq] = e.pos;
        this.srvReceived.set(ownSeq, { client: ME, seq: ownSeq, name: it.own.name, args: it.own.args });
      }
    }
    const h = ownSeq;
    this.srvHighWater = h;
    const len = this.log.length;
    this.srvStable = spec.stable % (len + 1);
    // Every own op inside the stable prefix has been delivered to everyone: it is visible.
    let maxOwnInStable = 0;
    for (let i = 0; i < this.srvStable; i++) if (this.log[i].client === ME) maxOwnInStable = this.log[i].seq;
    this.srvVisibleSeq = Math.max(maxOwnInStable, spec.visible % (h + 1));
    // The base is a stable prefix; the client deleted exactly its ops inside it (p), with it,
    // and keeps every later one (ClientStorage.saveBase). Without a base it deleted none.
    const B = spec.base === null ? 0 : spec.base % (this.srvStable + 1);
    let p = 0;
    for (let i = 0; i < B; i++) if (this.log[i].client === ME) p = this.log[i].seq;
    this.srvCheckpoint = spec.compact % (this.srvStable + 1);
    const durable: OpRecord[] = [];
    for (let s = p + 1; s <= h; s++) durable.push(this.srvReceived.get(s)!);
    let seq = h;
    for (const op of spec.extra) durable.push({ client: ME, seq: ++seq, name: op.name, args: op.args });
    const L = seq;
    for (const r of durable) this.own.set(r.seq, { seq: r.seq, name: r.name, args: r.args, durable: true, handle: undefined as unknown as OwnOp });
    this.lastSeq = L;
    // These records carry no digests (as a store from before digests): the engine keeps none.
    this.digests = L === 0;
    this.base = this.recvLen = this.stableRecv = B;
    this.baseOwnSeq = p;
    this.trace.push(
      `restore lastSeq=${L} durable=[${durable.map((d) => d.seq)}] base=${spec.base === null ? 'none' : B} serverLog=[${this.log.map(token)}] stable=${this.srvStable} visibleSeq=${this.srvVisibleSeq} checkpoint=${this.srvCheckpoint}`,
    );
    return {
      lastSeq: L,
      durable: structuredClone(durable),
      // The base comes off the client's disk: a fresh copy.
      ...(spec.base === null ? {} : { base: { pos: B, state: structuredClone(this.states[B]), ownSeq: p } }),
    };
  }

  /** Sequence an op at the end of the global log; the verdict is the machine's at that position. */
  private append(client: string, seq: number, op: OpSpec | OpRecord): LogEntry {
    const pos = this.log.length + 1;
    const prev = this.states[pos - 1];
    const inv = { client, seq, name: op.name, args: op.args, author: client === ME ? this.srvAuthor : client };
    const r = applyOp(ledger, prev, inv, pos);
    const e: LogEntry = r.error !== undefined ? { pos, ...inv, error: r.error } : { pos, ...inv };
    this.log.push(e);
    this.states.push(r.state);
    if (client === ME) this.srvHighWater = seq;
    return e;
  }

  private interval(): number {
    const b = this.batching;
    return b === 'off' ? 0 : (b.intervalMs ?? 16);
  }

  // ---------------------------------------------------------------- driving

  run(actions: readonly Action[]): void {
    for (const a of actions) this.step(a);
  }

  step(a: Action): void {
    this.trace.push(JSON.stringify(a));
    const e = this.engine;
    switch (a.t) {
      case 'submit': {
        const handle = e.submit(a.op.name, a.op.args);
        e.flushSends(); // as the client driver does once the submitting turn ends
        const seq = ++this.lastSeq;
        assert.equal(handle.seq, seq, 'submit assigns the next seq');
        assert.equal(handle.stage, 'submitted');
        this.own.set(seq, { seq, name: a.op.name, args: structuredClone(a.op.args), durable: false, handle });
        break;
      }
      case 'durable': {
        const waiting = [...this.own.values()]
          .filter((o) => !o.durable)
          .map((o) => o.seq)
          .sort((x, y) => x - y);
        const target = waiting.length ? waiting[a.k % waiting.length] : this.lastSeq;
        e.durable(target);
        for (const o of this.own.values()) if (o.seq <= target) o.durable = true;
        break;
      }
      case 'reserve':
        this.reservedSeq = Math.max(this.reservedSeq, this.lastSeq + a.k);
        e.reserved(this.lastSeq + a.k);
        break;
      case 'connect':
        if (this.conn !== 'offline') return this.skip(a);
        e.connected();
        this.conn = 'hello';
        this.afterFlushPoint(true);
        break;
      case 'disconnect':
        if (this.conn === 'offline') return this.skip(a);
        e.disconnected();
        this.conn = 'offline';
        this.afterFlushPoint(true);
        break;
      case 'welcome': {
        if (this.conn !== 'hello') return this.skip(a);
        this.conn = 'ready';
        this.sentMax = this.srvHighWater;
        const rejected = this.log.filter((x) => x.client === ME && x.error !== undefined).map((x) => ({ seq: x.seq, error: x.error! }));
        // Like the room engine: resume from `have` if the server still holds the entries after
        // it, else send its checkpoint (as it would arrive off the wire: a fresh copy).
        const resume = this.have >= this.srvCheckpoint;
        const from = resume ? this.have + 1 : this.srvCheckpoint + 1;
        this.deliver({
          t: 'welcome',
          v: PROTOCOL_VERSION,
          client: ME,
          author: this.srvAuthor,
          ...(resume ? {} : { checkpoint: { pos: this.srvCheckpoint, state: structuredClone(this.states[this.srvCheckpoint]) } }),
          from,
          entries: this.log.slice(from - 1),
          highWater: this.srvHighWater,
          visibleSeq: this.srvVisibleSeq,
          rejected,
          stable: this.srvStable,
          members: MEMBERS,
        });
        break;
      }
      case 'log': {
        const from = this.log.length + 1;
        const entries: WireEntry[] = [];
        for (const it of a.items) {
          if ('remote' in it) {
            const en = this.append(OTHER, ++this.otherSeq, it.remote);
            entries.push({ k: 'op', e: en });
          } else {
            // Our ops are ordered in seq order, only once the server has received them.
            const next = this.srvReceived.get(this.srvHighWater + 1);
            if (!next) continue;
            const en = this.append(ME, next.seq, next);
            entries.push(en.error !== undefined ? { k: 'own', seq: en.seq, error: en.error } : { k: 'own', seq: en.seq });
          }
        }
        if (entries.length === 0) return this.skip(a);
        if (this.conn === 'ready') this.deliver({ t: 'log', from, entries });
        else this.trace.push(`  (sequenced while the client is not ready: ${entries.length} entries)`);
        break;
      }
      case 'visible': {
        const cands = this.log.filter((x) => x.client === ME && x.seq > this.srvVisibleSeq).map((x) => x.seq);
        if (cands.length === 0) return this.skip(a);
        this.srvVisibleSeq = cands[a.k % cands.length];
        if (this.conn === 'ready') this.deliver({ t: 'visible', seq: this.srvVisibleSeq });
        break;
      }
      case 'stable': {
        // Every member has received the log up to pos. While we are connected that is bounded by
        // what was sent to us (all of the log); while we are not, we may have been dropped from
        // the visibility set and the next welcome carries the entries before the frontier.
        const bound = this.log.length;
        if (bound <= this.srvStable) return this.skip(a);
        this.srvStable += 1 + ((a.k >> 1) % (bound - this.srvStable));
        // Everyone else has our ops inside the stable prefix: they are visible. The server tells
        // us, before or after the stable frontier (then the engine clamps stable meanwhile).
        let maxOwn = 0;
        for (let i = 0; i < this.srvStable; i++) if (this.log[i].client === ME) maxOwn = this.log[i].seq;
        const newlyVisible = maxOwn > this.srvVisibleSeq;
        if (newlyVisible) this.srvVisibleSeq = maxOwn;
        if (this.conn === 'ready') {
          const visibleFirst = (a.k & 1) === 0;
          if (newlyVisible && visibleFirst) this.deliver({ t: 'visible', seq: maxOwn });
          this.deliver({ t: 'stable', pos: this.srvStable });
          if (newlyVisible && !visibleFirst) this.deliver({ t: 'visible', seq: maxOwn });
        }
        break;
      }
      case 'setBatching':
        this.batching = BATCHING_MODES[a.mode];
        e.setBatching(this.batching);
        this.afterFlushPoint(this.batching === 'off');
        break;
      case 'compact':
        if (this.srvCheckpoint === this.srvStable) return this.skip(a);
        this.srvCheckpoint = this.srvStable;
        break;
      case 'tick': {
        const due = e.nextDeadline();
        this.now += a.dt;
        e.tick();
        if (due <= this.now) assert.equal(e.nextDeadline(), Infinity, 'tick past the deadline flushes the batch');
        else assert.equal(e.nextDeadline(), due, 'tick before the deadline keeps the batch');
        this.afterFlushPoint(false);
        break;
      }
      case 'meta': {
        if (this.conn !== 'ready') return this.skip(a);
        this.deliver(
          a.kind === 'members' ? { t: 'members', members: MEMBERS } : a.kind === 'ping' ? { t: 'ping' } : { t: 'deregister', reason: 'ack timeout' },
        );
        break;
      }
      default:
        unreachable(a, 'action');
    }
    this.check(e.drain(), a, false);
  }

  private skip(a: Action): void {
    this.trace[this.trace.length - 1] += ' (skipped)';
    this.check(this.engine.drain(), { t: 'tick', dt: 0 }, false);
    void a;
  }

  /** Hand a message to the engine and mirror in the reference whether it was processed or queued. */
  private deliver(msg: ServerMessage): void {
    const e = this.engine;
    const deadlineBefore = e.nextDeadline();
    const wasQueued = deadlineBefore !== Infinity;
    e.receive(msg);
    const queuedNow = e.nextDeadline() !== Infinity;
    const b = this.batching;
    if (b === 'off') assert.equal(queuedNow, false, 'batching off never queues');
    if (wasQueued) {
      assert.ok(queuedNow, 'a frame behind a queued frame waits too');
      assert.equal(e.nextDeadline(), deadlineBefore, 'queueing more frames keeps the deadline');
    } else {
      if (!carriesRemote(msg)) assert.equal(queuedNow, false, 'frames without remote ops never wait on an empty inbox');
      if (b !== 'off' && !('auto' in b)) assert.equal(queuedNow, carriesRemote(msg), 'interval batching queues every frame with remote ops');
      const auto = b !== 'off' && 'auto' in b;
      const sinceLast = this.now - this.lastRemoteStep;
      if (auto && carriesRemote(msg) && sinceLast < this.interval())
        assert.ok(queuedNow, 'auto batching: at most one immediate step with remote ops per interval');
      if (queuedNow) {
        // Auto batching queues for one of two reasons: cost over budget (one interval from now),
        // or a step less than an interval ago (the end of that step's interval).
        const ok = [this.now + this.interval(), ...(auto && sinceLast < this.interval() ? [this.lastRemoteStep + this.interval()] : [])];
        assert.ok(ok.includes(e.nextDeadline()), `deadline ${e.nextDeadline()} is one of ${ok.join(', ')}`);
      } else if (auto && carriesRemote(msg)) {
        this.lastRemoteStep = this.now;
      }
    }
    cover(`msg:${msg.t}${queuedNow ? ':queued' : ''}`);
    if (msg.t === 'welcome' && msg.entries.some((x) => x.client === ME)) cover('welcome:own-catch-up');
    if (msg.t === 'welcome' && msg.checkpoint) cover('welcome:checkpoint');
    if (
      msg.t === 'welcome' &&
      msg.checkpoint &&
      [...this.own.values()].some(
        (o) => o.pos === undefined && o.seq <= msg.highWater && this.log.findIndex((x) => x.client === ME && x.seq === o.seq) < msg.checkpoint!.pos,
      )
    )
      cover('welcome:checkpoint-over-own-durable');
    if (msg.t === 'log')
      for (const w of msg.entries) cover(w.k === 'own' ? (w.error ? 'entry:own-rejected' : 'entry:own') : w.e.error ? 'entry:remote-rejected' : 'entry:remote');
    if (queuedNow) {
      this.queued.push(msg);
      this.trace[this.trace.length - 1] += ' (queued)';
    } else {
      this.refProcess(msg);
    }
  }

  private afterFlushPoint(mustFlush: boolean): void {
    const flushed = this.engine.nextDeadline() === Infinity;
    if (mustFlush) assert.ok(flushed, 'connect/disconnect flush the batch');
    if (flushed && this.queued.length) {
      cover('flush');
      this.lastRemoteStep = this.now;
      const q = this.queued;
      this.queued = [];
      for (const m of q) this.refProcess(m);
    }
  }

  /** The reference's reaction to a message the engine has processed. */
  private refProcess(msg: ServerMessage): void {
    const onEntries = (from: number, n: number) => {
      assert.equal(from, this.recvLen + 1, 'harness: message continues the processed log');
      for (let i = 0; i < n; i++) {
        const en = this.log[from - 1 + i];
        if (en.client !== ME) continue;
        this.refHighWater = Math.max(this.refHighWater, en.seq);
        const o = this.own.get(en.seq);
        if (o) o.pos = en.pos;
      }
      this.recvLen = from - 1 + n;
    };
    switch (msg.t) {
      case 'welcome':
        this.refAuthor = msg.author;
        if (msg.checkpoint) {
          this.checkpointThisStep = true;
          // Our ops inside the checkpoint that we had not seen ordered: ordered, position unknown.
          for (let i = 0; i < msg.checkpoint.pos; i++) {
            const en = this.log[i];
            const o = en.client === ME ? this.own.get(en.seq) : undefined;
            if (o && o.pos === undefined) {
              o.pos = en.pos;
              o.compacted = true;
            }
          }
          assert.ok(msg.checkpoint.pos > this.recvLen, 'harness: checkpoint only ahead of what the client holds');
          this.recvLen = msg.checkpoint.pos;
        }
        onEntries(msg.from, msg.entries.length);
        this.refHighWater = Math.max(this.refHighWater, msg.highWater);
        this.visSeq = Math.max(this.visSeq, msg.visibleSeq);
        this.stableRecv = Math.max(this.stableRecv, msg.stable);
        return;
      case 'log':
        return onEntries(msg.from, msg.entries.length);
      case 'visible':
        this.visSeq = Math.max(this.visSeq, msg.seq);
        return;
      case 'stable':
        this.stableRecv = Math.max(this.stableRecv, msg.pos);
        return;
      case 'deregister':
        this.deregistered++;
        return;
      default:
        return;
    }
  }

  // ---------------------------------------------------------------- reference

  private foldOwn(state: LedgerState, ops: readonly RefOwn[], first: number): LedgerState {
    let s = state;
    ops.forEach((o, i) => {
      s = applyOp(ledger, s, { client: ME, seq: o.seq, name: o.name, args: o.args, author: this.refAuthor }, first + i).state;
    });
    return s;
  }

  refViews() {
    const authLen = this.recvLen;
    let visLen = authLen;
    for (let i = this.base; i < authLen; i++) {
      const en = this.log[i];
      if (en.client === ME && en.seq > this.visSeq) {
        visLen = i;
        break;
      }
    }
    const stLen = Math.min(this.stableRecv, visLen);
    const mine = [...this.own.values()].sort((x, y) => x.seq - y.seq);
    const dur = mine.filter((o) => o.durable && o.pos === undefined);
    // (An op sent under a reservation may be ordered before its store confirms it.)
    const sub = mine.filter((o) => !o.durable && o.pos === undefined);
    const auth = this.states[authLen];
    const dState = this.foldOwn(auth, dur, authLen + 1);
    const sState = this.foldOwn(dState, sub, authLen + dur.length + 1);
    const logToks = (n: number) => this.log.slice(0, n).map(token);
    const authToks = logToks(authLen);
    const specTok = (o: RefOwn) => `${this.refAuthor}|${ME}:${o.seq}`;
    const durToks = [...authToks, ...dur.map(specTok)];
    const subToks = [...durToks, ...sub.map(specTok)];
    return {
      len: { stable: stLen, visible: visLen, authoritative: authLen, durable: authLen + dur.length, submitted: authLen + dur.length + sub.length },
      state: { stable: this.states[stLen], visible: this.states[visLen], authoritative: auth, durable: dState, submitted: sState } as Views<LedgerState>,
      sig: {
        stable: logToks(stLen).join(','),
        visible: logToks(visLen).join(','),
        authoritative: authToks.join(','),
        durable: durToks.join(','),
        submitted: subToks.join(','),
      } as Views<string>,
    };
  }

  private expectedStage(o: RefOwn): Stage {
    if (o.pos === undefined) return o.durable ? 'durable' : 'submitted';
    if (this.log[o.pos - 1].error !== undefined) return 'rejected';
    return o.seq <= this.visSeq ? 'visible' : 'authoritative';
  }

  private snaps(): Views<LedgerState> {
    const s = {} as Views<LedgerState>;
    for (const v of VIEWS) s[v] = this.engine.getState(v);
    return s;
  }

  // ---------------------------------------------------------------- checks

  private check(out: EngineOutput, a: Action, initial: boolean): void {
    const e = this.engine;
    const where = () => `\ntrace:\n  ${this.trace.join('\n  ')}`;

    assert.deepEqual(out.warnings, [], `engine warned on a valid conversation${where()}`);
    assert.equal(e.stats.divergences, 0);
    assert.equal(out.fatal, undefined);

    // Positions: the prefix chain always; exact lengths against the reference.
    const p = e.positions();
    assert.ok(
      p.stable <= p.visible && p.visible <= p.authoritative && p.authoritative <= p.durable && p.durable <= p.submitted,
      `positions not a chain: ${JSON.stringify(p)}${where()}`,
    );
    const ref = this.refViews();
    assert.deepEqual(p, ref.len, `positions differ from the reference${where()}`);

    // Inspection APIs agree: the held window is exactly (stable, authoritative] of the global
    // log; the speculative views' logs are authoritative + our pending ops in seq order.
    const held = e.heldEntries();
    assert.deepEqual(
      held.map((x) => x.pos),
      Array.from({ length: p.authoritative - p.stable }, (_, i) => p.stable + 1 + i),
      `heldEntries window${where()}`,
    );
    for (const x of held) {
      const g = this.log[x.pos - 1];
      assert.deepEqual([x.client, x.seq, x.name, x.author, x.error], [g.client, g.seq, g.name, g.author, g.error], `held entry ${x.pos}`);
    }
    const pendingIds = (n: number) =>
      [...this.own.values()]
        .filter((o) => o.pos === undefined)
        .sort((x, y) => x.seq - y.seq)
        .slice(0, n)
        .map((o) => `${ME}:${o.seq}`);
    assert.deepEqual(e.viewLog('durable'), { upTo: p.authoritative, tail: pendingIds(p.durable - p.authoritative) });
    assert.deepEqual(e.viewLog('submitted'), { upTo: p.authoritative, tail: pendingIds(p.submitted - p.authoritative) });

    // Views: frozen, equal to the naive fold of their logs.
    const now = this.snaps();
    for (const v of VIEWS) {
      assertDeepFrozen(now[v], v);
      assert.deepStrictEqual(now[v], ref.state[v], `${v} view differs from the reference fold of its log${where()}`);
    }

    if (!initial) {
      // `changed` reports exactly the views whose snapshot identity changed.
      for (const v of VIEWS) {
        assert.equal(out.changed.has(v), now[v] !== this.prevSnap[v], `changed.has(${v}) wrong${where()}`);
      }
      // A view whose log did not change keeps its snapshot object. (Not across a checkpoint: it
      // replaces the certain views wholesale and the speculative ones are rebased on it, even
      // when the ops in their logs happen to be the same.)
      if (!this.checkpointThisStep)
        for (const v of VIEWS) {
          if (ref.sig[v] === this.prevSig[v]) assert.ok(now[v] === this.prevSnap[v], `${v} log unchanged but snapshot replaced${where()}`);
        }
      // The same, stated per input (independent of the signature bookkeeping).
      const keep = (vs: ViewName[]) => {
        for (const v of vs) assert.ok(now[v] === this.prevSnap[v], `${a.t}: ${v} snapshot replaced${where()}`);
      };
      if (a.t === 'submit') keep(['durable', 'authoritative', 'visible', 'stable']);
      if (a.t === 'durable') keep(['submitted', 'authoritative', 'visible', 'stable']);
      const processedNow = this.queued.length === 0 && !this.trace[this.trace.length - 1].endsWith('(skipped)');
      if (a.t === 'visible' && processedNow && this.conn === 'ready') keep(['authoritative', 'durable', 'submitted']);
      if (a.t === 'stable' && processedNow && this.conn === 'ready') keep(['submitted', 'durable', 'authoritative']);
      if (a.t === 'meta') keep([...VIEWS]);
    }

    if (this.opts.checkAdjacentIdentity) {
      for (let i = 0; i + 1 < VIEWS.length; i++) {
        const [newer, older] = [VIEWS[i], VIEWS[i + 1]];
        if (ref.sig[newer] === ref.sig[older])
          assert.ok(now[newer] === now[older], `${newer} and ${older} have equal logs but different snapshot objects${where()}`);
      }
    }

    // Own-op stages: as the reference says, only forward, each change reported in `progressed`.
    const changedOps = new Set<number>();
    for (const o of this.own.values()) {
      const h = o.handle;
      const want = this.expectedStage(o);
      assert.equal(h.stage, want, `op ${h.id} stage${where()}`);
      const prev = this.prevStage.get(o.seq);
      if (prev !== h.stage) {
        if (!initial) changedOps.add(o.seq);
        if (prev !== undefined) {
          assert.notEqual(prev, 'rejected', `op ${h.id} left rejected`);
          assert.ok(STAGE_RANK[h.stage] > STAGE_RANK[prev], `op ${h.id} went back from ${prev} to ${h.stage}${where()}`);
        }
      }
      if (prev !== h.stage) cover(`stage:${h.stage}${o.durable ? '' : ':before-durable'}`);
      this.prevStage.set(o.seq, h.stage);
      if (o.pos !== undefined) {
        if (!o.compacted) assert.equal(h.pos, o.pos, `op ${h.id} position`);
        assert.equal(h.error, this.log[o.pos - 1].error, `op ${h.id} error`);
      } else {
        assert.equal(h.error, undefined);
      }
      // Stage times: every stage reached has a time, in order, never in the future.
      const reached = h.stage === 'rejected' ? [] : STAGE_ORDER.slice(0, STAGE_ORDER.indexOf(h.stage) + 1);
      let last = -Infinity;
      for (const s of reached) {
        const t = h.times[s];
        assert.ok(t !== undefined && t >= last && t <= this.now, `op ${h.id} times ${JSON.stringify(h.times)}`);
        last = t;
      }
      if (h.stage === 'rejected') assert.ok(h.times.rejected !== undefined && h.times.rejected <= this.now);
    }
    assert.deepEqual(new Set(out.progressed.map((o) => o.seq)), changedOps, `progressed lists exactly the ops whose stage changed${where()}`);
    for (const o of out.progressed) assert.ok(this.own.get(o.seq)?.handle === o, 'progressed hands out the op handle');

    // Persist: exactly the op just submitted.
    if (a.t === 'submit') {
      const o = this.own.get(this.lastSeq)!;
      assert.deepEqual(
        out.persist.map(({ digest: _, ...r }) => r),
        [{ client: ME, seq: o.seq, name: o.name, args: o.args }],
      );
      assert.equal(
        typeof out.persist[0].digest,
        this.digests ? 'number' : 'undefined',
        'each persisted op carries its digest, unless restored from a store that kept none',
      );
    } else {
      assert.deepEqual(out.persist, []);
    }
    // The base to keep is the Stable view, and names exactly our ops inside it (the store deletes
    // those with it, and must keep every other).
    const base = e.baseToSave();
    assert.equal(base.pos, e.positions().stable);
    assert.equal(base.state, e.getState('stable'));
    let ownInBase = 0;
    for (let i = 0; i < base.pos; i++) if (this.log[i]?.client === ME) ownInBase = Math.max(ownInBase, this.log[i].seq);
    assert.equal(base.ownSeq, ownInBase, `baseToSave().ownSeq is the highest own seq inside the Stable view${where()}`);
    assert.deepEqual(e.persistedShape(), { lastSeq: this.lastSeq, highWater: this.refHighWater });

    if (a.t === 'disconnect' && this.opts.strictDisconnect) assert.deepEqual(out.send, [], `disconnected() emitted frames for a closed transport${where()}`);
    // Sends: the server model receives them.
    for (const m of out.send) {
      switch (m.t) {
        case 'hello':
          assert.equal(a.t, 'connect');
          assert.equal(m.have, this.recvLen, 'hello.have is the processed log length');
          this.have = m.have;
          break;
        case 'ops':
          assert.equal(this.conn, 'ready', 'ops sent only after the welcome');
          for (const op of m.ops) {
            assert.ok(op.seq > this.sentMax, `op ${op.seq} sent twice or out of order on one connection`);
            this.sentMax = op.seq;
            const o = this.own.get(op.seq);
            assert.ok(o && (o.durable || op.seq <= this.reservedSeq), `op ${op.seq} sent before it was durable or reserved`);
            assert.deepEqual({ name: op.name, args: op.args }, { name: o.name, args: o.args });
            if (!this.srvReceived.has(op.seq)) this.srvReceived.set(op.seq, { client: ME, seq: op.seq, name: op.name, args: op.args });
          }
          break;
        case 'ack':
          assert.equal(this.conn, 'ready');
          assert.equal(m.pos, this.recvLen, 'ack is the processed log length');
          break;
        case 'register':
          // Answer to a deregister. Known issue: a deregister queued behind a batched frame is
          // processed by disconnected()'s flush, and the register comes out of that call.
          assert.ok(this.deregistered > 0, `register sent without a deregister${where()}`);
          this.deregistered--;
          if (a.t === 'disconnect') assert.ok(!this.opts.strictDisconnect, `disconnected() emitted a register frame for a closed transport${where()}`);
          break;
        case 'settled':
          // This model saves no base: the only one the store holds is the restored one (OP-VERDICT-KEPT).
          assert.equal(this.conn, 'ready');
          assert.ok(m.seq > 0 && m.seq === this.baseOwnSeq, `settled ${m.seq}, but the store's base holds our ops up to ${this.baseOwnSeq}${where()}`);
          break;
        case 'presence':
          assert.fail('presence sent, though this conversation never set it');
          break;
        case 'receipts':
          assert.fail('receipts asked for, though the view engine never asks (ClientRoom.onReceipts does)');
          break;
        default:
          unreachable(m, 'client message');
      }
    }
    // Liveness: while connected, every durable op has reached the server.
    if (this.conn === 'ready') {
      for (const o of this.own.values()) {
        // (One sent under a reservation may also wait for its write: a burst past RECENT_DIGESTS.)
        if (o.durable && o.seq > this.srvHighWater) assert.ok(this.srvReceived.has(o.seq), `durable op ${o.seq} never sent${where()}`);
      }
    }

    this.prevSnap = now;
    this.prevSig = ref.sig;
    this.checkpointThisStep = false;
  }
}
