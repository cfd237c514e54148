/**
 * Server storage: one SQLite file (better-sqlite3) holding every room's checkpoint, log suffix
 * and per-client records. Writes from many rooms are group-committed in one transaction with
 * `synchronous=FULL`, so when `commit` returns the batch survives a power cut; only then are
 * the ops announced Authoritative.
 *
 * The log is stored in chunks: the entries one output of a room appended, as one row (JSON
 * array) keyed by their first position. One row per op cost an INSERT and a B-tree entry per
 * op, the largest share of the server's time at saturation. Data files from before (a `log`
 * table, one row per op) are converted on open, in one transaction.
 *
 * Checkpoints are written lazily: the stable position is recorded on every advance (a few
 * bytes), but the checkpoint state itself (possibly megabytes) only every
 * `checkpointEvery` ops or when a room unloads. Log rows after the last written checkpoint are
 * kept, so a restart resumes from that checkpoint plus the rows after it.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { LogEntry, RoomDurableState, ClientRecord } from '@hercules/core';
import { StorageError } from './room-store.ts';

export { StorageError };

export interface RoomPersist {
  appended: LogEntry[];
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
}

export interface StoredRoom {
  machine: string;
  version: number;
  durable: RoomDurableState;
}


export class SqliteStore {
  readonly db: Database.Database;
  readonly file: string;
  private readonly checkpointEvery: number;
  /** Per room: position of the checkpoint on disk, and the latest one not yet written. */
  private readonly written = new Map<string, number>();
  private readonly latest = new Map<string, { pos: number; state: unknown }>();
  private stmts!: ReturnType<SqliteStore['prepare']>;

  constructor(dataDir: string, opts: { checkpointEvery?: number } = {}) {
    this.checkpointEvery = opts.checkpointEvery ?? 1000;
    try {
      mkdirSync(dataDir, { recursive: true });
      this.file = join(dataDir, 'hercules.sqlite');
      this.db = new Database(this.file, { timeout: 1000 });
    } catch (e) {
      throw new StorageError(`cannot open the data directory ${dataDir}: ${(e as Error).message}. Check that it exists, is writable and the disk is not full.`, e);
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
        throw new StorageError(`the data directory ${dataDir} is in use by another Hercules server. One server owns a data directory: stop the other, or give this one its own --data-dir.`, e);
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
          stable INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS log_chunks (
          room TEXT NOT NULL,
          first INTEGER NOT NULL,
          last INTEGER NOT NULL,
          entries TEXT NOT NULL,
          PRIMARY KEY (room, first)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS clients (
          room TEXT NOT NULL,
          client TEXT NOT NULL,
          record TEXT NOT NULL,
          PRIMARY KEY (room, client)
        ) WITHOUT ROWID;
      `);
      this.migrateRowPerOpLog();
      this.stmts = this.prepare();
    } catch (e) {
      this.db.close();
      throw new StorageError(`cannot open the data directory ${dataDir}: ${(e as Error).message}. Check that it exists, is writable and the disk is not full.`, e);
    }
  }

  /** A data file from before log chunks: each old row becomes a chunk of one entry. */
  private migrateRowPerOpLog(): void {
    const old = this.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log'`).get();
    if (!old) return;
    this.db.transaction(() => {
      this.db.exec(`INSERT INTO log_chunks (room, first, last, entries) SELECT room, pos, pos, '[' || entry || ']' FROM log; DROP TABLE log;`);
    })();
  }

  private prepare() {
    const db = this.db;
    return {
      getRoom: db.prepare<[string], { machine: string; version: number; checkpoint_pos: number; checkpoint: string; stable: number }>('SELECT machine, version, checkpoint_pos, checkpoint, stable FROM rooms WHERE room = ?'),
      getLog: db.prepare<[string, number], { entries: string }>('SELECT entries FROM log_chunks WHERE room = ? AND last > ? ORDER BY first'),
      getClients: db.prepare<[string], { client: string; record: string }>('SELECT client, record FROM clients WHERE room = ?'),
      insertRoom: db.prepare('INSERT INTO rooms (room, machine, version, checkpoint_pos, checkpoint, stable) VALUES (?, ?, ?, ?, ?, ?)'),
      setStable: db.prepare('UPDATE rooms SET stable = ? WHERE room = ?'),
      setCheckpoint: db.prepare('UPDATE rooms SET checkpoint_pos = ?, checkpoint = ?, stable = max(stable, ?) WHERE room = ?'),
      insertLog: db.prepare('INSERT INTO log_chunks (room, first, last, entries) VALUES (?, ?, ?, ?)'),
      // A chunk that straddles the checkpoint stays; load skips its covered entries.
      pruneLog: db.prepare('DELETE FROM log_chunks WHERE room = ? AND last <= ?'),
      upsertClient: db.prepare('INSERT INTO clients (room, client, record) VALUES (?, ?, ?) ON CONFLICT (room, client) DO UPDATE SET record = excluded.record'),
      countRooms: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM rooms'),
    };
  }

  /** Load a room, or undefined if it was never created. */
  load(room: string): StoredRoom | undefined {
    const r = this.stmts.getRoom.get(room);
    if (!r) return undefined;
    const suffix: LogEntry[] = [];
    for (const row of this.stmts.getLog.all(room, r.checkpoint_pos)) {
      for (const e of JSON.parse(row.entries) as LogEntry[]) if (e.pos > r.checkpoint_pos) suffix.push(e);
    }
    const clients: Record<string, ClientRecord> = {};
    for (const c of this.stmts.getClients.all(room)) clients[c.client] = JSON.parse(c.record);
    this.written.set(room, r.checkpoint_pos);
    return {
      machine: r.machine,
      version: r.version,
      durable: { checkpoint: { pos: r.checkpoint_pos, state: JSON.parse(r.checkpoint) }, suffix, clients, stable: r.stable },
    };
  }

  create(room: string, machine: string, version: number, initial: unknown): void {
    this.stmts.insertRoom.run(room, machine, version, 0, JSON.stringify(initial), 0);
    this.written.set(room, 0);
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
        const first = p.appended[0].pos, last = p.appended[p.appended.length - 1].pos;
        // A chunk is addressed by its range: a gap or disorder would lose or misplace entries.
        if (last - first + 1 !== p.appended.length) throw new Error(`appended entries ${first}..${last} are not ${p.appended.length} consecutive positions (a bug in the room engine)`);
        w.log = { first, last, json: JSON.stringify(p.appended) };
      }
      for (const [client, rec] of Object.entries(p.clients)) w.clients.push([client, JSON.stringify(rec)]);
      if (p.checkpoint) {
        // The state itself is written lazily (see the file comment); serialise it only when due.
        const due = p.checkpoint.pos - (this.written.get(room) ?? 0) >= this.checkpointEvery;
        w.checkpoint = { ...p.checkpoint, ...(due ? { json: JSON.stringify(p.checkpoint.state) } : {}) };
      }
      return w;
    } catch (e) {
      throw new StorageError(`room ${room}: cannot serialise its writes: ${(e as Error).message}`, e);
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
    const run = this.db.transaction(() => {
      for (const w of batch) {
        if (w.log) s.insertLog.run(w.room, w.log.first, w.log.last, w.log.json);
        for (const [client, json] of w.clients) s.upsertClient.run(w.room, client, json);
        if (w.checkpoint) {
          if (w.checkpoint.json !== undefined) {
            s.setCheckpoint.run(w.checkpoint.pos, w.checkpoint.json, w.checkpoint.pos, w.room);
            s.pruneLog.run(w.room, w.checkpoint.pos);
            written.set(w.room, w.checkpoint.pos);
          } else s.setStable.run(w.checkpoint.pos, w.room);
        }
      }
    });
    try {
      run();
    } catch (e) {
      throw new StorageError(`storage write failed: ${(e as Error).message}`, e);
    }
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
    this.latest.delete(room);
    this.written.delete(room);
  }

  private writeCheckpoint(room: string, cp: { pos: number; state: unknown }): void {
    this.stmts.setCheckpoint.run(cp.pos, JSON.stringify(cp.state), cp.pos, room);
    this.stmts.pruneLog.run(room, cp.pos);
    this.written.set(room, cp.pos);
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

  close(): void {
    for (const room of [...this.latest.keys()]) {
      try { this.flushCheckpoint(room); } catch { /* best effort on shutdown; the log is intact */ }
    }
    this.db.close();
  }
}
