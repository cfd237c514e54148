/**
 * Wire encoding of protocol messages: MessagePack bytes, with the hot messages (log, ops, ack,
 * visible, stable) as positional tuples and client ids and op names interned per connection.
 * Measured against JSON in docs/benchmarks.md: MessagePack encodes and decodes about twice as
 * fast and the tuples cut per-op overhead from ~140 bytes to a handful.
 *
 * This module is the client side (ClientCodec) and what both sides share. The client encodes
 * and decodes with the small codec in msgpack.ts, so a browser bundle never includes msgpackr;
 * the server side (ServerCodec, server-codec.ts) keeps msgpackr for its throughput. The bytes
 * are standard MessagePack either way, and each side reads the other's.
 *
 * A codec is stateful per connection and per direction (the intern tables); make a new pair
 * for every connection, on both sides. Decoding is defensive: a malformed frame throws a
 * HerculesError('malformed-frame') and leaves the tables unchanged... except for names it
 * had already interned, which is harmless because the connection is closed on a bad frame.
 */
import { HerculesError } from './errors.ts';
import { encode as pack, decode as unpack } from './msgpack.ts';
import type { ClientMessage, LogEntry, ServerMessage, WireEntry } from './protocol.ts';

/** Frame types, server to client: the first element of every frame's tuple. */
export const ServerFrame = { Other: 0, Log: 1, Visible: 2, Stable: 3, LogTentative: 4, Committed: 5, Acks: 6 } as const;
/** Frame types, client to server (numbered on their own: a frame is read by its direction). */
export const ClientFrame = { Other: 0, Ops: 1, Ack: 2, OpsWithAck: 3 } as const;

/** Interns strings: first use sends the string, later uses its index. */
export class Interner {
  #ids = new Map<string, number>();
  ref(s: string): string | number {
    const i = this.#ids.get(s);
    if (i !== undefined) return i;
    this.#ids.set(s, this.#ids.size);
    return s;
  }
}
export class Uninterner {
  #names: string[] = [];
  get(r: unknown, what: string): string {
    if (typeof r === 'string') {
      if (this.#names.length >= 100_000) bad(`too many distinct ${what}s on one connection`);
      this.#names.push(r);
      return r;
    }
    if (typeof r === 'number' && Number.isInteger(r) && r >= 0 && r < this.#names.length) return this.#names[r];
    return bad(`bad ${what} reference`);
  }
}

export function bad(what: string): never {
  throw new HerculesError('malformed-frame', `malformed frame: ${what}`);
}

export const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Client side of one connection: encodes ClientMessages, decodes server frames. */
export class ClientCodec {
  #outNames = new Interner();
  #inRefs = new Uninterner();

  encode(m: ClientMessage): Uint8Array {
    if (m.t === 'ops' && consecutive(m.ops)) {
      // With an ack (protocol 3): [OpsWithAck, pos, durable or 0, first seq, name, args, ...].
      const t: unknown[] = m.ack ? [ClientFrame.OpsWithAck, m.ack.pos, m.ack.durable ?? 0, m.ops[0].seq] : [ClientFrame.Ops, m.ops[0].seq];
      for (const o of m.ops) t.push(this.#outNames.ref(o.name), o.args);
      return pack(t);
    }
    if (m.t === 'ack') return pack(m.durable === undefined ? [ClientFrame.Ack, m.pos] : [ClientFrame.Ack, m.pos, m.durable]);
    return pack([ClientFrame.Other, m]);
  }

  decode(data: Uint8Array): ServerMessage {
    const v = unpack(data);
    if (!Array.isArray(v) || v.length < 2) return bad('expected a tuple');
    switch (v[0]) {
      case ServerFrame.Other: {
        const m = v[1] as ServerMessage;
        if (!m || typeof m !== 'object' || typeof m.t !== 'string') return bad('expected a message object');
        return m;
      }
      case ServerFrame.Log:
      case ServerFrame.LogTentative: {
        const from = v[1];
        if (!isNat(from)) return bad('log: bad position');
        // Tentative: [4, from, stored up to (0: not said), entries...] (LOG-TENTATIVE).
        const tentative = v[0] === ServerFrame.LogTentative;
        const first = tentative ? 3 : 2;
        if (tentative && !isNat(v[2])) return bad('log: bad committed position');
        const entries: WireEntry[] = [];
        for (let i = first; i < v.length; i++) {
          const t = v[i];
          if (!Array.isArray(t)) return bad('log: bad entry');
          if (t.length <= 3) {
            // Own: [seq], [seq, error], or [seq, error, 1] when refused (server-codec.ts).
            if (!isNat(t[0])) return bad('log: bad own seq');
            entries.push(
              t.length === 1
                ? { k: 'own', seq: t[0] }
                : t[2] === 1
                  ? { k: 'own', seq: t[0], error: String(t[1]), refused: true }
                  : { k: 'own', seq: t[0], error: String(t[1]) },
            );
          } else {
            const client = this.#inRefs.get(t[0], 'client');
            const name = this.#inRefs.get(t[2], 'op name');
            if (!isNat(t[1])) return bad('log: bad seq');
            const author = t.length > 4 && t[4] !== null ? this.#inRefs.get(t[4], 'author') : client;
            const e: LogEntry =
              t.length <= 5
                ? { pos: from + i - first, client, seq: t[1], name, args: t[3], author }
                : t[6] === 1
                  ? { pos: from + i - first, client, seq: t[1], name, args: t[3], author, error: String(t[5]), refused: true }
                  : { pos: from + i - first, client, seq: t[1], name, args: t[3], author, error: String(t[5]) };
            entries.push({ k: 'op', e });
          }
        }
        if (!tentative) return { t: 'log', from, entries };
        return v[2] === 0 ? { t: 'log', from, entries, tentative: true } : { t: 'log', from, entries, tentative: true, committed: v[2] as number };
      }
      case ServerFrame.Committed:
        return isNat(v[1]) ? { t: 'committed', pos: v[1] } : bad('committed: bad pos');
      case ServerFrame.Visible:
        return isNat(v[1]) ? { t: 'visible', seq: v[1] } : bad('visible: bad seq');
      case ServerFrame.Stable:
        return isNat(v[1]) ? { t: 'stable', pos: v[1] } : bad('stable: bad pos');
      case ServerFrame.Acks:
        return this.#acks(v);
      default:
        return bad(`unknown frame type ${String(v[0])}`);
    }
  }

  /** [6, client, pos, client, pos, ...]: client ids interned as in log frames (protocol 7). */
  #acks(v: unknown[]): ServerMessage {
    if (v.length % 2 !== 1) return bad('acks: expected client/position pairs');
    const acks: { client: string; pos: number }[] = [];
    for (let i = 1; i < v.length; i += 2) {
      const client = this.#inRefs.get(v[i], 'client');
      const pos = v[i + 1];
      if (!isNat(pos)) return bad('acks: bad position');
      acks.push({ client, pos });
    }
    return { t: 'acks', acks };
  }
}

/** Ops the compact frame can carry: consecutive seqs, no declared gap, no older version (those go as a plain message). */
function consecutive(ops: readonly { seq: number; after?: number; v?: number }[]): boolean {
  for (let i = 0; i < ops.length; i++) if (ops[i].after !== undefined || ops[i].v !== undefined || (i > 0 && ops[i].seq !== ops[i - 1].seq + 1)) return false;
  return ops.length > 0;
}
