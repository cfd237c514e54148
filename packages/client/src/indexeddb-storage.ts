/**
 * Browser client storage in IndexedDB. Appends of one tick share a readwrite transaction with
 * `durability: 'strict'` (flushed to disk before `complete` fires, where the browser supports
 * it), so an op is Durable only once it would survive a crash of the tab or the browser.
 *
 * One tab owns a store at a time, through a Web Lock named `hercules-store:<dbName>` held while
 * the store is open (the browser drops it when the tab closes or crashes). Two tabs on one
 * store would share a client id and number their ops from the same last seq; the server keeps
 * one op per (client, seq), so one tab's ops would be lost. A second opener waits briefly for
 * the lock (a reload's new page may start before the old page let go), then gets a
 * `store-in-use` error (a duplicated tab, say: give it its own store). Where the Web Locks API
 * is missing the store opens unlocked.
 */
import { HerculesError, joinParts, partChanges, partsUnder, type BaseSnapshot, type OpRecord, type PartChanges } from '@hercules/core';
import { indexedDbDirectory, type IndexedDbEnv } from './indexeddb-directory.ts';
import type { ClientStorage, OpTag, StoredClient } from './storage.ts';

/** `parts` (version 3): `state` is the skeleton of a base kept in parts (core's base-parts.ts), its rows in the `part` store. */
type BaseRow = { pos: number; state: unknown; ownSeq?: number; v?: number; parts?: 1 };
/** One node of a base's keyedMap trie (core's base-parts.ts), keyed by its room and path. */
interface PartRow {
  room: string;
  id: string;
  row: unknown;
}
interface ClientRow {
  room: string;
  clientId: string;
  lastSeq: number;
  lastDigest?: number;
  /** ClientStorage.reserve */
  reservedSeq?: number;
  /** A base written by version 1 of the database; version 2 keeps it in the `base` store until the next saveBase. */
  base?: BaseRow;
  /** StoredClient.marks */
  marks?: Record<string, number>;
}
interface OpRow {
  room: string;
  seq: number;
  op: OpRecord;
  /** The tab and request it was written for (StoredClient.tags); in the op's row, so one put writes both. */
  tag?: { tab: string; req: number };
}

const req = <T>(r: IDBRequest<T>) =>
  new Promise<T>((res, rej) => {
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(r.error);
  });
const done = (tx: IDBTransaction) =>
  new Promise<void>((res, rej) => {
    tx.oncomplete = () => res();
    tx.onerror = () => rej(tx.error ?? new HerculesError('storage-failed', 'IndexedDB transaction failed'));
    tx.onabort = () => rej(tx.error ?? new HerculesError('storage-failed', 'IndexedDB transaction aborted (quota exceeded?)'));
  });

/** Per tab, the higher request number of the two. */
function mergeMarks(held: Record<string, number> | undefined, add: Record<string, number>): Record<string, number> {
  const out = { ...held };
  for (const [tab, req] of Object.entries(add)) out[tab] = Math.max(out[tab] ?? 0, req);
  return out;
}

/** The part of the Web Locks API the store uses. */
export interface StoreLocks {
  request(name: string, options: { signal?: AbortSignal; ifAvailable?: boolean }, callback: (lock: unknown) => Promise<void> | void): Promise<unknown>;
}

const noop = () => {};

/** The Web Lock that keeps an IndexedDB store to one tab (DUR-ONE-WRITER). */
export const storeLockName = (dbName: string) => `hercules-store:${dbName}`;

/**
 * How long opening waits for the store's lock. A reload's new page can start before the old
 * one's lock is released; a second tab that really holds the store keeps it past this.
 */
const LOCK_WAIT_MS = 1500;

/** Opens (creating if new) the store's database. */
function openDatabase(idb: IDBFactory, dbName: string): Promise<IDBDatabase> {
  return new Promise<IDBDatabase>((res, rej) => {
    // Version 2 keeps each room's base in a store of its own: in the client row (version 1),
    // every append read and rewrote the whole base state with the row's last seq. Version 3
    // keeps a base's top-level keyedMaps in parts, so a save writes what changed (issue 43).
    const r = idb.open(dbName, 3);
    r.onupgradeneeded = () => {
      const db = r.result;
      for (const [name, keyPath] of [
        ['client', 'room'],
        ['ops', ['room', 'seq']],
        ['base', 'room'],
        ['part', ['room', 'id']],
      ] as const)
        if (!db.objectStoreNames.contains(name)) db.createObjectStore(name, { keyPath: keyPath as string | string[] });
    };
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(new HerculesError('storage-failed', `cannot open IndexedDB ${dbName}: ${r.error?.message}`));
    r.onblocked = () => rej(new HerculesError('store-in-use', `IndexedDB ${dbName} is blocked by another tab holding an older version; close it`));
  });
}

