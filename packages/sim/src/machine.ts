/**
 * The machine the simulator drives. Every effective op appends its id to `log`, so two states
 * are equal only if the same ops took effect in the same order: state equality checks log
 * equality. `withdraw` depends on state (it may succeed speculatively and fail in the global
 * order, or the reverse); `boom` always throws; `stamp` records ctx.position and ctx.author.
 *
 * `ledgerV2` is the next version (docs/migrations.md), which a run may upgrade to mid-traffic:
 * `stamps` becomes `marks`, a `keyedMap` (the migration converts it), and a `schema: 2` field
 * appears (a state of one version is never mistaken for one of the other), the `log` is kept as
 * it is (so every checker comparing logs still can), `stamp` becomes `mark` (its argument
 * renamed), and `boom` is gone: a v1 `boom` is refused by the translation with BOOM_REMOVED.
 * `mark` sets one key and deletes another, both named after ctx.position (which rebasing
 * changes), so the keyed map's tries split and collapse under every fault the simulator makes,
 * and each replica's tree is compared with the reference's as part of the state.
 *
 * `doc` is a collaborative text and `rich` a rich text (TEXT-*, RICH-*), both in either version.
 * The rich text is @hercules/prosemirror's model from its `/ops` entry (no ProseMirror there):
 * the simulator depends on the binding's package, never the reverse, and core keeps no model
 * whose block and mark names are one editor's schema (`h`, `l`, `c`, strong, em, link).
 */
import { createText, defineMachine, keyedMap, textOps, type KeyedMap, type Machine, type OpContext, type Text } from '@hercules/core';
import { createRichText, richTextOps, type RichBlockArgs, type RichFormatArgs, type RichText } from '@hercules/prosemirror/ops';

export interface LedgerState {
  log: string[];
  /** A collaborative text (issue 38) that clients edit at random places: TEXT-CONVERGE and its kin. */
  doc: Text;
  /**
   * A rich text (@hercules/prosemirror's model: its characters in `rich.text`, block attributes,
   * mark spans) that clients edit as the ProseMirror binding does (rich-edits.ts): RICH-*.
   */
  rich: RichText;
  counters: Record<string, number>;
  stamps: Record<string, string>;
}

/** Counts op executions: the simulator's deterministic stand-in for CPU time. */
export const work = { ops: 0 };

export interface LedgerStateV2 {
  log: string[];
  doc: Text;
  rich: RichText;
  counters: Record<string, number>;
  marks: KeyedMap<string>;
  schema: 2;
}

/** A state of either version: what every checker reads is its `log`. */
export type AnyLedgerState = LedgerState | LedgerStateV2;

/** The reason the v2 translation refuses a v1 `boom`. */
export const BOOM_REMOVED = 'boom was removed in sim-ledger@2';

/** The ops both versions have, unchanged. */
const counting = {
  inc(s: Pick<LedgerState, 'counters' | 'log'>, a: { key: string; by: number }, ctx: OpContext) {
    work.ops++;
    s.counters[a.key] = (s.counters[a.key] ?? 0) + a.by;
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
  withdraw(s: Pick<LedgerState, 'counters' | 'log'>, a: { key: string; amount: number }, ctx: OpContext) {
    work.ops++;
    const have = s.counters[a.key] ?? 0;
    if (have < a.amount) throw new Error(`insufficient ${a.key}: have ${have}, need ${a.amount}`);
    s.counters[a.key] = have - a.amount;
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
};

/** The text ops (`textOps()`), counted as work and logged like every other op. */
const { textInsert, textDelete } = textOps();
const text = {
  textInsert(s: Pick<LedgerState, 'doc' | 'log'>, a: Parameters<typeof textInsert>[1], ctx: OpContext) {
    work.ops++;
    textInsert(s, a, ctx);
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
  textDelete(s: Pick<LedgerState, 'doc' | 'log'>, a: Parameters<typeof textDelete>[1], ctx: OpContext) {
    work.ops++;
    textDelete(s, a, ctx);
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
};

/**
 * The rich-text ops the machine runs, looked up when an op runs: a test replaces one to plant a
 * bug (sim.test.ts), and every replica runs the planted one.
 */
export const richImpl = richTextOps();
const rich = {
  richBlock(s: Pick<LedgerState, 'rich' | 'log'>, a: RichBlockArgs, ctx: OpContext) {
    work.ops++;
    richImpl.richBlock(s, a);
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
  richFormat(s: Pick<LedgerState, 'rich' | 'log'>, a: RichFormatArgs, ctx: OpContext) {
    work.ops++;
    richImpl.richFormat(s, a);
    s.log.push(`${ctx.client}:${ctx.seq}`);
  },
};

export const ledger = defineMachine({
  name: 'sim-ledger',
  version: 1,
  initial: { log: [], doc: createText('sim'), rich: createRichText(), counters: {}, stamps: {} } as LedgerState,
  ops: {
    ...counting,
    ...text,
    ...rich,
    stamp(s, a: { key: string }, ctx) {
      work.ops++;
      s.stamps[a.key] = `${ctx.author}@${ctx.position}`;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
    boom(_s, _a: undefined, _ctx) {
      work.ops++;
      throw new Error('boom');
    },
  },
});

export const ledgerV2 = defineMachine({
  name: 'sim-ledger',
  version: 2,
  initial: { log: [], doc: createText('sim'), rich: createRichText(), counters: {}, marks: keyedMap.empty(), schema: 2 } as LedgerStateV2,
  ops: {
    ...counting,
    ...text,
    ...rich,
    mark(s, a: { at: string }, ctx) {
      work.ops++;
      // Up to 97 keys per `at`, written and removed by position: the map grows past a leaf (32).
      const slot = ctx.position % 97;
      keyedMap.set(s.marks, `${a.at}/${slot}`, `${ctx.author}@${ctx.position}`);
      keyedMap.delete(s.marks, `${a.at}/${(slot + 60) % 97}`);
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
  },
  migrateFrom: {
    machine: ledger,
    state: (s1: LedgerState): LedgerStateV2 => ({ log: s1.log, doc: s1.doc, rich: s1.rich, counters: s1.counters, marks: keyedMap.from(s1.stamps), schema: 2 }),
    op: (op) =>
      op.name === 'stamp'
        ? { name: 'mark', args: { at: (op.args as { key: string }).key } }
        : op.name === 'boom'
          ? { refuse: BOOM_REMOVED }
          : { name: op.name, args: op.args },
  },
});

/** The machine of each version the simulator runs. */
export const LEDGERS = { 1: ledger, 2: ledgerV2 } as const;
export type Ledger = typeof ledger | typeof ledgerV2;

/** The machine of `version`, typed over states of either version (for folds across an upgrade). */
export function ledgerAt(version: number): Machine<AnyLedgerState, any, any> {
  const m = LEDGERS[version as 1 | 2];
  if (!m) throw new Error(`the simulator has no sim-ledger@${version}`);
  return m as Machine<AnyLedgerState, any, any>;
}
