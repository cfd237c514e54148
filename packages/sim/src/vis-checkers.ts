/**
 * The ack timeout on a busy server (docs/spec.md, VIS-DROP-DEAD; issue 43): a member whose ack
 * came in time is not deregistered while that ack waits in the server's input (behind its rate
 * limit, or behind the server's other work), until it has waited past twice the timeout.
 *
 * What it holds the server to, from what the room service read (`read`: into a session's input)
 * and what it handed the room (`roomInput`): at a `deregister` on a connection, P is the first
 * position the room had not seen acknowledged on it; if an ack covering P was read from it no
 * later than T after P's op was first read at a server, the deregister must come after twice T
 * from that read. The op's first read is no later than the server ordered it, so the bound this
 * checks is never tighter than the rule's. Connections of hostile peers, ops from the server's
 * own API and a hello whose `have` the committed log does not cover are not judged.
 */
import type { ClientMessage } from '@hercules/core';
import type { Checker, Fail, Hooks, SimState } from './checkers.ts';

/** One connection as the service read it and handed it to the room. */
interface Conn {
  client?: string;
  hostile: boolean;
  /** Its hello's `have`. */
  have: number;
  /** The highest position the room took as acknowledged on it; undefined: not known. */
  handled: number | undefined;
  /** Acks read from it: [when, position]. */
  readonly acks: [number, number][];
}

const ackOf = (m: ClientMessage): number | undefined => (m.t === 'ack' ? m.pos : m.t === 'ops' ? m.ack?.pos : undefined);

function dropDead(fail: Fail): Hooks {
  const conns = new Map<string, Conn>();
  /** When each op (`client:seq`) was first read by a server. */
  const firstRead = new Map<string, number>();
  const conn = (id: string): Conn => {
    let c = conns.get(id);
    if (!c) conns.set(id, (c = { hostile: false, have: 0, handled: 0, acks: [] }));
    return c;
  };
  return {
    hostileOpened(_s, id) {
      conn(id).hostile = true;
    },
    read(s, id, msg) {
      const c = conn(id);
      if (msg.t === 'hello') c.client = msg.client;
      const ack = ackOf(msg);
      if (typeof ack === 'number') c.acks.push([s.now, ack]);
      if (msg.t !== 'ops' || c.client === undefined || !Array.isArray(msg.ops)) return;
      for (const op of msg.ops) {
        const key = `${c.client}:${op.seq}`;
        if (!firstRead.has(key)) firstRead.set(key, s.now);
      }
    },
    roomInput(s, id, frame) {
      const c = conn(id);
      const m = frame as ClientMessage;
      if (m.t === 'hello') {
        // The room takes `have` as acknowledged if its log reaches it (else 0): known here only
        // when the committed log does.
        c.have = m.have;
        c.handled = m.have <= s.global.length ? m.have : undefined;
      }
      const ack = ackOf(m);
      if (typeof ack !== 'number') return;
      if (c.handled !== undefined) c.handled = Math.max(c.handled, ack);
      else if (ack >= c.have) c.handled = ack;
    },
    sent(s, id, _client, msg) {
      if (msg.t !== 'deregister') return;
      const c = conns.get(id);
      if (!c || c.hostile || c.handled === undefined) return;
      check(fail, s, id, c, c.handled + 1, firstRead);
    },
  };
}

function check(fail: Fail, s: SimState, id: string, c: Conn, pos: number, firstRead: ReadonlyMap<string, number>): void {
  const e = s.global[pos - 1];
  const since = e && firstRead.get(`${e.client}:${e.seq}`);
  if (since === undefined) return;
  const t = s.ackTimeoutMs;
  if (s.now > since + 2 * t) return;
  const inTime = c.acks.find(([at, p]) => p >= pos && at <= since + t);
  if (inTime)
    fail(
      `${id} (${c.client}) was deregistered at ${s.now} for position ${pos}, whose op a server read at ${since}, though its ack of ${inTime[1]} was read at ${inTime[0]}, within the ${t} ms timeout, and still waited in the server's input (it may be kept until ${since + 2 * t})`,
    );
}

export const VIS_CHECKERS: readonly Checker[] = [
  {
    rule: 'VIS-DROP-DEAD',
    description: "a member whose ack came in time is not deregistered while the ack waits in the server's input, until twice the timeout",
    create: dropDead,
  },
];
