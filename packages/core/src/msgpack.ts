/**
 * A small MessagePack codec for the client side of the wire (ClientCodec in wire.ts), so that a
 * browser bundle carries 3.5 KiB of codec (minified; 1.8 gzipped) instead of msgpackr's 31 KiB
 * (docs/benchmarks.md, "Browser bundle size"). The server keeps msgpackr (server-codec.ts), configured
 * `{ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' }`; every
 * value the protocol carries crosses between the two unchanged, both ways
 * (packages/core/test/msgpack.test.ts checks it against msgpackr).
 *
 * What it encodes: null, booleans, numbers, strings, arrays, plain objects, and `undefined` as
 * fixext 1 type 0 (msgpackr's undefined), in the smallest standard form. Numbers as msgpackr
 * writes them: integers from -2^31 to 2^32-1 as the smallest int form, every other number as
 * float64 (never float32; an integer beyond 32 bits costs the same 9 bytes either way); -0 is
 * written as the integer 0, as msgpackr does (and as JSON makes it; -0 is outside the argument
 * domain, args.ts). A lone surrogate is written as U+FFFD, as TextEncoder does (also outside the
 * domain). Anything else (a Date, a Map, a typed array, a class instance, a bigint, a function,
 * nesting deeper than MAX_DEPTH) throws a `bad-argument` HerculesError: the op stubs have already
 * refused it (args.ts).
 *
 * What it decodes: every standard form but bin and the extensions (the protocol has neither),
 * apart from msgpackr's undefined (fixext 1 type 0). Integers of 64 bits become the nearest Number
 * (msgpackr's int64AsType 'number'), float32 is read, and strings that are not valid UTF-8 get
 * U+FFFD, as from msgpackr and TextDecoder. Map keys must be strings (msgpackr would turn a number,
 * boolean or nil key into one; the protocol has none). A "__proto__" key is renamed "__proto_", as
 * msgpackr does: a frame never sets a prototype, and both decoders give the same object. Anything
 * else throws a HerculesError('malformed-frame'), never another error: bin, other extensions,
 * truncation, trailing bytes, and nesting deeper than MAX_DEPTH.
 */
import { HerculesError } from './errors.ts';

/**
 * Deepest nesting of arrays and maps in a frame: op arguments nest at most MAX_ARG_DEPTH (256,
 * args.ts) inside a frame's few levels. A checkpoint's state (in a welcome, 3 levels down) is not
 * bounded by args.ts: a machine whose state nests deeper than about 500 levels cannot be caught up
 * by checkpoint (msgpackr's limit was the stack).
 */
export const MAX_DEPTH = 512;

// ---------------------------------------------------------------- encode

let out = new Uint8Array(2048);
let outView = new DataView(out.buffer);
let at = 0;
const textEncoder = new TextEncoder();

/** MessagePack bytes of `v` (a fresh array). */
export function encode(v: unknown): Uint8Array {
  at = 0;
  put(v, 0);
  const bytes = out.slice(0, at);
  if (out.length > 65536) {
    // after a large frame, let go of its buffer
    out = new Uint8Array(2048);
    outView = new DataView(out.buffer);
  }
  return bytes;
}

function room(n: number): void {
  if (at + n > out.length) {
    const fresh = new Uint8Array(Math.max(out.length * 2, at + n));
    fresh.set(out.subarray(0, at));
    out = fresh;
    outView = new DataView(out.buffer);
  }
}

/** A type byte, then n as a big-endian integer of `size` bytes (1, 2 or 4; negative n in two's complement). */
function head(type: number, n: number, size: number): void {
  out[at++] = type;
  if (size === 1) out[at] = n;
  else if (size === 2) outView.setUint16(at, n);
  else outView.setUint32(at, n);
  at += size;
}

/** The header of a string (fix 0xa0, wide 0xda), an array (0x90, 0xdc) or a map (0x80, 0xde) of n bytes or entries. */
function lengthHead(n: number, fix: number, wide: number): void {
  if (n < (fix === 0xa0 ? 32 : 16)) out[at++] = fix | n;
  else if (fix === 0xa0 && n < 256) head(0xd9, n, 1);
  else if (n < 65536) head(wide, n, 2);
  else head(wide + 1, n, 4);
}

