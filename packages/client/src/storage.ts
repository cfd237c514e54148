/**
 * Client-side durable storage. The Durable view holds exactly the ops a store has confirmed:
 * `append` resolves only once the ops would survive a crash of the process (and, for stores
 * that say so, of the device).
 */
import type { OpRecord } from '@hercules/core';

export interface StoredClient {
  clientId: string;
  /** Highest seq ever persisted for this room. */
  lastSeq: number;
  /** Persisted ops not yet known authoritative, in seq order. */
  durable: OpRecord[];
  /** Snapshot of a prefix of the global log, to start offline. */
  base?: { pos: number; state: unknown };
}

export interface ClientStorage {
  /** What this store holds for `room`, or undefined on first use. */
  load(room: string): Promise<StoredClient | undefined>;
  /** Record the client id chosen for `room` on first use. */
  init(room: string, clientId: string): Promise<void>;
  /** Persist ops durably (group-committed); resolves when they are safe. */
  append(room: string, ops: readonly OpRecord[]): Promise<void>;
  /** Ops up to `seq` are authoritative on the server: they may be deleted. */
  prune(room: string, seq: number): Promise<void>;
  /** Keep a snapshot to start offline from (best effort). */
  saveBase(room: string, pos: number, state: unknown): Promise<void>;
  close(): Promise<void>;
  /** What a durable write survives, for docs and the inspector. */
  readonly durability: 'memory' | 'process-crash' | 'power-loss';
}

/** Keeps everything in memory: survives reconnects, not restarts. For tests and ephemeral clients. */
export function memoryStorage(): ClientStorage {
  const rooms = new Map<string, StoredClient>();
  return {
    durability: 'memory',
    async load(room) {
      const r = rooms.get(room);
      return r && structuredClone(r);
    },
    async init(room, clientId) {
      if (!rooms.has(room)) rooms.set(room, { clientId, lastSeq: 0, durable: [] });
    },
    async append(room, ops) {
      const r = rooms.get(room)!;
      for (const op of ops) {
        r.durable.push(structuredClone(op));
        r.lastSeq = Math.max(r.lastSeq, op.seq);
      }
    },
    async prune(room, seq) {
      const r = rooms.get(room);
      if (r) r.durable = r.durable.filter((o) => o.seq > seq);
    },
    async saveBase(room, pos, state) {
      const r = rooms.get(room);
      if (r && (!r.base || r.base.pos < pos)) r.base = { pos, state };
    },
    async close() {},
  };
}
