/**
 * The checkers of the room service's security rules (issue 36, item 3; docs/spec.md, SEC-*): the
 * simulator runs the service itself (service.ts), so what its sessions and input scheduler do
 * with each connection is held, under every fault the simulator makes, to what the connection
 * sent, who it authenticated as, and when its access ended. They see the service from outside
 * only: what reached its end of each connection (`delivered`), what it handed its room
 * (`roomJoined`, `roomInput`), what it sent and when it closed.
 *
 * The rules checked here and what the simulator does to exercise them: SEC-LIMITS (a third of the
 * seeds run small op rates), SEC-AUTHN and SEC-AUTHOR (half the seeds authenticate their clients
 * as users, half of those with credentials that expire), SEC-ACCESS (some of those revoke users'
 * access mid-run), SEC-MALFORMED (a third of the seeds add hostile peers, hostile-peer.ts). Other
 * SEC rules are the fuzzer's, the soak's or tests' (docs/spec.md).
 */
import { SERVER_CLIENT, SYSTEM_CLIENT, type ClientMessage } from '@hercules/core';
import type { Checker, Credential, Fail, SimState } from './checkers.ts';

/** The default op rate and burst of the service (room-service.ts DEFAULT_LIMITS), for a run that leaves them. */
const DEFAULT_OPS_PER_SECOND = 1000;
const DEFAULT_OPS_BURST = 5000;

/** A frame as the room should get it: an ops frame by its seqs (it may come in runs), any other by its type. */
interface Expected {
  t: string;
  seqs?: number[];
  ack?: unknown;
  client?: string;
  pos?: number;
  /** Ops of an ops frame the room got so far. */
  done: number;
}

/** One connection as the checkers of the service follow it. */
interface Conn {
  readonly cred: Credential | undefined;
  readonly openedAt: number;
  /** The access hook answers `none` for its user as it opens (the run revoked the user). */
  readonly denied: boolean;
  /** Neither end closed it yet. */
  open: boolean;
  joined: boolean;
  /** When a backend revoked its user while it was open. */
  revokedAt?: number;
  /** The last error the service sent on it. */
  lastError?: { code: string; fatal: boolean };
  /** What arrived at the service and did not reach the room yet, oldest first. */
  readonly queue: Expected[];
  /** Op tokens the room was handed for it (an op, or a presence frame, costs one). */
  charged: number;
  /** The most ops one frame delivered on it carried: the bucket may go below zero by one frame. */
  largestFrame: number;
}

/** The connections of a run, by id: what every checker here reads. */
function connections() {
  const conns = new Map<string, Conn>();
  return {
    conns,
    opened(s: SimState, conn: string, cred: Credential | undefined) {
      conns.set(conn, { cred, openedAt: s.now, denied: cred?.denied === true, open: true, joined: false, queue: [], charged: 0, largestFrame: 1 });
    },
    /** Closed: no longer open, and the error the service sent before closing it, if it did. */
    closed(conn: string, error: { code: string; fatal: boolean } | undefined) {
      const c = conns.get(conn);
      if (!c) return undefined;
      c.open = false;
      if (error) c.lastError = error;
      return c;
    },
  };
}

const expectedOf = (msg: ClientMessage): Expected => {
  if (msg.t === 'ops') return { t: 'ops', seqs: msg.ops.map((o) => o.seq), ack: msg.ack, done: 0 };
  if (msg.t === 'hello') return { t: 'hello', client: msg.client, done: 0 };
  if (msg.t === 'ack') return { t: 'ack', pos: msg.pos, done: 0 };
  return { t: msg.t, done: 0 };
};

