/**
 * Server storage: one SQLite file (better-sqlite3) holding every room's checkpoint, log suffix
 * and per-client records. Writes from many rooms are group-committed in one transaction with
 * the WAL synced to disk before any of its appends settles, so when an append resolves it survives
 * a power cut; only then are the ops announced Authoritative. The sync runs off the event loop:
 * SQLite writes the transaction with `synchronous=NORMAL` (no fsync) and the store then fsyncs
 * the WAL file on libuv's thread pool, which is what `synchronous=FULL` adds in WAL mode ("an
 * additional sync of the WAL after each commit"), without holding the event loop for it (a CPU
 * profile of a busy server had half its busy time inside FULL's fsync; docs/benchmarks.md).
 *
 * The log is stored in chunks: the entries one output of a room appended, as one row (JSON
 * array) keyed by their first position. One row per op cost an INSERT and a B-tree entry per
 * op, the largest share of the server's time at saturation. Data files from before (a `log`
 * table, one row per op) are converted on open, in one transaction.
 *
 * Checkpoints are written lazily: the stable position is recorded on every advance (a few
 * bytes), but the checkpoint state itself (possibly megabytes) only every
 * `checkpointEvery` ops, once the log written since is half the size of the last state, and
 * when a room unloads: a state rewritten every 1,000 ops whatever its size made a large room's
 * commits (every other room's too: they share the transaction) slower as it grew. Log rows after
 * the last written checkpoint are kept, so a restart resumes from that checkpoint plus the rows
 * after it.
 *
 * Two interfaces over the same tables. The `RoomStore` contract (room-store.ts: `open`,
 * `append`, `release`, `rooms`, `listRooms`, `close`), asynchronous and fenced: the appends called in one
 * event-loop turn, of any rooms, share one transaction, and a room's appends of that turn are
 * written as one (fences checked in memory; see `commitQueue`); a room whose write fails fails
 * alone. Every promise settles after its commit; the server uses this one (through RoomHost).
 * And an older synchronous interface (`load`, `create`, `serialize`, `commitPrepared`,
 * `flushCheckpoint`, `forget`), not fenced, kept for tools and tests.
 */
