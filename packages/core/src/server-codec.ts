/**
 * The server side of the wire (wire.ts has the format and the client side): encodes
 * ServerMessages and decodes client frames with msgpackr, whose speed the server's throughput
 * depends on. In its own module so that a client bundle, which imports only ClientCodec, never
 * includes msgpackr (core's package.json declares no side effects, so bundlers drop this module).
 */
import { Packr } from 'msgpackr';
import type { ServerMessage } from './protocol.ts';
import { ClientFrame, Interner, ServerFrame, Uninterner, bad, isNat } from './wire.ts';

const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });

function unpack(data: Uint8Array): unknown {
  try {
    return packr.unpack(data);
  } catch (e) {
    return bad(`not MessagePack (${(e as Error).message})`);
  }
}

/** Server side of one connection: encodes ServerMessages, decodes client frames. */
export class ServerCodec {
  private out = new Interner();
  private inNames = new Uninterner();

  encode(m: ServerMessage): Uint8Array {
    switch (m.t) {
      case 'log': {
        const t: unknown[] = m.tentative ? [ServerFrame.LogTentative, m.from, m.committed ?? 0] : [ServerFrame.Log, m.from];
        for (const w of m.entries) {
          // Own: [seq], [seq, error] or, refused, [seq, error, 1]; an op is 4 elements or more.
          if (w.k === 'own') t.push(w.error === undefined ? [w.seq] : w.refused ? [w.seq, w.error, 1] : [w.seq, w.error]);
          else {
            const e = w.e;
            const tup: unknown[] = [this.out.ref(e.client), e.seq, this.out.ref(e.name), e.args];
            const authorSame = e.author === e.client;
            if (!authorSame || e.error !== undefined) tup.push(authorSame ? null : this.out.ref(e.author));
            if (e.error !== undefined) tup.push(e.error);
            if (e.refused) tup.push(1);
            t.push(tup);
          }
        }
        return packr.pack(t);
      }
      case 'visible':
        return packr.pack([ServerFrame.Visible, m.seq]);
      case 'stable':
        return packr.pack([ServerFrame.Stable, m.pos]);
      case 'committed':
        return packr.pack([ServerFrame.Committed, m.pos]);
      case 'acks': {
        const t: unknown[] = [ServerFrame.Acks];
        for (const a of m.acks) t.push(this.out.ref(a.client), a.pos);
        return packr.pack(t);
      }
      default:
        return packr.pack([ServerFrame.Other, m]);
    }
  }

  /** Decode a client frame into an untrusted value for `parseClientMessage`. */
  decode(data: Uint8Array): unknown {
    const v = unpack(data);
    if (!Array.isArray(v) || v.length < 2) return bad('expected a tuple');
    switch (v[0]) {
      case ClientFrame.Other:
        return v[1];
      case ClientFrame.Ops:
        return { t: 'ops', ops: this.ops(v, 1) };
      case ClientFrame.OpsWithAck: {
        // [3, pos, durable or 0, first seq, name, args, ...]; parseClientMessage checks the ack.
        if (v.length < 4) return bad('ops: expected an ack and a first seq');
        const ops = this.ops(v, 3);
        return { t: 'ops', ops, ack: v[2] === 0 ? { pos: v[1] } : { pos: v[1], durable: v[2] } };
      }
      case ClientFrame.Ack:
        return v.length > 2 ? { t: 'ack', pos: v[1], durable: v[2] } : { t: 'ack', pos: v[1] };
      default:
        return bad(`unknown frame type ${String(v[0])}`);
    }
  }

  /** The ops of a compact ops frame whose first seq is at `at`, name/args pairs after it. */
  private ops(v: unknown[], at: number): { seq: number; name: string; args: unknown }[] {
    const first = v[at];
    if (!isNat(first) || first === 0) return bad('ops: first seq must be a positive integer');
    if ((v.length - at - 1) % 2 !== 0 || v.length === at + 1) return bad('ops: expected name/args pairs');
    const ops = [];
    for (let i = at + 1, seq = first; i < v.length; i += 2, seq++) {
      ops.push({ seq, name: this.inNames.get(v[i], 'op name'), args: v[i + 1] });
    }
    return ops;
  }
}
