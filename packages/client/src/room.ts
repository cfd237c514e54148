/**
 * The room `connect()` returns: the app's side of a ClientRoom (op stubs, views, handles,
 * positions) plus the connection's (status, whenOnline, flushed, close). It wraps the pieces
 * rather than patching them: the ClientRoom, its ClientDriver and the transport stay separate
 * objects, and nothing of the driver's side (receive, durable, the engine) is reachable here.
 */
import {
  HerculesError,
  type AppRoom,
  type ClientDriver,
  type LeanClientRoom,
  type Listener,
  type Machine,
  type MemberPosition,
  type OpHandle,
  type OpStubs,
  type PresenceOf,
  type ReceiveStats,
  type StateOf,
  type TextHandle,
  type TextPath,
  type UndoStatus,
  type ViewName,
  type ViewPositions,
} from '@hercules/core';
import type { ClientStorage } from './storage.ts';
import type { ClientTransport, ConnectionStatus } from './transport.ts';

export interface ConnectedRoom<M extends Machine<any, any>> extends AppRoom<M> {
  readonly room: string;
  status(): ConnectionStatus;
  onStatus(fn: (s: ConnectionStatus, detail?: string) => void): () => void;
  /** Close the socket and the storage. Durable ops stay in storage for the next start. */
  close(): Promise<void>;
  /** Resolves once every op submitted so far is durable (or rejected). */
  flushed(): Promise<void>;
  /**
   * Resolves once the server has welcomed this client (at once if it is online). Rejects with
   * the fatal error if the server refused it for good, with 'closed' if the room is closed, and
   * with 'timeout' (naming the last failure, e.g. connection refused) after `timeoutMs`.
   */
  whenOnline(opts?: { timeoutMs?: number }): Promise<void>;
  /**
   * Where this client's time went on what the server sent (decode, apply, notify), summed since
   * it connected: always on, two clock reads a frame. Sample it twice and subtract for a window.
   */
  receiveStats(): ReceiveStats;
  /**
   * Set one of this client's keyed presences, shown to others as a peer of its own (`key` in
   * `presence.others()`; null clears it): how the tabs of a shared client each show their own
   * (docs/tabs.md). Protocol 8.
   */
  setPresenceOf(key: string, value: PresenceOf<M> | null): void;
}

export interface ConnectedClientRoomParts<M extends Machine<any, any>> {
  name: string;
  inner: LeanClientRoom<M>;
  driver: ClientDriver<M>;
  transport: ClientTransport;
  storage: ClientStorage;
}

export class ConnectedClientRoom<M extends Machine<any, any>> implements ConnectedRoom<M> {
  readonly room: string;
  readonly machine: M;
  readonly clientId: string;
  readonly ops: OpStubs<M>;
  readonly #inner: LeanClientRoom<M>;
  readonly #driver: ClientDriver<M>;
  readonly #transport: ClientTransport;
  readonly #storage: ClientStorage;
  readonly #statusListeners = new Set<(s: ConnectionStatus, detail?: string) => void>();
  /** The fatal error that stopped this room, if any. */
  #fatalError: HerculesError | undefined;
  #closing: Promise<void> | undefined;
  #closed = false;

  constructor(parts: ConnectedClientRoomParts<M>) {
    this.room = parts.name;
    this.#inner = parts.inner;
    this.#driver = parts.driver;
    this.#transport = parts.transport;
    this.#storage = parts.storage;
    this.machine = this.#inner.machine;
    this.clientId = this.#inner.clientId;
    // The stubs call the inner room directly: no extra hop on the op path.
    this.ops = this.#inner.ops;
  }

  // ---------------------------------------------------------------- the room (delegated)

