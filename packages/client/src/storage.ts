/**
 * Client-side durable storage. The Durable view holds exactly the ops a store has confirmed:
 * `append` resolves only once the ops would survive a crash of the process (and, for stores
 * that say so, of the device).
 */
import type { BaseSnapshot, OpRecord } from '@hercules/core';

export interface StoredClient {
  clientId: string;
  /** Highest seq ever persisted for this room. */
  lastSeq: number;
  /** The op digest of the op at lastSeq (OpRecord.digest); absent in stores written before digests. */
  lastDigest?: number;
  /** The highest seq `reserve` was given; absent if never. */
  reservedSeq?: number;
  /** Persisted ops not inside the base, in seq order. */
  durable: OpRecord[];
  /** Snapshot of a prefix of the global log, to start offline, and the highest own seq inside it. */
  base?: BaseSnapshot;
  /** The tags of the held ops that were written with one (`append`'s `tags`): tabs.ts. */
  tags?: OpTag[];
  /** Per tab, the highest request number ever written with an op (never pruned): tabs.ts. */
  marks?: Record<string, number>;
}

/**
 * Which tab asked for an op, and its request number there: the idempotency token of a request
 * a follower tab sent to the leader tab (tabs.ts). Written in the same atomic write as the op,
 * so after a handover the new leader knows for certain whether the request reached the store.
 */
export interface OpTag {
  seq: number;
  tab: string;
  req: number;
}

export interface ClientStorage {
  /** What this store holds for `room`, or undefined on first use. */
  load(room: string): Promise<StoredClient | undefined>;
  /** Record the client id chosen for `room` on first use. */
  init(room: string, clientId: string): Promise<void>;
  /**
   * Persist ops durably (group-committed); resolves when they are safe. Also keeps lastSeq and
   * the digest of the op at lastSeq, and (stores with `keepsTags`) each tag with its op and, per tab,
   * the highest request number in `marks`.
   */
  append(room: string, ops: readonly OpRecord[], tags?: readonly OpTag[]): Promise<void>;
  /**
   * True if `append` keeps `tags` (in the same atomic write as the ops) and `load` returns them
   * and the marks: what a store shared by tabs needs (tabs.ts).
   */
  readonly keepsTags?: boolean;
  /**
   * In ONE atomic write: keep `base` (if newer than the one held) and delete this room's ops with
   * seq <= base.ownSeq, which the base's state holds. Never delete an op any other way: an op
   * may leave the device only inside a state that contains it, or the Durable view of a client
   * restarted after a crash would be behind the one it showed before.
   */
  saveBase(room: string, base: BaseSnapshot): Promise<void>;
  /**
   * Durably set this room's reservedSeq to `throughSeq`, in order with the appends and other
   * reservations; `load` returns it. With it, the client sends an op while it is being persisted
   * instead of after: a restarted client numbers its ops past every seq an earlier process may
   * have sent (DUR-BEFORE-SEND). (It lowers the value only when it closes with every op it sent
   * persisted.) A store without it gets the paper's order, each op persisted before it is sent.
   * Optional; a store that implements it must keep what it is given.
   */
  reserve?(room: string, throughSeq: number): Promise<void>;
  close(): Promise<void>;
  /** What a durable write survives, for docs and the inspector. */
  readonly durability: 'memory' | 'process-crash' | 'power-loss';
  /** The rooms (store keys) this store holds a client for. Optional: recovery needs it to delete a store. */
  rooms?(): Promise<string[]>;
  /**
   * The other stores of this kind on this device (IndexedDB: the origin's databases), where a
   * closed tab or an earlier version may have left ops the server never confirmed. With it,
   * connect() drains them (recover.ts). Optional.
   */
  directory?(): StoreDirectory;
}

/**
 * The stores of one kind on a device, for recovering ops stranded in a store no client opens
 * any more (a tab closed while offline, with a per-tab store). A store in use by a live client
 * is never claimed: the same lock that keeps it to one writer (DUR-ONE-WRITER) says it is in use.
 */
export interface StoreDirectory {
  /** Names of the stores that exist now (some may be in use, or not be client stores at all). */
  list(): Promise<string[]>;
  /** Open the store for this caller alone, or undefined if a live client holds it or it is no client store. */
  claim(name: string): Promise<ClaimedStore | undefined>;
}

