/**
 * 3. Rebase cost on the paper's benchmark app (§7.3): a 100 KB byte array (100,000 elements),
 * ops of 500 increments, 100 pending ops. Goal: rebase ≥ 10× cheaper than a full recompute.
 *
 * The op `inc({ offset })` adds 1 mod 256 to the 500 contiguous elements starting at `offset`
 * (wrapping at the end); offsets come from the seeded Rng of @hercules/test-utils. Two JSON layouts of the same bytes:
 *   flat:    { bytes: number[100000] }
 *   chunked: { chunks: number[100][1000] }   (an op touches 1 or 2 chunks)
 *
 * The log: 1,000 authoritative ops from another client, then one new remote op (position 1001),
 * then our 100 pending ops (positions 1002..1101). Measured, interleaved in every repetition:
 *   rebase (applyOps)  applyOps(machine, base, pending, 1002) on the new authoritative base:
 *                      exactly the call the engine's finishStep makes.
 *   rebase (engine)    a real ViewEngine with 100 durable unacked ops receives the remote op in
 *                      a {t:'log'} frame: applies it to Authoritative, rebases Durable (and
 *                      Submitted, which shares Durable's snapshot). One frame per repetition.
 *   full recompute     applyOps(machine, initial, all 1,101 ops, 1): the view rebuilt from its
 *                      whole log (one draft: the cheapest recompute this machinery allows).
 *   rebase, op 50 of 100 throws   the same applyOps call when one pending op throws (an op the
 *                      app rejects speculatively): applyOps then falls back to one draft per op.
 *   clone + replay     structuredClone(base) then the 100 op functions run directly on the
 *                      mutable copy (no drafts, no freezing): the naive alternative. The
 *                      result is not frozen; freezing it would add a full walk.
 */
import { ViewEngine, PROTOCOL_VERSION, applyOp, applyOps, type LogEntry, type Machine, type ServerMessage } from '@hercules/core';
import { BYTES, CHUNK, INCREMENTS, chunkedMachine, flatMachine, fresh, incOps } from './fixtures.ts';
import { fmt, gc, interleaved, sink, standalone, stats, type Goal, type Row, type Section } from './harness.ts';

const LOG = 1_000;
const PENDING = 100;
const REPS = 13;
const WARMUP = 2;

interface LayoutResult {
  layout: string;
  ms: Record<string, number[]>;
}

function measureLayout(layout: string, machine: Machine<any>): LayoutResult {
  const logOps = incOps('other', LOG, 0xbeef).map((o, i) => ({ ...o, pos: i + 1 }));
  // Remote ops, one per repetition (and warm-up round) of the engine measurement.
  const remotes = incOps('other', WARMUP + REPS + 1, 0xcafe, LOG + 1);
  const pending = incOps('me', PENDING, 0xf00d);

  const log0 = applyOps(machine, machine.initial, logOps, 1);
  const remote = { ...remotes[0], pos: LOG + 1 };
  const base = applyOp(machine, log0, remote, LOG + 1).state;
  const everything = [...logOps, remote, ...pending];
  // The same pending list with op 50 replaced by one that throws (speculatively rejected).
  const withThrow = pending.map((p, i) => (i === 49 ? { ...p, name: 'reject', args: undefined } : p));

  // The engine: catch up to position 1000 with a checkpoint welcome (the engine's own catch-up
  // path, equivalent to receiving the 1,000 entries but without 1,000 setup applications), then
  // 100 submitted-and-persisted ops that the server has not ordered yet.
  const engine = new ViewEngine(machine, { clientId: 'me', now: () => 0 });
  engine.connected();
  engine.receive({
    t: 'welcome',
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    checkpoint: { pos: LOG, state: log0 },
    from: LOG + 1,
    entries: [],
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: 0,
    members: ['me', 'other'],
  });
  for (const p of pending) engine.submit('inc', p.args);
  engine.durable(PENDING);
  engine.drain();
  // Its own copy of the op body: plain arrays here must not make the engine's copy polymorphic.
  const replayInc = fresh(machine.ops.inc);
  let nextRemote = 0;
  const rebasedBefore = engine.stats.rebasedOps;
  let frames = 0;

  const ms = interleaved(
    {
      'rebase (applyOps)': () => {
        sink.o = applyOps(machine, base, pending, LOG + 2);
      },
      'rebase (engine receive)': () => {
        const r = remotes[nextRemote++];
        const pos = engine.positions().authoritative + 1;
        const e: LogEntry = { pos, client: r.client, seq: r.seq, name: r.name, args: r.args, author: r.author };
        const msg: ServerMessage = { t: 'log', from: pos, entries: [{ k: 'op', e }] };
        engine.receive(msg);
        frames++;
        sink.o = engine.getState('submitted');
      },
      'rebase, op 50 of 100 throws (applyOps)': () => {
        sink.o = applyOps(machine, base, withThrow, LOG + 2);
      },
      'full recompute': () => {
        sink.o = applyOps(machine, machine.initial, everything, 1);
      },
      'clone + replay': () => {
        const s = structuredClone(base);
        const fn = replayInc;
        for (let i = 0; i < pending.length; i++) {
          const p = pending[i];
          fn(s, p.args, { author: p.author, client: p.client, seq: p.seq, position: LOG + 2 + i });
        }
        sink.o = s;
      },
    },
    REPS,
    WARMUP,
    { gcBetween: true },
  );
  engine.drain();

  // The engine really rebased 100 ops per frame, and its Durable view is the reference fold.
  const rebased = engine.stats.rebasedOps - rebasedBefore;
  if (rebased !== frames * PENDING) throw new Error(`engine rebased ${rebased} ops in ${frames} frames, expected ${frames * PENDING}`);
  let ref = log0;
  for (let i = 0; i < frames; i++) ref = applyOp(machine, ref, remotes[i], LOG + 1 + i).state;
  ref = applyOps(machine, ref, pending, LOG + frames + 1);
  if (JSON.stringify(engine.getState('durable')) !== JSON.stringify(ref)) throw new Error(`${layout}: engine Durable view differs from the reference fold`);
  if (engine.getState('submitted') !== engine.getState('durable')) throw new Error(`${layout}: Submitted should share Durable's snapshot`);
  return { layout, ms };
}

