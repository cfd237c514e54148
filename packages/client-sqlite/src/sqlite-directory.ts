/**
 * The SQLite client stores in one directory, as a StoreDirectory for recovery
 * (@hercules/client recoverPending, DUR-NOT-STRANDED): for Node apps that give each worker or
 * process a store file of its own there, so a worker that stopped for good and never comes
 * back has its ops sent by another. A file is claimed by opening it with the store's exclusive
 * lock without waiting: a live process holds that lock while its store is open, so its file is
 * skipped. A file that is not a client store (no `client` and `ops` tables) is never written.
 */
import Database from 'better-sqlite3';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ClaimedStore, StoreDirectory } from '@hercules/client';
import { sqliteStorage } from './sqlite-storage.ts';

/** True if `file` holds a client store's tables; false if not, or if a live process holds it. */
function isClientStore(file: string): boolean {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { timeout: 0, fileMustExist: true });
    const tables = db.prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('client', 'ops')").all();
    return tables.length === 2;
  } catch {
    return false; // SQLITE_BUSY (in use), or not a database
  } finally {
    db?.close();
  }
}

/** `match`: which file names are stores (default: ending in .sqlite, .sqlite3 or .db). */
export function sqliteDirectory(dir: string, opts?: { match?: RegExp }): StoreDirectory {
  const match = opts?.match ?? /\.(sqlite3?|db)$/;
  return {
    async list() {
      try {
        return readdirSync(dir).filter((f) => match.test(f));
      } catch (e) {
        if ((e as { code?: string }).code === 'ENOENT') return [];
        throw e;
      }
    },
    async claim(name): Promise<ClaimedStore | undefined> {
      const file = join(dir, name);
      if (!isClientStore(file)) return undefined;
      let storage: ReturnType<typeof sqliteStorage>;
      try {
        storage = sqliteStorage(file, { lockWaitMs: 0 });
      } catch (e) {
        if ((e as { code?: string }).code === 'store-in-use') return undefined;
        throw e;
      }
      let gone: Promise<void> | undefined;
      const letGo = (remove: boolean) =>
        (gone ??= (async () => {
          await storage.close();
          // Closed first: the file is then ours no more, so another claimer may open it between
          // the close and the removal; it finds only ops the server has confirmed, and its
          // resend of them is kept once (LOG-EXACTLY-ONCE).
          if (remove) for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
        })());
      return { name, storage: { ...storage, close: () => letGo(false) }, release: () => letGo(false), remove: () => letGo(true) };
    },
  };
}
