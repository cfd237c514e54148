/**
 * Recovery of stranded ops (DUR-NOT-STRANDED, docs/spec.md). A client that stops while offline
 * keeps its Durable ops in its store and sends them when it starts again. A store that no client
 * opens again (a browser tab closed while offline, with a store of its own) would keep them for
 * ever, though the app called them Durable. So a client finds the other stores of its room that
 * no live client holds, and drains each one as the client that wrote it: under ITS client id,
 * with ITS seqs, so an op the server already has is known by (client, seq) and kept once
 * (LOG-EXACTLY-ONCE). Once the server has confirmed (ordered or rejected) every op of the store,
 * the store is deleted, unless it holds another room's ops too (then it is only released).
 *
 * Draining is connect() on the claimed store: the same engine, driver and welcome that bring a
 * restarted client back in step, so recovery adds no second way of resending ops.
 */
import { HerculesError, type Machine } from '@hercules/core';
import { connectWith, openStore, type ConnectOptions, type ConnectedRoom } from './connect.ts';
import type { ClaimedStore, ClientStorage, StoreDirectory } from './storage.ts';

/** A store holding ops of the room that the server may not have. */
export interface PendingStore {
  /** The store's name in its directory (IndexedDB: the database name). */
  store: string;
  /** The client that wrote them; they are sent under it. */
  clientId: string;
  /** Ops stored outside the store's base snapshot: sent, or not, before the client stopped. */
  ops: number;
}

/** A store drained; `ops` 0: it held nothing outside its base (a closed tab's, all sent), and was only cleaned up. */
export interface RecoveredStore extends PendingStore {
  /** The store was deleted (false: it holds another room's ops, and is left for that room's client). */
  removed: boolean;
}

export type RecoverOptions<M extends Machine<any, any>> = Omit<ConnectOptions<M>, 'storage' | 'clientId' | 'recover' | 'transport' | 'onStatus'> & {
  /** Where to look: e.g. indexedDbDirectory(), or a store's own `directory()`. */
  stores: StoreDirectory;
  /** Stop: the store being drained is released with what it still holds, the rest are not looked at. */
  signal?: AbortSignal;
  /** Stores of this client id are left alone (the caller's own id, which it numbers ops under itself). */
  exceptClientId?: string;
  /** Called as each store is drained. */
  onRecovered?: (r: RecoveredStore) => void;
};

/** What `storage` holds of `room` outside its base, with the key it is kept under. */
async function pendingIn(storage: ClientStorage, machine: Machine<any, any>, room: string) {
  const { key, stored } = await openStore(storage, machine, room);
  return stored && { key, clientId: stored.clientId, ops: stored.durable.length };
}

/** Every store of `room` in `stores` that no live client holds and that holds ops outside its base. */
export async function findPending<M extends Machine<any, any>>(opts: { stores: StoreDirectory; machine: M; room: string }): Promise<PendingStore[]> {
  const found: PendingStore[] = [];
  for (const name of await opts.stores.list()) {
    const claimed = await opts.stores.claim(name);
    if (!claimed) continue;
    try {
      const p = await pendingIn(claimed.storage, opts.machine, opts.room);
      if (p && p.ops > 0) found.push({ store: name, clientId: p.clientId, ops: p.ops });
    } finally {
      await claimed.release();
    }
  }
  return found;
}

/**
 * Drain every store of the room that no live client holds: send its ops under its own client
 * id, wait until the server has confirmed each, then delete it (a store of the room with no ops
 * outside its base is deleted at once). Resolves with what it drained.
 * A store that fails (the server refuses that client, say) is reported to onError, released
 * with its ops, and the others are still drained.
 */
export async function recoverPending<M extends Machine<any, any>>(opts: RecoverOptions<M>): Promise<RecoveredStore[]> {
  const report = (e: unknown) => opts.onError?.(e instanceof Error ? e : new Error(String(e)));
  const recovered: RecoveredStore[] = [];
  for (const name of await opts.stores.list()) {
    if (opts.signal?.aborted) break;
    let claimed: ClaimedStore | undefined;
    try {
      claimed = await opts.stores.claim(name);
      if (!claimed) continue;
      const r = await drain(claimed, opts);
      if (!r) continue;
      recovered.push(r);
      opts.onRecovered?.(r);
    } catch (e) {
      await claimed?.release().catch(() => {});
      if (opts.signal?.aborted) continue;
      // A refusal keeps its code: e.g. the server refuses the store's client to another user
      // signed in now (its ops stay in the store until their own user comes back).
      const code = e instanceof HerculesError ? e.code : 'storage-failed';
      report(new HerculesError(code, `recovering the ops of store "${name}" failed, it keeps them: ${(e as Error)?.message ?? e}`));
    }
  }
  return recovered;
}

async function drain<M extends Machine<any, any>>(claimed: ClaimedStore, opts: RecoverOptions<M>): Promise<RecoveredStore | undefined> {
  const p = await pendingIn(claimed.storage, opts.machine, opts.room);
  if (!p || p.clientId === opts.exceptClientId) {
    await claimed.release();
    return undefined;
  }
  if (p.ops > 0) await sendAll(claimed, opts);
  const removed = await othersHoldNothing(claimed.storage, p.key);
  await (removed ? claimed.remove() : claimed.release());
  return { store: claimed.name, clientId: p.clientId, ops: p.ops, removed };
}

/** True if no room but `key` has ops outside its base in this store. */
async function othersHoldNothing(storage: ClaimedStore['storage'], key: string): Promise<boolean> {
  for (const other of await storage.rooms()) {
    if (other !== key && ((await storage.load(other))?.durable.length ?? 0) > 0) return false;
  }
  return true;
}

/** Connect as the store's client and wait until none of its ops is Submitted or Durable only. */
async function sendAll<M extends Machine<any, any>>(claimed: ClaimedStore, opts: RecoverOptions<M>): Promise<void> {
  const { stores: _stores, signal, exceptClientId: _except, onRecovered: _onRecovered, ...connectOpts } = opts;
  // The claim outlives the room: deleting the store happens while it is still held.
  // Its warnings (the server unreachable, say) are the caller's own room's too; a refusal for
  // good ends the drain and is reported once, by recoverPending.
  // No undo or text handles: a drain only sends what the store holds.
  const room = await connectWith({ ...connectOpts, storage: { ...claimed.storage, close: async () => {} }, recover: false, onError: () => {} }, {});
  try {
    await confirmed(room, signal);
    await room.flushed();
  } finally {
    await room.close();
  }
}

const unconfirmed = (room: ConnectedRoom<any>) => room.pending().some((h) => h.stage === 'submitted' || h.stage === 'durable');

function confirmed(room: ConnectedRoom<any>, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    let over = false;
    const finish = (e?: unknown) => {
      if (over) return;
      over = true;
      off();
      signal?.removeEventListener('abort', stop);
      if (e) reject(e);
      else resolve();
    };
    const check = () => {
      if (!unconfirmed(room)) finish();
    };
    const stop = () => finish(new HerculesError('closed', 'recovery was stopped; the store keeps its ops'));
    const off = room.onProgress(check);
    signal?.addEventListener('abort', stop);
    if (signal?.aborted) stop();
    // A refusal for good (e.g. unauthorized for that client) ends this store's drain.
    room.whenOnline().catch(finish);
    check();
  });
}