import Database from 'better-sqlite3';
import { closeSync, fsync, fsyncSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { HerculesError, SYSTEM_CLIENT, type LogEntry, type RoomDurableState, type ClientRecord } from '@hercules/core';
import {
  FencedError,
  StorageError,
  checkAgainstHead,
  checkAppend,
  checkListRooms,
  checkRoomName,
  closedError,
  type Appended,
  type ListRoomsOptions,
  type StoredRoomInfo,
  type CheckedAppend,
  type LoadedRoom,
  type RoomAppend,
  type RoomInit,
  type RoomPeek,
  type RoomExport,
  exportProblem,
  type RoomMeta,
  type RoomStore,
  type HistoryEntry,
  type HistoryQuery,
  type RetentionSetting,
  type RoomHistory,
  retentionCut,
  retentionFor,
  retentionStart,
} from './room-store.ts';
import { checkpointDigest, importedDigests, keepDigests, stateDigest, type CheckpointDigest } from './state-digest.ts';

export { StorageError };

export interface RoomPersist {
  appended: readonly LogEntry[];
  clients: Record<string, ClientRecord>;
  checkpoint?: { pos: number; state: unknown };
}

/** One room's writes, serialised by `SqliteStore.serialize`. */
export interface PreparedWrite {
  room: string;
  log?: { first: number; last: number; json: string };
  clients: [client: string, json: string][];
  /** `json` is set when the checkpoint state itself is due to be written, else only the position. */
  checkpoint?: { pos: number; state: unknown; json?: string };
  /** The digest of the checkpoint's state, recorded with the write (appends only; state-digest.ts). */
  digest?: CheckpointDigest;
}

export interface StoredRoom {
  machine: string;
  version: number;
  durable: RoomDurableState;
}

export interface SqliteStoreOptions {
  /**
   * Write a checkpoint's state once it is this many ops past the one on disk and the log written
   * since is at least half the size of the last state written (and on unload). Default 1000.
   */
  checkpointEvery?: number;
  /** The clock a room's `created` is read from (ms since the epoch). Default `Date.now`. */
  now?: () => number;
  /**
   * Called after each group commit of `append`s, for metrics: how many appends it wrote and how
   * many failed, the log entries written, the transactions it tried (1 when nothing failed
   * in the database; more when a room's write failed and the rest were written again, or the
   * group's commit failed and each room was tried alone) and how long it took.
   */
  onCommit?: (c: { appends: number; failed: number; ops: number; transactions: number; seconds: number }) => void;
  /**
   * Called after each fsync of the WAL that settles a group commit (off the event loop; see the
   * header), for metrics: how long it took, and whether it failed. `onCommit` times the write
   * alone; an append settles after both.
   */
  onSync?: (s: { seconds: number; failed: boolean }) => void;
  /**
   * Keep a room's log entries from this position on even once a checkpoint covers them (their
   * readers, webhooks, have not had them yet), up to `retainAtMost` entries behind the checkpoint.
   * Default: entries a checkpoint covers are deleted with it.
   */
  retainFrom?: (room: string) => number;
  /** At most this many entries are kept behind a checkpoint for `retainFrom`. Default 100,000. */
  retainAtMost?: number;
  /**
   * How much history (`history`: older states and the log after them) to keep behind checkpoints,
   * per store or per machine (HistoryRetention); pruned when a checkpoint's state is written.
   * Default DEFAULT_RETENTION.
   */
  retention?: RetentionSetting;
}

/** An append waiting for the group commit of its turn. */
interface QueuedAppend {
  room: string;
  checked: CheckedAppend;
  /** Its checkpoint, kept (by reference) as the latest to write on release once the append is durable. */
  checkpoint: { pos: number; state: unknown } | undefined;
  prepared: PreparedWrite;
  resolve: (a: Appended) => void;
  reject: (e: unknown) => void;
}

export class SqliteStore implements RoomStore {
  readonly db: Database.Database;
  readonly file: string;
  private readonly checkpointEvery: number;
  private readonly now: () => number;
  private readonly onCommit: SqliteStoreOptions['onCommit'];
  private readonly onSync: SqliteStoreOptions['onSync'];
  /** Per room: position of the checkpoint on disk, and the latest one not yet written. */
  private readonly written = new Map<string, number>();
  private readonly latest = new Map<string, { pos: number; state: unknown }>();
  /**
   * Per room: the size of its last checkpoint state, and the bytes of log written since. A state
   * is written again only once the log since has grown to half its size (and `checkpointEvery`
   * ops passed), so writing checkpoints costs at most about twice what writing the log does,
   * however large the state grows; a restart replays at most about that much log.
   */
  private readonly checkpointBytes = new Map<string, number>();
  private readonly logBytesSince = new Map<string, number>();
  /**
   * Per room: its rev and head as the file holds them, to check fences without a read (this
   * store holds the file's exclusive lock, so only its own writes move them). Filled when a
   * room is read or first appended to, dropped when it is released.
   */
  private readonly heads = new Map<string, Head>();
  private stmts!: ReturnType<SqliteStore['prepare']>;
  /** Appends of this turn, for one transaction. */
  private queue: QueuedAppend[] = [];
  private flushScheduled = false;
  private closed = false;
  /**
   * The WAL file, opened to fsync it after each group commit (see the header). Undefined if it
   * could not be opened: then SQLite syncs each commit itself (`synchronous=FULL`).
   */
  private walFd: number | undefined;
  private syncsInFlight = 0;
  /** Each batch settles after the ones before it: the chain of their syncs. */
  private lastSync: Promise<unknown> = Promise.resolve();
  /** A failed fsync: what was written may not be on disk, so nothing more is acknowledged. */
  private syncFailed: StorageError | undefined;
  /** close() synced the WAL itself: syncs still in flight then count as done. */
  private syncedAtClose = false;

  private readonly retain: Pick<SqliteStoreOptions, 'retainFrom' | 'retainAtMost' | 'retention'>;

  constructor(dataDir: string, opts: SqliteStoreOptions = {}) {
    this.checkpointEvery = opts.checkpointEvery ?? 1000;
    this.retain = { retainFrom: opts.retainFrom, retainAtMost: opts.retainAtMost, retention: opts.retention };
    if (typeof opts.retention !== 'function') retentionFor(opts.retention, 'any'); // checked now
    this.now = opts.now ?? Date.now;
    this.onCommit = opts.onCommit;
    this.onSync = opts.onSync;
    try {
      mkdirSync(dataDir, { recursive: true });
      this.file = join(dataDir, 'hercules.sqlite');
      this.db = new Database(this.file, { timeout: 1000 });
    } catch (e) {
      throw new StorageError(
        `cannot open the data directory ${dataDir}: ${(e as Error).message}. Check that it exists, is writable and the disk is not full.`,
        e,
      );
    }
    try {
      // One server per data directory: two would each sequence the same rooms and overwrite
      // each other's log. The lock is taken now and held until close; the OS drops it when the
      // process dies, even by SIGKILL. (Exclusive before WAL: the WAL index lives in memory.)
      this.db.pragma('locking_mode = EXCLUSIVE');
      this.db.pragma('journal_mode = WAL');
      this.db.exec('BEGIN IMMEDIATE; COMMIT');
    } catch (e) {
      this.db.close();
      if ((e as { code?: string }).code === 'SQLITE_BUSY') {
        throw new StorageError(
          `the data directory ${dataDir} is in use by another Hercules server. One server owns a data directory: stop the other, or give this one its own --data-dir.`,
          e,
        );
      }
      throw new StorageError(`cannot open ${this.file}: ${(e as Error).message}. Check it is a Hercules data file and the disk is not full.`, e);
    }
    try {
      // FULL: a commit is on disk (fsync of the WAL) before it returns.
      this.db.pragma('synchronous = FULL');
      this.db.exec(`
        CREATE TABLE IF NOT EXISTS rooms (
          room TEXT PRIMARY KEY,
          machine TEXT NOT NULL,
          version INTEGER NOT NULL,
          checkpoint_pos INTEGER NOT NULL,
          checkpoint TEXT NOT NULL,
          stable INTEGER NOT NULL,
          rev INTEGER NOT NULL DEFAULT 0,
          created INTEGER NOT NULL DEFAULT 0,
          last_append INTEGER NOT NULL DEFAULT 0,
          digests TEXT NOT NULL DEFAULT '[]'
        );
        CREATE TABLE IF NOT EXISTS log_chunks (
          room TEXT NOT NULL,
          first INTEGER NOT NULL,
          last INTEGER NOT NULL,
          entries TEXT NOT NULL,
          PRIMARY KEY (room, first)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS history_states (
          room TEXT NOT NULL,
          pos INTEGER NOT NULL,
          state TEXT NOT NULL,
          PRIMARY KEY (room, pos)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS clients (
          room TEXT NOT NULL,
          client TEXT NOT NULL,
          record TEXT NOT NULL,
          PRIMARY KEY (room, client)
        ) WITHOUT ROWID;
      `);
      this.migrateRowPerOpLog();
      this.migrateRoomColumns();
      this.migrateChunkTimes();
      this.stmts = this.prepare();
      this.syncOffTheEventLoop();
    } catch (e) {
      this.db.close();
      throw new StorageError(
        `cannot open the data directory ${dataDir}: ${(e as Error).message}. Check that it exists, is writable and the disk is not full.`,
        e,
      );
    }
  }

  /**
   * Open the WAL file (it exists: the schema was written through it) and let SQLite stop syncing
   * on commit; the store syncs it (syncWal). If it cannot be opened, SQLite keeps syncing.
   */
  private syncOffTheEventLoop(): void {
    try {
      this.walFd = openSync(`${this.file}-wal`, 'r');
    } catch {
      return;
    }
    this.db.pragma('synchronous = NORMAL');
  }

  /**
   * fsync the WAL on the thread pool; resolves (in call order) with undefined once everything
   * written before the call is on disk, or with the error. Without a WAL descriptor, at once
   * (SQLite synced the commit).
   */
  private syncWal(): Promise<StorageError | undefined> {
    const fd = this.walFd;
    if (fd === undefined || this.syncFailed) {
      const settled = this.lastSync.then(() => this.syncFailed);
      this.lastSync = settled;
      return settled;
    }
    this.syncsInFlight++;
    const t0 = performance.now();
    const synced = new Promise<StorageError | undefined>((resolve) =>
      fsync(fd, (err) => {
        if (--this.syncsInFlight === 0 && this.closed) this.closeWal();
        try {
          this.onSync?.({ seconds: (performance.now() - t0) / 1000, failed: err !== null });
        } catch {
          /* a metrics hook must not fail the writes */
        }
        if (err && !this.syncedAtClose)
          this.syncFailed ??= new StorageError(
            `cannot sync the data file ${this.file} to disk: ${err.message}. The last writes may not be on disk; restart the server (it resumes from what is on disk) and check the disk.`,
            err,
          );
        resolve(err && !this.syncedAtClose ? this.syncFailed : undefined);
      }),
    );
    const ordered = this.lastSync.then(() => synced);
    this.lastSync = ordered;
    return ordered;
  }

  /** The synchronous path (`commitPrepared`, close): sync the WAL on this thread. */
  private syncWalNow(): void {
    if (this.walFd !== undefined) fsyncSync(this.walFd);
  }

  private closeWal(): void {
    if (this.walFd === undefined) return;
    try {
      closeSync(this.walFd);
    } catch {
      /* already gone with the process's files */
    }
    this.walFd = undefined;
  }

  /** A data file from before log chunks: each old row becomes a chunk of one entry. */
  private migrateRowPerOpLog(): void {
    const old = this.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log'`).get();
    if (!old) return;
    this.db.transaction(() => {
      this.db.exec(`INSERT INTO log_chunks (room, first, last, entries) SELECT room, pos, pos, '[' || entry || ']' FROM log; DROP TABLE log;`);
    })();
  }

  /**
   * A data file from before the room store contract: rooms get a rev (the fence) and a creation
   * time (0: unknown); from before room listings: the time of their last append (0: unknown until
   * the room is next written). Each column is added if missing (the schema is versioned by its
   * columns), all in one transaction.
   */
  private migrateRoomColumns(): void {
    const cols = new Set(
      this.db
        .prepare<[], { name: string }>(`SELECT name FROM pragma_table_info('rooms')`)
        .all()
        .map((c) => c.name),
    );
    if (cols.has('rev') && cols.has('created') && cols.has('last_append') && cols.has('digests')) return;
    this.db.transaction(() => {
      if (!cols.has('rev')) this.db.exec('ALTER TABLE rooms ADD COLUMN rev INTEGER NOT NULL DEFAULT 0');
      if (!cols.has('created')) this.db.exec('ALTER TABLE rooms ADD COLUMN created INTEGER NOT NULL DEFAULT 0');
      if (!cols.has('last_append')) this.db.exec('ALTER TABLE rooms ADD COLUMN last_append INTEGER NOT NULL DEFAULT 0');
      // The checkpoint digests (state-digest.ts): none for a room written before them.
      if (!cols.has('digests')) this.db.exec(`ALTER TABLE rooms ADD COLUMN digests TEXT NOT NULL DEFAULT '[]'`);
    })();
  }

  /** A data file from before history: log chunks get their commit time (0: unknown). */
  private migrateChunkTimes(): void {
    const cols = this.db.prepare<[], { name: string }>(`SELECT name FROM pragma_table_info('log_chunks')`).all();
    if (!cols.some((c) => c.name === 'time')) this.db.exec('ALTER TABLE log_chunks ADD COLUMN time INTEGER NOT NULL DEFAULT 0');
  }

  private prepare() {
    const db = this.db;
    return {
      getRoom: db.prepare<
        [string],
        { machine: string; version: number; checkpoint_pos: number; checkpoint: string; stable: number; rev: number; created: number }
      >('SELECT machine, version, checkpoint_pos, checkpoint, stable, rev, created FROM rooms WHERE room = ?'),
      // The fence and the head: the last chunk by position holds the last entry (chunks are consecutive).
      getHead: db.prepare<[string], { rev: number; checkpoint_pos: number; last: number | null }>(
        'SELECT rev, checkpoint_pos, (SELECT last FROM log_chunks WHERE room = rooms.room ORDER BY first DESC LIMIT 1) AS last FROM rooms WHERE room = ?',
      ),
      listRooms: db.prepare<[], { room: string }>('SELECT room FROM rooms'),
      peekRoom: db.prepare<[string], { machine: string; version: number; checkpoint_pos: number; created: number }>(
        'SELECT machine, version, checkpoint_pos, created FROM rooms WHERE room = ?',
      ),
      getLog: db.prepare<[string, number], { entries: string }>('SELECT entries FROM log_chunks WHERE room = ? AND last > ? ORDER BY first'),
      getClients: db.prepare<[string], { client: string; record: string }>('SELECT client, record FROM clients WHERE room = ?'),
      insertRoom: db.prepare(
        'INSERT INTO rooms (room, machine, version, checkpoint_pos, checkpoint, stable, created, last_append) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      // last_append: the time of a write with entries or client records (NULL: a checkpoint only, it stays).
      bumpRev: db.prepare('UPDATE rooms SET rev = rev + ?, stable = max(stable, ?), last_append = coalesce(?, last_append) WHERE room = ?'),
      touch: db.prepare('UPDATE rooms SET last_append = ? WHERE room = ?'),
      // Never back: an older checkpoint over a newer one would name log entries already pruned.
      advanceCheckpoint: db.prepare('UPDATE rooms SET checkpoint_pos = ?, checkpoint = ?, stable = max(stable, ?) WHERE room = ? AND checkpoint_pos < ?'),
      setStable: db.prepare('UPDATE rooms SET stable = ? WHERE room = ?'),
      getDigests: db.prepare<[string], { digests: string }>('SELECT digests FROM rooms WHERE room = ?'),
      setDigests: db.prepare('UPDATE rooms SET digests = ? WHERE room = ?'),
      setCheckpoint: db.prepare('UPDATE rooms SET checkpoint_pos = ?, checkpoint = ?, stable = max(stable, ?) WHERE room = ?'),
      insertLog: db.prepare('INSERT INTO log_chunks (room, first, last, entries, time) VALUES (?, ?, ?, ?, ?)'),
      // History (HistoryRetention): the state a checkpoint replaces is kept, then pruned with the log.
      keepState: db.prepare(
        'INSERT OR IGNORE INTO history_states (room, pos, state) SELECT room, checkpoint_pos, checkpoint FROM rooms WHERE room = ? AND checkpoint_pos < ?',
      ),
      historyBases: db.prepare<[string], { pos: number }>('SELECT pos FROM history_states WHERE room = ? ORDER BY pos'),
      dropStates: db.prepare('DELETE FROM history_states WHERE room = ? AND (pos < ? OR pos >= ?)'),
      lastBefore: db.prepare<[string, number], { last: number | null }>('SELECT max(last) AS last FROM log_chunks WHERE room = ? AND time < ?'),
      historyRoom: db.prepare<
        [string],
        { machine: string; version: number; created: number; checkpoint_pos: number; start: number | null; last: number | null }
      >(
        `SELECT machine, version, created, checkpoint_pos, (SELECT min(pos) FROM history_states WHERE room = rooms.room) AS start,
          (SELECT last FROM log_chunks WHERE room = rooms.room ORDER BY first DESC LIMIT 1) AS last FROM rooms WHERE room = ?`,
      ),
      historyState: db.prepare<[string, number], { pos: number; state: string }>(
        'SELECT pos, state FROM history_states WHERE room = ? AND pos <= ? ORDER BY pos DESC LIMIT 1',
      ),
      checkpointState: db.prepare<[string], { state: string }>('SELECT checkpoint AS state FROM rooms WHERE room = ?'),
      historyChunks: db.prepare<[string, number, number], { entries: string; time: number }>(
        'SELECT entries, time FROM log_chunks WHERE room = ? AND last >= ? AND first <= ? ORDER BY first',
      ),
      // A chunk that straddles the checkpoint stays; load skips its covered entries.
      pruneLog: db.prepare('DELETE FROM log_chunks WHERE room = ? AND last <= ?'),
      upsertClient: db.prepare('INSERT INTO clients (room, client, record) VALUES (?, ?, ?) ON CONFLICT (room, client) DO UPDATE SET record = excluded.record'),
      countRooms: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM rooms'),
      listFirst: db.prepare<[number], ListedRow>(`${LIST_ROOMS} ORDER BY r.room LIMIT ?`),
      listAfter: db.prepare<[string, number], ListedRow>(`${LIST_ROOMS} WHERE r.room > ? ORDER BY r.room LIMIT ?`),
    };
  }

  /** Load a room, or undefined if it was never created. */
  load(room: string): StoredRoom | undefined {
    const r = this.read(room);
    return r && { machine: r.meta.machine, version: r.meta.version, durable: r.durable };
  }

  private read(room: string): { meta: RoomMeta; durable: RoomDurableState; rev: number } | undefined {
    const r = this.stmts.getRoom.get(room);
    if (!r) return undefined;
    const suffix: LogEntry[] = [];
    let logBytes = 0;
    for (const row of this.stmts.getLog.all(room, r.checkpoint_pos)) {
      logBytes += row.entries.length;
      for (const e of JSON.parse(row.entries) as LogEntry[]) if (e.pos > r.checkpoint_pos) suffix.push(e);
    }
    this.heads.set(room, { rev: r.rev, head: suffix.length ? suffix[suffix.length - 1].pos : r.checkpoint_pos });
    const clients: Record<string, ClientRecord> = {};
    for (const c of this.stmts.getClients.all(room)) clients[c.client] = JSON.parse(c.record);
    this.written.set(room, r.checkpoint_pos);
    this.checkpointBytes.set(room, r.checkpoint.length);
    this.logBytesSince.set(room, logBytes);
    return {
      meta: { machine: r.machine, version: r.version, created: r.created },
      durable: { checkpoint: { pos: r.checkpoint_pos, state: JSON.parse(r.checkpoint) }, suffix, clients, stable: r.stable },
      rev: r.rev,
    };
  }

  create(room: string, machine: string, version: number, initial: unknown): void {
    const json = JSON.stringify(initial);
    const now = this.now();
    const digests = JSON.stringify([{ pos: 0, digest: stateDigest(initial) }]);
    this.db.transaction(() => {
      this.stmts.insertRoom.run(room, machine, version, 0, json, 0, now, now);
      this.stmts.setDigests.run(digests, room);
    })();
    this.heads.set(room, { rev: 0, head: 0 });
    this.written.set(room, 0);
    this.checkpointBytes.set(room, json.length);
    this.logBytesSince.set(room, 0);
  }

  /**
   * Serialise one room's writes for `commitPrepared`, outside any transaction, so that a room
   * whose output cannot be serialised (a value JSON cannot take, nesting deeper than the stack)
   * or is inconsistent fails alone, before the group commit. Changes nothing; throws
   * StorageError naming the room.
   */
  serialize(room: string, p: RoomPersist): PreparedWrite {
    try {
      const w: PreparedWrite = { room, clients: [] };
      if (p.appended.length) {
        const first = p.appended[0].pos,
          last = p.appended[p.appended.length - 1].pos;
        // A chunk is addressed by its range: a gap or disorder would lose or misplace entries.
        if (last - first + 1 !== p.appended.length)
          throw new HerculesError(
            'internal',
            `appended entries ${first}..${last} are not ${p.appended.length} consecutive positions (a bug in the room engine); report it`,
          );
        w.log = { first, last, json: JSON.stringify(p.appended) };
      }
      for (const [client, rec] of Object.entries(p.clients)) w.clients.push([client, JSON.stringify(rec)]);
      const logBytes = (this.logBytesSince.get(room) ?? 0) + (w.log?.json.length ?? 0);
      this.logBytesSince.set(room, logBytes);
      if (p.checkpoint) {
        // The state itself is written lazily (see the file comment and checkpointBytes); serialise it only when due.
        const due = p.checkpoint.pos - (this.written.get(room) ?? 0) >= this.checkpointEvery && logBytes >= (this.checkpointBytes.get(room) ?? 0) / 2;
        if (due) {
          const json = JSON.stringify(p.checkpoint.state);
          w.checkpoint = { ...p.checkpoint, json };
          // Counted from here even if this commit fails: the room is then reloaded, which counts afresh.
          this.checkpointBytes.set(room, json.length);
          this.logBytesSince.set(room, 0);
        } else w.checkpoint = { ...p.checkpoint };
      }
      return w;
    } catch (e) {
      throw new StorageError(`room ${room}: cannot serialise its writes: ${(e as Error).message}`, e, 'value');
    }
  }

  /**
   * Write prepared writes of many rooms in one durable transaction. Throws StorageError (e.g.
   * disk full, read-only directory); then nothing of the batch was written and nothing here
   * changed.
   */
  commitPrepared(batch: readonly PreparedWrite[]): void {
    const s = this.stmts;
    const written = new Map<string, number>();
    const now = this.now();
    const run = this.db.transaction(() => {
      for (const w of batch) {
        if (w.log || w.clients.length) s.touch.run(now, w.room);
        if (w.log) s.insertLog.run(w.room, w.log.first, w.log.last, w.log.json, now);
        for (const [client, json] of w.clients) s.upsertClient.run(w.room, client, json);
        if (w.checkpoint) {
          if (w.checkpoint.json !== undefined) {
            this.keepHistory(w.room, w.checkpoint.pos);
            s.setCheckpoint.run(w.checkpoint.pos, w.checkpoint.json, w.checkpoint.pos, w.room);
            this.prune(w.room, w.checkpoint.pos);
            written.set(w.room, w.checkpoint.pos);
          } else s.setStable.run(w.checkpoint.pos, w.room);
        }
      }
    });
    try {
      run();
      this.syncWalNow();
    } catch (e) {
      throw new StorageError(`storage write failed: ${(e as Error).message}`, e);
    }
    // Its log writes move heads without a rev: the fence is read from the file again.
    for (const w of batch) this.heads.delete(w.room);
    // Only now, with the transaction durable: what is on disk, and the latest checkpoint to
    // write on unload (one whose ops never reached the disk must never be written).
    for (const [room, pos] of written) this.written.set(room, pos);
    for (const w of batch) if (w.checkpoint) this.latest.set(w.room, { pos: w.checkpoint.pos, state: w.checkpoint.state });
  }

  /**
   * Write the persists of many rooms in one durable transaction. Throws StorageError (e.g. disk
   * full, read-only directory, a room's writes that cannot be serialised); then nothing of the
   * batch was written.
   */
  commit(batch: ReadonlyArray<readonly [room: string, p: RoomPersist]>): void {
    this.commitPrepared(batch.map(([room, p]) => this.serialize(room, p)));
  }

  /** Forget what is cached about a room (dropped from memory after a failure): it reloads from disk. */
  forget(room: string): void {
    this.heads.delete(room);
    this.latest.delete(room);
    this.written.delete(room);
    this.checkpointBytes.delete(room);
    this.logBytesSince.delete(room);
  }

  /**
   * Delete log chunks ending at or before this, once a checkpoint at `cp` covers them: the
   * history kept starts at `start` (HistoryRetention), and webhooks may need older entries
   * (SqliteStoreOptions.retainFrom).
   */
  private pruneTo(room: string, cp: number, start: number): number {
    const keep = this.retain.retainFrom?.(room);
    return keep === undefined ? start : Math.min(start, Math.max(keep - 1, cp - (this.retain.retainAtMost ?? 100_000)));
  }

  /**
   * Where a room's checkpoint digests start with the checkpoint at `cp`: the log an export carries
   * (from the checkpoint, and what webhooks keep), not the history kept behind it.
   */
  private keptFrom(room: string, cp: number): number {
    return this.pruneTo(room, cp, cp);
  }

  /** Before a checkpoint at `cp` replaces the room's state on disk: keep that state as history (inside the write's transaction). */
  private keepHistory(room: string, cp: number): void {
    this.stmts.keepState.run(room, cp);
  }

  /** A checkpoint at `cp` was written (inside the transaction): drop the history and the log retention no longer keeps. */
  private prune(room: string, cp: number): void {
    const s = this.stmts;
    const machine = s.peekRoom.get(room)?.machine ?? '';
    const policy = retentionFor(this.retain.retention, machine);
    const older = policy.days === undefined ? 0 : (s.lastBefore.get(room, this.now() - policy.days * 86_400_000)?.last ?? 0);
    const bases = s.historyBases.all(room).map((b) => b.pos);
    const start = retentionStart(bases, cp, retentionCut(policy, cp, older));
    s.dropStates.run(room, start, cp);
    s.pruneLog.run(room, this.pruneTo(room, cp, start));
  }

  private writeCheckpoint(room: string, cp: { pos: number; state: unknown }): void {
    this.keepHistory(room, cp.pos);
    if (this.stmts.advanceCheckpoint.run(cp.pos, JSON.stringify(cp.state), cp.pos, room, cp.pos).changes > 0) {
      this.prune(room, cp.pos);
      this.recordDigest(room, undefined, this.keptFrom(room, cp.pos));
    }
    this.written.set(room, cp.pos);
  }

  /**
   * Add a checkpoint's digest to the room's list (if given) and drop those before `from`, the
   * first position whose log is kept (state-digest.ts keepDigests); inside the caller's transaction.
   */
  private recordDigest(room: string, d: CheckpointDigest | undefined, from: number): void {
    const row = this.stmts.getDigests.get(room);
    if (!row) return;
    const list = keepDigests(JSON.parse(row.digests) as CheckpointDigest[], d, from);
    this.stmts.setDigests.run(JSON.stringify(list), room);
  }

  /** Write a room's latest checkpoint now (on unload or shutdown). */
  flushCheckpoint(room: string): void {
    const cp = this.latest.get(room);
    if (cp && cp.pos > (this.written.get(room) ?? 0)) this.db.transaction(() => this.writeCheckpoint(room, cp))();
    this.latest.delete(room);
  }

  roomCount(): number {
    return this.stmts.countRooms.get()!.n;
  }

  // ---------------------------------------------------------------- the RoomStore contract

  async exportRoom(room: string): Promise<RoomExport | undefined> {
    if (this.closed) throw closedError(`export room ${String(room)}`);
    checkRoomName(room);
    try {
      const r = this.stmts.getRoom.get(room);
      if (!r) return undefined;
      const suffix: LogEntry[] = [];
      for (const row of this.stmts.getLog.all(room, r.checkpoint_pos))
        for (const e of JSON.parse(row.entries) as LogEntry[]) if (e.pos > r.checkpoint_pos) suffix.push(e);
      const clients: Record<string, ClientRecord> = {};
      for (const c of this.stmts.getClients.all(room)) clients[c.client] = JSON.parse(c.record);
      return {
        meta: { machine: r.machine, version: r.version },
        durable: { checkpoint: { pos: r.checkpoint_pos, state: JSON.parse(r.checkpoint) }, suffix, clients, stable: r.stable },
        digests: JSON.parse(this.stmts.getDigests.get(room)?.digests ?? '[]') as CheckpointDigest[],
      };
    } catch (e) {
      throw new StorageError(`room ${room}: cannot read it for an export: ${(e as Error).message}. Check the data file is readable.`, e);
    }
  }

  async importRoom(room: string, data: RoomExport): Promise<void> {
    if (this.closed) throw closedError(`import room ${String(room)}`);
    checkRoomName(room);
    const problem = exportProblem(data);
    if (problem) throw new HerculesError('bad-argument', `import room ${room}: ${problem}`);
    const d = data.durable;
    const s = this.stmts;
    const write = this.db.transaction(() => {
      if (s.getRoom.get(room)) throw new HerculesError('bad-argument', `import room ${room}: it exists; delete it first or import under another name`);
      const now = this.now();
      s.insertRoom.run(room, data.meta.machine, data.meta.version, d.checkpoint.pos, JSON.stringify(d.checkpoint.state), d.stable, now, now);
      s.setDigests.run(JSON.stringify(importedDigests(data)), room);
      if (d.suffix.length) s.insertLog.run(room, d.suffix[0].pos, d.suffix[d.suffix.length - 1].pos, JSON.stringify(d.suffix), now);
      for (const [client, rec] of Object.entries(d.clients)) s.upsertClient.run(room, client, JSON.stringify(rec));
    });
    try {
      write();
    } catch (e) {
      if (e instanceof HerculesError) throw e;
      throw new StorageError(`room ${room}: cannot import it: ${(e as Error).message}. Check the disk is not full.`, e);
    }
    const failed = await this.syncWal();
    if (failed) throw failed;
  }

  async deleteRoom(room: string): Promise<boolean> {
    if (this.closed) throw closedError(`delete room ${String(room)}`);
    checkRoomName(room);
    const del = this.db.transaction(() => {
      this.db.prepare('DELETE FROM log_chunks WHERE room = ?').run(room);
      this.db.prepare('DELETE FROM history_states WHERE room = ?').run(room);
      this.db.prepare('DELETE FROM clients WHERE room = ?').run(room);
      return this.db.prepare('DELETE FROM rooms WHERE room = ?').run(room).changes > 0;
    });
    let existed: boolean;
    try {
      existed = del();
      this.heads.delete(room);
      this.latest.delete(room);
      this.written.delete(room);
      this.checkpointBytes.delete(room);
      this.logBytesSince.delete(room);
    } catch (e) {
      throw new StorageError(`room ${room}: cannot delete it: ${(e as Error).message}. Check the disk is not full.`, e);
    }
    const failed = await this.syncWal();
    if (failed) throw failed;
    return existed;
  }

  async history(room: string, q: HistoryQuery): Promise<RoomHistory | undefined> {
    if (this.closed) throw closedError(`read the history of room ${String(room)}`);
    checkRoomName(room);
    try {
      // One read transaction: a checkpoint written in between cannot tear what is read.
      return this.db.transaction(() => this.readHistory(room, q))();
    } catch (e) {
      throw new StorageError(`room ${room}: cannot read its history: ${(e as Error).message}. Check the data file is readable.`, e);
    }
  }

  private readHistory(room: string, q: HistoryQuery): RoomHistory | undefined {
    const s = this.stmts;
    const r = s.historyRoom.get(room);
    if (!r) return undefined;
    const meta = { machine: r.machine, version: r.version, created: r.created };
    const start = r.start ?? r.checkpoint_pos;
    const head = Math.max(r.checkpoint_pos, r.last ?? 0);
    const range = (from: number, to: number): HistoryEntry[] => {
      const lo = Math.max(from, start + 1),
        hi = Math.min(to, head);
      const out: HistoryEntry[] = [];
      if (lo > hi) return out;
      for (const c of s.historyChunks.iterate(room, lo, hi))
        for (const e of JSON.parse(c.entries) as LogEntry[]) if (e.pos >= lo && e.pos <= hi) out.push({ ...e, time: c.time });
      return out;
    };
    if (!('stateAt' in q)) return { meta, start, head, entries: range(q.from, q.to) };
    const p = q.stateAt;
    if (!(p >= start && p <= head)) return { meta, start, head, entries: [] };
    const base = p >= r.checkpoint_pos ? { pos: r.checkpoint_pos, state: s.checkpointState.get(room)!.state } : s.historyState.get(room, p)!;
    return { meta, start, head, base: { pos: base.pos, state: JSON.parse(base.state) }, entries: range(base.pos + 1, p) };
  }

  async peek(room: string, after: number, max: number): Promise<RoomPeek | undefined> {
    if (this.closed) throw closedError(`peek at room ${String(room)}`);
    checkRoomName(room);
    try {
      const r = this.stmts.peekRoom.get(room);
      if (!r) return undefined;
      const meta = { machine: r.machine, version: r.version, created: r.created };
      if (max <= 0) return { meta, from: after + 1, entries: [] };
      // Entries a checkpoint covers may still be here (retainFrom): read what is, from `after` on.
      const entries: LogEntry[] = [];
      let first: number | undefined;
      for (const row of this.stmts.getLog.iterate(room, after)) {
        for (const e of JSON.parse(row.entries) as LogEntry[]) {
          if (e.pos <= after) continue;
          first ??= e.pos;
          if (entries.length < max) entries.push(e);
        }
        if (first !== undefined && entries.length >= max) break;
      }
      const from = first ?? Math.max(after + 1, r.checkpoint_pos + 1);
      return { meta, from, entries };
    } catch (e) {
      throw new StorageError(`room ${room}: cannot read its log: ${(e as Error).message}. Check the data file is readable.`, e);
    }
  }

  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  async open(room: string, init?: RoomInit): Promise<LoadedRoom | undefined> {
    if (this.closed) throw closedError(`open room ${String(room)}`);
    checkRoomName(room);
    try {
      // Synchronous, so no other call comes in between the look and the create.
      let fresh = false;
      if (init && !this.stmts.getRoom.get(room)) {
        this.create(room, init.machine, init.version, init.initial);
        fresh = true;
      }
      const r = this.read(room);
      return r && { ...r, fresh };
    } catch (e) {
      throw e instanceof HerculesError
        ? e
        : new StorageError(
            `room ${room}: cannot ${init ? 'open or create' : 'open'} it: ${(e as Error).message}. Check the disk is not full and the data file is readable.`,
            e,
          );
    }
  }

  append(room: string, write: RoomAppend): Promise<Appended> {
    if (this.closed) return Promise.reject(closedError(`append to room ${String(room)}`));
    if (this.syncFailed) return Promise.reject(this.syncFailed);
    let q: QueuedAppend;
    try {
      const checked = checkAppend(room, write);
      // Serialised now, on its own: a value that cannot be stored fails this append alone, and
      // what the caller changes after the call does not change what is written.
      const prepared = this.serialize(room, { appended: write.entries ?? [], clients: write.clients ?? {}, checkpoint: write.checkpoint });
      const checkpoint = write.checkpoint && { pos: write.checkpoint.pos, state: write.checkpoint.state };
      // Every checkpoint given has its digest recorded, whether or not its state is written now.
      if (checkpoint) prepared.digest = { pos: checkpoint.pos, digest: checkpointDigest(room, checkpoint.pos, checkpoint.state) };
      q = { room, checked, checkpoint, prepared, resolve: () => {}, reject: () => {} };
    } catch (e) {
      return Promise.reject(e);
    }
    const settled = new Promise<Appended>((resolve, reject) => {
      q.resolve = resolve;
      q.reject = reject;
    });
    this.queue.push(q);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.commitQueue();
      });
    }
    return settled;
  }

  async release(room: string): Promise<void> {
    if (this.closed) throw closedError(`release room ${String(room)}`);
    checkRoomName(room);
    this.commitQueue(); // its checkpoints first
    try {
      this.flushCheckpoint(room);
    } catch (e) {
      throw new StorageError(
        `room ${room}: cannot write its checkpoint on release: ${(e as Error).message}. The log is intact; the room loads from an older checkpoint.`,
        e,
      );
    } finally {
      this.forget(room);
    }
    await this.syncWal(); // best effort, like the checkpoint: the log is on disk without it
  }

  async rooms(): Promise<string[]> {
    if (this.closed) throw closedError('list its rooms');
    return this.stmts.listRooms.all().map((r) => r.room);
  }

  /**
   * One query over the rooms table's primary key, from `after` on. `bytes` sums `octet_length`
   * of the room's name, checkpoint, log chunks and client records: SQLite reads a text's length
   * from its record header without reading the text, so this costs a walk of the room's rows,
   * not of its data. It leaves out page overhead, the index entries and free pages.
   */
  async listRooms(opts: ListRoomsOptions): Promise<StoredRoomInfo[]> {
    if (this.closed) throw closedError('list its rooms');
    const { after, limit } = checkListRooms(opts);
    let rows: ListedRow[];
    try {
      rows = after === undefined ? this.stmts.listFirst.all(limit) : this.stmts.listAfter.all(after, limit);
    } catch (e) {
      throw new StorageError(`cannot list the rooms: ${(e as Error).message}. Check the data file is readable.`, e);
    }
    return rows.map((r) => ({
      name: r.room,
      machine: r.machine,
      version: Number.isSafeInteger(r.migrated) ? (r.migrated as number) : r.version,
      head: r.head,
      checkpoint: r.checkpoint_pos,
      stable: r.stable,
      bytes: r.bytes,
      created: r.created,
      lastActivity: r.last_append,
    }));
  }

  /**
   * Write the appends queued in this turn, then settle their promises in call order.
   *
   * The fence is checked in memory first (`heads`: this store holds the file's exclusive lock,
   * so nothing else moves a room's rev), which settles fenced and misplaced appends without
   * touching the database. The appends that pass are merged per room, in call order, into one
   * write (one log chunk, one rev update for all of them) and written in one transaction.
   * If a room's write throws, the transaction is rolled back, that room's appends fail (nothing
   * of them was written) and the others are written again without it; if the transaction fails
   * where no room's write did (its commit: a full disk, an I/O error), each room is tried in a
   * transaction of its own, so only the rooms the database refuses fail.
   */
  private commitQueue(): void {
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    const t0 = performance.now();
    const results: (Appended | unknown)[] = new Array(batch.length);
    // The fence and the head, in memory, appends of one room in call order.
    const groups = new Map<string, RoomWrite>();
    for (let i = 0; i < batch.length; i++) {
      const q = batch[i];
      let g = groups.get(q.room);
      try {
        const at = g?.to ?? this.headOf(q.room);
        if (!at) throw new FencedError(q.room, q.checked.after, undefined);
        if (at.rev !== q.checked.after) throw new FencedError(q.room, q.checked.after, at.rev);
        const head = checkAgainstHead(q.room, q.checked, at.head);
        if (!g) groups.set(q.room, (g = { room: q.room, from: at, to: at, members: [] }));
        g.to = { rev: at.rev + 1, head };
        g.members.push(i);
        results[i] = { rev: at.rev + 1, head };
      } catch (e) {
        results[i] = e;
      }
    }
    let pending = [...groups.values()];
    let transactions = 0;
    const now = this.now();
    while (pending.length > 0) {
      transactions++;
      let current: RoomWrite | undefined;
      try {
        this.db.transaction(() => {
          for (const g of pending) {
            current = g;
            this.writeRoom(g, batch, now);
          }
          current = undefined;
        })();
        for (const g of pending) this.wrote(g, batch);
        pending = [];
      } catch (e) {
        if (current) {
          // This room's write failed: it alone fails; the rest are written again without it.
          this.failGroup(current, results, e);
          pending = pending.filter((g) => g !== current);
          continue;
        }
        // The transaction failed as a whole: each room in a transaction of its own.
        for (const g of pending) {
          transactions++;
          try {
            this.db.transaction(() => this.writeRoom(g, batch, now))();
            this.wrote(g, batch);
          } catch (e2) {
            this.failGroup(g, results, e2);
          }
        }
        pending = [];
      }
    }
    let appends = 0,
      ops = 0;
    for (let i = 0; i < batch.length; i++) {
      if (results[i] instanceof Error) continue;
      appends++;
      ops += batch[i].checked.count;
    }
    try {
      this.onCommit?.({ appends, failed: batch.length - appends, ops, transactions, seconds: (performance.now() - t0) / 1000 });
    } catch {
      /* a metrics hook must not fail the writes */
    }
    // Nothing is acknowledged before it is on disk: the batch settles once the WAL is synced.
    if (this.walFd === undefined)
      this.settle(batch, results, undefined); // SQLite synced it
    else void this.syncWal().then((failed) => this.settle(batch, results, failed));
  }

  /** Resolve a batch's appends (or reject them all if the sync failed), failed ones rejected with their error. */
  private settle(batch: readonly QueuedAppend[], results: readonly (Appended | unknown)[], syncFailed: StorageError | undefined): void {
    for (let i = 0; i < batch.length; i++) {
      const r = syncFailed ?? results[i],
        q = batch[i];
      if (!(r instanceof Error)) q.resolve(r as Appended);
      else
        q.reject(
          r instanceof HerculesError
            ? r
            : new StorageError(
                `room ${q.room}: the append failed and nothing of it was written: ${r.message}. Check the disk is not full and the data directory is writable; reload the room before writing again.`,
                r,
              ),
        );
    }
  }

  /** A room's rev and head, from memory, or from the file the first time (then kept). */
  private headOf(room: string): Head | undefined {
    let h = this.heads.get(room);
    if (!h) {
      const at = this.stmts.getHead.get(room);
      if (!at) return undefined;
      h = { rev: at.rev, head: Math.max(at.checkpoint_pos, at.last ?? 0) };
      this.heads.set(room, h);
    }
    return h;
  }

  /** One room's appends of this turn, as one write, inside a transaction: throws to roll it back. */
  private writeRoom(g: RoomWrite, batch: readonly QueuedAppend[], now: number): void {
    const s = this.stmts,
      room = g.room;
    const chunks: string[] = [];
    let first = 0,
      last = 0,
      stable = 0;
    let clients: Map<string, string> | undefined;
    let cp: { pos: number; json: string } | undefined;
    let digest: CheckpointDigest | undefined;
    for (const i of g.members) {
      const w = batch[i].prepared;
      if (w.digest && w.digest.pos > (digest?.pos ?? -1)) digest = w.digest;
      if (w.log) {
        if (chunks.length === 0) first = w.log.first;
        last = w.log.last;
        chunks.push(w.log.json);
      }
      for (const [client, json] of w.clients) (clients ??= new Map()).set(client, json);
      if (w.checkpoint) {
        stable = Math.max(stable, w.checkpoint.pos);
        if (w.checkpoint.json !== undefined && w.checkpoint.pos > (cp?.pos ?? -1)) cp = { pos: w.checkpoint.pos, json: w.checkpoint.json };
      }
    }
    // Each chunk is a JSON array of consecutive entries, and the chunks follow each other: one row.
    if (chunks.length) s.insertLog.run(room, first, last, chunks.length === 1 ? chunks[0] : `[${chunks.map((c) => c.slice(1, -1)).join(',')}]`, now);
    if (clients) for (const [client, json] of clients) s.upsertClient.run(room, client, json);
    g.wroteCheckpoint = undefined;
    if (cp) this.keepHistory(room, cp.pos);
    if (cp && s.advanceCheckpoint.run(cp.pos, cp.json, cp.pos, room, cp.pos).changes > 0) {
      this.prune(room, cp.pos);
      g.wroteCheckpoint = cp.pos;
    }
    if (digest || g.wroteCheckpoint !== undefined) this.recordDigest(room, digest, this.keptFrom(room, g.wroteCheckpoint ?? this.written.get(room) ?? 0));
    // Last: the rev moves only with everything above written.
    s.bumpRev.run(g.to.rev - g.from.rev, stable, chunks.length > 0 || clients ? now : null, room);
  }

  /**
   * A room's write is durable: its head in memory, the checkpoint on disk, and the latest
   * checkpoint to write on release (one whose append failed must never be written).
   */
  private wrote(g: RoomWrite, batch: readonly QueuedAppend[]): void {
    this.heads.set(g.room, g.to);
    if (g.wroteCheckpoint !== undefined && g.wroteCheckpoint > (this.written.get(g.room) ?? 0)) this.written.set(g.room, g.wroteCheckpoint);
    for (const i of g.members) {
      const cp = batch[i].checkpoint;
      if (cp && cp.pos > (this.latest.get(g.room)?.pos ?? -1)) this.latest.set(g.room, { pos: cp.pos, state: cp.state });
    }
  }

  /** A room's write was rolled back: its appends fail (its head in memory never moved). */
  private failGroup(g: RoomWrite, results: unknown[], e: unknown): void {
    const err = e instanceof Error ? e : new HerculesError('storage-failed', String(e));
    for (const i of g.members) results[i] = err;
  }

  /**
   * Settle the appends in flight, write the latest checkpoints not yet written (best effort: the
   * log is intact without them), and close the file. Also the synchronous close the server calls:
   * all of it is done when this returns.
   */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.commitQueue();
    this.closed = true;
    for (const room of [...this.latest.keys()]) {
      try {
        this.flushCheckpoint(room);
      } catch {
        /* best effort on shutdown; the log is intact */
      }
    }
    try {
      // The appends still waiting for their sync are on disk after this one.
      this.syncWalNow();
      this.syncedAtClose = true;
    } catch {
      /* their own syncs report it */
    }
    try {
      this.db.close();
    } catch (e) {
      return Promise.reject(new StorageError(`cannot close ${this.file}: ${(e as Error).message}`, e));
    } finally {
      if (this.syncsInFlight === 0) this.closeWal();
    }
    return Promise.resolve();
  }
}

