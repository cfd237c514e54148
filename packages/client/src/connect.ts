/**
 * connect(): the three client pieces put together. A ClientRoom (the app's API over the view
 * engine), the ClientDriver (persist before send, retries, base saving, batching deadlines; from
 * @hercules/core, the same the simulator runs) on the real clock and the given store, and a
 * reconnecting WebSocketTransport; the room returned wraps them (room.ts).
 */
import {
  ALL_ROOM_FEATURES,
  ClientDriver,
  HerculesError,
  LeanClientRoom,
  machineVersions,
  type Batching,
  type Clock,
  type Machine,
  type OpHandle,
  type RoomFeatures,
  type UndoOptions,
} from '@hercules/core';
import { recoverPending, type RecoveredStore } from './recover.ts';
import { ConnectedClientRoom, type ConnectedRoom } from './room.ts';
import { memoryStorage, type ClientStorage, type StoreDirectory, type StoredClient } from './storage.ts';
import { WebSocketTransport, type ClientTransport, type ConnectionStatus, type WebSocketLike } from './transport.ts';

export type { ConnectedRoom } from './room.ts';
export type { ConnectionStatus } from './transport.ts';

export interface ConnectOptions<M extends Machine<any, any>> {
  /**
   * Server URL, e.g. ws://127.0.0.1:8787; or several (the nodes of a cluster, without a load
   * balancer): after a lost or failed connection the next one is tried.
   */
  url: string | readonly string[];
  /** Room name: 1-128 of A-Z a-z 0-9 . _ ~ - */
  room: string;
  machine: M;
  /** Where durable ops live. Default: memory (survives reconnects, not restarts). */
  storage?: ClientStorage;
  /**
   * Credentials for servers that authenticate (sent as ?token=, since browsers cannot set
   * headers on a WebSocket). A function is called before every connection attempt, so it can
   * return a fresh token; with a function, a refusal as 'unauthenticated' is retried with
   * backoff instead of being final.
   */
  token?: string | (() => string | Promise<string>);
  /** Fixed client id; default: generated once and kept in storage. */
  clientId?: string;
  batching?: Batching;
  /**
   * Reconnect backoff: first delay and cap, ms. Defaults 100 and 5000. Each delay is random up
   * to the current one, which doubles per attempt; it starts again from the first only after a
   * connection that held for the cap, so a refusal that recurs right after each welcome backs off too.
   */
  backoff?: { minMs?: number; maxMs?: number };
  /**
   * Give the connection up if no frame arrives for this long: the status says `offline` and a
   * reconnect starts at once, without waiting for a dead socket to close. So `online` means a
   * frame arrived within this long. Default: twice the heartbeat interval the server's pings
   * announce, at least 2000 ms (10 s against an embedded server, 2 s against a cluster node);
   * 15000 ms until the first ping, or from a server that does not announce it.
   */
  watchdogMs?: number;
  /**
   * Give up on one connection attempt that has not been welcomed by the server within this
   * long, and try again (with backoff). Default 10000 ms. Once the watchdog follows a short
   * heartbeat (a cluster's), an attempt whose socket has not even opened (a frozen server
   * accepts the TCP connection and never answers the upgrade) is given up sooner: after the
   * larger of the watchdog and 3 s.
   */
  connectTimeoutMs?: number;
  /**
   * Save a snapshot of the Stable view at most this often (default 2000 ms; 0: as soon as Stable
   * changes). It is what a restarted client starts from offline, and only with it do our ops
   * inside it leave the store, so the store holds at most about this long of confirmed ops.
   */
  baseEveryMs?: number;
  /** Presence (room.presence.set) goes out at most this often, the latest value winning (default 16 ms). */
  presenceEveryMs?: number;
  /**
   * Send each op while the store persists it, under a stored seq reservation, instead of after
   * (DUR-BEFORE-SEND; needs a store with `reserve`). On by default; false sends each op only
   * once it is saved, one fsync later (the paper's order).
   */
  sendAhead?: boolean;
  /** A WebSocket class; default: the global one, else the `ws` package (Node 20). */
  WebSocket?: unknown;
  onStatus?: (status: ConnectionStatus, detail?: string) => void;
  /**
   * Errors and warnings: the server unreachable (code 'unreachable'), a fatal refusal, a store
   * that failed to write ('storage-failed': once per run of failures, until a write succeeds).
   * Without it, the first one is printed once with console.warn.
   */
  onError?: (error: Error) => void;
  /** Notify listeners in a microtask (default) or synchronously. */
  notify?: 'microtask' | 'sync';
  /** Undo tracking (docs/undo.md): on by default ({ captureMs: 500 }); false turns it off. */
  undo?: UndoOptions | false;
  /**
   * Another transport than the WebSocket one (tests, an in-process link); `WebSocket`, `token`,
   * `backoff`, `watchdogMs` and `connectTimeoutMs` are then the given transport's business.
   */
  /**
   * Each op of this client the server rejected, including ops saved in an earlier session that
   * no handle of this one stands for (room.onRejected; OP-REJECTED-TOLD). Registered before the
   * first connection, so none is missed.
   */
  onRejected?: (op: OpHandle) => void;
  transport?: ClientTransport;
  /**
   * Find the other stores of this room that no live client holds (a tab closed while offline
   * left one) and send their ops, each under the client id that wrote them, then delete them
   * (recover.ts, DUR-NOT-STRANDED). Runs in the background, on connections of its own, until
   * done or this room closes. Default: on where the storage offers a `directory()` (IndexedDB
   * with Web Locks) and no `transport` was given; false: off; a StoreDirectory: look there.
   */
  recover?: boolean | StoreDirectory;
  /** Called as each stranded store is drained. */
  onRecovered?: (r: RecoveredStore) => void;
}

