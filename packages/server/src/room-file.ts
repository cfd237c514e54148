/**
 * What a room file may hold to be imported (`importRoom`, `PUT /admin/rooms/:room`): the same
 * domain as live ops, so an import can store nothing that no client could have made. Before
 * this, a checkpoint state nested 3,000 deep, log arguments nested 3,000 deep or a client
 * record with `highWater` 1e300 were stored as they were (issue 40): no welcome for that room
 * could be encoded (its clients retried for ever) and its state endpoint failed.
 *
 * - log entries: their arguments in the argument domain (args.ts: JSON data, 256 deep, 256 KiB,
 *   as the server refuses before ordering), their names and client ids within the protocol's
 *   bounds, every number an integer in range;
 * - the checkpoint state: JSON data nested at most MAX_STATE_DEPTH deep (a machine's state
 *   holds op arguments a few levels down, so it may nest deeper than they do, but it must fit in
 *   a welcome);
 * - client records: every field as the engine writes it (seqs within the client's highWater,
 *   positions within the log, digests 53-bit integers), nothing else;
 * - the whole file at most MAX_IMPORT_BYTES as JSON.
 *
 * `roomFileProblem` names the first field that breaks one of these, by its path in the file.
 */
import { findNonJson, MAX_OP_NAME, MAX_SERVER_KEYS, RECENT_DIGESTS, scanOp, type ClientRecord, type LogEntry } from '@hercules/core';
import type { RoomFile } from './room-service.ts';
import { digestsProblem } from './store/room-store.ts';
import { DIGEST_PATTERN } from './store/state-digest.ts';

/**
 * Largest room file an import takes, as JSON: the body limit of `PUT /admin/rooms/:room`, and
 * what `importRoom` measures. A state of that size still goes out in one welcome (a Node client's
 * `ws` takes frames up to 100 MiB; browsers have no limit) and into one checkpoint (SQLite takes
 * values up to 1e9 bytes; the cluster store splits its checkpoints).
 */
export const MAX_IMPORT_BYTES = 64 << 20;

/**
 * Deepest nesting of an imported checkpoint state. A welcome carries the state 3 levels down in
 * its frame, and the client's decoder takes 512 levels (msgpack.ts MAX_DEPTH): a state of 509
 * levels decodes, one of 510 does not (measured with ServerCodec and ClientCodec). 500 leaves
 * the frame a few levels of room to grow, and is twice the arguments' 256.
 */
export const MAX_STATE_DEPTH = 500;

/** A client id's length bound, as in the protocol's hello. */
const MAX_CLIENT_ID = 128;

/** Every field of a T, no more (a field added to LogEntry or ClientRecord fails the build here until it is checked below). */
const fieldsOf = <T>(all: Record<keyof T, true>): Set<string> => new Set(Object.keys(all));
const ENTRY_FIELDS = fieldsOf<LogEntry>({
  pos: true,
  client: true,
  seq: true,
  name: true,
  args: true,
  author: true,
  error: true,
  refused: true,
  after: true,
  v: true,
  digest: true,
});
const RECORD_FIELDS = fieldsOf<ClientRecord>({
  highWater: true,
  visibleSeq: true,
  rejected: true,
  owner: true,
  digest: true,
  recent: true,
  durable: true,
  keys: true,
});

/** Thrown inside the checks with the first problem found; caught by roomFileProblem. */
class Problem extends Error {}

/** What a value is, for a message: short, and safe for any value (no JSON of a deep one). */
function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (Object.is(v, -0)) return '-0';
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

function fail(path: string, what: string, v: unknown): never {
  throw new Problem(`${path} must be ${what}, got ${show(v)}`);
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && [Object.prototype, null].includes(Object.getPrototypeOf(v));

/** An integer from `min` to `max` (at most 2^53 - 1: every position, seq and digest is one), not -0 (JSON has none). */
function int(path: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || Object.is(v, -0) || v < min || v > max) fail(path, `an integer from ${min} to ${max}`, v);
  return v;
}