function put(v: unknown, depth: number): void {
  room(9);
  switch (typeof v) {
    case 'string':
      return putString(v);
    case 'boolean':
      out[at++] = v ? 0xc3 : 0xc2;
      return;
    case 'undefined':
      return head(0xd4, 0, 2); // fixext 1, type 0: msgpackr's undefined
    case 'number':
      if (v >> 0 !== v && v >>> 0 !== v) {
        // beyond -2^31 .. 2^32-1, or not an integer
        out[at++] = 0xcb;
        outView.setFloat64(at, v);
        at += 8;
      } else if (v < 0x80 && v >= -0x20)
        out[at++] = v; // fixint (and -0 as 0)
      else {
        const size = v < 0 ? (v >= -0x80 ? 1 : v >= -0x8000 ? 2 : 4) : v < 0x100 ? 1 : v < 0x10000 ? 2 : 4;
        head((v < 0 ? 0xd0 : 0xcc) + (size >> 1), v, size); // int or uint 8, 16, 32
      }
      return;
    case 'object':
      if (v === null) {
        out[at++] = 0xc0;
        return;
      }
      if (depth < MAX_DEPTH && putObject(v, depth)) return;
      break;
    case 'bigint':
    case 'symbol':
    case 'function':
      break; // not sendable: refused below
  }
  throw new HerculesError('bad-argument', `cannot send a ${typeof v === 'object' ? 'non-plain object or nesting deeper than ' + MAX_DEPTH : typeof v}`);
}