/** The host's clock and timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
  defer: (fn) => queueMicrotask(fn),
};

const ROOM_NAME = /^[A-Za-z0-9._~-]{1,128}$/;

async function resolveWebSocket(given: unknown): Promise<new (url: string) => WebSocketLike> {
  if (given) return given as new (url: string) => WebSocketLike;
  const g = (globalThis as { WebSocket?: unknown }).WebSocket;
  if (g) return g as new (url: string) => WebSocketLike;
  const mod = 'ws';
  const ws = (await import(/* @vite-ignore */ mod)) as { default: unknown };
  return ws.default as new (
    url: string,
  ) => WebSocketLike;
}

function newClientId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * The store of a room, by machine name and room: not by version, so it survives an upgrade
 * (docs/migrations.md). A store written before that, keyed `name@version/room`, is found under
 * that key, for each version the machine's migrateFrom chain knows (newest first), and used
 * there; its ops and base without a version are of the key's.
 */
export async function openStore(storage: ClientStorage, machine: Machine<any, any>, room: string): Promise<{ key: string; stored: StoredClient | undefined }> {
  const key = `${machine.name}/${room}`;
  const stored = await storage.load(key);
  if (stored) return { key, stored };
  for (const m of machineVersions(machine)) {
    const legacy = `${machine.name}@${m.version}/${room}`;
    const old = await storage.load(legacy);
    if (!old) continue;
    const v = m.version;
    return {
      key: legacy,
      stored: {
        ...old,
        durable: old.durable.map((o) => (o.v === undefined ? { ...o, v } : o)),
        ...(old.base ? { base: old.base.v === undefined ? { ...old.base, v } : old.base } : {}),
      },
    };
  }
  return { key, stored: undefined };
}

