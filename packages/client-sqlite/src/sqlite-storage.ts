/**
 * Node client storage in one SQLite file (better-sqlite3, WAL, synchronous=FULL). Appends that
 * arrive in the same tick are committed in one transaction (group commit). A package of its own
 * (@hercules/client-sqlite) so browser apps never install or bundle the native better-sqlite3.
 *
 * One process owns a store at a time: the file is locked exclusively while open (the OS drops
 * the lock when the process dies, even by SIGKILL). Two processes sharing one client id would
 * each number their ops from the same last seq, and the server keeps only one op per
 * (client, seq): the other's ops would be lost. So a second opener gets an error instead.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { HerculesError, joinParts, partChanges, partsUnder, type BaseSnapshot, type OpRecord, type PartChanges } from '@hercules/core';
import type { ClientStorage, StoredClient } from '@hercules/client';

/** How long opening waits for another holder of the store's lock (one that is dying, say). */
const LOCK_WAIT_MS = 1000;

/** The store could not be opened: what failed, then what to check. */
function cannotOpen(file: string, e: unknown, check: string): HerculesError {
  return new HerculesError('storage-failed', `cannot open client storage ${file}: ${(e as Error).message}. Check ${check} and the disk is not full.`, {
    cause: e,
  });
}

/** A batch of writes failed; the client driver reports it (once per run of failures) and retries. */
function writeFailed(e: unknown): HerculesError {
  return new HerculesError('storage-failed', `client storage write failed: ${(e as Error).message}. The ops stay Submitted (in memory) and will be retried.`, {
    cause: e,
  });
}

/** Stores written by earlier versions get the columns added since (NULL: unknown). */
function addMissingColumns(db: Database.Database): void {
  // Stores from before op digests and base ownSeq get the columns (NULL: unknown).
  const cols = new Set(
    db
      .prepare<[], { name: string }>("SELECT name FROM pragma_table_info('client')")
      .all()
      .map((c) => c.name),
  );
  if (!cols.has('last_digest')) db.exec('ALTER TABLE client ADD COLUMN last_digest INTEGER');
  if (!cols.has('base_own_seq')) db.exec('ALTER TABLE client ADD COLUMN base_own_seq INTEGER');
  if (!cols.has('reserved_seq')) db.exec('ALTER TABLE client ADD COLUMN reserved_seq INTEGER');
  // The machine version of the base (BaseSnapshot.v; docs/migrations.md).
  if (!cols.has('base_v')) db.exec('ALTER TABLE client ADD COLUMN base_v INTEGER');
  // 1: `base` is the skeleton of a base kept in parts (core's base-parts.ts), its rows in base_part.
  if (!cols.has('base_split')) db.exec('ALTER TABLE client ADD COLUMN base_split INTEGER');
}

/** A row of the client table: the room's client id, seqs and base. */
interface ClientRow {
  client_id: string;
  last_seq: number;
  last_digest: number | null;
  reserved_seq: number | null;
  base_pos: number | null;
  base: string | null;
  base_own_seq: number | null;
  base_v: number | null;
  base_split: number | null;
}

/**
 * Opens the file, takes its exclusive lock (a second opener gets store-in-use) and creates or
 * upgrades the tables; closes the file again if any of it fails.
 */
function openStore(file: string, lockWaitMs: number): Database.Database {
  let db: Database.Database;
  try {
    mkdirSync(dirname(file), { recursive: true });
    db = new Database(file, { timeout: lockWaitMs });
  } catch (e) {
    throw cannotOpen(file, e, 'the directory is writable');
  }
  try {
    // Exclusive locking before WAL: the lock is taken now and held until close (and the WAL
    // index lives in memory, so no -shm file).
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = WAL');
    db.exec('BEGIN IMMEDIATE; COMMIT');
  } catch (e) {
    db.close();
    if ((e as { code?: string }).code === 'SQLITE_BUSY') {
      throw new HerculesError(
        'store-in-use',
        `client storage ${file} is in use by another process. A store belongs to one client process at a time: close the other one, or give this one its own file.`,
      );
    }
    throw cannotOpen(file, e, 'the file is a Hercules client store');
  }
  try {
    db.pragma('synchronous = FULL');
    db.exec(`
      CREATE TABLE IF NOT EXISTS client (room TEXT PRIMARY KEY, client_id TEXT NOT NULL, last_seq INTEGER NOT NULL, base_pos INTEGER, base TEXT);
      CREATE TABLE IF NOT EXISTS ops (room TEXT NOT NULL, seq INTEGER NOT NULL, op TEXT NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS base_part (room TEXT NOT NULL, part TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (room, part)) WITHOUT ROWID;
    `);
    addMissingColumns(db);
  } catch (e) {
    db.close();
    throw cannotOpen(file, e, 'the directory is writable');
  }
  return db;
}