/** What `listRooms` reads per room (`version` as created; `migrated`: the `~hercules` record's highWater, if any). */
interface ListedRow {
  room: string;
  machine: string;
  version: number;
  migrated: number | null;
  head: number;
  checkpoint_pos: number;
  stable: number;
  bytes: number;
  created: number;
  last_append: number;
}

const LIST_ROOMS = `SELECT r.room, r.machine, r.version, r.checkpoint_pos, r.stable, r.created, r.last_append,
  max(r.checkpoint_pos, coalesce((SELECT last FROM log_chunks WHERE room = r.room ORDER BY first DESC LIMIT 1), 0)) AS head,
  (SELECT json_extract(record, '$.highWater') FROM clients WHERE room = r.room AND client = '${SYSTEM_CLIENT}') AS migrated,
  octet_length(r.room) + octet_length(r.checkpoint)
    + coalesce((SELECT sum(octet_length(entries)) FROM log_chunks WHERE room = r.room), 0)
    + coalesce((SELECT sum(octet_length(client) + octet_length(record)) FROM clients WHERE room = r.room), 0) AS bytes
  FROM rooms r`;

/** A room's fence and head. */
interface Head {
  rev: number;
  head: number;
}

/** One room's appends of a group commit, merged into one write. */
interface RoomWrite {
  room: string;
  /** The room before them and after them. */
  from: Head;
  to: Head;
  /** Their indexes in the batch, in call order. */
  members: number[];
  /** The checkpoint position whose state the write stored, if it did. */
  wroteCheckpoint?: number;
}
