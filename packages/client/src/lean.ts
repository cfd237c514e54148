/**
 * `@hercules/client/lean`: connect() with only the features the app passes, for browser bundles.
 * `@hercules/client`'s connect() has every one (undo, `room.text`, presence, delivery receipts,
 * stranded-store recovery and the IndexedDB directory it reads), each a method or a default of
 * every room, so no bundler can leave them out; here each is
 * an import of its own, and the README's browser snippet pays for none (issue 41, item 5;
 * docs/benchmarks.md, "Browser bundle size").
 *
 *   connect({ url, room, machine, storage, features: [undoFeature, textFeature] })
 */
import { HerculesError, type Machine } from '@hercules/core';
import { connectWith, type ClientFeatures, type ConnectOptions } from './connect.ts';
import { recoverPending } from './recover.ts';
import { indexedDbDirectory } from './indexeddb-directory.ts';
import { STORE_ENV } from './indexeddb-storage.ts';
import type { ConnectedRoom } from './room.ts';

export { presenceFeature, receiptsFeature, textFeature, undoFeature, VIEWS } from '@hercules/core';
export type { OpHandle, ViewName, Stage, AppRoom, ViewPositions, MemberPosition, RoomFeatures } from '@hercules/core';
export type { ClientFeatures, ConnectOptions, ConnectedRoom } from './connect.ts';
export type { ClientStorage, OpTag } from './storage.ts';
export { memoryStorage } from './storage.ts';
/** IndexedDB storage without `directory()` (recoveryFeature finds the stores without it). */
export { leanIndexedDbStorage as indexedDbStorage } from './indexeddb-storage.ts';

/** Stranded-store recovery (ConnectOptions.recover; recover.ts, DUR-NOT-STRANDED). */
export const recoveryFeature: ClientFeatures = {
  recoverPending,
  storeDirectory: (storage) => {
    const env = STORE_ENV.get(storage);
    return env && indexedDbDirectory(env);
  },
};

export interface LeanConnectOptions<M extends Machine<any, any>> extends ConnectOptions<M> {
  /**
   * The features this room has beyond its core: `undoFeature` (room.undo and redo),
   * `textFeature` (room.text), `presenceFeature` (room.presence, setPresenceOf), `receiptsFeature` (room.onReceipts),
   * `recoveryFeature` (the recovery of stranded stores, on by default with it). None by default.
   */
  features?: readonly ClientFeatures[];
}

/** connect() of `@hercules/client`, with only `opts.features`. */
export function connect<M extends Machine<any, any>>(opts: LeanConnectOptions<M>): Promise<ConnectedRoom<M>> {
  const features: ClientFeatures = Object.assign({}, ...(opts?.features ?? []));
  if (opts?.undo && !features.undoStack) return refuse('undo options need the undo feature: features: [undoFeature]');
  if (opts?.recover && !features.recoverPending) return refuse('recover needs the recovery feature: features: [recoveryFeature]');
  return connectWith(opts, features);
}

function refuse(message: string): Promise<never> {
  return Promise.reject(new HerculesError('bad-argument', `connect: ${message}`));
}