/** The statements the store runs, prepared once. */
function prepareStatements(db: Database.Database) {
  return {
    getClient: db.prepare<[string], ClientRow>(
      'SELECT client_id, last_seq, last_digest, reserved_seq, base_pos, base, base_own_seq, base_v, base_split FROM client WHERE room = ?',
    ),
    getRooms: db.prepare<[], { room: string }>('SELECT room FROM client'),
    getOps: db.prepare<[string], { op: string }>('SELECT op FROM ops WHERE room = ? ORDER BY seq'),
    insClient: db.prepare('INSERT OR IGNORE INTO client (room, client_id, last_seq) VALUES (?, ?, 0)'),
    insOp: db.prepare('INSERT OR REPLACE INTO ops (room, seq, op) VALUES (?, ?, ?)'),
    setSeq: db.prepare('UPDATE client SET last_seq = ?, last_digest = ? WHERE room = ? AND last_seq < ?'),
    setReserved: db.prepare('UPDATE client SET reserved_seq = ? WHERE room = ?'),
    delOps: db.prepare('DELETE FROM ops WHERE room = ? AND seq <= ?'),
    setBase: db.prepare(
      'UPDATE client SET base_pos = ?, base = ?, base_own_seq = ?, base_v = ?, base_split = 1 WHERE room = ? AND (base_pos IS NULL OR base_pos < ?)',
    ),
    getParts: db.prepare<[string], { part: string; value: string }>('SELECT part, value FROM base_part WHERE room = ?'),
    putPart: db.prepare('INSERT OR REPLACE INTO base_part (room, part, value) VALUES (?, ?, ?)'),
    delPart: db.prepare('DELETE FROM base_part WHERE room = ? AND part = ?'),
    // (a range of the primary key: the ids under a node start with its id less its closing bracket)
    delPartsUnder: db.prepare('DELETE FROM base_part WHERE room = ? AND part >= ? AND part < ? || char(1114111)'),
    delParts: db.prepare('DELETE FROM base_part WHERE room = ?'),
  };
}

/** A room's client row and durable ops as ClientStorage.load returns them; `parts`: its base's part rows. */
function storedClient(c: ClientRow, durable: OpRecord[], parts: () => Map<string, unknown>): StoredClient {
  return {
    clientId: c.client_id,
    lastSeq: c.last_seq,
    ...(c.last_digest !== null ? { lastDigest: c.last_digest } : {}),
    ...(c.reserved_seq !== null ? { reservedSeq: c.reserved_seq } : {}),
    durable,
    // A base from before ownSeq was kept: its ops were pruned by seq already, so 0 (keep all) is exact.
    ...(c.base !== null && c.base_pos !== null
      ? {
          base: {
            pos: c.base_pos,
            state: c.base_split === 1 ? joinParts(JSON.parse(c.base), parts()) : JSON.parse(c.base),
            ownSeq: c.base_own_seq ?? 0,
            ...(c.base_v !== null ? { v: c.base_v } : {}),
          },
        }
      : {}),
  };
}

/**
 * The base and the deletion of the ops it holds are one transaction (see ClientStorage.saveBase):
 * a failure or a crash at any write of it leaves the base before it whole. The base is kept in
 * parts (core's base-parts.ts): what changed since the last base this process saved is written, the
 * first save of a process writes them all.
 */
