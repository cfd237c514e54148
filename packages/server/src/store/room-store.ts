/**
 * The room store contract: what a room's sequencer needs from storage, per room, asynchronous and
 * fenced. `SqliteStore` (one file, group commit across rooms) and `MemoryStore` implement it; a
 * store over a replicated log (NATS JetStream, etcd) is meant to fit it too. Any implementation
 * runs the conformance suite in `./conformance.ts` (`@hercules/server/store-conformance`).
 *
 * A room holds:
 *   metadata   the machine (name, version) it runs and when it was created; set once
 *   log        entries at consecutive positions 1, 2, …, head (each a `LogEntry`)
 *   checkpoint the machine's state at some position c <= head; entries up to c may be dropped
 *   stable     the highest checkpoint position written to it (the engine's stable frontier)
 *   clients    one `ClientRecord` per client id, replaced whole on each write
 *   rev        the fence: how many appends the room has accepted since it was created
 *
 * Fencing. Every append names the `rev` it expects to follow (`after`), and succeeds only if the
 * room is at exactly that rev; then the room moves to `after + 1`. So of two writers that loaded
 * the same room, at most one can write after that point: the other's next append fails with a
 * `FencedError`, and it must reload the room. The fence is a count of appends, not the log
 * position, because an append need not carry entries: a client claim (a record with its owner)
 * is persisted before the welcome that announces it, and two such appends at one log position
 * would otherwise both succeed. A writer can still predict the revs of appends it has not seen
 * settle (each success adds exactly 1), so it can keep several in flight: appends of one room take
 * effect in the order they were called, and when one fails every later one of that chain fails
 * too (it names a rev the room never reaches). A store may write the appends of one room that
 * are in flight together as one (SQLite does, per group commit): then a write that fails fails
 * all of them, earlier ones included. A writer treats any failure as the end of what it has in
 * flight, and reloads.
 *
 * All or nothing. An append that fails (fenced, refused, a value the store cannot hold, an I/O
 * error) has written nothing: not its entries, not its client records, not its checkpoint. An
 * append whose promise resolved is durable in the store's sense (fsynced for SQLite). A store may
 * report a failure for an append that in fact landed (an acknowledgement lost in a crash or on a
 * network); the writer cannot tell, drops the room and reloads it, and then sees what landed.
 *
 * Claiming a room. Loading (`open`) is the claim: a writer owns the room from the rev it loaded
 * until an append of it is fenced. That is enough for one process per data directory (SQLite's
 * file lock) and for a simulator. A store shared by several processes adds an epoch (a lease) on
 * top, so that a writer whose lease expired stops before its appends are even tried; the fence
 * stays what makes two writers unable to both succeed.
 */
import { HerculesError, type ClientRecord, type LogEntry, type RoomDurableState } from '@hercules/core';
import { DIGEST_PATTERN, MAX_CHECKPOINT_DIGESTS, type CheckpointDigest } from './state-digest.ts';

/** What a room is, set when it is created. */
export interface RoomMeta {
  /** The machine the room runs: its name and version. */
  machine: string;
  version: number;
  /** When it was created, in ms since the epoch by the store's clock (0: unknown, a room from before this was recorded). */
  created: number;
}

/** What `open` creates a missing room with. */
export interface RoomInit {
  machine: string;
  version: number;
  /** The machine's initial state: the room's checkpoint at position 0. */
  initial: unknown;
}

/** A room as loaded: enough to construct its `RoomEngine` and to go on appending. */
export interface LoadedRoom {
  meta: RoomMeta;
  /**
   * The checkpoint, the log after it up to the head (`suffix`, consecutive positions from
   * `checkpoint.pos + 1`), the client records and the stable position: `new RoomEngine(machine,
   * opts, durable)`. The checkpoint may be older than the newest one appended (a store may write
   * checkpoints lazily), never newer than the log it keeps.
   */
  durable: RoomDurableState;
  /** The room's rev: the `after` of the writer's first append. */
  rev: number;
  /** True if this call created the room (from `init`); false if it existed. */
  fresh: boolean;
}

