/**
 * React bindings. Views are immutable snapshots that share unchanged parts by identity, so a
 * selector's result can be compared with Object.is: a component re-renders only when the part
 * it reads changed.
 */
import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import type { AppRoom, Machine, OpHandle, PeerPresence, PresenceOf, Stage, StateOf, ViewName, ViewPositions } from '@hercules/core';

type AnyRoom = AppRoom<Machine<any, any>> & { status?: () => string; onStatus?: (fn: (s: any) => void) => () => void };

/**
 * A snapshot source through `selector`, re-rendering only when the selected value changes
 * (`isEqual`): the selector runs again only for a new snapshot object, and an equal result keeps
 * the previous one. What useView and useOthers share.
 */
function useSelected<S, T>(subscribe: (fn: () => void) => () => void, snapshot: () => S, selector: (s: S) => T, isEqual: (a: T, b: T) => boolean): T {
  const last = useRef<{ source: S; value: T } | null>(null);
  const sel = useRef(selector);
  sel.current = selector;
  const get = useCallback(() => {
    const source = snapshot();
    const prev = last.current;
    if (prev && prev.source === source) return prev.value;
    const value = sel.current(source);
    if (prev && isEqual(prev.value, value)) {
      last.current = { source, value: prev.value };
      return prev.value;
    }
    last.current = { source, value };
    return value;
  }, [snapshot, isEqual]);
  return useSyncExternalStore(subscribe, get, get);
}

/**
 * Read `view` of `room` through `selector`. Re-renders only when the selected value changes
 * (`isEqual`, default Object.is — right for parts of a snapshot, which keep their identity).
 */
export function useView<M extends Machine<any, any>, T = StateOf<M>>(
  room: AppRoom<M>,
  view: ViewName,
  selector: (state: StateOf<M>) => T = (s) => s as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): T {
  const subscribe = useCallback((fn: () => void) => room.subscribe(view, fn), [room, view]);
  const snapshot = useCallback(() => room.getState(view), [room, view]);
  return useSelected(subscribe, snapshot, selector, isEqual);
}

/** The room's op stubs (stable across renders). */
export function useOps<M extends Machine<any, any>>(room: AppRoom<M>): AppRoom<M>['ops'] {
  return room.ops;
}

/** Follow one op: re-renders as it moves through its stages. */
export function useOpStage(handle: OpHandle | undefined): Stage | undefined {
  const [stage, setStage] = useState<Stage | undefined>(handle?.stage);
  useEffect(() => {
    if (!handle) return setStage(undefined);
    let live = true;
    const update = () => {
      if (live) setStage(handle.stage);
    };
    update();
    handle.durable.then(update, update);
    handle.authoritative.then(update, update);
    handle.visible.then(update, update);
    return () => {
      live = false;
    };
  }, [handle]);
  return stage;
}

/**
 * The other connections' presence through `selector` (default: all of them): re-renders only
 * when the selected value changes (`isEqual`, default Object.is). `others()` keeps its identity
 * until presence changes, and each peer's entry until that peer's value changes.
 */
export function useOthers<M extends Machine<any, any, any>, T = readonly PeerPresence<PresenceOf<M>>[]>(
  room: AppRoom<M>,
  selector: (others: readonly PeerPresence<PresenceOf<M>>[]) => T = (o) => o as unknown as T,
  isEqual: (a: T, b: T) => boolean = Object.is,
): T {
  const subscribe = useCallback((fn: () => void) => room.presence.subscribe(fn), [room]);
  const snapshot = useCallback(() => room.presence.others(), [room]);
  return useSelected(subscribe, snapshot, selector, isEqual);
}

/** This connection's presence and a setter (`room.presence.set`; null clears it). */
export function usePresence<M extends Machine<any, any, any>>(room: AppRoom<M>): [PresenceOf<M> | undefined, (value: PresenceOf<M> | null) => void] {
  const [value, setValue] = useState(() => room.presence.get());
  const set = useCallback(
    (v: PresenceOf<M> | null) => {
      room.presence.set(v);
      setValue(room.presence.get());
    },
    [room],
  );
  return [value, set];
}

/** Members of the visibility set. */
export function useMembers(room: AppRoom<Machine<any, any>>): readonly string[] {
  const subscribe = useCallback((fn: () => void) => room.onMembers(fn), [room]);
  return useSyncExternalStore(
    subscribe,
    () => room.members(),
    () => room.members(),
  );
}

/** The length of each view's log (`room.positions()`), re-rendering as the room makes progress. */
export function usePositions(room: AppRoom<Machine<any, any>>): ViewPositions {
  const subscribe = useCallback((fn: () => void) => room.onProgress(fn), [room]);
  return useSyncExternalStore(
    subscribe,
    () => room.positions(),
    () => room.positions(),
  );
}

/** Connection status of a room from connect() ('online', 'offline', ...). */
export function useStatus(room: AnyRoom): string {
  const subscribe = useCallback((fn: () => void) => (room.onStatus ? room.onStatus(fn) : () => {}), [room]);
  const get = () => (room.status ? room.status() : 'n/a');
  return useSyncExternalStore(subscribe, get, get);
}

/** Re-render every `ms` (for ages and timers in the inspector). */
export function useTick(ms: number): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setN((x) => x + 1), ms);
    return () => clearInterval(t);
  }, [ms]);
  return n;
}

/**
 * Undo and redo of this client's own changes (docs/undo.md): `canUndo` and `canRedo` re-render as
 * they change; `undo` and `redo` are stable across renders.
 */
export function useUndo(room: AppRoom<Machine<any, any>>): { canUndo: boolean; canRedo: boolean; undo: () => void; redo: () => void } {
  const subscribe = useCallback((fn: () => void) => room.onUndoChange(fn), [room]);
  const canUndo = useSyncExternalStore(
    subscribe,
    () => room.canUndo(),
    () => room.canUndo(),
  );
  const canRedo = useSyncExternalStore(
    subscribe,
    () => room.canRedo(),
    () => room.canRedo(),
  );
  const undo = useCallback(() => void room.undo(), [room]);
  const redo = useCallback(() => void room.redo(), [room]);
  return { canUndo, canRedo, undo, redo };
}
