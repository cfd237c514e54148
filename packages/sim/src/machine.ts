/**
 * The machine the simulator drives. Every effective op appends its id to `log`, so two states
 * are equal only if the same ops took effect in the same order: state equality checks log
 * equality. `withdraw` depends on state (it may succeed speculatively and fail in the global
 * order, or the reverse); `boom` always throws; `stamp` records ctx.position and ctx.author.
 */
import { defineMachine } from '@hercules/core';

export interface LedgerState {
  log: string[];
  counters: Record<string, number>;
  stamps: Record<string, string>;
}

/** Counts op executions: the simulator's deterministic stand-in for CPU time. */
export const work = { ops: 0 };

export const ledger = defineMachine({
  name: 'sim-ledger',
  version: 1,
  initial: { log: [], counters: {}, stamps: {} } as LedgerState,
  ops: {
    inc(s, a: { key: string; by: number }, ctx) {
      work.ops++;
      s.counters[a.key] = (s.counters[a.key] ?? 0) + a.by;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
    withdraw(s, a: { key: string; amount: number }, ctx) {
      work.ops++;
      const have = s.counters[a.key] ?? 0;
      if (have < a.amount) throw new Error(`insufficient ${a.key}: have ${have}, need ${a.amount}`);
      s.counters[a.key] = have - a.amount;
      s.log.push(`${ctx.client}:${ctx.seq}`);
    },
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