export interface ClaimedStore {
  readonly name: string;
  /** Open and held by the claimer until release or remove; `close` on it is release. */
  readonly storage: ClientStorage & { rooms(): Promise<string[]> };
  /** Close it and let others claim it again. */
  release(): Promise<void>;
  /** Delete it, still holding it, then let go: for a store that holds nothing the server lacks. */
  remove(): Promise<void>;
}

/**
 * A copy of `next` that shares with `prevCopy` (a copy of `prev`) every container `next` shares
 * with `prev`. Snapshots are immutable (frozen), so a container that is the same object holds
 * the same data: a base that changed a few keys of a 100k-key keyedMap copies the leaves they
 * are in and the branches above them, not the whole state. What is not plain JSON (a typed
 * array, say) is cloned whole.
 */
export function copyChanged(prev: unknown, prevCopy: unknown, next: unknown): unknown {
  if (next === prev) return prevCopy;
  if (next === null || typeof next !== 'object') return next;
  const p = prev !== null && typeof prev === 'object' ? (prev as Record<string, unknown>) : undefined;
  const pc = p !== undefined && prevCopy !== null && typeof prevCopy === 'object' ? (prevCopy as Record<string, unknown>) : undefined;
  if (Array.isArray(next)) {
    const same = Array.isArray(prev) && pc !== undefined;
    return next.map((v, i) => (same ? copyChanged(p![i], pc[i], v) : copyChanged(undefined, undefined, v)));
  }
  if (Object.getPrototypeOf(next) !== Object.prototype && Object.getPrototypeOf(next) !== null) return structuredClone(next);
  const same = p !== undefined && !Array.isArray(prev) && pc !== undefined;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(next)) {
    const v = (next as Record<string, unknown>)[k];
    out[k] = same && Object.hasOwn(p, k) ? copyChanged(p[k], pc[k], v) : copyChanged(undefined, undefined, v);
  }
  return out;
}

/** Keeps everything in memory: survives reconnects, not restarts. For tests and ephemeral clients. */
export function memoryStorage(): ClientStorage {
  const rooms = new Map<string, StoredClient>();
  /** Per room, the state the held base was copied from (the engine's snapshot): copyChanged. */
  const copiedFrom = new Map<string, unknown>();
  return {
    durability: 'memory',
    keepsTags: true,
    async load(room) {
      const r = rooms.get(room);
      return r && structuredClone(r);
    },
    async init(room, clientId) {
      if (!rooms.has(room)) rooms.set(room, { clientId, lastSeq: 0, durable: [] });
    },
    async append(room, ops, tags) {
      const r = rooms.get(room)!;
      for (const tag of tags ?? []) {
        r.tags = [...(r.tags ?? []), { ...tag }];
        r.marks = { ...r.marks, [tag.tab]: Math.max(r.marks?.[tag.tab] ?? 0, tag.req) };
      }
      for (const op of ops) {
        r.durable.push(structuredClone(op));
        if (op.seq > r.lastSeq) {
          r.lastSeq = op.seq;
          if (op.digest !== undefined) r.lastDigest = op.digest;
          else delete r.lastDigest;
        }
      }
    },
    async reserve(room, throughSeq) {
      const r = rooms.get(room)!;
      r.reservedSeq = throughSeq;
    },
    async saveBase(room, base) {
      const r = rooms.get(room);
      if (!r || (r.base && r.base.pos >= base.pos)) return;
      // An engine's snapshot is deeply frozen (machine.ts, draft.ts): held as it is, it is a copy
      // no one can change, and saving it costs nothing (issue 43: the copies were 6-7 % of a
      // 100,000-key keyedMap's client, and a fifth copy of the map for the collector to mark).
      // Any other state: what changed since the held base is copied, not the whole state.
      const held = r.base;
      const state = Object.isFrozen(base.state)
        ? base.state
        : held === undefined
          ? structuredClone(base.state)
          : copyChanged(copiedFrom.get(room), held.state, base.state);
      r.base = { ...base, state };
      copiedFrom.set(room, base.state);
      r.durable = r.durable.filter((o) => o.seq > base.ownSeq);
      if (r.tags) r.tags = r.tags.filter((t) => t.seq > base.ownSeq);
    },
    async close() {},
  };
}