/** A well-formed string of `min` to `max` UTF-16 units. */
function str(path: string, v: unknown, min = 0, max = Number.POSITIVE_INFINITY): string {
  if (typeof v !== 'string' || v.length < min || v.length > max || findNonJson(v, path))
    fail(path, `a string of ${min} to ${max} characters, valid Unicode`, v);
  return v;
}

function onlyFields(path: string, o: Record<string, unknown>, known: Set<string>): void {
  for (const k of Object.keys(o)) if (!known.has(k)) throw new Problem(`${path} has a field ${show(k)} that is not one of ${[...known].join(', ')}`);
}

/** The log entry at `path`, which must be at position `pos`. */
function checkEntry(path: string, e: unknown, pos: number): void {
  if (!isPlain(e)) fail(path, 'a log entry (an object)', e);
  onlyFields(path, e, ENTRY_FIELDS);
  if (e.pos !== pos) fail(`${path}.pos`, `${pos} (the log follows the checkpoint without a gap)`, e.pos);
  str(`${path}.client`, e.client, 1, MAX_CLIENT_ID);
  const seq = int(`${path}.seq`, e.seq, 1);
  str(`${path}.name`, e.name, 1, MAX_OP_NAME);
  str(`${path}.author`, e.author, 1);
  const scan = scanOp(0, e.name as string, e.args);
  if ('problem' in scan) throw new Problem(scan.problem.startsWith('args') ? `${path}.${scan.problem}` : `${path}.args: ${scan.problem}`);
  if (e.error !== undefined) str(`${path}.error`, e.error);
  if (e.refused !== undefined && e.refused !== true) fail(`${path}.refused`, 'true or absent', e.refused);
  if (e.after !== undefined) int(`${path}.after`, e.after, 0, seq - 1);
  if (e.v !== undefined) int(`${path}.v`, e.v, 1);
  if (e.digest !== undefined) int(`${path}.digest`, e.digest, 0);
}

/** A list at `path` of at most `max` items, each checked by `item`. */
function list(path: string, v: unknown, max: number, item: (path: string, x: unknown) => void): void {
  if (!Array.isArray(v) || v.length > max) fail(path, `a list of at most ${max} items`, v);
  for (let i = 0; i < v.length; i++) item(`${path}[${i}]`, v[i]);
}

/** A pair or triple at `path` (recent's [seq, digest], keys' [key, seq, pos]). */
function tuple(path: string, v: unknown, n: number): unknown[] {
  if (!Array.isArray(v) || v.length !== n) fail(path, `a list of ${n} items`, v);
  return v;
}

/** The client record at `path`, in a room whose log ends at `head`. */
function checkRecord(path: string, r: unknown, head: number): void {
  if (!isPlain(r)) fail(path, 'a client record (an object)', r);
  onlyFields(path, r, RECORD_FIELDS);
  const highWater = int(`${path}.highWater`, r.highWater, 0);
  int(`${path}.visibleSeq`, r.visibleSeq, 0, highWater);
  if (r.durable !== undefined) int(`${path}.durable`, r.durable, 0, highWater);
  if (r.owner !== undefined) str(`${path}.owner`, r.owner, 1);
  if (r.digest !== undefined) int(`${path}.digest`, r.digest, 0);
  if (r.rejected !== undefined)
    list(`${path}.rejected`, r.rejected, Number.POSITIVE_INFINITY, (p, x) => {
      if (!isPlain(x)) fail(p, 'a rejected op { seq, pos, error, refused? }', x);
      onlyFields(p, x, new Set(['seq', 'pos', 'error', 'refused']));
      int(`${p}.seq`, x.seq, 1, highWater);
      int(`${p}.pos`, x.pos, 1, head);
      str(`${p}.error`, x.error);
      if (x.refused !== undefined && x.refused !== true) fail(`${p}.refused`, 'true or absent', x.refused);
    });
  if (r.recent !== undefined)
    list(`${path}.recent`, r.recent, RECENT_DIGESTS + 1, (p, x) => {
      const [seq, digest] = tuple(p, x, 2);
      int(`${p}[0]`, seq, 0, highWater);
      int(`${p}[1]`, digest, 0);
    });
  if (r.keys !== undefined)
    list(`${path}.keys`, r.keys, MAX_SERVER_KEYS, (p, x) => {
      const [key, seq, pos] = tuple(p, x, 3);
      str(`${p}[0]`, key);
      int(`${p}[1]`, seq, 1, highWater);
      int(`${p}[2]`, pos, 1, head);
    });
}

