/**
 * The room a tab of a shared client gets (tabs.ts): one ConnectedRoom whatever this tab is. As a
 * follower it reads the leader's views through a FollowerMirror; once it leads (at once, or when
 * the leader tab goes) it reads its own connected room. Listeners are its own, so they carry over
 * when the tab takes the lead, and they hear every view then.
 */
import {
  HerculesError,
  textHandle,
  VIEWS,
  type Listener,
  type Machine,
  type MemberPosition,
  type OpHandle,
  type OpStubs,
  type PeerPresence,
  type PresenceOf,
  type ReceiveStats,
  type RoomPresence,
  type StateOf,
  type TextHandle,
  type TextPath,
  type UndoStatus,
  type ViewName,
  type ViewPositions,
} from '@hercules/core';
import type { ConnectedRoom } from '../room.ts';
import type { ConnectionStatus } from '../transport.ts';
import type { FollowerMirror } from './follower.ts';
import { OthersOfTab, type TabPresences } from './presence.ts';

/** The leader's side of the tabs' presence (LeaderService). */
export interface TabPresenceHost {
  setTabPresence(tab: string, value: unknown): void;
  tabPresence(): TabPresences;
}

export class TabRoom<M extends Machine<any, any>> implements ConnectedRoom<M> {
  readonly machine: M;
  readonly ops: OpStubs<M>;
  readonly presence: RoomPresence<PresenceOf<M>>;
  #local: ConnectedRoom<M> | undefined;
  #host: TabPresenceHost | undefined;
  #presence: PresenceOf<M> | undefined;
  readonly #othersOfTab = new OthersOfTab();
  readonly #views = new Map<ViewName, Set<Listener<StateOf<M>>>>(VIEWS.map((v) => [v, new Set()]));
  readonly #status = new Set<(s: ConnectionStatus, detail?: string) => void>();
  readonly #members = new Set<(m: readonly string[]) => void>();
  readonly #others = new Set<(o: readonly PeerPresence<PresenceOf<M>>[]) => void>();
  readonly #progress = new Set<(p: ViewPositions) => void>();
  readonly #rejected = new Set<(op: OpHandle) => void>();
  readonly #receipts = new Set<() => void>();
  /** The leader room's receipts subscription, held while this tab has a listener (it makes the client ask the server). */
  #receiptsOff: (() => void) | undefined;
  readonly #undo = new Set<(s: UndoStatus) => void>();
  #undoSaid: UndoStatus = { canUndo: false, canRedo: false };
  #lastStatus: ConnectionStatus = 'connecting';
  /** What listeners last heard: each array is the same object until it changes (a new one per leader message). */
  #lastMembers: readonly string[] | undefined;
  #lastOthers: readonly unknown[] | undefined;

