/**
 * The origin's IndexedDB client stores, as a StoreDirectory for recovery (recover.ts): the
 * databases `indexedDB.databases()` lists that have a client store's shape. A store is claimed
 * with its own Web Lock, asked for `ifAvailable`: a live tab holds that lock for as long as the
 * store is open (indexeddb-storage.ts), so a store in use is skipped, never waited for, and two
 * tabs recovering at once never drain the same store.
 */
import { HerculesError } from '@hercules/core';
import { indexedDbStorage, storeLockName, type StoreLocks } from './indexeddb-storage.ts';
import type { ClaimedStore, StoreDirectory } from './storage.ts';

export interface IndexedDbEnv {
  indexedDB: IDBFactory;
  IDBKeyRange: typeof IDBKeyRange;
  locks: StoreLocks;
  /**
   * Which database names to look at (default: all). A store does not record who was signed in
   * when it was written, so an app whose users share a browser names stores per user and
   * recovers only the signed-in user's.
   */
  match: (name: string) => boolean;
}

/** The claimer holds the lock already: the store it opens must not ask for it again. */
const HELD: StoreLocks = { request: async (_name, _opts, callback) => callback(true) };

/** The lock, if nobody holds it now: resolves with its release, or undefined. */
function lockIfFree(locks: StoreLocks, name: string): Promise<(() => void) | undefined> {
  return new Promise((resolve, reject) => {
    locks
      .request(name, { ifAvailable: true }, (lock) => {
        if (!lock) return resolve(undefined);
        return new Promise<void>((release) => resolve(release));
      })
      .catch(reject);
  });
}

/** True if `name` exists and was written by indexedDbStorage (version 1, 2 or 3, a client and an ops store). */
function isClientStore(idb: IDBFactory, name: string): Promise<boolean> {
  return new Promise((resolve) => {
    const r = idb.open(name);
    // No version asked: an upgrade means the database is gone since it was listed. Abort, so
    // looking does not create it.
    r.onupgradeneeded = () => r.transaction?.abort();
    r.onerror = () => resolve(false);
    r.onsuccess = () => {
      const db = r.result;
      const ours = db.version >= 1 && db.version <= 3 && db.objectStoreNames.contains('client') && db.objectStoreNames.contains('ops');
      db.close();
      resolve(ours);
    };
  });
}

function deleteDatabase(idb: IDBFactory, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const r = idb.deleteDatabase(name);
    r.onsuccess = () => resolve();
    r.onerror = () => reject(new HerculesError('storage-failed', `cannot delete IndexedDB ${name}: ${r.error?.message}`));
  });
}

export function indexedDbDirectory(env?: Partial<IndexedDbEnv>): StoreDirectory {
  const g = globalThis as { indexedDB?: IDBFactory; IDBKeyRange?: typeof IDBKeyRange; navigator?: { locks?: StoreLocks } };
  const idb = env?.indexedDB ?? g.indexedDB;
  const KeyRange = env?.IDBKeyRange ?? g.IDBKeyRange;
  const locks = env?.locks ?? g.navigator?.locks;
  if (!idb || !KeyRange || !locks) throw new HerculesError('bad-argument', 'indexedDbDirectory: needs IndexedDB and Web Locks (navigator.locks)');
  return {
    async list() {
      // Firefox before 126 has no databases(): nothing can be found there.
      if (typeof idb.databases !== 'function') return [];
      return (await idb.databases()).flatMap((d) => (d.name && (!env?.match || env.match(d.name)) ? [d.name] : []));
    },
    async claim(name): Promise<ClaimedStore | undefined> {
      const unlock = await lockIfFree(locks, storeLockName(name));
      if (!unlock) return undefined;
      try {
        if (!(await isClientStore(idb, name))) {
          unlock();
          return undefined;
        }
      } catch (e) {
        unlock();
        throw e;
      }
      const storage = indexedDbStorage(name, { indexedDB: idb, IDBKeyRange: KeyRange, locks: HELD });
      let gone: Promise<void> | undefined;
      const letGo = (remove: boolean) =>
        (gone ??= (async () => {
          try {
            await storage.close();
            if (remove) await deleteDatabase(idb, name);
          } finally {
            unlock();
          }
        })());
      return {
        name,
        storage: { ...storage, rooms: storage.rooms!, close: () => letGo(false) },
        release: () => letGo(false),
        remove: () => letGo(true),
      };
    },
  };
}
