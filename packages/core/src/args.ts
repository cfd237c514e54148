/**
 * The argument domain: what an op's arguments (and a machine's state) may hold, so that every
 * replica applies the same values whichever way they reached it — live over the wire
 * (MessagePack), from a store or a checkpoint (JSON), or in the submitter's own memory.
 *
 * The domain is JSON data exactly as JSON round-trips it: null, booleans, finite numbers other
 * than -0, well-formed strings, arrays, and plain objects whose values are all in the domain.
 * Outside it, each path changes the value differently: NaN and ±Infinity become null in JSON but
 * stay themselves in MessagePack; -0 becomes 0 in JSON; a Date becomes a string in JSON and a
 * Date in MessagePack; an undefined property vanishes in JSON; bytes become an object of indices;
 * a lone surrogate survives JSON but becomes U+FFFD in UTF-8; a `__proto__` key is dropped by
 * MessagePack's decoder. Replicas fed different paths would diverge forever, so:
 * - the client's op stubs copy the arguments into the domain (-0 becomes 0, as JSON would make
 *   it) and refuse anything else with a `bad-argument` error naming the path;
 * - the server refuses, before ordering, any op whose arguments are outside the domain, deeper
 *   than MAX_ARG_DEPTH or larger than MAX_OP_BYTES (a raw connection can send anything).
 */
import { HerculesError } from './errors.ts';
import { MAX_OP_BYTES } from './protocol.ts';

/** Deepest nesting of arrays and objects in op arguments and state. */
export const MAX_ARG_DEPTH = 256;

/** Whether a string is valid Unicode (no lone surrogate): only such strings cross the wire unchanged. */
export const wellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (s) => (s as string & { isWellFormed(): boolean }).isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/**
 * Why `v` is outside the domain (naming the first offending path), or undefined if it is in.
 * `maxDepth`: the deepest nesting allowed (a room's state may nest deeper than op arguments).
 */
export function findNonJson(v: unknown, path: string, depth = 0, maxDepth = MAX_ARG_DEPTH): string | undefined {
  if (v === null || typeof v === 'boolean') return undefined;
  if (typeof v === 'string') return wellFormed(v) ? undefined : `${path} is a string with a lone surrogate (not valid Unicode)`;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return `${path} is ${v}`;
    return Object.is(v, -0) ? `${path} is -0 (JSON has no -0; use 0)` : undefined;
  }
  if (depth >= maxDepth) return `${path} is nested deeper than ${maxDepth} levels`;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== Array.prototype) return `${path} is an array subclass`;
    for (let i = 0; i < v.length; i++) {
      if (!(i in v)) return `${path}[${i}] is a hole in a sparse array`;
      const p = findNonJson(v[i], `${path}[${i}]`, depth + 1, maxDepth);
      if (p) return p;
    }
    return undefined;
  }
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null)
      return `${path} is a ${(proto as { constructor?: { name?: string } })?.constructor?.name ?? 'non-plain object'}`;
    for (const k of Object.keys(v)) {
      if (k === '__proto__') return `${path} has a "__proto__" key`;
      if (!wellFormed(k)) return `${path} has a key with a lone surrogate (not valid Unicode)`;
      const p = findNonJson((v as Record<string, unknown>)[k], `${path}.${k}`, depth + 1, maxDepth);
      if (p) return p;
    }
    return undefined;
  }
  return `${path} is ${v === undefined ? 'undefined' : `a ${typeof v}`}`;
}

/**
 * A frozen copy of `args` in the domain, as every replica will see it: -0 becomes 0 (what JSON
 * makes of it); anything else outside the domain throws `bad-argument` naming the path.
 * `undefined` (an op without arguments) stays undefined.
 */
export function domainCopy(op: string, args: unknown): unknown {
  if (args === undefined) return undefined;
  const fast = copyIn(args, 0);
  if (fast !== OUT) return fast;
  const copy = copyZeroes(args, 0);
  const bad = findNonJson(copy, 'args');
  if (bad)
    throw new HerculesError(
      'bad-argument',
      `${op}(${bad}): op arguments must be JSON data (null, booleans, finite numbers, strings, arrays, plain objects), to mean the same on every client`,
    );
  return deepFreezeFresh(copy);
}

const OUT = Symbol('outside the domain');

/**
 * The frozen copy domainCopy makes, in one walk (copy, check and freeze were three, the
 * arguments' costliest part of a submit: docs/benchmarks.md, text), or OUT when anything is
 * outside the domain: domainCopy then finds what, the slow way, to name it.
 */
function copyIn(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return wellFormed(v) ? v : OUT;
  if (typeof v === 'number') return Number.isFinite(v) ? (v === 0 ? 0 : v) : OUT;
  if (v === null || typeof v === 'boolean') return v;
  if (typeof v !== 'object' || depth >= MAX_ARG_DEPTH) return OUT;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== Array.prototype) return OUT;
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const c = i in v ? copyIn(v[i], depth + 1) : OUT;
      if (c === OUT) return OUT;
      out[i] = c;
    }
    return Object.freeze(out);
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return OUT;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const c = k === '__proto__' || !wellFormed(k) ? OUT : copyIn((v as Record<string, unknown>)[k], depth + 1);
    if (c === OUT) return OUT;
    out[k] = c;
  }
  return Object.freeze(out);
}