  constructor(
    readonly room: string,
    readonly mirror: FollowerMirror,
    readonly shutdown: () => Promise<void>,
  ) {
    this.machine = mirror.machine as M;
    const stubs: Record<string, (args?: unknown) => OpHandle> = {};
    for (const name of this.machine.opNames) stubs[name] = (args) => this.submit(name, args);
    this.ops = stubs as OpStubs<M>;
    this.presence = this.#presenceApi();
    // A follower's own requests; once this tab leads, its room tells every rejection (lead()).
    mirror.rejected = (h) => {
      if (!this.#local) this.#tellRejected(h);
    };
    // A new leader knows no tab's presence: say this tab's again.
    mirror.leaderChanged = () => {
      if (!this.#local && this.#presence !== undefined) this.#sendPresence(this.#presence);
    };
  }

  get clientId(): string {
    return this.#local?.clientId ?? this.mirror.clientId;
  }
  /** True once this tab holds the connection and the store. */
  get leading(): boolean {
    return this.#local !== undefined;
  }

  /** This tab leads now: read its room from here on; its presence and its siblings' are `host`'s. */
  lead(local: ConnectedRoom<M>, host: TabPresenceHost): void {
    this.#local = local;
    this.#host = host;
    for (const v of VIEWS) local.subscribe(v, () => this.#emit(v));
    local.onStatus(() => this.#meta());
    local.onMembers(() => this.#meta());
    local.presence.subscribe(() => this.#meta());
    local.onProgress(() => this.#meta());
    local.onRejected((h) => this.#tellRejected(h));
    this.#followReceipts();
    local.onUndoChange(() => this.#undoChanged());
    this.#undoChanged();
    if (this.#presence !== undefined) host.setTabPresence(this.mirror.tab, this.#presence);
    this.changed(VIEWS);
  }

  /** As a leader: the tabs' presence may have changed (told with each views message). */
  othersChanged(): void {
    const others = this.presence.others();
    if (others === this.#lastOthers) return;
    this.#lastOthers = others;
    for (const fn of [...this.#others]) fn(others);
  }

  /** The mirror's views changed (or, with none, its connection, members or presence). */
  changed(views: readonly ViewName[]): void {
    for (const v of views) this.#emit(v);
    this.#meta();
  }

  getState(view: ViewName = 'submitted'): StateOf<M> {
    if (!VIEWS.includes(view)) throw new HerculesError('bad-argument', `unknown view ${JSON.stringify(view)}; use one of ${VIEWS.join(', ')}`);
    return (this.#local ? this.#local.getState(view) : this.mirror.state(view)) as StateOf<M>;
  }
  subscribe(view: ViewName, listener: Listener<StateOf<M>>, opts?: { immediate?: boolean }): () => void {
    const set = this.#views.get(view);
    if (!set) throw new HerculesError('bad-argument', `unknown view ${JSON.stringify(view)}; use one of ${VIEWS.join(', ')}`);
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'subscribe(view, listener): listener must be a function');
    set.add(listener);
    if (opts?.immediate) listener(this.getState(view), view);
    return () => set.delete(listener);
  }
  until(view: ViewName, predicate: (state: StateOf<M>) => boolean, opts?: { timeoutMs?: number }): Promise<StateOf<M>> {
    return new Promise((resolve, reject) => {
      if (predicate(this.getState(view))) return resolve(this.getState(view));
      const timer =
        opts?.timeoutMs !== undefined
          ? setTimeout(() => {
              off();
              reject(new HerculesError('timeout', `until(${view}): not true after ${opts.timeoutMs} ms`));
            }, opts.timeoutMs)
          : undefined;
      const off = this.subscribe(view, (s) => {
        if (!predicate(s)) return;
        off();
        clearTimeout(timer);
        resolve(s);
      });
    });
  }
  members(): readonly string[] {
    return this.#local ? this.#local.members() : this.mirror.members;
  }
  onMembers(listener: (members: readonly string[]) => void): () => void {
    this.#members.add(listener);
    return () => this.#members.delete(listener);
  }
  access(): 'read' | 'write' {
    return this.#local ? this.#local.access() : this.mirror.access;
  }
  /** This tab's ops not yet stable (as a leader, every op of the shared client). */
  pending(): OpHandle[] {
    return [...this.mirror.pending(), ...(this.#local?.pending() ?? [])];
  }
  submit(name: string, args?: unknown): OpHandle {
    return this.#local ? this.#local.submit(name, args) : this.mirror.submit(name, args);
  }
  positions(): ViewPositions {
    return this.#local ? this.#local.positions() : this.mirror.positions();
  }
  onProgress(listener: (positions: ViewPositions) => void): () => void {
    this.#progress.add(listener);
    return () => this.#progress.delete(listener);
  }
  flushNotifications(): void {
    this.#local?.flushNotifications();
  }
  receiveStats(): ReceiveStats {
    return this.#local?.receiveStats() ?? { frames: 0, decodeMs: 0, applyMs: 0, notifies: 0, notifyMs: 0 };
  }
  status(): ConnectionStatus {
    return this.#local ? this.#local.status() : this.mirror.status;
  }
  onStatus(fn: (s: ConnectionStatus, detail?: string) => void): () => void {
    this.#status.add(fn);
    return () => this.#status.delete(fn);
  }
  /** As a single tab's: rejects with the fatal error if the server refused this client for good. */
  whenOnline(opts?: { timeoutMs?: number }): Promise<void> {
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const settle = (s: ConnectionStatus): boolean => {
        if (s === 'online') resolve();
        else if (s === 'failed') this.#failed().then(reject, reject);
        else if (s === 'closed') reject(new HerculesError('closed', 'the room was closed before it came online'));
        else return false;
        off();
        clearTimeout(timer);
        return true;
      };
      const off = this.onStatus(settle);
      if (settle(this.status())) return;
      if (opts?.timeoutMs !== undefined)
        timer = setTimeout(() => {
          off();
          reject(new HerculesError('timeout', `not online after ${opts.timeoutMs} ms`));
        }, opts.timeoutMs);
    });
  }

  /** The error that stopped the shared client: its leader's room rejects whenOnline with it. */
  async #failed(): Promise<HerculesError> {
    if (!this.#local) return this.mirror.failure ?? new HerculesError('internal', 'the connection failed');
    return this.#local.whenOnline().then(
      () => new HerculesError('internal', 'the connection failed'),
      (e: HerculesError) => e,
    );
  }

  /** Every op this tab submitted so far is durable (or rejected). */
  async flushed(): Promise<void> {
    await Promise.all(this.mirror.pending().map((h) => h.durable));
    await this.#local?.flushed();
  }
  close(): Promise<void> {
    return this.shutdown();
  }

  /** Over this TabRoom, so a handle taken in a follower keeps working once the tab leads. */
  text(path: TextPath): TextHandle<OpHandle> {
    return textHandle(this, path);
  }
  /** The leader's floor; a follower's inserts are moved to it by the leader (text-clocks.ts). */
  textClockFloor(): number {
    return this.#local ? this.#local.textClockFloor() : 0;
  }
  /**
   * As a leader, every rejected op of the shared client (its room's); as a follower, this tab's
   * own ops (docs/tabs.md). Listeners are this tab's, so they carry over when it takes the lead.
   */
  /**
   * Delivery receipts (room.seenBy): the leader's room asks the server for them while this tab
   * has a listener. A follower tab sees none yet (seenBy [] and memberPositions []): the
   * BroadcastChannel does not carry them (docs/tabs.md, "Not done").
   */
  onReceipts(listener: () => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onReceipts(listener): listener must be a function');
    this.#receipts.add(listener);
    this.#followReceipts();
    return () => {
      this.#receipts.delete(listener);
      if (this.#receipts.size === 0 && this.#receiptsOff) {
        this.#receiptsOff();
        this.#receiptsOff = undefined;
      }
    };
  }
  seenBy(op: OpHandle): readonly string[] {
    return this.#local ? this.#local.seenBy(op) : [];
  }
  memberPositions(): readonly MemberPosition[] {
    return this.#local ? this.#local.memberPositions() : [];
  }
  #followReceipts(): void {
    if (!this.#local || this.#receiptsOff || this.#receipts.size === 0) return;
    this.#receiptsOff = this.#local.onReceipts(() => {
      for (const fn of [...this.#receipts]) {
        try {
          fn();
        } catch (e) {
          console.warn(`an onReceipts listener threw: ${(e as Error)?.message ?? String(e)}`);
        }
      }
    });
  }

  onRejected(listener: (op: OpHandle) => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onRejected(listener): listener must be a function');
    this.#rejected.add(listener);
    return () => this.#rejected.delete(listener);
  }

  /**
   * Undo is the leader's: its room keeps the shared client's one history. A follower has none
   * (undefined, canUndo() false: docs/tabs.md, "Not done"); its undo listeners hear the leader's
   * once this tab takes the lead.
   */
  undo(): OpHandle | undefined {
    return this.#local?.undo();
  }
  redo(): OpHandle | undefined {
    return this.#local?.redo();
  }
  canUndo(): boolean {
    return this.#local?.canUndo() ?? false;
  }
  canRedo(): boolean {
    return this.#local?.canRedo() ?? false;
  }
  onUndoChange(listener: (status: UndoStatus) => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onUndoChange(listener): listener must be a function');
    this.#undo.add(listener);
    return () => this.#undo.delete(listener);
  }
  undoGroup<T>(fn: () => T): T {
    if (typeof fn !== 'function') throw new HerculesError('bad-argument', 'undoGroup(fn): fn must be a function');
    return this.#local ? this.#local.undoGroup(fn) : fn();
  }
  stopCapturing(): void {
    this.#local?.stopCapturing();
  }

  #tellRejected(h: OpHandle): void {
    for (const fn of [...this.#rejected]) {
      try {
        fn(h);
      } catch (e) {
        // As a single tab's room: a listener that throws does not stop the others, and is said.
        console.warn(`an onRejected listener threw: ${(e as Error)?.message ?? String(e)}`);
      }
    }
  }

  /** Tell undo listeners if canUndo or canRedo changed. */
  #undoChanged(): void {
    const now = { canUndo: this.canUndo(), canRedo: this.canRedo() };
    if (now.canUndo === this.#undoSaid.canUndo && now.canRedo === this.#undoSaid.canRedo) return;
    this.#undoSaid = now;
    for (const fn of [...this.#undo]) fn(now);
  }

  #emit(view: ViewName): void {
    const set = this.#views.get(view)!;
    if (set.size === 0) return;
    const state = this.getState(view);
    for (const l of [...set]) l(state, view);
  }

  /** Connection, members, presence and positions: told to whoever listens, each when it changed. */
  #meta(): void {
    const s = this.status();
    if (s !== this.#lastStatus) {
      this.#lastStatus = s;
      for (const fn of [...this.#status]) fn(s);
    }
    const members = this.members();
    if (members !== this.#lastMembers) {
      this.#lastMembers = members;
      for (const fn of [...this.#members]) fn(members);
    }
    this.othersChanged();
    const p = this.positions();
    for (const fn of [...this.#progress]) fn(p);
  }

  /** A keyed presence of the shared client: what this tab's presence.set is (presence.ts). */
  setPresenceOf(key: string, value: PresenceOf<M> | null): void {
    if (!this.#host) throw new HerculesError('bad-argument', 'setPresenceOf: only the leader tab sets keyed presences; use presence.set');
    this.#host.setTabPresence(key, value);
  }

  #sendPresence(value: PresenceOf<M> | null): void {
    if (this.mirror.leader) this.mirror.send({ t: 'presence', to: this.mirror.leader, tab: this.mirror.tab, value });
  }

  /**
   * Each tab's presence is its own (PRESENCE-PER-KEY): the leader sets it on the connection under
   * the tab's id, so others see one peer per tab; this tab's others are the server's peers and
   * its sibling tabs (presence.ts).
   */
  #presenceApi(): RoomPresence<PresenceOf<M>> {
    const set = (value: PresenceOf<M> | null) => {
      const invalid = value === null ? undefined : this.machine.validatePresence(value);
      if (invalid !== undefined) throw new HerculesError('bad-argument', `presence.set: ${invalid}`);
      if (this.#host) this.#host.setTabPresence(this.mirror.tab, value);
      else this.#sendPresence(value);
      this.#presence = value ?? undefined;
    };
    const others = (): readonly PeerPresence[] => {
      const local = this.#local;
      if (!local || !this.#host) return this.mirror.others;
      return this.#othersOfTab.of(local.presence.others(), local.clientId, this.#host.tabPresence(), this.mirror.tab);
    };
    return {
      set,
      update: (partial) => set({ ...(this.#presence as object), ...(partial as object) } as PresenceOf<M>),
      get: () => this.#presence,
      others: () => others() as readonly PeerPresence<PresenceOf<M>>[],
      subscribe: (listener) => {
        this.#others.add(listener);
        return () => this.#others.delete(listener);
      },
    };
  }
}