  getState(view: ViewName = 'submitted'): StateOf<M> {
    return this.#inner.getState(view);
  }
  subscribe(view: ViewName, listener: Listener<StateOf<M>>, opts?: { immediate?: boolean }): () => void {
    return this.#inner.subscribe(view, listener, opts);
  }
  until(view: ViewName, predicate: (state: StateOf<M>) => boolean, opts?: { timeoutMs?: number }): Promise<StateOf<M>> {
    return this.#inner.until(view, predicate, opts);
  }
  onMembers(listener: (members: readonly string[]) => void): () => void {
    return this.#inner.onMembers(listener);
  }
  onReceipts(listener: () => void): () => void {
    return this.#inner.onReceipts(listener);
  }
  seenBy(op: OpHandle): readonly string[] {
    return this.#inner.seenBy(op);
  }
  memberPositions(): readonly MemberPosition[] {
    return this.#inner.memberPositions();
  }
  get presence() {
    return this.#inner.presence;
  }
  setPresenceOf(key: string, value: PresenceOf<M> | null): void {
    this.#inner.setPresenceOf(key, value);
  }
  members(): readonly string[] {
    return this.#inner.members();
  }
  access(): 'read' | 'write' {
    return this.#inner.access();
  }
  pending(): OpHandle[] {
    return this.#inner.pending();
  }
  submit(name: string, args?: unknown): OpHandle {
    return this.#inner.submit(name, args);
  }
  text(path: TextPath): TextHandle<OpHandle> {
    return this.#inner.text(path);
  }
  textClockFloor(): number {
    return this.#inner.textClockFloor();
  }
  receiveStats(): ReceiveStats {
    return { ...this.#inner.receiveStats(), decodeMs: this.#transport.decodeMs?.() ?? 0 };
  }
  positions(): ViewPositions {
    return this.#inner.positions();
  }
  onRejected(listener: (op: OpHandle) => void): () => void {
    return this.#inner.onRejected(listener);
  }
  onProgress(listener: (positions: ViewPositions) => void): () => void {
    return this.#inner.onProgress(listener);
  }
  flushNotifications(): void {
    this.#inner.flushNotifications();
  }
  undo(): OpHandle | undefined {
    return this.#inner.undo();
  }
  redo(): OpHandle | undefined {
    return this.#inner.redo();
  }
  canUndo(): boolean {
    return this.#inner.canUndo();
  }
  canRedo(): boolean {
    return this.#inner.canRedo();
  }
  onUndoChange(listener: (status: UndoStatus) => void): () => void {
    return this.#inner.onUndoChange(listener);
  }
  undoGroup<T>(fn: () => T): T {
    return this.#inner.undoGroup(fn);
  }
  stopCapturing(): void {
    this.#inner.stopCapturing();
  }

  // ---------------------------------------------------------------- the connection

  status(): ConnectionStatus {
    return this.#transport.status();
  }

  onStatus(fn: (s: ConnectionStatus, detail?: string) => void): () => void {
    this.#statusListeners.add(fn);
    return () => {
      this.#statusListeners.delete(fn);
    };
  }

  /** The transport's status changes, told to every listener (a listener's bug is not ours to crash on). */
  statusChanged(s: ConnectionStatus, detail?: string): void {
    for (const fn of [...this.#statusListeners]) {
      try {
        fn(s, detail);
      } catch {
        /* ignore */
      }
    }
  }

  /** The room stopped for good on a fatal refusal. */
  failed(error: HerculesError): void {
    this.#fatalError = error;
    this.#transport.stop('failed', `${error.code}: ${error.message}`);
  }

  whenOnline(opts?: { timeoutMs?: number }): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.#transport.status() === 'online') return resolve();
      if (this.#fatalError) return reject(this.#fatalError);
      if (this.#closed || this.#closing) return reject(new HerculesError('closed', 'whenOnline: the room is closed'));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const off = () => {
        this.#statusListeners.delete(watch);
        if (timer) clearTimeout(timer);
      };
      const watch = (s: ConnectionStatus) => {
        if (s === 'online') {
          off();
          resolve();
        } else if (s === 'failed') {
          off();
          reject(this.#fatalError ?? new HerculesError('internal', 'the connection failed'));
        } else if (s === 'closed') {
          off();
          reject(new HerculesError('closed', 'the room was closed before it came online'));
        }
      };
      this.#statusListeners.add(watch);
      if (opts?.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          off();
          const last = this.#transport.lastFailure();
          reject(new HerculesError('timeout', `not online after ${opts.timeoutMs} ms${last ? `: ${last.message}` : ''}`));
        }, opts.timeoutMs);
      }
    });
  }

  flushed(): Promise<void> {
    return this.#driver.flushed();
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    await this.#driver.close();
    this.#closed = true;
    this.#inner.close();
    this.#transport.stop('closed');
    this.#driver.closed();
    await this.#storage.close();
  }
}