function putObject(v: object, depth: number): boolean {
  if (Array.isArray(v)) {
    lengthHead(v.length, 0x90, 0xdc);
    for (let i = 0; i < v.length; i++) put(v[i], depth + 1);
    return true;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = Object.keys(v);
  lengthHead(keys.length, 0x80, 0xde);
  for (const k of keys) {
    putString(k);
    put((v as Record<string, unknown>)[k], depth + 1);
  }
  return true;
}

function putString(s: string): void {
  const n = s.length;
  room(n * 3 + 5);
  if (n < 32) {
    // short ASCII (keys, names, most values) in JavaScript
    let i = 0;
    for (let c; i < n && (c = s.charCodeAt(i)) < 0x80; i++) out[at + 1 + i] = c;
    if (i === n) {
      out[at] = 0xa0 | n;
      at += n + 1;
      return;
    }
  }
  // Anything else as TextEncoder writes it (a lone surrogate as U+FFFD), after room for the
  // longest header, then moved back behind the header it needs.
  const start = at;
  const bytes = textEncoder.encodeInto(s, out.subarray(start + 5)).written;
  lengthHead(bytes, 0xa0, 0xda);
  out.copyWithin(at, start + 5, start + 5 + bytes);
  at += bytes;
}

// ---------------------------------------------------------------- decode

let src: Uint8Array = new Uint8Array(0);
let pos = 0;
let view: DataView | undefined;
// ignoreBOM: keep a string's leading U+FEFF (by default TextDecoder drops it, and so does msgpackr
// without its native extension, as in a browser, for strings over 64 bytes).
const textDecoder = new TextDecoder('utf-8', { ignoreBOM: true });

/** The value in `data`, which must hold exactly one; HerculesError('malformed-frame') otherwise. */
export function decode(data: Uint8Array): unknown {
  src = data;
  pos = 0;
  view = undefined;
  try {
    const v = get(0);
    if (pos < src.length) fail('trailing bytes');
    return v;
  } catch (e) {
    // A RangeError (a stack already deep when decode was called) is a malformed frame too.
    throw e instanceof HerculesError ? e : new HerculesError('malformed-frame', `malformed frame: ${e}`);
  }
}

function fail(why: string): never {
  throw new HerculesError('malformed-frame', `malformed frame: not MessagePack (${why})`);
}

/** Moves past n bytes, returning where they start; fails if the frame has fewer. */
function take(n: number): number {
  if (n > src.length - pos) fail('truncated');
  return (pos += n) - n;
}

/** The big-endian unsigned integer of `size` bytes (1, 2 or 4) next in the frame. */
function uint(size: number): number {
  const p = take(size);
  let x = src[p];
  for (let i = 1; i < size; i++) x = x * 256 + src[p + i];
  return x;
}

function get(depth: number): unknown {
  if (depth > MAX_DEPTH) fail('nested too deep');
  const b = src[take(1)];
  if (b < 0x80) return b;
  if (b < 0x90) return getMap(b & 15, depth);
  if (b < 0xa0) return getArray(b & 15, depth);
  if (b < 0xc0) return getString(b & 31);
  if (b >= 0xe0) return b - 256;
  if (b > 0xcb && b < 0xd4) {
    // uint 8, 16, 32, 64, int 8, 16, 32, 64
    const size = 1 << (b & 3);
    let x = uint(size < 8 ? size : 4);
    if (b > 0xcf && x >= 2 ** (size < 8 ? size * 8 - 1 : 31)) x -= 2 ** (size < 8 ? size * 8 : 32);
    // 64 bits: to the nearest Number, with msgpackr's one rounding.
    return size < 8 ? x : x * 4294967296 + uint(4);
  }
  if (b > 0xd8) {
    // str 8, 16, 32, array 16, 32, map 16, 32
    if (b < 0xdc) return getString(uint(1 << (b - 0xd9)));
    const n = uint(b & 1 ? 4 : 2);
    return b < 0xde ? getArray(n, depth) : getMap(n, depth);
  }
  // Of the extensions only msgpackr's `undefined`: fixext 1 of type 0 (its payload byte ignored,
  // as msgpackr does).
  if (b === 0xd4 && src[take(2)] === 0) return undefined;
  if (b === 0xc0) return null;
  if (b === 0xc2 || b === 0xc3) return b === 0xc3;
  if (b === 0xca || b === 0xcb) {
    view ??= new DataView(src.buffer, src.byteOffset, src.byteLength);
    return b === 0xca ? view.getFloat32(take(4)) : view.getFloat64(take(8));
  }
  // Bin (the protocol has no bytes), other extensions, and 0xc1 (never used).
  return fail(`type byte ${b}`);
}

const fcc = String.fromCharCode;

/**
 * Short ASCII strings repeat from frame to frame (keys such as "row" and "text", names): they are
 * looked up here by their bytes and come back as the same string, which is faster to make and
 * which V8 stores into objects faster (msgpackr does the same for keys).
 */
const cache: string[] = [];

function getString(n: number): string {
  const p = take(n);
  if (n < 32) {
    const h = (n ^ (src[p] << 2) ^ (src[pos - 1] << 5)) & 1023;
    const k = cache[h];
    let s = '';
    let i = 0;
    if (k !== undefined && k.length === n) {
      while (i < n && k.charCodeAt(i) === src[p + i]) i++;
      if (i === n) return k;
    }
    for (i = p; i < pos && src[i] < 128; i++) s += fcc(src[i]);
    if (i === pos) return (cache[h] = s);
    // The rest of a short string that is not ASCII, in JavaScript too (a call into TextDecoder
    // costs more, in Chromium most); at the first byte that is not valid UTF-8, TextDecoder
    // decides what the whole string becomes.
    for (; i < pos; i++) {
      let c = src[i];
      if (c > 127) {
        const more = c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3; // continuation bytes
        if (c < 0xc2 || c > 0xf4 || i + more >= pos) break;
        c &= 0x3f >> more;
        for (let j = 1; j <= more; j++) c = (src[i + j] & 0xc0) === 0x80 ? (c << 6) | (src[i + j] & 63) : -1;
        // Not overlong, not a surrogate, not past U+10FFFF.
        if (c < (more === 1 ? 0x80 : more === 2 ? 0x800 : 0x10000) || c > 0x10ffff || (c >= 0xd800 && c < 0xe000)) break;
        i += more;
        if (c > 0xffff) {
          s += fcc(0xd800 | ((c - 0x10000) >> 10), 0xdc00 | (c & 0x3ff));
          continue;
        }
      }
      s += fcc(c);
    }
    if (i === pos) return s;
  }
  return textDecoder.decode(src.subarray(p, pos));
}

function getArray(n: number, depth: number): unknown[] {
  // Every element takes a byte at least: a claimed length is checked before anything is allocated.
  if (n > src.length - pos) fail('truncated');
  const a = new Array(n);
  for (let i = 0; i < n; i++) a[i] = get(depth + 1);
  return a;
}

function getMap(n: number, depth: number): Record<string, unknown> {
  if (n > (src.length - pos) / 2) fail('truncated');
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const k = get(depth + 1);
    if (typeof k !== 'string') fail('a map key that is not a string');
    const v = get(depth + 1);
    o[k === '__proto__' ? '__proto_' : k] = v;
  }
  return o;
}