/** The room got `frame` from connection `c`: it must be the next of what the connection sent (the next run of its ops frame). */
function takeInput(fail: Fail, id: string, c: Conn, frame: unknown): number {
  const f = frame as { t?: unknown; ops?: { seq: number }[]; ack?: unknown; client?: unknown; pos?: unknown };
  const next = c.queue[0];
  if (!next) return fail(`the room got a ${String(f.t)} frame from ${id} that the connection never sent (or got it twice)`);
  if (next.t !== f.t) return fail(`the room got a ${String(f.t)} frame from ${id}, but the next frame the connection sent is ${next.t}`);
  if (next.t === 'hello' && f.client !== next.client) return fail(`the room got ${id}'s hello as client ${String(f.client)}; it said ${next.client}`);
  if (next.t === 'ack' && f.pos !== next.pos) return fail(`the room got an ack of ${String(f.pos)} from ${id}; the connection acked ${next.pos}`);
  if (next.t !== 'ops') {
    c.queue.shift();
    return next.t === 'presence' ? 1 : 0;
  }
  const seqs = (f.ops ?? []).map((o) => o.seq);
  const want = next.seqs!.slice(next.done, next.done + seqs.length);
  if (seqs.length === 0 || seqs.join() !== want.join())
    return fail(`the room got ops ${seqs.join()} from ${id}; the connection's frame has ${next.seqs!.join()}, ${next.done} of them handed over already`);
  if (next.done === 0 ? JSON.stringify(f.ack) !== JSON.stringify(next.ack) : f.ack !== undefined)
    return fail(`the room got the ack of ${id}'s ops frame ${next.done === 0 ? 'changed or lost' : 'again with a later run of its ops'}`);
  next.done += seqs.length;
  if (next.done === next.seqs!.length) c.queue.shift();
  return seqs.length;
}