/** A room as `exportRoom` reads it and `importRoom` writes it. */
export interface RoomExport {
  meta: Pick<RoomMeta, 'machine' | 'version'>;
  durable: RoomDurableState;
  /**
   * The digest of the state at each checkpoint the store was given (an append's `checkpoint`,
   * the initial state, an import's), by position, oldest first: those whose position is still
   * within the log it keeps, at most MAX_CHECKPOINT_DIGESTS (state-digest.ts). What `hercules
   * replay` checks a replay against. Absent from a store that records none; an import stores
   * those given.
   */
  digests?: CheckpointDigest[];
}

/** Why an export cannot be imported, or undefined: consecutive positions after the checkpoint, a stable position within the log. */
export function exportProblem(data: RoomExport): string | undefined {
  const d = data?.durable;
  if (!data?.meta || typeof data.meta.machine !== 'string' || !Number.isInteger(data.meta.version)) return 'meta must be { machine: string, version: integer }';
  if (!d?.checkpoint || !Number.isSafeInteger(d.checkpoint.pos) || d.checkpoint.pos < 0) return 'durable.checkpoint must be { pos: integer >= 0, state }';
  if (!Array.isArray(d.suffix)) return 'durable.suffix must be a list of log entries';
  for (let i = 0; i < d.suffix.length; i++) {
    const e = d.suffix[i];
    if (!e || e.pos !== d.checkpoint.pos + 1 + i || typeof e.client !== 'string' || !Number.isSafeInteger(e.seq) || typeof e.name !== 'string')
      return `durable.suffix[${i}] must be the log entry at position ${d.checkpoint.pos + 1 + i}`;
  }
  if (!d.clients || typeof d.clients !== 'object' || Array.isArray(d.clients)) return 'durable.clients must be an object of client records';
  const head = d.checkpoint.pos + d.suffix.length;
  if (!Number.isSafeInteger(d.stable) || d.stable < 0 || d.stable > head) return `durable.stable must be a position within the log (0..${head})`;
  return digestsProblem(data.digests, head);
}

/** Why a list of checkpoint digests is not one (positions increasing, each at most `head`, digests as stateDigest writes them), or undefined. */
export function digestsProblem(list: unknown, head: number, path = 'digests'): string | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list) || list.length > MAX_CHECKPOINT_DIGESTS) return `${path} must be a list of at most ${MAX_CHECKPOINT_DIGESTS} { pos, digest }`;
  let last = -1;
  for (let i = 0; i < list.length; i++) {
    const x = list[i] as CheckpointDigest;
    if (!x || typeof x !== 'object' || Object.keys(x).some((k) => k !== 'pos' && k !== 'digest')) return `${path}[${i}] must be { pos, digest }`;
    if (!Number.isSafeInteger(x.pos) || x.pos <= last || x.pos > head)
      return `${path}[${i}].pos must be a position after ${last} and at most the head, ${head}, got ${String(x.pos)}`;
    if (typeof x.digest !== 'string' || !DIGEST_PATTERN.test(x.digest)) return `${path}[${i}].digest must be 64 lowercase hex digits (a SHA-256)`;
    last = x.pos;
  }
  return undefined;
}

/**
 * How much of a room's history a store keeps behind its checkpoint (docs/history.md): the log
 * entries and the older checkpoint states that `history` reads. Each limit given caps what is
 * kept; when both are given, the tighter one wins. Checkpoints prune: when one is written, the
 * store keeps the entries after the newest kept state at or before the cut (the checkpoint minus
 * `ops`, or the last entry older than `days`), and that state; so it keeps at least what the
 * limits name (while the room has it) and at most that plus the ops between two written
 * checkpoints. `{ ops: 0 }` keeps nothing behind the checkpoint.
 */
export interface HistoryRetention {
  /** Keep the last this many ops behind the checkpoint (an integer >= 0). */
  ops?: number;
  /** Keep the ops committed in the last this many days (a number > 0; fractions allowed). */
  days?: number;
}

/** A store's retention when none is configured: the last 10,000 ops. */
export const DEFAULT_RETENTION: Readonly<HistoryRetention> = Object.freeze({ ops: 10_000 });

/** A retention per server, or per machine (by the room's machine name). */
export type RetentionSetting = HistoryRetention | ((machine: string) => HistoryRetention);

