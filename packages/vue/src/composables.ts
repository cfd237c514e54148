/**
 * Vue composables over a room's subscription API, the counterparts of @hercules/react's hooks.
 * Each returns a shallow ref kept current while the calling scope lives (a component's setup,
 * or an effectScope()), and unsubscribes when the scope ends. Views are immutable snapshots that
 * share unchanged parts by identity: a selector's result is compared with Object.is, so a ref
 * changes (and what reads it re-renders) only when the part it selects changed. The refs are
 * shallow on purpose: the snapshot is not copied into reactive proxies.
 *
 * The room (and the view) may be refs or getters: the subscription follows them. While a
 * component renders on the server (renderToString) nothing subscribes: a render reads once.
 */
import {
  computed,
  getCurrentInstance,
  inject,
  shallowReadonly,
  shallowRef,
  ssrContextKey,
  toValue,
  watch,
  type MaybeRefOrGetter,
  type ShallowRef,
  type WritableComputedRef,
} from 'vue';
import type { AppRoom, Machine, OpHandle, PeerPresence, PresenceOf, Stage, StateOf, ViewName, ViewPositions } from '@hercules/core';

type AnyRoom = AppRoom<Machine<any, any>> & { status?: () => string; onStatus?: (fn: (s: any) => void) => () => void };
type Inputs<A extends readonly unknown[]> = { [K in keyof A]: MaybeRefOrGetter<A[K]> };

/**
 * True while a component renders on the server: its setup runs, nothing is mounted or unmounted,
 * and before Vue 3.5 the cleanup of a watcher that ran there never runs (a subscription per render).
 */
function renderingOnServer(): boolean {
  return getCurrentInstance() !== null && inject(ssrContextKey, null) !== null;
}

/**
 * A ref of `read(...inputs)` kept current by `listen(update, ...inputs)`, which subscribes and
 * returns its unsubscribe, again whenever an input that is a ref or getter changes. A new value
 * `isEqual` to the current one is not set, so nothing re-renders for it.
 */
function tracked<A extends readonly unknown[], T>(
  inputs: Inputs<A>,
  read: (...a: A) => T,
  listen: (update: () => void, ...a: A) => () => void,
  isEqual: (a: T, b: T) => boolean = Object.is,
): Readonly<ShallowRef<T>> {
  const now = () => inputs.map((x) => toValue(x)) as unknown as A;
  const value = shallowRef(read(...now()));
  const update = (a: A) => {
    const next = read(...a);
    if (!isEqual(value.value, next)) value.value = next;
  };
  if (!renderingOnServer())
    watch(
      now,
      (a, _, onCleanup) => {
        update(a);
        onCleanup(listen(() => update(a), ...a));
      },
      { immediate: true },
    );
  return shallowReadonly(value);
}

/**
 * `view` of `room` through `selector`: a readonly shallow ref that changes only when the selected
 * value changes (`isEqual`, default Object.is — right for parts of a snapshot, which keep their identity).
 */
export function useView<M extends Machine<any, any>, T = StateOf<M>>(
  room: MaybeRefOrGetter<AppRoom<M>>,
  view: MaybeRefOrGetter<ViewName>,
  selector: (state: StateOf<M>) => T = (s) => s as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): Readonly<ShallowRef<T>> {
  return tracked<[AppRoom<M>, ViewName], T>(
    [room, view],
    (r, v) => selector(r.getState(v)),
    (update, r, v) => r.subscribe(v, update),
    isEqual,
  );
}

/** The room's op stubs. */
export function useOps<M extends Machine<any, any>>(room: AppRoom<M>): AppRoom<M>['ops'] {
  return room.ops;
}

/** One op's stage, changing as it moves through its stages (undefined: no op). */
export function useOpStage(handle: MaybeRefOrGetter<OpHandle | undefined>): Readonly<ShallowRef<Stage | undefined>> {
  return tracked<[OpHandle | undefined], Stage | undefined>(
    [handle],
    (h) => h?.stage,
    (update, h) => {
      let live = true;
      const moved = () => {
        if (live) update();
      };
      for (const stage of h ? [h.durable, h.authoritative, h.visible] : []) stage.then(moved, moved);
      return () => {
        live = false;
      };
    },
  );
}

/**
 * The other connections' presence through `selector` (default: all of them), changing only when
 * the selected value changes. `others()` keeps its identity until presence changes.
 */
export function useOthers<M extends Machine<any, any, any>, T = readonly PeerPresence<PresenceOf<M>>[]>(
  room: MaybeRefOrGetter<AppRoom<M>>,
  selector: (others: readonly PeerPresence<PresenceOf<M>>[]) => T = (o) => o as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): Readonly<ShallowRef<T>> {
  return tracked<[AppRoom<M>], T>(
    [room],
    (r) => selector(r.presence.others()),
    (update, r) => r.presence.subscribe(update),
    isEqual,
  );
}

/** This connection's presence as a writable ref: setting it sets `room.presence` (null clears it). */
export function usePresence<M extends Machine<any, any, any>>(room: AppRoom<M>): WritableComputedRef<PresenceOf<M> | undefined> {
  const mine = shallowRef(room.presence.get());
  return computed({
    get: () => mine.value,
    set: (value) => {
      room.presence.set(value ?? null);
      mine.value = room.presence.get();
    },
  });
}

/** Members of the visibility set. */
export function useMembers(room: MaybeRefOrGetter<AppRoom<Machine<any, any>>>): Readonly<ShallowRef<readonly string[]>> {
  return tracked<[AppRoom<Machine<any, any>>], readonly string[]>(
    [room],
    (r) => r.members(),
    (update, r) => r.onMembers(update),
  );
}

/** The length of each view's log (`room.positions()`), changing as the room makes progress. */
export function usePositions(room: MaybeRefOrGetter<AppRoom<Machine<any, any>>>): Readonly<ShallowRef<ViewPositions>> {
  return tracked<[AppRoom<Machine<any, any>>], ViewPositions>(
    [room],
    (r) => r.positions(),
    (update, r) => r.onProgress(update),
  );
}

/** Connection status of a room from connect() ('online', 'offline', ...). */
export function useStatus(room: MaybeRefOrGetter<AnyRoom>): Readonly<ShallowRef<string>> {
  return tracked<[AnyRoom], string>(
    [room],
    (r) => (r.status ? r.status() : 'n/a'),
    (update, r) => (r.onStatus ? r.onStatus(update) : () => {}),
  );
}

/**
 * Undo and redo of this client's own changes (docs/undo.md): `canUndo` and `canRedo` are readonly
 * refs kept current; `undo` and `redo` act on the room as it is when called.
 */
export function useUndo(room: MaybeRefOrGetter<AppRoom<Machine<any, any>>>): {
  canUndo: Readonly<ShallowRef<boolean>>;
  canRedo: Readonly<ShallowRef<boolean>>;
  undo: () => void;
  redo: () => void;
} {
  const listen = (update: () => void, r: AppRoom<Machine<any, any>>) => r.onUndoChange(update);
  return {
    canUndo: tracked<[AppRoom<Machine<any, any>>], boolean>([room], (r) => r.canUndo(), listen),
    canRedo: tracked<[AppRoom<Machine<any, any>>], boolean>([room], (r) => r.canRedo(), listen),
    undo: () => void toValue(room).undo(),
    redo: () => void toValue(room).redo(),
  };
}
