/**
 * The checkers of delivery receipts (issue 41, item 3; docs/spec.md, RECEIPT-*). In a run where
 * receipts are on (SimState.receiptsOn, half the seeds) every client process listens to
 * `room.onReceipts` from its start, and these hold what `seenBy` and `memberPositions` say to
 * what each client actually acked, under every fault the simulator makes.
 */
import type { OpHandle } from '@hercules/core';
import type { Checker, ClientState, Fail, Room, SimState } from './checkers.ts';

/** How many of a client's latest handles a step looks at: older ones were checked when they were new. */
export const RECENT_HANDLES = 16;

/** Highest position each client id ever acked or declared held in a hello, by what its processes put on the wire (an upper bound of what the server heard). */
function ackTracker() {
  const acked = new Map<string, number>();
  return {
    acked,
    note(c: ClientState, pos: number | undefined) {
      if (pos !== undefined && pos > (acked.get(c.id) ?? 0)) acked.set(c.id, pos);
    },
  };
}

function checkTrue(fail: Fail, acked: ReadonlyMap<string, number>, c: ClientState, room: Room, handles: readonly OpHandle[]): void {
  for (const h of handles) {
    if (h.position === undefined) continue;
    for (const m of room.seenBy(h)) {
      const a = acked.get(m) ?? 0;
      if (a < h.position) fail(`${c.id} reports ${m} as holding ${h.id} (position ${h.position}), but ${m} acked only up to ${a}`);
      if (m === c.id) fail(`${c.id} reports itself among those holding ${h.id}`);
    }
  }
  for (const p of room.memberPositions()) {
    const a = acked.get(p.client) ?? 0;
    if (p.pos > a) fail(`${c.id} reports member ${p.client} at position ${p.pos}, but it acked only up to ${a}`);
  }
}

export const RECEIPT_CHECKERS: readonly Checker[] = [
  {
    rule: 'RECEIPT-TRUE',
    description: 'a member is never reported as holding an op (seenBy) or a position (memberPositions) it has not acked',
    create: (fail: Fail) => {
      const t = ackTracker();
      return {
        clientSent(_s, c, msg) {
          if (msg.t === 'ack') t.note(c, msg.pos);
          else if (msg.t === 'ops') t.note(c, msg.ack?.pos);
          // A hello declares what the client holds (`have`, from its store): the server counts it
          // as acked, and rightly, so the checker does too (seeds 523, 571, 723 and 1201 of 1500
          // reported a member at its hello's `have` without an ack frame above it).
          else if (msg.t === 'hello') t.note(c, msg.have);
        },
        step(_s, st) {
          for (const { c, room, unchanged } of st.live) if (!unchanged) checkTrue(fail, t.acked, c, room, c.handles.slice(-RECENT_HANDLES));
        },
      };
    },
  },
  {
    rule: 'RECEIPT-LIVE',
    description: 'once faults stop and the room is quiet, a client listening to receipts reports every other member as holding each of its ordered ops',
    create: (fail: Fail) => ({
      end(s: SimState, timedOutMs) {
        if (!s.receiptsOn || timedOutMs !== undefined || !s.serverUp) return;
        const members = s.server.members();
        for (const c of s.clients) {
          if (!c.alive || !c.room) continue;
          const others = members.filter((m) => m !== c.id);
          for (const h of c.handles) {
            if (h.position === undefined || h.stage === 'rejected') continue;
            const seen = new Set(c.room.seenBy(h));
            const missing = others.filter((m) => !seen.has(m));
            if (missing.length)
              fail(
                `after quiescence ${c.id} does not report ${missing.join(', ')} as holding ${h.id} (position ${h.position}); members: ${members.join(', ')}`,
              );
          }
        }
      },
    }),
  },
];
