/**
 * The soak test's state machine: each client's ops carry k = 1, 2, 3... in the order the
 * client made them durable, so the state itself records any op applied twice (dups) or
 * skipped (gaps), per client, without keeping the ops.
 */
import { defineMachine } from '@hercules/core';

/** The flood's rooms run the demo chat (test/soak/flood-proc.ts). */
export { chat } from '../../apps/machines.ts';

export const soak = defineMachine({
  name: 'soak',
  version: 1,
  initial: { dups: 0, gaps: 0, clients: {} as Record<string, { n: number; last: number }> },
  ops: {
    inc(s, a: { k: number }, ctx) {
      const c = (s.clients[ctx.client] ??= { n: 0, last: 0 });
      if (a.k <= c.last) s.dups++;
      else if (a.k !== c.last + 1) s.gaps++;
      c.n++;
      c.last = Math.max(c.last, a.k);
    },
  },
});