/** Check a retention setting: throws `bad-argument`; `{}` or undefined is the default. */
export function checkRetention(where: string, r: HistoryRetention | undefined): HistoryRetention {
  if (r === undefined) return DEFAULT_RETENTION;
  if (r === null || typeof r !== 'object') throw new HerculesError('bad-argument', `${where}: retention must be { ops?, days? }`);
  if (r.ops !== undefined && (!Number.isSafeInteger(r.ops) || r.ops < 0))
    throw new HerculesError('bad-argument', `${where}: retention.ops must be an integer >= 0, got ${String(r.ops)}`);
  if (r.days !== undefined && (typeof r.days !== 'number' || !Number.isFinite(r.days) || r.days <= 0))
    throw new HerculesError('bad-argument', `${where}: retention.days must be a number > 0, got ${String(r.days)}`);
  if (r.ops === undefined && r.days === undefined) return DEFAULT_RETENTION;
  return { ...(r.ops !== undefined ? { ops: r.ops } : {}), ...(r.days !== undefined ? { days: r.days } : {}) };
}

/** The servers' `history` option: a retention for every room, and per machine (by name). */
export type HistoryOption = HistoryRetention & { machines?: Record<string, HistoryRetention> };

/** A `history` option as a store's retention setting, checked now (throws `bad-argument` naming `caller`). */
export function retentionSetting(caller: string, h: HistoryOption | undefined): RetentionSetting {
  if (h === undefined) return checkRetention(`${caller}: history`, undefined);
  if (h === null || typeof h !== 'object') throw new HerculesError('bad-argument', `${caller}: history must be { ops?, days?, machines? }`);
  const { machines, ...all } = h;
  const base = checkRetention(`${caller}: history`, all);
  if (machines === undefined) return base;
  if (machines === null || typeof machines !== 'object')
    throw new HerculesError('bad-argument', `${caller}: history.machines must be an object of machine name to { ops?, days? }`);
  const per = new Map(Object.entries(machines).map(([m, r]) => [m, checkRetention(`${caller}: history.machines.${m}`, r)]));
  return (machine) => per.get(machine) ?? base;
}

/** The retention of a room running `machine`: the setting's, checked. */
export function retentionFor(setting: RetentionSetting | undefined, machine: string): HistoryRetention {
  return checkRetention(`retention of machine ${machine}`, typeof setting === 'function' ? setting(machine) : setting);
}

/**
 * Where a checkpoint at `cp` lets retention cut: entries at or before the returned position may
 * go. `older`: the last position committed before `now - days` (0: none), if `days` is set.
 */
export function retentionCut(r: HistoryRetention, cp: number, older: number): number {
  const byOps = r.ops === undefined ? 0 : cp - r.ops;
  const byDays = r.days === undefined ? 0 : older;
  return Math.max(0, Math.min(cp, r.ops === undefined && r.days === undefined ? cp : Math.max(byOps, byDays)));
}

/**
 * The position history is kept from after a checkpoint at `cp`: the newest of the kept states
 * (`bases`, ascending, all before `cp`) at or before `cut`; the oldest if none is (what is kept
 * must start at a state); `cp` itself if the cut reaches it or nothing older is kept.
 */
export function retentionStart(bases: readonly number[], cp: number, cut: number): number {
  if (cut >= cp || bases.length === 0) return cp;
  let start = bases[0];
  for (const b of bases) if (b <= cut) start = b;
  return start;
}

/** A log entry as history reads it: with the time the store committed it. */
export interface HistoryEntry extends LogEntry {
  /** When the store committed it, in ms since the epoch by the store's clock (0: unknown, written before this was recorded). */
  readonly time: number;
}

/** What `RoomStore.history` reads: entries of a range, or what rebuilds the state at a position. */
export type HistoryQuery = { from: number; to: number } | { stateAt: number };

/** What `RoomStore.history` answers. */
export interface RoomHistory {
  meta: RoomMeta;
  /** The first retained position: the state at `start` can be rebuilt, and every entry from `start + 1` to `head` is kept. */
  start: number;
  /** The position of the room's last stored entry. */
  head: number;
  /**
   * For `{ stateAt: p }` with start <= p <= head: the newest kept state at or before p (its
   * position and value), and `entries` run from there to p. Absent otherwise.
   */
  base?: { pos: number; state: unknown };
  /** For `{ from, to }`: the kept entries with positions in both [from, to] and [start + 1, head], in order. */
  entries: HistoryEntry[];
}

