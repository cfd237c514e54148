/**
 * Whether the room store commits, for /healthz: it watches the appends the rooms make (their
 * commits and checkpoints), and the rooms they open, whose failure counts too (a store that
 * cannot load a room, a cluster's NATS gone) but whose success does not (on a full disk a room
 * still loads). Before this, /healthz answered `ok: true` through 20 s of a full disk and 795
 * failed commits (issue 40): it asked only whether the SQLite file answered a read.
 *
 * The store is failing while the last of these failed and no append has succeeded since, for
 * at most STALE_MS after that failure. The limit is there because a server that reports
 * itself down is often taken out of rotation, and then nothing tries the write that would show
 * it healthy again; a store that failed and has not been tried for that long is reported up,
 * with its last failure. Failures that say nothing of the store do not count: a write fenced by
 * another writer (the room moved), a value the store cannot hold (that room's own output), a
 * closed store (shutting down), a bad argument (a caller's bug).
 */
import { HerculesError } from '@hercules/core';
import { FencedError, StorageError, type RoomInit, type RoomStore } from './store/room-store.ts';

/** How long a failure with no write since is reported (see the file comment). */
export const STALE_MS = 30_000;

export interface StoreHealthReport {
  ok: boolean;
  /** Writes that failed since the last one that succeeded. */
  failures: number;
  /** The last failure's message, while failing (and after, until a write succeeds). */
  error?: string;
  /** How long ago the last failure was, and the last success, ms. */
  lastFailureMsAgo?: number;
  lastCommitMsAgo?: number;
}

/** Whether a rejected write says the store cannot write. */
function isStoreFailure(e: unknown): boolean {
  if (e instanceof FencedError) return false;
  if (e instanceof StorageError) return e.kind === 'io';
  return !(e instanceof HerculesError && (e.code === 'closed' || e.code === 'bad-argument' || e.code === 'fenced'));
}

export class StoreHealth {
  private lastOk: number | undefined;
  private lastFailure: { at: number; error: string } | undefined;
  private failures = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** A write succeeded. */
  succeeded(): void {
    this.lastOk = this.now();
    this.failures = 0;
  }

  /** A write failed with `e` (counted only if it says the store cannot write). */
  failed(e: unknown): void {
    if (!isStoreFailure(e)) return;
    this.lastFailure = { at: this.now(), error: e instanceof Error ? e.message : String(e) };
    this.failures++;
  }

  report(): StoreHealthReport {
    const now = this.now();
    const f = this.lastFailure;
    const failing = f !== undefined && this.failures > 0 && now - f.at < STALE_MS;
    return {
      ok: !failing,
      failures: this.failures,
      ...(f && this.failures > 0 ? { error: f.error, lastFailureMsAgo: now - f.at } : {}),
      ...(this.lastOk !== undefined ? { lastCommitMsAgo: now - this.lastOk } : {}),
    };
  }

  /**
   * `store` with its appends and opens watched, everything else as it is: hand this to the room
   * service, keep `store` for the rest. (A Proxy, so a store's own methods, optional ones too,
   * stay what they are.)
   */
  watch<S extends RoomStore>(store: S): S {
    const watched =
      <A extends unknown[], R>(fn: (...args: A) => Promise<R>, success: boolean) =>
      (...args: A): Promise<R> => {
        let p: Promise<R>;
        try {
          p = fn(...args);
        } catch (e) {
          p = Promise.reject(e);
        }
        p.then(
          () => success && this.succeeded(),
          (e: unknown) => this.failed(e),
        );
        return p;
      };
    const append = watched((room: string, w: Parameters<RoomStore['append']>[1]) => store.append(room, w), true);
    const open = watched((room: string, init?: RoomInit) => (init === undefined ? store.open(room) : store.open(room, init)), false);
    const bound = new Map<PropertyKey, unknown>();
    return new Proxy(store, {
      get(target, key) {
        if (key === 'append') return append;
        if (key === 'open') return open;
        const v = Reflect.get(target, key, target);
        if (typeof v !== 'function') return v;
        if (!bound.has(key)) bound.set(key, v.bind(target));
        return bound.get(key);
      },
    });
  }
}