/** A transaction with strict durability where the browser supports the option. */
function tx(db: IDBDatabase, stores: string[], mode: IDBTransactionMode): IDBTransaction {
  try {
    return db.transaction(stores, mode, { durability: 'strict' } as IDBTransactionOptions);
  } catch {
    return db.transaction(stores, mode);
  }
}

/** An append or a reservation (no ops), written in one transaction with those waiting beside it. */
type BatchItem = { room: string; ops: readonly OpRecord[]; tags?: readonly OpTag[]; reserve?: number; ok: () => void; fail: (e: unknown) => void };

/**
 * One batch's rows in `t`: each op (with its tag), and per room the client row's last seq,
 * reservation and tab marks. A room's row in `rows` (the store's copy of what it last committed)
 * is written without reading it; any other is read in `t` first. Each row written goes into
 * `wrote`. True if nothing was read (so `t` may commit at once).
 */
function writeBatch(t: IDBTransaction, items: readonly BatchItem[], rows: ReadonlyMap<string, ClientRow> | undefined, wrote: ClientRow[]): boolean {
  const opsStore = t.objectStore('ops');
  const clients = t.objectStore('client');
  const rooms = new Map<string, { last?: OpRecord; reserve?: number; marks?: Record<string, number> }>();
  for (const it of items) {
    const r = rooms.get(it.room) ?? {};
    rooms.set(it.room, r);
    if (it.reserve !== undefined) r.reserve = it.reserve; // the last one wins
    const tagOf = new Map(it.tags?.map((t) => [t.seq, t]));
    for (const op of it.ops) {
      const t = tagOf.get(op.seq);
      opsStore.put({ room: it.room, seq: op.seq, op, ...(t ? { tag: { tab: t.tab, req: t.req } } : {}) } satisfies OpRow);
      if (t) r.marks = { ...r.marks, [t.tab]: Math.max(r.marks?.[t.tab] ?? 0, t.req) };
      if (!r.last || r.last.seq < op.seq) r.last = op;
    }
  }
  let read = false;
  for (const [room, { last, reserve, marks }] of rooms) {
    const put = (row: ClientRow | undefined) => {
      if (!row) return;
      const next: ClientRow = { ...row };
      if (last && row.lastSeq < last.seq) {
        next.lastSeq = last.seq;
        if (last.digest !== undefined) next.lastDigest = last.digest;
        else delete next.lastDigest;
      }
      if (reserve !== undefined) next.reservedSeq = reserve;
      if (marks) next.marks = mergeMarks(row.marks, marks);
      if (next.lastSeq !== row.lastSeq || next.reservedSeq !== row.reservedSeq || marks) clients.put(next);
      wrote.push(next);
    };
    const held = rows?.get(room);
    if (held) put(held);
    else {
      read = true;
      const g = clients.get(room);
      g.onsuccess = () => put(g.result as ClientRow | undefined);
    }
  }
  return !read;
}

/**
 * The store's appends and reservations, each batch in one transaction. While no other write of
 * the store is in flight, a room's client row is the one this store last committed (the store
 * is this tab's alone, DUR-ONE-WRITER), so a batch puts it without reading it and commits at once
 * (`IDBTransaction.commit()`): the commit then runs in the browser while the page's main thread
 * does the rest of the submit's turn (the app's rendering of it), and the write waits for that
 * thread once, for its completion, instead of twice (the read's result, then the completion).
 * In the demo chat that turn rendered for 6-14 ms (React's synchronous render and the layout it
 * forced; npm run bench:tabs, path, and a Chromium trace). A write made while another (or a
 * saveBase) is in flight reads the rows in its transaction, which IndexedDB runs after the
 * other; a write keeps the rows it wrote only if it was alone when it completed, and a failed
 * one forgets them all.
 */