export function run(): Section {
  const results = [measureLayout('flat number[100000]', flatMachine), measureLayout(`chunked number[${BYTES / CHUNK}][${CHUNK}]`, chunkedMachine)];
  gc();
  const rows: Row[] = [];
  const goals: Goal[] = [];
  const comparisons: string[] = [];
  for (const r of results) {
    const m = Object.fromEntries(Object.entries(r.ms).map(([k, v]) => [k, stats(v)]));
    const rebase = m['rebase (applyOps)'].median;
    const viaEngine = m['rebase (engine receive)'].median;
    const full = m['full recompute'].median;
    const naive = m['clone + replay'].median;
    const thrown = m['rebase, op 50 of 100 throws (applyOps)'].median;
    for (const [name, s] of Object.entries(m)) {
      rows.push({
        layout: r.layout,
        measurement: name,
        'median ms': s.median,
        'min ms': s.min,
        'max ms': s.max,
        'full recompute ÷ this': full / s.median,
        'this ÷ rebase (applyOps)': s.median / rebase,
      });
    }
    goals.push({ what: `${r.layout}: full recompute ÷ rebase (applyOps)`, goal: '≥ 10×', measured: `${fmt(full / rebase)}×`, met: full / rebase >= 10 });
    goals.push({
      what: `${r.layout}: full recompute ÷ rebase (engine receive)`,
      goal: '≥ 10×',
      measured: `${fmt(full / viaEngine)}×`,
      met: full / viaEngine >= 10,
    });
    comparisons.push(
      `${r.layout}: clone + replay ÷ rebase (applyOps) = ${fmt(naive / rebase)}× (${naive < rebase ? 'the naive deep copy + replay is faster' : 'the rebase is faster'}); per re-applied op: rebase ${fmt((rebase * 1000) / PENDING)} µs, full recompute ${fmt((full * 1000) / (LOG + 1 + PENDING))} µs.`,
    );
    comparisons.push(
      `${r.layout}: one throwing op among the 100 makes the rebase ${fmt(thrown / rebase)}× slower (applyOps redoes the ops before the thrower once, skips it, and carries on).`,
    );
  }
  return {
    id: 'rebase',
    title: `Rebase of ${PENDING} pending ops, byte array of ${BYTES.toLocaleString('en-US')} elements, ${INCREMENTS} increments per op (log of ${LOG} + 1 remote + ${PENDING} pending)`,
    command: 'node --expose-gc --import tsx bench/src/rebase.bench.ts',
    params: {
      elements: BYTES,
      incrementsPerOp: INCREMENTS,
      pendingOps: PENDING,
      authoritativeLog: LOG,
      chunk: CHUNK,
      reps: REPS,
      warmup: WARMUP,
      op: 'inc({offset}): 500 contiguous elements from offset (wrapping), each (x + 1) & 255; offsets from the seeded Rng (sfc32)',
    },
    rows,
    goals,
    notes: [
      ...comparisons,
      'All measurements of a layout are interleaved in each repetition (gc between them); ratios are of medians from the same run.',
      'The engine was verified after the run: it rebased exactly 100 ops per frame and its Durable view equals the reference fold.',
    ],
  };
}

await standalone(import.meta.url, run);
