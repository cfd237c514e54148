/**
 * Svelte stores over a room's subscription API, the counterparts of @hercules/react's hooks.
 *
 * Stores, not runes: the store contract (`subscribe(fn)` returning an unsubscribe) is what
 * Svelte 3, 4 and 5 all read with `$store` in a component, and these are built with
 * `svelte/store`'s `readable`, which each of them ships as plain JavaScript. Runes exist only in
 * Svelte 5, and only in files its compiler processes (.svelte, .svelte.js), so a library of
 * runes would not load in Svelte 4. In Svelte 5, `fromStore(store)` turns one into an object
 * whose `current` is reactive state, for runes code outside components.
 *
 * A store subscribes to the room when it gets its first subscriber and unsubscribes after its
 * last (a component's `$store` does both). Views are immutable snapshots that share unchanged
 * parts by identity: a selector's result is compared with `isEqual` (default Object.is) and the
 * store is set only when it changed, so a `$store` re-renders only for the part it reads.
 */
import { readable, writable, type Readable, type Writable } from 'svelte/store';
import type { AppRoom, Machine, OpHandle, PeerPresence, PresenceOf, Stage, StateOf, ViewName, ViewPositions } from '@hercules/core';

type AnyRoom = AppRoom<Machine<any, any>> & { status?: () => string; onStatus?: (fn: (s: any) => void) => () => void };

/** A store of `read()`, kept current by `listen(update)` (which returns its unsubscribe) while subscribed. */
function tracked<T>(read: () => T, listen: (update: () => void) => () => void, isEqual: (a: T, b: T) => boolean = Object.is): Readable<T> {
  return readable(read(), (set) => {
    let current = read();
    set(current);
    return listen(() => {
      const next = read();
      if (!isEqual(current, next)) set((current = next));
    });
  });
}

/** `view` of `room` through `selector`: set only when the selected value changes (`isEqual`, default Object.is). */
export function viewStore<M extends Machine<any, any>, T = StateOf<M>>(
  room: AppRoom<M>,
  view: ViewName,
  selector: (state: StateOf<M>) => T = (s) => s as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): Readable<T> {
  return tracked(
    () => selector(room.getState(view)),
    (update) => room.subscribe(view, update),
    isEqual,
  );
}

/** One op's stage, as it moves through its stages. */
export function opStageStore(handle: OpHandle): Readable<Stage> {
  return tracked(
    () => handle.stage,
    (update) => {
      let live = true;
      const moved = () => {
        if (live) update();
      };
      for (const stage of [handle.durable, handle.authoritative, handle.visible]) stage.then(moved, moved);
      return () => {
        live = false;
      };
    },
  );
}

/** The other connections' presence through `selector` (default: all of them), set only when the selected value changes. */
export function othersStore<M extends Machine<any, any, any>, T = readonly PeerPresence<PresenceOf<M>>[]>(
  room: AppRoom<M>,
  selector: (others: readonly PeerPresence<PresenceOf<M>>[]) => T = (o) => o as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): Readable<T> {
  return tracked(
    () => selector(room.presence.others()),
    (update) => room.presence.subscribe(update),
    isEqual,
  );
}

/** This connection's presence as a writable store: `$presence = value` sets `room.presence` (undefined or null clears it). */
export function presenceStore<M extends Machine<any, any, any>>(room: AppRoom<M>): Writable<PresenceOf<M> | undefined> {
  const mine = writable<PresenceOf<M> | undefined>(room.presence.get());
  const set = (value: PresenceOf<M> | null | undefined) => {
    room.presence.set(value ?? null);
    mine.set(room.presence.get());
  };
  return { subscribe: mine.subscribe, set, update: (fn) => set(fn(room.presence.get())) };
}

/** Members of the visibility set. */
export function membersStore(room: AppRoom<Machine<any, any>>): Readable<readonly string[]> {
  return tracked(
    () => room.members(),
    (update) => room.onMembers(update),
  );
}

/** The length of each view's log (`room.positions()`), as the room makes progress. */
export function positionsStore(room: AppRoom<Machine<any, any>>): Readable<ViewPositions> {
  return tracked(
    () => room.positions(),
    (update) => room.onProgress(update),
  );
}

/** Connection status of a room from connect() ('online', 'offline', ...). */
export function statusStore(room: AnyRoom): Readable<string> {
  return tracked(
    () => (room.status ? room.status() : 'n/a'),
    (update) => (room.onStatus ? room.onStatus(update) : () => {}),
  );
}

/** Whether this client can undo and redo now (docs/undo.md); call `room.undo()` and `room.redo()` to act. */
export function undoStore(room: AppRoom<Machine<any, any>>): Readable<{ readonly canUndo: boolean; readonly canRedo: boolean }> {
  return tracked(
    () => ({ canUndo: room.canUndo(), canRedo: room.canRedo() }),
    (update) => room.onUndoChange(update),
    (a, b) => a.canUndo === b.canUndo && a.canRedo === b.canRedo,
  );
}