function batchWriter(opened: Promise<IDBDatabase>) {
  const rows = new Map<string, ClientRow>();
  let writing = 0;
  return {
    /** Writes `items` in one transaction, started in the call once `db` is open; each item hears how it went. */
    async write(items: readonly BatchItem[], db: IDBDatabase | undefined): Promise<void> {
      const wrote: ClientRow[] = [];
      writing++;
      try {
        const t = tx(db ?? (await opened), ['ops', 'client'], 'readwrite');
        if (writeBatch(t, items, writing === 1 ? rows : undefined, wrote)) t.commit?.();
        await done(t);
        if (writing > 1) rows.clear();
        else for (const row of wrote) rows.set(row.room, row);
        for (const it of items) it.ok();
      } catch (e) {
        rows.clear();
        const err = new HerculesError(
          'storage-failed',
          `client storage write failed: ${(e as Error)?.message ?? e}. The ops stay Submitted (in memory) and will be retried.`,
          {
            cause: e,
          },
        );
        for (const it of items) it.fail(err);
      } finally {
        writing--;
      }
    },
    /** Runs `fn`, another transaction that may rewrite a client row: the writes meanwhile read theirs. */
    async alone(fn: () => Promise<void>): Promise<void> {
      writing++;
      rows.clear();
      await fn().finally(() => writing--);
    },
  };
}

/** The store's Web Lock: `locked` once held (or at once without Web Locks); `close` gives up waiting; `release` lets it go. */
interface StoreLock {
  locked: Promise<void>;
  close(): void;
  release(): void;
}

/** Takes the store's lock, waiting LOCK_WAIT_MS for another holder, then failing with store-in-use. */
function lockStore(locks: StoreLocks | undefined, dbName: string): StoreLock {
  let unlock = () => {};
  let closed = false;
  const giveUp = new AbortController(); // on timeout, or close() while waiting
  const closedWhileWaiting = () => new HerculesError('closed', `client storage "${dbName}" was closed while waiting for its lock`);
  const locked = !locks
    ? Promise.resolve()
    : new Promise<void>((res, rej) => {
        const timer = setTimeout(() => giveUp.abort(Object.assign(new Error('lock wait timed out'), { name: 'TimeoutError' })), LOCK_WAIT_MS);
        locks
          .request(storeLockName(dbName), { signal: giveUp.signal }, () => {
            clearTimeout(timer);
            if (closed) {
              rej(closedWhileWaiting());
              return;
            } // let go at once
            res();
            return new Promise<void>((release) => {
              unlock = release;
            }); // held until close()
          })
          .catch((e: Error) => {
            clearTimeout(timer);
            if (closed) return rej(closedWhileWaiting());
            rej(
              e?.name === 'TimeoutError' || e?.name === 'AbortError'
                ? new HerculesError(
                    'store-in-use',
                    `client storage "${dbName}" (IndexedDB) is open in another tab or window; a store belongs to one tab: close the other, or give this one its own store name (a duplicated tab copies sessionStorage and any id kept there).`,
                  )
                : new HerculesError('storage-failed', `cannot lock client storage "${dbName}": ${e?.message ?? e}`, { cause: e }),
            );
          });
      });
  return {
    locked,
    close: () => {
      closed = true;
      giveUp.abort(closedWhileWaiting());
    },
    release: () => unlock(),
  };
}

/** A room's client row, op rows and base as ClientStorage.load returns them. */
function storedClient(row: ClientRow, ops: OpRow[], base: BaseRow | undefined): StoredClient {
  return {
    clientId: row.clientId,
    lastSeq: row.lastSeq,
    ...(row.lastDigest !== undefined ? { lastDigest: row.lastDigest } : {}),
    ...(row.reservedSeq !== undefined ? { reservedSeq: row.reservedSeq } : {}),
    durable: ops.map((o) => o.op),
    ...(row.marks ? { marks: row.marks, tags: ops.flatMap((o) => (o.tag ? [{ seq: o.seq, ...o.tag }] : [])) } : {}),
    // A base from before ownSeq was kept: its ops were pruned by seq already, so 0 (keep all) is exact.
    ...(base ? { base: { pos: base.pos, state: base.state, ownSeq: base.ownSeq ?? 0, ...(base.v !== undefined ? { v: base.v } : {}) } } : {}),
  };
}

/** The base held for `row`'s room: the base store's, or one version 1 left in the client row. */
const heldBase = (row: ClientRow, stored: BaseRow | undefined): BaseRow | undefined => stored ?? row.base;

/** The keys of `room`'s part rows whose ids start with `prefix` ('' : all of them; every id starts with '['). */
const partRange = (KeyRange: typeof IDBKeyRange, room: string, prefix: string) => KeyRange.bound([room, prefix], [room, `${prefix}\uffff`]);

