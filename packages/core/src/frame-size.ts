/**
 * The decoded size of a client frame, read from its MessagePack bytes before anything is decoded
 * (issue 40): a frame under the byte limit can still decode to a huge value (1 MiB of empty maps
 * is a million objects, about 61 MiB of heap), so the server measures each frame first, refuses
 * one over MAX_FRAME_UNITS without decoding it, and charges the rest to the input
 * budget by the heap they will take. One pass over the bytes, skipping strings by their length;
 * it allocates nothing (chosen over a bounded decoder: bench/src/flood/decode-bound.bench.ts).
 *
 * Units are the argument domain's own measure (scanOp, args.ts), so the bound follows from the
 * limits an honest client already keeps: an array or map 5, a string (a map key too) 5 plus its
 * UTF-8 bytes, a number 9, nil, a boolean or undefined 1, a bin or an extension 5 plus its bytes.
 */
import { HerculesError } from './errors.ts';
import { FRAME_BUDGET_BYTES, MAX_OPS_PER_FRAME } from './protocol.ts';

/**
 * The most units a client frame may decode to. An honest client's ops frames hold at most
 * FRAME_BUDGET_BYTES (512 KiB) of ops as scanOp counts them (view-engine's sendPending; a single op
 * is at most MAX_OP_BYTES, 256 KiB, plus its name), and a frame counts no more than its ops:
 * a name costs 5 plus its length, or 9 as an interned reference, where scanOp charges it 13 plus
 * twice its length. Ops that cannot go in the compact tuple (a declared gap, an older version) go as
 * objects whose keys and fields add at most 72 units an op, for at most MAX_OPS_PER_FRAME ops.
 * 64 KiB more covers the envelope and every other message (a hello, an ack, a presence value of
 * at most 4 KiB). Decoded, a unit takes at most about 14 bytes of heap (an empty map: 5 units,
 * 72 bytes), so no accepted frame holds more than about 19 MB.
 */
export const MAX_FRAME_UNITS = FRAME_BUDGET_BYTES + MAX_OPS_PER_FRAME * 72 + (64 << 10);

/**
 * Heap estimate per decoded value: an object or array (V8: 61 bytes an empty map and 38 an empty
 * array with its slot, bench/src/flood/decode-expansion.ts), every value's slot in its parent,
 * a string's header, a number that is not a small integer (a heap number).
 */
const CONTAINER_HEAP = 64,
  SLOT_HEAP = 8,
  STRING_HEAP = 16,
  NUMBER_HEAP = 16;

/** What measureFrame found: units (the bound's measure) and an estimate of the decoded heap, in bytes. */
export interface FrameSize {
  units: number;
  heap: number;
}

/**
 * Deeper than this, msgpackr runs out of stack (it recurses: a few thousand levels) and the frame
 * is malformed either way; the measure says so first.
 */
export const MAX_MEASURED_DEPTH = 1 << 16;

/** Items still to read of each open array or map (a map's count is its keys and values). */
const left = new Int32Array(MAX_MEASURED_DEPTH + 2);

/**
 * Measure the one MessagePack value in `data` without decoding it. Throws HerculesError
 * `too-large` as soon as it passes `maxUnits`, and `malformed-frame` if the bytes are not one
 * MessagePack value (truncated, trailing bytes, 0xc1) or nest deeper than MAX_MEASURED_DEPTH.
 * Depth is not bounded here otherwise: a level costs a byte and 5 units, and arguments nested
 * deeper than MAX_ARG_DEPTH are refused as ops, with their reason, as before.
 */
export function measureFrame(data: Uint8Array, maxUnits = MAX_FRAME_UNITS): FrameSize {
  const end = data.length;
  let pos = 0,
    depth = 0,
    units = 0,
    heap = 0,
    values = 0, // every value: its slot in its parent
    opened = 0; // arrays and maps
  left[0] = 1;
  while (depth >= 0) {
    if (left[depth] === 0) {
      depth--;
      continue;
    }
    left[depth]--;
    values++;
    if (pos >= end) return malformed('truncated');
    const b = data[pos++];
    let n = 0; // items of an array or map that starts here
    if (b < 0x80 || b >= 0xe0) {
      units += 9;
      continue;
    }
    if (b >= 0xa0 && b < 0xc0) {
      const bytes = b & 31; // fixstr
      units += 5 + bytes;
      heap += STRING_HEAP + bytes;
      pos += bytes;
      continue;
    }
    if (b < 0x90) n = (b & 15) * 2;
    else if (b < 0xa0) n = b & 15;
    else if (b === 0xc0 || b === 0xc2 || b === 0xc3) {
      units += 1;
      continue;
    } else if (b === 0xc1) return malformed('type byte 193');
    else if (b <= 0xc9 || (b >= 0xd9 && b <= 0xdb)) {
      // bin 8, 16, 32; ext 8, 16, 32 (a length, a type byte, the payload); str 8, 16, 32
      const size = 1 << (b <= 0xc6 ? b - 0xc4 : b <= 0xc9 ? b - 0xc7 : b - 0xd9);
      const bytes = uint(data, pos, size, end) + (b >= 0xc7 && b <= 0xc9 ? 1 : 0);
      units += 5 + bytes;
      heap += STRING_HEAP + bytes;
      pos += size + bytes;
      continue;
    } else if (b <= 0xd3) {
      // float 32, 64, uint 8-64, int 8-64
      const size = b <= 0xcb ? 4 << (b - 0xca) : 1 << (b & 3);
      units += 9;
      if (size >= 4) heap += NUMBER_HEAP;
      pos += size;
      continue;
    } else if (b <= 0xd8) {
      // fixext 1, 2, 4, 8, 16 (undefined is fixext 1 of type 0): a type byte and the payload
      units += b === 0xd4 ? 1 : 5;
      pos += 1 + (1 << (b - 0xd4));
      continue;
    } else {
      const size = b & 1 ? 4 : 2; // array 16, 32, map 16, 32
      n = uint(data, pos, size, end) * (b < 0xde ? 1 : 2);
      pos += size;
    }
    units += 5;
    opened++;
    if (units > maxUnits) return tooLarge(maxUnits);
    if (n > 0) {
      if (++depth > MAX_MEASURED_DEPTH) return malformed(`nested deeper than ${MAX_MEASURED_DEPTH} levels`);
      // Every item takes a byte at least: a claimed length the frame cannot hold is refused here.
      if (n > end - pos) return malformed('truncated');
      left[depth] = n;
    }
  }
  if (units > maxUnits) return tooLarge(maxUnits);
  if (pos !== end) return malformed(pos > end ? 'truncated' : 'trailing bytes');
  return { units, heap: heap + values * SLOT_HEAP + opened * CONTAINER_HEAP };
}

function tooLarge(maxUnits: number): never {
  throw new HerculesError(
    'too-large',
    `frame too large: it would decode to more than ${maxUnits} units (an upper bound of its ops' sizes as the client counts them: FRAME_BUDGET_BYTES of ops in a frame); the client library never sends one`,
  );
}

/** The big-endian unsigned integer of `size` bytes at `at`. */
function uint(data: Uint8Array, at: number, size: number, end: number): number {
  if (at + size > end) malformed('truncated');
  let x = 0;
  for (let i = 0; i < size; i++) x = x * 256 + data[at + i];
  return x;
}

function malformed(why: string): never {
  throw new HerculesError('malformed-frame', `malformed frame: not MessagePack (${why})`);
}