/** Structural copy that turns -0 into 0; leaves anything else for findNonJson to judge. */
function copyZeroes(v: unknown, depth: number): unknown {
  if (typeof v === 'number') return v === 0 ? 0 : v;
  if (v === null || typeof v !== 'object' || depth > MAX_ARG_DEPTH) return v;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== Array.prototype) return v;
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) if (i in v) out[i] = copyZeroes(v[i], depth + 1);
    return out;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const c = copyZeroes((v as Record<string, unknown>)[k], depth + 1);
    // defineProperty, so a "__proto__" key stays an own key for findNonJson to name; only there:
    // on every key it was most of the copy's cost (docs/benchmarks.md, text).
    if (k === '__proto__') Object.defineProperty(out, k, { value: c, enumerable: true, writable: true, configurable: true });
    else out[k] = c;
  }
  return out;
}

function deepFreezeFresh<T>(v: T): T {
  if (v !== null && typeof v === 'object') {
    for (const k of Object.keys(v)) deepFreezeFresh((v as Record<string, unknown>)[k]);
    Object.freeze(v);
  }
  return v;
}

/**
 * The digest chain of one client's ops: digest(n) = hash(digest(n-1), name(n), args(n)). The
 * server keeps the digest of each client's last op in its client record, and the client keeps
 * it beside its own ops: a client whose ops under a sequence number differ from the ones the
 * server ordered (its id is in use by another client, or its store came from a backup) finds
 * out at its welcome instead of taking the other's ops for its own.
 */
/** A 53-bit integer: cheap to compare, store and send (a string form cost more than the hash). */
export const GENESIS_DIGEST = 0;

/**
 * One walk over an op's arguments, done by the server for every op before ordering it and by a
 * client for every op it submits: whether they are in the domain, an upper bound of their size
 * on the wire (MessagePack: 9 bytes a number, a string's UTF-8 bytes plus a 5-byte header), and
 * the op's digest after `prev`. One pass, no JSON text: this sits on the server's per-op path.
 */
export function scanOp(prev: number, name: string, args: unknown): { digest: number; bytes: number } | { problem: string } {
  h1 = 0xdeadbeef;
  h2 = 0x41c6ce57;
  size = 0;
  mix(prev % 4294967296);
  mix(Math.floor(prev / 4294967296));
  mixString(name);
  if (args === undefined) mix(0);
  else if (!walk(args, 0)) return { problem: `${findNonJson(args, 'args') ?? 'args are not JSON data'}; op arguments must be JSON data` };
  if (size > MAX_OP_BYTES) return { problem: `arguments of about ${size} bytes exceed the ${MAX_OP_BYTES}-byte limit per op` };
  // cyrb53's finish (a public-domain 53-bit hash): collisions are astronomically unlikely for
  // the few ops that are ever compared.
  const a = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  const b = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(a ^ (a >>> 13), 3266489909);
  return { digest: 4294967296 * (2097151 & b) + (a >>> 0), bytes: size + name.length + 8 };
}

let h1 = 0,
  h2 = 0,
  size = 0;
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

function mix(x: number): void {
  h1 = Math.imul(h1 ^ x, 2654435761);
  h2 = Math.imul(h2 ^ x, 1597334677);
}

/** Length first, so that no two sequences of strings hash alike by running together. */
function mixString(s: string): void {
  let a = Math.imul(h1 ^ s.length, 2654435761),
    b = Math.imul(h2 ^ s.length, 1597334677),
    n = 5;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    a = Math.imul(a ^ ch, 2654435761);
    b = Math.imul(b ^ ch, 1597334677);
    // UTF-8's bytes exactly: a surrogate pair (one code point, 4 bytes) counts 2 + 2; a lone
    // surrogate is outside the domain (wellFormed).
    n += ch < 0x80 ? 1 : ch < 0x800 || (ch & 0xf800) === 0xd800 ? 2 : 3;
  }
  h1 = a;
  h2 = b;
  size += n;
}

/** Hashes `v` into the digest and counts its size; false as soon as it leaves the domain. */
function walk(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'string':
      if (!wellFormed(v)) return false;
      mix(5);
      mixString(v);
      return true;
    case 'number':
      if (!Number.isFinite(v) || Object.is(v, -0)) return false;
      f64[0] = v;
      mix(4);
      mix(u32[0]);
      mix(u32[1]);
      size += 9;
      return true;
    case 'boolean':
      mix(v ? 2 : 3);
      size += 1;
      return true;
    case 'object': {
      if (v === null) {
        mix(1);
        size += 1;
        return true;
      }
      if (depth >= MAX_ARG_DEPTH) return false;
      size += 5;
      if (Array.isArray(v)) {
        if (Object.getPrototypeOf(v) !== Array.prototype) return false;
        mix(6);
        mix(v.length);
        for (let i = 0; i < v.length; i++) if (!(i in v) || !walk(v[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      const keys = Object.keys(v);
      mix(7);
      mix(keys.length);
      for (const k of keys) {
        if (k === '__proto__' || !wellFormed(k)) return false;
        mixString(k);
        if (!walk((v as Record<string, unknown>)[k], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/**
 * A value's size as the argument domain counts it, with no op around it (the presence bound,
 * MAX_PRESENCE_BYTES): a string (an object's key too) its UTF-8 bytes + 5, a number 9, an array
 * or object 5 plus what it holds, null or a boolean 1. An upper bound of its MessagePack size
 * (which writes a short string's header in 1 byte and a small integer in 1). Or why the value is
 * outside the domain.
 */
export function domainBytes(v: unknown): number | { problem: string } {
  const scan = scanOp(0, '', v);
  // scanOp's bytes also count the op's name ('': a string of 0 bytes, 5) and 8 for the op.
  return 'problem' in scan ? scan : scan.bytes - 13;
}

/** Whether two ops' arguments are the same JSON data (for the rare comparisons of a resend). */
export function sameArgs(a: unknown, b: unknown): boolean {
  return (a === undefined ? '' : JSON.stringify(a)) === (b === undefined ? '' : JSON.stringify(b));
}