/** In `t`: the part rows `ch` changes (core's partChanges). */
function writeParts(t: IDBTransaction, KeyRange: typeof IDBKeyRange, room: string, ch: PartChanges): void {
  const parts = t.objectStore('part');
  if (ch.dropAll) parts.delete(partRange(KeyRange, room, ''));
  for (const id of ch.drop) {
    parts.delete([room, id]);
    parts.delete(partRange(KeyRange, room, partsUnder(id)));
  }
  for (const [id, row] of ch.put) parts.put({ room, id, row } satisfies PartRow);
}

/**
 * In `t`: the room's base (its skeleton and the parts `ch` changes), if newer than the one held,
 * and the deletion of the ops it holds (one transaction: ClientStorage.saveBase); a base version
 * 1 left in the client row goes. `wrote` is called if it was written (once `t` commits, the
 * part rows are those of `base`).
 */
function writeBase(t: IDBTransaction, KeyRange: typeof IDBKeyRange, room: string, base: BaseSnapshot, ch: PartChanges, wrote: () => void): void {
  const clients = t.objectStore('client');
  const bases = t.objectStore('base');
  const g = clients.get(room);
  const b = bases.get(room);
  b.onsuccess = () => {
    const row = g.result as ClientRow | undefined; // a transaction answers its requests in order: g was asked first
    const held = row && heldBase(row, b.result as BaseRow | undefined);
    if (!row || (held && held.pos >= base.pos)) return;
    bases.put({ room, pos: base.pos, state: ch.skeleton, ownSeq: base.ownSeq, parts: 1, ...(base.v !== undefined ? { v: base.v } : {}) } satisfies BaseRow & {
      room: string;
    });
    writeParts(t, KeyRange, room, ch);
    if (row.base) {
      const { base: _legacy, ...rest } = row;
      clients.put(rest);
    }
    if (base.ownSeq > 0) t.objectStore('ops').delete(KeyRange.bound([room, 0], [room, base.ownSeq]));
    wrote();
  };
}

/** The base as held: a version-3 base's skeleton joined with its part rows (read in `t`). */
async function readBase(t: IDBTransaction, KeyRange: typeof IDBKeyRange, room: string, base: BaseRow | undefined): Promise<BaseRow | undefined> {
  if (!base?.parts) return base;
  const rows = (await req(t.objectStore('part').getAll(partRange(KeyRange, room, '')))) as PartRow[];
  return { ...base, state: joinParts(base.state, new Map(rows.map((r) => [r.id, r.row]))) };
}

/**
 * ClientStorage.saveBase: one transaction writes the base (what changed of its parts since the
 * state this store last wrote; the first save of a store writes them all) and deletes the ops it
 * holds. Saves run one after another, each against the state the one before it wrote.
 */
function baseSaver(opened: Promise<IDBDatabase>, KeyRange: typeof IDBKeyRange): (room: string, base: BaseSnapshot) => Promise<void> {
  /** Per room, the state whose parts the database holds. */
  const saved = new Map<string, unknown>();
  const save = async (room: string, base: BaseSnapshot) => {
    const db = await opened;
    const ch = partChanges(saved.has(room) ? saved.get(room) : undefined, base.state);
    let wrote = false;
    const t = tx(db, ['client', 'ops', 'base', 'part'], 'readwrite');
    writeBase(t, KeyRange, room, base, ch, () => {
      wrote = true;
    });
    await done(t);
    // Only once it committed: after a failed write the rows are still those of the last base.
    if (wrote) saved.set(room, base.state);
  };
  let saving: Promise<void> = Promise.resolve();
  return (room, base) => {
    const p = saving.then(() => save(room, base));
    saving = p.catch(noop);
    return p;
  };
}

/** What the directory of a store's origin needs (indexeddb-directory.ts): kept per store that has Web Locks. */
export const STORE_ENV = new WeakMap<ClientStorage, Omit<IndexedDbEnv, 'match'>>();

/**
 * `env` supplies another IndexedDB implementation (e.g. fake-indexeddb in tests) and, with
 * `locks`, another lock manager (default `navigator.locks`).
 */
export function indexedDbStorage(dbName = 'hercules', env?: { indexedDB: IDBFactory; IDBKeyRange: typeof IDBKeyRange; locks?: StoreLocks }): ClientStorage {
  const storage = leanIndexedDbStorage(dbName, env);
  const found = STORE_ENV.get(storage);
  // Without Web Locks a store in use cannot be told from a stranded one: no recovery then.
  if (found) storage.directory = () => indexedDbDirectory(found);
  return storage;
}