export const SEC_CHECKERS: readonly Checker[] = [
  {
    rule: 'SEC-LIMITS',
    description:
      "a connection's frames reach its room whole, in order and once, its hello first, only after it joined, and its ops within its token bucket (backpressure: nothing dropped)",
    create: (fail: Fail) => {
      const t = connections();
      return {
        opened(s, conn, cred) {
          t.opened(s, conn, cred);
        },
        delivered(_s, conn, msg) {
          const c = t.conns.get(conn);
          if (!c) return;
          c.queue.push(expectedOf(msg));
          if (msg.t === 'ops') c.largestFrame = Math.max(c.largestFrame, msg.ops.length);
        },
        roomJoined(_s, conn) {
          const c = t.conns.get(conn);
          if (!c) fail(`the room joined ${conn}, a connection the service never got`);
          else if (c.queue[0]?.t !== 'hello') fail(`the room joined ${conn} before its hello (next in its input: ${c.queue[0]?.t ?? 'nothing'})`);
          else c.joined = true;
        },
        roomInput(s, conn, frame) {
          const c = t.conns.get(conn);
          if (!c) return fail(`the room got a frame from ${conn}, a connection the service never got`);
          if (!c.joined) fail(`the room got a ${String((frame as { t?: unknown }).t)} frame from ${conn} before it joined the room`);
          c.charged += takeInput(fail, conn, c, frame);
          const rate = s.limits.opsPerSecond ?? DEFAULT_OPS_PER_SECOND;
          const allowed = (s.limits.opsBurst ?? DEFAULT_OPS_BURST) + (rate * (s.now - c.openedAt)) / 1000 + c.largestFrame;
          if (c.charged > allowed)
            fail(`the room got ${c.charged} ops from ${conn} in ${s.now - c.openedAt} ms; its bucket allows ${Math.floor(allowed)} (${rate}/s)`);
        },
      };
    },
  },
  {
    rule: 'SEC-AUTHN',
    description: 'a connection whose credential expires is closed then with unauthenticated (not before), and nothing it sends after reaches the room',
    create: (fail: Fail) => {
      const t = connections();
      return {
        opened(s, conn, cred) {
          t.opened(s, conn, cred);
        },
        closed(s, conn, by, error) {
          const c = t.closed(conn, error);
          if (!c || by !== 'server') return;
          const exp = c.cred?.expiresAt ?? Infinity;
          if (c.lastError?.code === 'unauthenticated' && s.now < exp)
            fail(`${conn} was closed unauthenticated at ${s.now}, before its credential expired at ${exp}`);
        },
        roomInput(s, conn, frame) {
          const exp = t.conns.get(conn)?.cred?.expiresAt ?? Infinity;
          if (s.now > exp)
            fail(`the room got a ${String((frame as { t?: unknown }).t)} frame from ${conn} at ${s.now}, after its credential expired at ${exp}`);
        },
        step(s) {
          for (const [id, c] of t.conns) {
            if (!c.open) t.conns.delete(id);
            else if (s.now > (c.cred?.expiresAt ?? Infinity))
              fail(
                `${id} is still open at ${s.now}, its credential expired at ${c.cred!.expiresAt}${c.lastError ? ` (last error sent: ${c.lastError.code})` : ''}`,
              );
          }
        },
      };
    },
  },
  {
    rule: 'SEC-ACCESS',
    description:
      'revoking a user closes each of its open connections with a fatal revoked error at once, and nothing they send reaches the room after; a user without access is never joined',
    create: (fail: Fail) => {
      const t = connections();
      return {
        opened(s, conn, cred) {
          t.opened(s, conn, cred);
        },
        closed(_s, conn, _by, error) {
          t.closed(conn, error);
        },
        roomJoined(_s, conn, user) {
          const c = t.conns.get(conn);
          if (c?.denied) fail(`the room joined ${conn} of user ${user}, whose access was revoked when it connected`);
        },
        roomInput(_s, conn, frame) {
          const c = t.conns.get(conn);
          if (c?.revokedAt !== undefined)
            fail(`the room got a ${String((frame as { t?: unknown }).t)} frame from ${conn} after its user ${c.cred?.user} was revoked at ${c.revokedAt}`);
        },
        revoked(s, user, cut) {
          let open = 0;
          for (const [id, c] of t.conns) {
            if (c.cred?.user !== user || c.revokedAt !== undefined) continue;
            if (!c.open && c.lastError?.code !== 'revoked') continue; // closed before the revocation
            open++;
            c.revokedAt = s.now;
            if (c.open) fail(`user ${user} was revoked, but its connection ${id} is still open`);
            if (c.lastError?.code !== 'revoked' || !c.lastError.fatal)
              fail(`${id} was closed on revoking ${user} without a fatal revoked error (last: ${c.lastError?.code ?? 'none'})`);
          }
          if (cut !== open)
            fail(
              `revoking ${user} reported ${cut} connections closed; ${open} were open (${[...t.conns].map(([id, c]) => `${id}:${c.cred?.user}:${c.open ? 'open' : 'closed'}:${c.lastError?.code ?? ''}`).join(' ')})`,
            );
        },
      };
    },
  },
  {
    rule: 'SEC-MALFORMED',
    description:
      'a hostile peer (ops before or without hello, bytes that are not MessagePack, a text frame, a frame past the decoded bound, a revoked user) is closed with the fatal error its first bad frame calls for, and nothing of it reaches the room',
    create: (fail: Fail) => {
      /** Hostile connections not closed yet: their kind and the codes they may be closed with. */
      const peers = new Map<string, { kind: string; expect: readonly string[]; at: number }>();
      const what = (conn: string) => `hostile peer ${conn} (${peers.get(conn)!.kind}, opened at ${peers.get(conn)!.at})`;
      return {
        hostileOpened(s, conn, kind, expect) {
          peers.set(conn, { kind, expect, at: s.now });
        },
        roomJoined(_s, conn) {
          if (peers.has(conn)) fail(`the room joined ${what(conn)}`);
        },
        roomInput(_s, conn, frame) {
          if (peers.has(conn)) fail(`the room got a ${String((frame as { t?: unknown }).t)} frame from ${what(conn)}`);
        },
        closed(_s, conn, by, error) {
          const p = peers.get(conn);
          if (!p) return;
          if (by === 'server' && (!error || !error.fatal || !p.expect.includes(error.code)))
            fail(
              `the service closed ${what(conn)} with ${error ? `${error.fatal ? 'fatal' : 'non-fatal'} ${error.code}` : 'no error'}; expected fatal ${p.expect.join(' or ')}`,
            );
          peers.delete(conn);
        },
        end() {
          for (const conn of peers.keys()) fail(`${what(conn)} is still open at the end of the run`);
        },
      };
    },
  },
  {
    rule: 'SEC-AUTHOR',
    description: "every op's author is the authenticated user of its client's connection (the client id without authentication)",
    create: (fail: Fail) => ({
      sequenced(s, e) {
        if (e.client === SERVER_CLIENT || e.client === SYSTEM_CLIENT) return;
        const want = s.authorOf(e.client);
        if (e.author !== want) fail(`entry ${e.client}:${e.seq} at ${e.pos} is authored by ${e.author}; its client's user is ${want}`);
      },
    }),
  },
];
