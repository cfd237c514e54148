/**
 * The protocol fuzzer's hostile frames (fuzz.ts): random bytes, random msgpack, messages that
 * are valid or nearly so, the same mutated byte by byte, amplifying frames past the measure's
 * bound, and presence values for floods. Every choice comes from the run's seeded Rng, in a fixed
 * order, so a seed makes the same frames on every run.
 */
import { Packr } from 'msgpackr';
import { MAX_FRAME_UNITS, PROTOCOL_VERSION, type ClientMessage } from '@hercules/core';
import { hostileValue } from './hostile.ts';
import type { Rng } from './rng.ts';

/** msgpackr as a peer may use it: it also writes what ClientCodec refuses to send (Dates, bytes). */
export const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

const INTERESTING = [
  0x00, 0xff, 0x7f, 0x80, 0xc0, 0xc1, 0xc2, 0xc3, 0xcc, 0xcd, 0xce, 0xcf, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xe0,
];

const CLIENT_IDS = ['h1', 'h2', 'h3', 'x1', 'x2', 'b1', 'r1', '', 'a'.repeat(200)];

/** What the frames read of the room under attack: its head, and a client's high-water mark (so most ops frames continue a sequence). */
export interface FrameTarget {
  head(): number;
  clientRecord(id: string): { highWater: number } | undefined;
}

/** An attacker's frame, and whether it is an amplifying one over the bound (which measureFrame must refuse). */
export interface AttackFrame {
  bytes: Uint8Array;
  overBound: boolean;
}

/**
 * An attacker's frame as a fresh ClientCodec frames it (ops as [1, firstSeq, name or the index
 * of a name already in the frame, args, ...] or with an ack [3, pos, durable, firstSeq, ...],
 * acks as [2, pos], anything else as [0, message]), but through msgpackr, which also writes
 * what ClientCodec refuses to send (Dates, bytes).
 */
export function clientFrame(m: ClientMessage | Record<string, unknown>): Uint8Array {
  if (m.t === 'ops') {
    const ops = (m as ClientMessage & { t: 'ops' }).ops;
    const names = new Map<string, number>();
    const ref = (name: string) => {
      const i = names.get(name);
      if (i !== undefined) return i;
      names.set(name, names.size);
      return name; // first use: the name itself, as the interner sends it
    };
    const ack = (m as { ack?: unknown }).ack;
    // With an ack: [3, pos, durable or 0, firstSeq, ...] (a non-object ack only fits the plain form).
    if (ack !== undefined && (typeof ack !== 'object' || ack === null)) return packr.pack([0, m]);
    const head = ack === undefined ? [1] : [3, (ack as { pos: unknown }).pos, (ack as { durable?: unknown }).durable ?? 0];
    return packr.pack([...head, ops[0].seq, ...ops.flatMap((o) => [ref(o.name), o.args])]);
  }
  if (m.t === 'ack') {
    const a = m as { pos: unknown; durable?: unknown };
    return packr.pack(a.durable === undefined ? [2, a.pos] : [2, a.pos, a.durable]);
  }
  return packr.pack([0, m]);
}

/** Makes the hostile frames of one run from its Rng, reading the room's head as it goes. */
export class FrameMaker {
  constructor(
    private readonly rng: Rng,
    private readonly target: FrameTarget,
  ) {}

  /** A hostile value (hostile.ts), `depth` deep inside another. */
  randomValue(depth = 0): unknown {
    return hostileValue(this.rng, depth);
  }

  /** One frame of an attacker whose hello said `client`: 1 in 40 amplifying, the rest random, valid or mutated. */
  attackFrame(client: string): AttackFrame {
    const rng = this.rng;
    if (rng.chance(1 / 40)) {
      const n = rng.chance(0.3) ? rng.int(262_000, 300_000) : rng.int(1, 20_000);
      const overBound = 5 * n > MAX_FRAME_UNITS;
      return { bytes: this.amplifyingFrame(rng.int(1, 100), n), overBound };
    }
    switch (rng.int(0, 9)) {
      case 0:
        return { bytes: Uint8Array.from({ length: rng.int(0, 48) }, () => rng.int(0, 255)), overBound: false };
      case 1:
        return { bytes: packr.pack([rng.int(0, 3), this.randomValue(), this.randomValue()]), overBound: false };
      case 2:
        return { bytes: packr.pack(this.randomValue()), overBound: false };
      case 3:
      case 4:
      case 5:
      case 6:
        return { bytes: clientFrame(this.validMessage(client)), overBound: false };
      default:
        return { bytes: this.mutate(clientFrame(this.validMessage(client))), overBound: false };
    }
  }

  /** One frame of a presence flood: a long string, a cursor with padding, or a hostile value. */
  presenceFrame(): Uint8Array {
    const rng = this.rng;
    const value = rng.chance(0.6)
      ? `${'p'.repeat(rng.int(3000, 5000))}`
      : rng.chance(0.5)
        ? { cursor: [rng.int(0, 99), rng.int(0, 99)], pad: 'q'.repeat(rng.int(0, 4100)) }
        : this.randomValue();
    return clientFrame({ t: 'presence', value });
  }