/**
 * indexedDbStorage without `directory()` (`@hercules/client/lean`'s: its recoveryFeature finds
 * the stores without it), so a bundle without recovery leaves the directory out.
 */
export function leanIndexedDbStorage(dbName = 'hercules', env?: { indexedDB: IDBFactory; IDBKeyRange: typeof IDBKeyRange; locks?: StoreLocks }): ClientStorage {
  const g = globalThis as { indexedDB?: IDBFactory; IDBKeyRange?: typeof IDBKeyRange; navigator?: { locks?: StoreLocks } };
  const idb = env?.indexedDB ?? g.indexedDB;
  const KeyRange = env?.IDBKeyRange ?? g.IDBKeyRange;
  if (!idb || !KeyRange)
    throw new HerculesError('bad-argument', 'indexedDbStorage: no IndexedDB in this environment; use memoryStorage() or sqliteStorage() in Node');
  const locks = env?.locks ?? g.navigator?.locks;
  const lock = lockStore(locks, dbName);
  const opened = lock.locked.then(() => openDatabase(idb, dbName));
  opened.catch(noop); // reported by whichever call awaits it first
  /**
   * Each append or reservation starts its transaction in the call itself once the database is
   * open (before that, the calls waiting share one, once it opens). Not a timer, nor a later
   * microtask: with a setTimeout(0) an op's write started 10.7 ms after its submit (median), and
   * with a microtask after an await 13.9 ms, behind the page's own work of that turn (its
   * listeners, its rendering), for a commit of 0.8-1.0 ms: the demo chat in Chromium at load 20,
   * npm run bench:tabs (path).
   */
  let batch: BatchItem[] = [];
  let db: IDBDatabase | undefined;
  opened.then((d) => {
    db = d;
  }, noop);
  const enqueue = (item: BatchItem) => {
    batch.push(item);
    if (db) void flush();
    else if (batch.length === 1) queueMicrotask(() => void flush());
  };
  const writer = batchWriter(opened);
  const flush = () => {
    const items = batch;
    batch = [];
    return items.length ? writer.write(items, db) : undefined;
  };
  const saveParts = baseSaver(opened, KeyRange);
  const storage: ClientStorage = {
    durability: 'power-loss',
    keepsTags: true,
    async rooms() {
      const db = await opened;
      return (await req(tx(db, ['client'], 'readonly').objectStore('client').getAllKeys())) as string[];
    },
    async load(room): Promise<StoredClient | undefined> {
      const db = await opened;
      const t = tx(db, ['client', 'ops', 'base', 'part'], 'readonly');
      const row = (await req(t.objectStore('client').get(room))) as ClientRow | undefined;
      if (!row) return undefined;
      const ops = (await req(t.objectStore('ops').getAll(KeyRange.bound([room, 0], [room, Number.MAX_SAFE_INTEGER])))) as OpRow[];
      const base = await readBase(t, KeyRange, room, (await req(t.objectStore('base').get(room))) as BaseRow | undefined);
      return storedClient(row, ops, heldBase(row, base));
    },
    async init(room, clientId) {
      const db = await opened;
      const t = tx(db, ['client'], 'readwrite');
      const s = t.objectStore('client');
      const g = s.get(room);
      g.onsuccess = () => {
        if (!g.result) s.put({ room, clientId, lastSeq: 0 } satisfies ClientRow);
      };
      await done(t);
    },
    append(room, ops, tags) {
      return new Promise<void>((ok, fail) => enqueue({ room, ops, ...(tags?.length ? { tags } : {}), ok, fail }));
    },
    reserve(room, throughSeq) {
      return new Promise<void>((ok, fail) => enqueue({ room, ops: [], reserve: throughSeq, ok, fail }));
    },
    saveBase(room, base) {
      // It may rewrite the row (a version-1 base leaves it): the writes meanwhile read it.
      return writer.alone(() => saveParts(room, base));
    },
    async close() {
      lock.close();
      try {
        if (batch.length) await flush();
        (await opened.catch(() => undefined))?.close(); // never opened: nothing to close
      } finally {
        lock.release();
      }
    },
  };
  if (locks) STORE_ENV.set(storage, { indexedDB: idb, IDBKeyRange: KeyRange, locks });
  return storage;
}