/** connect()'s arguments, refused at once with what is wrong (bad-argument). */
function checkConnectOptions<M extends Machine<any, any>>(opts: ConnectOptions<M>): void {
  const urls = typeof opts?.url === 'string' ? [opts.url] : Array.isArray(opts?.url) ? (opts.url as unknown[]) : [];
  if (!opts || urls.length === 0 || !urls.every((u) => typeof u === 'string' && /^wss?:\/\//.test(u)))
    throw new HerculesError('bad-argument', `connect: url must be ws:// or wss:// (or a non-empty list of them), got ${JSON.stringify(opts?.url)}`);
  if (typeof opts.room !== 'string' || !ROOM_NAME.test(opts.room))
    throw new HerculesError('bad-argument', `connect: room must be 1-128 of A-Z a-z 0-9 . _ ~ -, got ${JSON.stringify(opts.room)}`);
  if (!opts.machine || !(opts.machine.opNames instanceof Set)) throw new HerculesError('bad-argument', 'connect: machine must come from defineMachine');
}

/** Errors and warnings go to onError; without one, the first is printed once. */
function reporter(room: string, onError: ((e: Error) => void) | undefined): (e: Error) => void {
  let warned = false;
  return (e) => {
    if (onError) {
      try {
        onError(e);
      } catch {
        /* the app's handler failing is not ours to crash on */
      }
    } else if (!warned) {
      warned = true;
      console.warn(`hercules (room ${room}): ${e.message} [pass onError to connect() to handle these; further ones are not printed]`);
    }
  };
}

/**
 * What a connected room may have beyond its core (room-features.ts): undo, `room.text`,
 * presence and delivery receipts, and the recovery of stranded stores. `connect` gives them all; `@hercules/client/lean` only the
 * ones the app passes, so its bundle holds no other.
 */
export interface ClientFeatures extends RoomFeatures {
  /** Stranded-store recovery (recover.ts): without it, `recover` must not be set. */
  readonly recoverPending?: typeof recoverPending;
  /** Where recovery looks by default when the storage has no `directory()` (lean's IndexedDB storage). */
  readonly storeDirectory?: (storage: ClientStorage) => StoreDirectory | undefined;
}

/** Connect to a room, with every feature (undo, `room.text`, presence, receipts, stranded-store recovery). */
export function connect<M extends Machine<any, any>>(opts: ConnectOptions<M>): Promise<ConnectedRoom<M>> {
  return connectWith(opts, { ...ALL_ROOM_FEATURES, recoverPending });
}

/** connect() with only `features`. */
export async function connectWith<M extends Machine<any, any>>(opts: ConnectOptions<M>, features: ClientFeatures): Promise<ConnectedRoom<M>> {
  checkConnectOptions(opts);
  const storage = opts.storage ?? memoryStorage();
  const WebSocketImpl = opts.transport ? undefined : await resolveWebSocket(opts.WebSocket);
  const { key, stored: found } = await openStore(storage, opts.machine, opts.room);
  let stored = found;
  const clientId = stored?.clientId ?? opts.clientId ?? newClientId();
  if (!stored) {
    await storage.init(key, clientId);
    stored = { clientId, lastSeq: 0, durable: [] };
  }
  const report = reporter(opts.room, opts.onError);

  const transport =
    opts.transport ??
    new WebSocketTransport({
      url: opts.url,
      room: opts.room,
      WebSocket: WebSocketImpl!,
      token: opts.token,
      clock: systemClock,
      backoff: opts.backoff,
      watchdogMs: opts.watchdogMs,
      connectTimeoutMs: opts.connectTimeoutMs,
    });
  const maxBackoffMs = opts.backoff?.maxMs ?? 5000;

  const inner = new LeanClientRoom(opts.machine, {
    clientId,
    now: systemClock.now,
    batching: opts.batching,
    notify: opts.notify,
    undo: opts.undo,
    features,
    restore: {
      lastSeq: stored.lastSeq,
      durable: stored.durable,
      ...(stored.lastDigest !== undefined ? { lastDigest: stored.lastDigest } : {}),
      ...(stored.reservedSeq !== undefined ? { reservedSeq: stored.reservedSeq } : {}),
      ...(stored.base ? { base: stored.base } : {}),
    },
  });
  // Set once the room exists; the driver needs it only from the first connection on.
  let room: ConnectedClientRoom<M> | undefined;
  const driver = new ClientDriver(inner, {
    clock: systemClock,
    store: {
      append: (ops, done) => storage.append(key, ops).then(() => done(), done),
      saveBase: (base, done) => storage.saveBase(key, base).then(() => done(), done),
      ...(storage.reserve && opts.sendAhead !== false
        ? { reserve: (seq: number, done: (e?: unknown) => void) => storage.reserve!(key, seq).then(() => done(), done) }
        : {}),
    },
    basePos: stored.base?.pos ?? 0,
    baseEveryMs: opts.baseEveryMs,
    presenceEveryMs: opts.presenceEveryMs,
    report,
    // (The reason itself was reported as a warning.)
    resync: () => transport.restart('out of step with the server; reconnecting'),
    fatal: (code, message) => {
      if (code === 'unauthenticated' && typeof opts.token === 'function') {
        // The token may have expired; the next attempt asks for a fresh one.
        report(new HerculesError('unauthenticated', `${message} (retrying with a fresh token)`));
        return false;
      }
      if (code === 'replaced') {
        // Another connection took our client id. It may be this client's own newer socket (then
        // this one is already abandoned and never hears it), or another client under our id: a
        // clone from a backup, say. The welcome's digest check decides which history is ours, so
        // the rightful client must not stop here: retry, after the longest backoff, so two
        // clients under one id that never conflict take turns slowly rather than fight.
        report(new HerculesError('replaced', `${message}; another client uses this client id (retrying in up to ${maxBackoffMs} ms)`));
        transport.restart('replaced', { patient: true });
        return false;
      }
      const error = new HerculesError(code, message);
      room?.failed(error);
      report(error);
    },
  });
  const roomStorage = features.recoverPending ? startRecovery(opts, storage, clientId, report, features) : storage;
  room = new ConnectedClientRoom({ name: opts.room, inner, driver, transport, storage: roomStorage });
  if (opts.onStatus) room.onStatus(opts.onStatus);
  if (opts.onRejected) room.onRejected(opts.onRejected);
  const link = { send: (msg: Parameters<ClientTransport['send']>[0]) => transport.send(msg) };
  const connected = room;
  transport.start({
    opened: () => driver.opened(link),
    message: (msg) => driver.received(msg),
    lost: () => driver.closed(),
    status: (s, detail) => connected.statusChanged(s, detail),
    error: report,
  });
  return room;
}

/**
 * Drain stranded stores in the background (recover.ts) and return the storage the room closes:
 * closing it stops the recovery first (the store being drained keeps what it holds).
 */
function startRecovery<M extends Machine<any, any>>(
  opts: ConnectOptions<M>,
  storage: ClientStorage,
  clientId: string,
  report: (e: Error) => void,
  { recoverPending: recover, storeDirectory }: ClientFeatures,
): ClientStorage {
  const stores =
    typeof opts.recover === 'object'
      ? opts.recover
      : opts.recover === false || opts.transport
        ? undefined
        : (storage.directory?.() ?? storeDirectory?.(storage));
  if (!stores) return storage;
  const stop = new AbortController();
  const { storage: _storage, clientId: _clientId, recover: _recover, transport: _transport, onStatus: _onStatus, ...rest } = opts;
  const running = recover!({ ...rest, stores, signal: stop.signal, exceptClientId: clientId, onError: report }).catch(report);
  return {
    ...storage,
    close: async () => {
      stop.abort();
      await running;
      await storage.close();
    },
  };
}