/** The checkpoint, the log after it, the client records and the stable position; throws a Problem. */
function checkRoom(file: RoomFile): void {
  const cp: unknown = file.checkpoint;
  if (!isPlain(cp)) fail('checkpoint', 'an object { pos, state }', cp);
  const base = int('checkpoint.pos', cp.pos, 0);
  const bad = findNonJson(cp.state, 'checkpoint.state', 0, MAX_STATE_DEPTH);
  if (bad) throw new Problem(`${bad}; a room's state must be JSON data, nested at most ${MAX_STATE_DEPTH} deep`);
  if (!Array.isArray(file.entries)) fail('entries', 'a list of log entries', file.entries);
  const head = base + file.entries.length;
  for (let i = 0; i < file.entries.length; i++) checkEntry(`entries[${i}]`, file.entries[i], base + 1 + i);
  const clients: unknown = file.clients;
  if (!isPlain(clients)) fail('clients', 'an object of client records', clients);
  for (const [id, rec] of Object.entries(clients)) {
    const path = `clients[${show(id)}]`;
    str(`${path} (its client id)`, id, 1, MAX_CLIENT_ID);
    if (id === '__proto__') fail(path, 'a client id other than "__proto__" (which a record of records cannot hold)', id);
    checkRecord(path, rec, head);
  }
  for (const [i, e] of (file.entries as LogEntry[]).entries()) {
    const rec = (clients as Record<string, { highWater: number }>)[e.client];
    if (rec && e.seq > rec.highWater) fail(`entries[${i}].seq`, `at most the highWater of client ${show(e.client)} (${rec.highWater})`, e.seq);
  }
  int('stable', file.stable, 0, head);
  checkDigests(file, base, head);
}

/** The checkpoint digests (positions from the checkpoint to the head, increasing) and the head's digest, if the file has them. */
function checkDigests(file: RoomFile, base: number, head: number): void {
  const problem = digestsProblem(file.digests, head);
  if (problem) throw new Problem(problem);
  const first = file.digests?.[0];
  if (first && first.pos < base) fail('digests[0].pos', `a position within the log (${base}..${head})`, first.pos);
  const h: unknown = file.head;
  if (h === undefined) return;
  if (!isPlain(h)) fail('head', 'an object { pos, digest }', h);
  onlyFields('head', h, new Set(['pos', 'digest']));
  int('head.pos', h.pos, head, head);
  if (typeof h.digest !== 'string' || !DIGEST_PATTERN.test(h.digest)) fail('head.digest', '64 lowercase hex digits (a SHA-256)', h.digest);
}

/**
 * Why `file` cannot be imported, naming the field (its path in the file), or undefined. Checks
 * everything before anything is stored: an import is all or nothing. The caller has checked
 * the format and the machine.
 */
export function roomFileProblem(file: RoomFile): string | undefined {
  try {
    checkRoom(file);
  } catch (e) {
    if (e instanceof Problem) return shorten(e.message);
    throw e;
  }
  // Once its nesting is bounded, JSON can measure it.
  const bytes = Buffer.byteLength(JSON.stringify(file));
  if (bytes > MAX_IMPORT_BYTES) return `the room file is ${bytes} bytes as JSON, over the ${MAX_IMPORT_BYTES}-byte limit of an import`;
  return undefined;
}

/** A message whose path runs hundreds of levels deep: a segment repeated n times is written once with ×n (`[0]×256`), and what is still long is cut to its ends. */
function shorten(message: string): string {
  const short = message.replace(/(\[\d+\]|\.[\w$]+)\1{3,}/g, (run, seg: string) => `${seg}×${run.length / seg.length}`);
  return short.length <= 400 ? short : `${short.slice(0, 150)} … ${short.slice(-200)}`;
}