/** What `RoomStore.peek` reads. */
export interface RoomPeek {
  meta: RoomMeta;
  from: number;
  entries: LogEntry[];
}

/**
 * A stored room as `RoomStore.listRooms` reads it: what is known of it without loading it. Every
 * figure is as stored (a loaded room's writer may hold more that is not yet written).
 */
export interface StoredRoomInfo {
  name: string;
  /** The machine the room runs (RoomMeta.machine). */
  machine: string;
  /**
   * The machine version the room runs now: after a migration, the version it migrated to (the
   * `highWater` of its `~hercules` client record; docs/migrations.md), else RoomMeta.version.
   */
  version: number;
  /** The position of its last log entry (0: none yet). */
  head: number;
  /** The position of its stored checkpoint (entries up to it may be dropped). */
  checkpoint: number;
  /** Its stable position. */
  stable: number;
  /**
   * What it occupies in the store, in bytes, as the store can count it cheaply: for the SQLite
   * and memory stores, the UTF-8 bytes of its stored JSON (checkpoint state, log entries kept,
   * client records) plus its name, not the database's page overhead, indexes or free space.
   */
  bytes: number;
  /** When it was created (RoomMeta.created; 0: unknown). */
  created: number;
  /**
   * When its last append carrying log entries or client records landed (an op ordered, a client
   * joining), in ms since the epoch by the store's clock; `created` (or the import) if none did
   * yet; 0: unknown (a room from before this was recorded, not written to since). An append with
   * only a checkpoint does not count: it is housekeeping (a room writes one as it unloads).
   */
  lastActivity: number;
}

/** What `RoomStore.listRooms` takes: rooms after `after` (by name, `compareRoomNames`), at most `limit` of them. */
export interface ListRoomsOptions {
  after?: string;
  limit: number;
}

/**
 * The order rooms are listed in: by Unicode code point (the order of their UTF-8 bytes, which is
 * SQLite's for text), not JavaScript's UTF-16 order, so that every store pages alike.
 */