  /** A message of the protocol's shape, valid or nearly so: hello, ops (now and then with an ack), ack, register, or a server message's tag. */
  private validMessage(client: string): ClientMessage | Record<string, unknown> {
    const rng = this.rng;
    switch (rng.int(0, 6)) {
      case 0:
        return {
          t: 'hello',
          v: rng.chance(0.9) ? PROTOCOL_VERSION : rng.int(0, 3),
          client: rng.pick(CLIENT_IDS),
          machine: { name: rng.chance(0.9) ? 'fuzz' : 'other', version: rng.chance(0.9) ? 1 : 2 },
          have: rng.pick([0, 0, rng.int(0, this.target.head() + 3), 1e9]),
        };
      case 1:
      case 2:
        return this.opsMessage(client);
      case 3:
        return {
          t: 'ack',
          pos: rng.pick([0, rng.int(0, this.target.head() + 2), -1, 1.5]),
          ...(rng.chance(0.3) ? { durable: rng.pick([0, rng.int(0, 50), 1e15, -1, 2.5, 'x']) } : {}),
        };
      case 4:
        return { t: 'register' };
      default:
        return { t: rng.pick(['welcome', 'log', 'nope', 7]), x: this.randomValue() };
    }
  }

  /** An ops message: 1 to 4 ops, most continuing the client's sequence, with args in or out of the schema. */
  private opsMessage(client: string): Record<string, unknown> {
    const rng = this.rng;
    const first = rng.chance(0.8) ? (this.target.clientRecord(client)?.highWater ?? 0) + 1 : rng.int(0, 40);
    return {
      t: 'ops',
      ops: Array.from({ length: rng.int(1, 4) }, (_, i) => ({
        seq: first + i,
        name: rng.pick(['add', 'add', 'note', 'keep', 'keep', 'burn', '']),
        args: rng.chance(0.5) ? { k: rng.int(-1200, 1200) } : rng.chance(0.3) ? { text: rng.pick(['hi', 'forbidden']) } : this.randomValue(),
      })),
      // An ack riding on the ops (protocol 3, VIS-ACK-WITH-OPS), now and then a bad one.
      ...(rng.chance(0.3)
        ? {
            ack: rng.chance(0.9)
              ? {
                  pos: rng.pick([0, rng.int(0, this.target.head() + 2), -1, 1.5]),
                  ...(rng.chance(0.3) ? { durable: rng.pick([0, rng.int(0, 50), -1, 'x']) } : {}),
                }
              : this.randomValue(),
          }
        : {}),
    };
  }

  /** An ops frame [1, seq, 'add', args] whose args are `n` empty maps or arrays, a byte each on the wire (issue 40's frame). */
  private amplifyingFrame(seq: number, n: number): Uint8Array {
    const f = new Uint8Array(8 + 5 + n).fill(this.rng.chance(0.5) ? 0x80 : 0x90);
    f.set([0x94, 0x01, 0xcc, seq & 0x7f, 0xa3, 0x61, 0x64, 0x64, 0xdd]);
    new DataView(f.buffer).setUint32(9, n);
    return f;
  }

  /** 1 to 4 byte-wise mutations of a frame. */
  private mutate(b: Uint8Array): Uint8Array {
    let out: Uint8Array = Uint8Array.from(b);
    for (let n = this.rng.int(1, 4); n > 0; n--) out = this.mutateOnce(out);
    return out;
  }

  /** One mutation: flip a bit, write an interesting byte, truncate, append, copy within, or move a slice to the end. */
  private mutateOnce(out: Uint8Array): Uint8Array {
    const rng = this.rng;
    switch (rng.int(0, 5)) {
      case 0:
        if (out.length) {
          const i = rng.int(0, out.length - 1);
          out[i] ^= 1 << rng.int(0, 7);
        }
        return out;
      case 1:
        if (out.length) out[rng.int(0, out.length - 1)] = rng.pick(INTERESTING);
        return out;
      case 2:
        return out.slice(0, rng.int(0, out.length));
      case 3: {
        const extra = Uint8Array.from({ length: rng.int(1, 8) }, () => rng.int(0, 255));
        const o = new Uint8Array(out.length + extra.length);
        o.set(out);
        o.set(extra, out.length);
        return o;
      }
      case 4:
        if (out.length > 1) {
          const i = rng.int(0, out.length - 1);
          out.copyWithin(i, rng.int(0, out.length - 1));
        }
        return out;
      default:
        if (out.length) {
          const i = rng.int(0, out.length - 1);
          const j = rng.int(i, out.length);
          return Uint8Array.from([...out.slice(0, i), ...out.slice(j), ...out.slice(i, j)]);
        }
        return out;
    }
  }
}
