/**
 * The soak test's state machine: each client's ops carry k = 1, 2, 3... in the order the
 * client made them durable, so the state itself records any op applied twice (dups) or
 * skipped (gaps), per client, without keeping the ops. Its notes (v1) carry j = 1, 2, 3...,
 * a chain of their own.
 *
 * Two versions: the soak starts its server on v1 (machines-v1.ts) and, mid-soak, restarts it
 * on v2 (machines-v2.ts), which migrates each room once (docs/migrations.md). v2 renames `inc`
 * to `add` (ops written under v1 are translated, marked `from: 1`, and counted per client in
 * `translated`) and drops `note`: a note written offline under v1 and sent after the upgrade is
 * refused with NOTE_REFUSED's reason.
 */
import { defineMachine } from '@hercules/core';

/** The flood's rooms run the demo chat (test/soak/flood-proc.ts). */
export { chat } from '../../apps/machines.ts';

type V1Client = { n: number; last: number; notes?: number };

export const soak = defineMachine({
  name: 'soak',
  version: 1,
  initial: { dups: 0, gaps: 0, clients: {} as Record<string, V1Client> },
  ops: {
    inc(s, a: { k: number }, ctx) {
      const c = (s.clients[ctx.client] ??= { n: 0, last: 0 });
      if (a.k <= c.last) s.dups++;
      else if (a.k !== c.last + 1) s.gaps++;
      c.n++;
      c.last = Math.max(c.last, a.k);
    },
    note(s, a: { j: number }, ctx) {
      const c = (s.clients[ctx.client] ??= { n: 0, last: 0 });
      const notes = c.notes ?? 0;
      if (a.j <= notes) s.dups++;
      else if (a.j !== notes + 1) s.gaps++;
      c.notes = Math.max(notes, a.j);
    },
  },
});

/** The reason v2 refuses a v1 note with: the soak matches it exactly. */
export const NOTE_REFUSED = (j: number) => `note ${j} was removed in soak@2`;

export const soakV2 = defineMachine({
  name: 'soak',
  version: 2,
  initial: {
    dups: 0,
    gaps: 0,
    /** How many times a migration from v1 was applied to this state: exactly 1 for a room that ran v1. */
    migrations: 0,
    clients: {} as Record<string, { n: number; last: number; notes: number; translated: number }>,
  },
  ops: {
    add(s, a: { k: number; from: 1 | 2 }, ctx) {
      const c = (s.clients[ctx.client] ??= { n: 0, last: 0, notes: 0, translated: 0 });
      if (a.k <= c.last) s.dups++;
      else if (a.k !== c.last + 1) s.gaps++;
      c.n++;
      c.last = Math.max(c.last, a.k);
      if (a.from === 1) c.translated++;
    },
  },
  migrateFrom: {
    machine: soak,
    state: (s1) => ({
      dups: s1.dups,
      gaps: s1.gaps,
      // A v1 state has no `migrations`; were a second migration entry applied (to a v2 state), it would count 2.
      migrations: ((s1 as { migrations?: number }).migrations ?? 0) + 1,
      clients: Object.fromEntries(Object.entries(s1.clients).map(([id, c]) => [id, { n: c.n, last: c.last, notes: c.notes ?? 0, translated: 0 }])),
    }),
    op: (op) => (op.name === 'inc' ? { name: 'add', args: { k: op.args.k, from: 1 } } : { refuse: NOTE_REFUSED(op.args.j) }),
  },
});