export function compareRoomNames(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!,
      y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/** One fenced, all-or-nothing write to a room. */
export interface RoomAppend {
  /** The rev the writer expects the room to be at (that of its load, plus one per append it made since). */
  after: number;
  /** Entries to add, at consecutive positions starting right after the room's head. */
  entries?: readonly LogEntry[];
  /** Client records to write, each replacing the client's record whole. */
  clients?: Readonly<Record<string, ClientRecord>>;
  /**
   * The state at position `pos` (<= the head after this append). Entries up to `pos` may then be
   * dropped. A checkpoint older than the one the room has is ignored, except that the stable
   * position never goes back either. A store may defer writing the state (see `release`), and
   * keep it by reference until then: do not change it after the call (the engine's states are
   * frozen). Everything else of an append is taken when `append` is called.
   */
  checkpoint?: { pos: number; state: unknown };
}

export interface Appended {
  /** The room's rev now: `after + 1`. */
  rev: number;
  /** The room's head now: the position of its last entry. */
  head: number;
}

export interface RoomStore {
  /**
   * Load a room. With `init`, a missing room is created from it first (atomically: of two
   * callers, one creates it and the other loads it); without, a missing room is `undefined`. A
   * room that exists is returned as it is, whatever `init` says: comparing its machine with the
   * one expected is the caller's business. Sees every append whose promise has resolved.
   */
  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  /** Write to a room, fenced by `after`; rejects with `FencedError` if the room is elsewhere (or gone). */
  append(room: string, write: RoomAppend): Promise<Appended>;
  /**
   * The writer is done with the room for now (it unloads it): write what the store deferred (a
   * lazily written checkpoint) and drop what it caches about it. The room stays stored.
   */
  release(room: string): Promise<void>;
  /**
   * Before a join is served from a room loaded earlier (its state in the writer's memory): resolve
   * only if this writer still held the room at some moment after the call, else reject (the caller
   * drops the room and the joiner retries, reloading it). Optional: a store with one writer by
   * construction (SQLite, memory) has nothing to confirm; a replicated one whose writer can lose a
   * room without knowing it yet (a cluster node paused or cut off) must, or a joiner may be
   * welcomed with a log older than one it already saw.
   */
  confirmWriter?(room: string): Promise<void>;
  /** The names of the rooms stored, in no particular order. */
  rooms(): Promise<string[]>;
  /**
   * A page of the stored rooms with what is known of each without loading it (`StoredRoomInfo`):
   * the first `limit` rooms whose names come after `after` (all, without it), in the order of
   * `compareRoomNames`. Fewer than `limit`: that was the last page. Touches no cache and no fence,
   * so it may run while rooms are loaded. Optional: without it, `server.rooms()` lists such a
   * store's unloaded rooms by name only.
   */
  listRooms?(opts: ListRoomsOptions): Promise<StoredRoomInfo[]>;
  /**
   * A read for others than the room's writer (webhooks, the backend API): the room's meta and up
   * to `max` log entries after position `after`, as stored (`from` > after + 1: the ones before
   * were compacted into the checkpoint). Touches nothing the writer relies on (no cache, no fence),
   * so it may run while the room is loaded. Undefined: no such room. Optional: a store without it
   * serves no webhooks, and the backend API then needs the room's machine named.
   */
  peek?(room: string, after: number, max: number): Promise<RoomPeek | undefined>;
  /**
   * A read of the room's retained history (`HistoryRetention`): the entries of a range with
   * their commit times, or the newest kept state at or before a position and the entries from
   * there to it. Like `peek`, touches nothing the writer relies on. Undefined: no such room.
   * Optional: without it, the backend API's `stateAt` and `log` refuse.
   */
  history?(room: string, q: HistoryQuery): Promise<RoomHistory | undefined>;
  /** The room as stored (meta, checkpoint, the log after it, client records), for an export; touches no cache. Optional. */
  exportRoom?(room: string): Promise<RoomExport | undefined>;
  /**
   * Create `room` from an export, all or nothing; rejects with `bad-argument` if it exists (or
   * the export is not consistent: the log must follow the checkpoint without a gap). Optional.
   */
  importRoom?(room: string, data: RoomExport): Promise<void>;
  /** Delete the room and everything it holds; false if there was none. Its writer must have released it first. Optional. */
  deleteRoom?(room: string): Promise<boolean>;
  /** Finish what is in flight (appends settle), write what is deferred, and let go of the storage. Later calls reject with `closed`. */
  close(): Promise<void>;
}

/** An append lost: the room is not at the rev the writer expected. Reload the room before writing again. */
export class FencedError extends HerculesError {
  readonly room: string;
  /** The rev the append named. */
  readonly expected: number;
  /** The rev the room is at, or undefined if it does not exist. */
  readonly actual: number | undefined;
  constructor(room: string, expected: number, actual: number | undefined) {
    super(
      'fenced',
      actual === undefined
        ? `room ${room} does not exist, so an append expecting it at rev ${expected} cannot be written; open the room (with its machine) to create it first`
        : `room ${room} is at rev ${actual}, not ${expected} as this append expected: another writer wrote to it, or an earlier append of this writer failed; nothing of this append was written, reload the room (open) before writing again`,
    );
    this.name = 'FencedError';
    this.room = room;
    this.expected = expected;
    this.actual = actual;
  }
}

/** A store could not read or write: a full disk, an I/O error, a value it cannot hold. */
export class StorageError extends HerculesError {
  /**
   * 'value': what was given cannot be stored (a value JSON cannot hold, nesting too deep): that
   * write fails, the storage is fine. 'io': the storage failed (a full disk, an I/O error).
   */
  readonly kind: 'io' | 'value';
  constructor(message: string, cause?: unknown, kind: 'io' | 'value' = 'io') {
    super('storage-failed', message, { cause });
    this.name = 'StorageError';
    this.kind = kind;
  }
}

export function closedError(what: string): HerculesError {
  return new HerculesError('closed', `the room store is closed, so it cannot ${what}; open a new one`);
}

export function checkRoomName(room: unknown): asserts room is string {
  if (typeof room !== 'string' || room.length === 0)
    throw new HerculesError('bad-argument', `a room name must be a non-empty string, got ${typeof room === 'string' ? 'an empty string' : typeof room}`);
}

/** Check `listRooms`'s options: throws `bad-argument`. */
export function checkListRooms(opts: ListRoomsOptions): ListRoomsOptions {
  if (opts === null || typeof opts !== 'object') throw new HerculesError('bad-argument', 'listRooms({ after?, limit }): the options must be an object');
  if (!Number.isSafeInteger(opts.limit) || opts.limit < 1)
    throw new HerculesError('bad-argument', `listRooms: limit must be an integer >= 1, got ${String(opts.limit)}`);
  if (opts.after !== undefined && typeof opts.after !== 'string')
    throw new HerculesError('bad-argument', `listRooms: after must be a room name (a string), got ${typeof opts.after}`);
  return { after: opts.after, limit: opts.limit };
}

/** The facts of an append that `checkAppend` found sound, taken when it was called. */
export interface CheckedAppend {
  after: number;
  /** The head its entries follow (one before the first), or undefined if it has none. */
  follows: number | undefined;
  /** How many entries it carries. */
  count: number;
  checkpointPos: number | undefined;
}

/**
 * Check what can be checked of an append without the room: throws `bad-argument` naming the
 * problem.
 */
export function checkAppend(room: string, w: RoomAppend): CheckedAppend {
  checkRoomName(room);
  const bad = (why: string) => new HerculesError('bad-argument', `room ${room}: append refused, ${why}; nothing was written`);
  if (w === null || typeof w !== 'object') throw bad('the write must be an object { after, entries?, clients?, checkpoint? }');
  if (!Number.isSafeInteger(w.after) || w.after < 0) throw bad(`after must be the room's rev (an integer >= 0), got ${String(w.after)}`);
  let follows: number | undefined;
  let count = 0;
  if (w.entries !== undefined) {
    if (!Array.isArray(w.entries)) throw bad('entries must be an array of log entries');
    count = w.entries.length;
    if (count > 0) {
      const first = w.entries[0]?.pos;
      if (!Number.isSafeInteger(first) || first < 1) throw bad(`the first entry's position must be an integer >= 1, got ${String(first)}`);
      for (let i = 1; i < count; i++) {
        // A gap or disorder would lose or misplace entries.
        if (w.entries[i]?.pos !== first + i)
          throw bad(`entries must be at consecutive positions: entry ${i} is at ${String(w.entries[i]?.pos)}, not ${first + i}`);
      }
      follows = first - 1;
    }
  }
  if (w.clients !== undefined && (w.clients === null || typeof w.clients !== 'object' || Array.isArray(w.clients)))
    throw bad('clients must be an object of client id to ClientRecord');
  if (w.checkpoint !== undefined) {
    if (w.checkpoint === null || typeof w.checkpoint !== 'object' || !Number.isSafeInteger(w.checkpoint.pos) || w.checkpoint.pos < 0)
      throw bad(`checkpoint must be { pos, state } with pos an integer >= 0, got pos ${String(w.checkpoint?.pos)}`);
  }
  return { after: w.after, follows, count, checkpointPos: w.checkpoint?.pos };
}

/**
 * Check an append against the room's head (after the fence held): its entries must follow the
 * head, its checkpoint must not pass the new head. Returns the new head. A failure here is the
 * writer's bug (its rev matched but its log did not), so it is `bad-argument`, not fenced.
 */
export function checkAgainstHead(room: string, a: CheckedAppend, head: number): number {
  if (a.follows !== undefined && a.follows !== head) {
    throw new HerculesError(
      'bad-argument',
      `room ${room}: append refused, its entries start at ${a.follows + 1} but the room's head is ${head} (they must start at ${head + 1}); nothing was written`,
    );
  }
  const newHead = head + a.count;
  if (a.checkpointPos !== undefined && a.checkpointPos > newHead) {
    throw new HerculesError(
      'bad-argument',
      `room ${room}: append refused, its checkpoint at ${a.checkpointPos} is past the room's head ${newHead}; nothing was written`,
    );
  }
  return newHead;
}