function baseSaver(db: Database.Database, st: ReturnType<typeof prepareStatements>): (room: string, base: BaseSnapshot) => void {
  /** Per room, the state whose parts the store holds (known only once this process saved one). */
  const saved = new Map<string, unknown>();
  const write = db.transaction((room: string, base: BaseSnapshot, ch: PartChanges): boolean => {
    if (st.setBase.run(base.pos, JSON.stringify(ch.skeleton), base.ownSeq, base.v ?? null, room, base.pos).changes === 0) return false;
    if (ch.dropAll) st.delParts.run(room);
    for (const id of ch.drop) {
      st.delPart.run(room, id);
      st.delPartsUnder.run(room, partsUnder(id), partsUnder(id));
    }
    for (const [id, value] of ch.put) st.putPart.run(room, id, JSON.stringify(value));
    st.delOps.run(room, base.ownSeq);
    return true;
  });
  return (room, base) => {
    const ch = partChanges(saved.has(room) ? saved.get(room) : undefined, base.state);
    // Only once it committed: after a failed write the rows are still those of the last base.
    if (write(room, base, ch)) saved.set(room, base.state);
  };
}

/** `lockWaitMs`: how long to wait for another holder of the file (default 1000; 0: fail at once). */
export function sqliteStorage(file: string, opts?: { lockWaitMs?: number }): ClientStorage & { rooms(): Promise<string[]> } {
  const db = openStore(file, opts?.lockWaitMs ?? LOCK_WAIT_MS);
  const st = prepareStatements(db);
  const { getClient, getRooms, getOps, insClient, insOp, setSeq, setReserved, getParts } = st;
  const saveBase = baseSaver(db, st);

  // Group commit: appends and reservations of one tick share a transaction (one fsync); a
  // reservation has no ops.
  let batch: { room: string; ops: readonly OpRecord[]; reserve?: number; done: () => void; fail: (e: unknown) => void }[] = [];
  const writeBatch = db.transaction((items: typeof batch) => {
    for (const it of items) {
      let last: OpRecord | undefined;
      for (const op of it.ops) {
        insOp.run(it.room, op.seq, JSON.stringify(op));
        if (!last || op.seq > last.seq) last = op;
      }
      if (last) setSeq.run(last.seq, last.digest ?? null, it.room, last.seq);
      if (it.reserve !== undefined) setReserved.run(it.reserve, it.room);
    }
  });
  const flush = () => {
    const items = batch;
    batch = [];
    try {
      writeBatch(items);
      for (const it of items) it.done();
    } catch (e) {
      const err = writeFailed(e);
      for (const it of items) it.fail(err);
    }
  };
  let closed = false;
  return {
    durability: 'power-loss',
    async rooms() {
      return getRooms.all().map((r) => r.room);
    },
    async load(room): Promise<StoredClient | undefined> {
      const c = getClient.get(room);
      if (!c) return undefined;
      const durable = getOps.all(room).map((r) => JSON.parse(r.op) as OpRecord);
      return storedClient(c, durable, () => new Map(getParts.all(room).map((r) => [r.part, JSON.parse(r.value) as unknown])));
    },
    async init(room, clientId) {
      insClient.run(room, clientId);
    },
    append(room, ops) {
      if (closed) return Promise.reject(new HerculesError('closed', 'client storage is closed; open it again to write'));
      return new Promise<void>((done, fail) => {
        if (batch.length === 0) setImmediate(flush);
        batch.push({ room, ops, done, fail });
      });
    },
    reserve(room, throughSeq) {
      if (closed) return Promise.reject(new HerculesError('closed', 'client storage is closed; open it again to write'));
      return new Promise<void>((done, fail) => {
        if (batch.length === 0) setImmediate(flush);
        batch.push({ room, ops: [], reserve: throughSeq, done, fail });
      });
    },
    async saveBase(room, base) {
      if (!closed) saveBase(room, base);
    },
    async close() {
      if (closed) return;
      if (batch.length) flush();
      closed = true;
      db.close();
    },
  };
}
