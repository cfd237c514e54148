/**
 * Hostile peers: connections to the room service that break the protocol, as an attacker's
 * script would, beside the run's honest clients (SEC-MALFORMED, SEC-LIMITS, SEC-ACCESS). Each
 * sends a few frames over a few ms and never answers: ops before its hello or with no hello at
 * all, bytes that are not one MessagePack value, a text frame, a frame that would decode past
 * the bound of SEC-LIMITS, or (in seeds that revoke users) hello and ops as a user whose access
 * is revoked. The service must close each with the fatal error its first bad frame calls for
 * (or refuse it at the door), and nothing of it may reach the room: the checker of
 * SEC-MALFORMED in sec-checkers.ts holds it to that, and SEC-LIMITS's and SEC-ACCESS's see its
 * frames as they see an honest client's.
 *
 * A connection names its room in its URL and no frame names another, so "a frame for a room it
 * did not join" is an ops frame on a connection that has not joined (yet): ops before hello.
 */
import { ClientCodec, type ClientMessage, PROTOCOL_VERSION } from '@hercules/core';
import type { Rng } from './rng.ts';

export type HostileKind = 'ops-first' | 'no-hello' | 'garbage' | 'text' | 'oversize' | 'revoked';

/** One frame a hostile peer sends: its bytes, and the message they encode when they encode one. */
export interface HostileFrame {
  readonly bytes: Uint8Array;
  readonly isBinary: boolean;
  readonly msg?: ClientMessage;
}

export interface HostilePeer {
  readonly kind: HostileKind;
  readonly frames: readonly HostileFrame[];
  /** The error codes the service may close it with, fatal (the first is what its first bad frame calls for). */
  readonly expect: readonly string[];
}

/** 300,000 empty arrays in one array: 300 KB that measureFrame bounds at 1.5 M units, past MAX_FRAME_UNITS. */
function oversizeFrame(): Uint8Array {
  const n = 300_000;
  const b = new Uint8Array(5 + n);
  b[0] = 0xdd; // array 32
  new DataView(b.buffer).setUint32(1, n);
  b.fill(0x90, 5); // empty fixarray
  return b;
}

/**
 * A hostile peer of `kind` (drawn when not given). `machine`: what the room runs, so its hello
 * is one the service would take; `id`: its client id and the mark in its ops' notes.
 */
export function hostilePeer(rng: Rng, id: string, machine: { name: string; version: number }, kind?: HostileKind): HostilePeer {
  const codec = new ClientCodec();
  const frame = (msg: ClientMessage): HostileFrame => ({ bytes: codec.encode(msg), isBinary: true, msg });
  const ops = (): HostileFrame =>
    frame({
      t: 'ops',
      ops: Array.from({ length: rng.int(1, 3) }, (_, i) => ({ seq: i + 1, name: 'inc', args: { key: 'a', by: 1, note: `hostile:${id}:${i + 1}` } })),
    });
  const hello = frame({ t: 'hello', v: PROTOCOL_VERSION, client: id, machine: { name: machine.name, version: machine.version }, have: 0 });
  const k = kind ?? rng.pick<HostileKind>(['ops-first', 'ops-first', 'no-hello', 'garbage', 'text', 'oversize']);
  switch (k) {
    case 'ops-first':
      return { kind: k, frames: [ops(), hello, ops()], expect: ['not-ready'] };
    case 'no-hello':
      return { kind: k, frames: [ops(), ops()], expect: ['not-ready'] };
    case 'garbage':
      // 0xc1 is never used in MessagePack; a truncated map; trailing bytes after a value.
      return {
        kind: k,
        frames: [{ bytes: Uint8Array.from(rng.pick([[0xc1], [0x82, 0xa1, 0x74], [0xc0, 0xc0]])), isBinary: true }, hello],
        expect: ['malformed-frame'],
      };
    case 'text':
      return { kind: k, frames: [{ bytes: new TextEncoder().encode('{"t":"hello"}'), isBinary: false }, hello], expect: ['malformed-frame'] };
    case 'oversize':
      return { kind: k, frames: [{ bytes: oversizeFrame(), isBinary: true }, hello, ops()], expect: ['too-large'] };
    case 'revoked':
      return { kind: k, frames: [hello, ops()], expect: ['forbidden'] };
  }
}
