/**
 * connect(): a ClientRoom on a real WebSocket with durable local storage. Adds what the pure
 * room lacks: sockets, reconnect with backoff and jitter, a heartbeat watchdog, batching
 * timers, and ordered, retried persistence.
 */
import { ClientCodec, ClientRoom, HerculesError, type Batching, type ClientMessage, type Machine, type OpRecord } from '@hercules/core';
import { memoryStorage, type ClientStorage } from './storage.ts';

export type ConnectionStatus = 'connecting' | 'online' | 'offline' | 'closed' | 'failed';

export interface ConnectOptions<M extends Machine<any, any>> {
  /** Server URL, e.g. ws://127.0.0.1:8787 */
  url: string;
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
  /** Reconnect backoff: first delay and cap, ms. Defaults 100 and 5000. */
  backoff?: { minMs?: number; maxMs?: number };
  /** Reconnect if no frame arrives for this long (server pings every 5 s). Default 15000 ms. */
  watchdogMs?: number;
  /**
   * Give up on one connection attempt that has not been welcomed by the server within this
   * long, and try again (with backoff). Default 10000 ms.
   */
  connectTimeoutMs?: number;
  /**
   * Save a snapshot of the Stable view at most this often (default 2000 ms; 0: as soon as Stable
   * changes). It is what a restarted client starts from offline, and only with it do our ops
   * inside it leave the store, so the store holds at most about this long of confirmed ops.
   */
  baseEveryMs?: number;
  /** A WebSocket class; default: the global one, else the `ws` package (Node 20). */
  WebSocket?: unknown;
  onStatus?: (status: ConnectionStatus, detail?: string) => void;
  /**
   * Errors and warnings: the server unreachable (code 'unreachable'), a fatal refusal, a store
   * that failed to write. Without it, the first one is printed once with console.warn.
   */
  onError?: (error: Error) => void;
  /** Notify listeners in a microtask (default) or synchronously. */
  notify?: 'microtask' | 'sync';
}

type WS = {
  binaryType: string;
  readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
};

export interface ConnectedRoom<M extends Machine<any, any>> extends ClientRoom<M> {
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
}

const ROOM_NAME = /^[A-Za-z0-9._~-]{1,128}$/;

async function resolveWebSocket(given: unknown): Promise<new (url: string) => WS> {
  if (given) return given as new (url: string) => WS;
  const g = (globalThis as { WebSocket?: unknown }).WebSocket;
  if (g) return g as new (url: string) => WS;
  const mod = 'ws';
  const ws = (await import(/* @vite-ignore */ mod)) as { default: unknown };
  return ws.default as new (
    url: string,
  ) => WS;
}

function newClientId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

export async function connect<M extends Machine<any, any>>(opts: ConnectOptions<M>): Promise<ConnectedRoom<M>> {
  if (!opts || typeof opts.url !== 'string' || !/^wss?:\/\//.test(opts.url))
    throw new HerculesError('bad-argument', `connect: url must be ws:// or wss://, got ${JSON.stringify(opts?.url)}`);
  if (typeof opts.room !== 'string' || !ROOM_NAME.test(opts.room))
    throw new HerculesError('bad-argument', `connect: room must be 1-128 of A-Z a-z 0-9 . _ ~ -, got ${JSON.stringify(opts.room)}`);
  if (!opts.machine || !(opts.machine.opNames instanceof Set)) throw new HerculesError('bad-argument', 'connect: machine must come from defineMachine');
  const storage = opts.storage ?? memoryStorage();
  const WebSocketImpl = await resolveWebSocket(opts.WebSocket);
  const key = `${opts.machine.name}@${opts.machine.version}/${opts.room}`;
  let stored = await storage.load(key);
  const clientId = stored?.clientId ?? opts.clientId ?? newClientId();
  if (!stored) {
    await storage.init(key, clientId);
    stored = { clientId, lastSeq: 0, durable: [] };
  }
  const minMs = opts.backoff?.minMs ?? 100;
  const maxMs = opts.backoff?.maxMs ?? 5000;
  const watchdogMs = opts.watchdogMs ?? 15_000;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  const baseEveryMs = opts.baseEveryMs ?? 2000;

  let ws: WS | undefined;
  let codec = new ClientCodec();
  let status: ConnectionStatus = 'connecting';
  const statusListeners = new Set<(s: ConnectionStatus, d?: string) => void>();
  if (opts.onStatus) statusListeners.add(opts.onStatus);
  let attempt = 0;
  let closed = false;
  let failed = false;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  let watchdog: ReturnType<typeof setTimeout> | undefined;
  let batchTimer: ReturnType<typeof setTimeout> | undefined;
  let baseTimer: ReturnType<typeof setTimeout> | undefined;
  let connectTimer: ReturnType<typeof setTimeout> | undefined;
  /** Why the last attempt failed (for whenOnline and the status), and whether it was reported. */
  let lastFailure: HerculesError | undefined;
  let failureReported = false;
  let fatalError: Error | undefined;
  let warned = false;

  const setStatus = (s: ConnectionStatus, detail?: string) => {
    if (status === s) return;
    status = s;
    for (const fn of [...statusListeners]) {
      try {
        fn(s, detail);
      } catch {
        /* a listener's bug is not ours to crash on */
      }
    }
  };
  const reportError = (e: Error) => {
    if (opts.onError) {
      try {
        opts.onError(e);
      } catch {
        /* the app's handler failing is not ours to crash on */
      }
    } else if (!warned) {
      warned = true;
      console.warn(`hercules (room ${opts.room}): ${e.message} [pass onError to connect() to handle these; further ones are not printed]`);
    }
  };
  /** A failed attempt: named once per run of failures with the same reason, not at every retry. */
  const attemptFailed = (e: HerculesError) => {
    const same = lastFailure?.message === e.message;
    lastFailure = e;
    if (!same || !failureReported) {
      failureReported = true;
      reportError(e);
    }
  };

  // ---------------------------------------------------------------- persistence, in order
  let toPersist: OpRecord[] = [];
  let persistScheduled = false;
  let chain: Promise<void> = Promise.resolve();
  const persistNow = () => {
    persistScheduled = false;
    const ops = toPersist;
    toPersist = [];
    if (ops.length === 0) return;
    chain = chain.then(async () => {
      for (let i = 0; ; i++) {
        try {
          await storage.append(key, ops);
          break;
        } catch (e) {
          // Keep the ops Submitted and retry; later ops wait behind them so order holds.
          reportError(e instanceof Error ? e : new Error(String(e)));
          if (closed) return;
          await new Promise((r) => setTimeout(r, Math.min(5000, 50 * 2 ** i)));
        }
      }
      if (!closed) room.durable(ops[ops.length - 1].seq);
    });
  };

  const room = new ClientRoom(opts.machine, {
    clientId,
    batching: opts.batching,
    notify: opts.notify,
    restore: {
      lastSeq: stored.lastSeq,
      durable: stored.durable,
      ...(stored.lastDigest !== undefined ? { lastDigest: stored.lastDigest } : {}),
      ...(stored.base ? { base: stored.base } : {}),
    },
  }) as ClientRoom<M> & Partial<ConnectedRoom<M>>;

  const sendFrame = (msg: ClientMessage) => {
    if (!ws || ws.readyState !== 1) return;
    try {
      ws.send(codec.encode(msg));
    } catch (e) {
      reportError(new Error(`send failed: ${(e as Error).message}`));
    }
  };

  const scheduleBatch = () => {
    const d = room.nextDeadline();
    if (batchTimer) clearTimeout(batchTimer);
    batchTimer = undefined;
    if (d !== Infinity)
      batchTimer = setTimeout(
        () => {
          room.tick();
          scheduleBatch();
        },
        Math.max(0, d - performance.now()),
      );
  };

  let lastBasePos = stored.base?.pos ?? 0;
  const scheduleBase = () => {
    if (baseTimer || closed) return;
    baseTimer = setTimeout(() => {
      baseTimer = undefined;
      const base = room.engine.baseToSave();
      if (base.pos > lastBasePos) {
        lastBasePos = base.pos;
        storage.saveBase(key, base).catch((e) => {
          lastBasePos = 0;
          reportError(e);
        });
      }
    }, baseEveryMs);
  };

  room.attach({
    send: sendFrame,
    persist: (ops) => {
      toPersist.push(...ops);
      if (!persistScheduled) {
        persistScheduled = true;
        queueMicrotask(persistNow);
      }
    },
    warn: (m) => reportError(new Error(m)),
    resync: () => {
      ws?.close(4102, 'out of step with the server; reconnecting');
    },
    fatal: (code, message) => {
      if (code === 'unauthenticated' && typeof opts.token === 'function') {
        // The token may have expired; the next attempt asks for a fresh one.
        reportError(new HerculesError('unauthenticated', `${message} (retrying with a fresh token)`));
        return false;
      }
      if (code === 'replaced') {
        // Another connection took our client id. It may be this client's own newer socket (then
        // this one is already abandoned and never hears it), or another client under our id: a
        // clone from a backup, say. The welcome's digest check decides which history is ours, so
        // the rightful client must not stop here: retry, after the longest backoff, so two
        // clients under one id that never conflict take turns slowly rather than fight.
        reportError(new HerculesError('replaced', `${message}; another client uses this client id (retrying in up to ${maxMs} ms)`));
        attempt = 16;
        return false;
      }
      failed = true;
      fatalError = new HerculesError(code, message);
      setStatus('failed', `${code}: ${message}`);
      reportError(fatalError);
      ws?.close(1000, 'fatal');
    },
  });
  room.subscribe('stable', scheduleBase);

  const armWatchdog = () => {
    if (watchdog) clearTimeout(watchdog);
    watchdog = setTimeout(() => {
      ws?.close(4100, 'no frame from the server; reconnecting');
    }, watchdogMs);
  };

  const open = async () => {
    reconnectTimer = undefined;
    if (closed || failed) return;
    setStatus('connecting');
    const u = new URL(opts.url);
    u.searchParams.set('room', opts.room);
    let token: string | undefined;
    try {
      token = typeof opts.token === 'function' ? await opts.token() : opts.token;
    } catch (e) {
      reportError(new Error(`the token function failed: ${(e as Error).message}; retrying`));
      return retry();
    }
    if (closed || failed) return;
    if (token) u.searchParams.set('token', token);
    let sock: WS;
    try {
      sock = new WebSocketImpl(u.toString());
    } catch (e) {
      reportError(new Error(`cannot open ${opts.url}: ${(e as Error).message}`));
      return retry();
    }
    ws = sock;
    sock.binaryType = 'arraybuffer';
    codec = new ClientCodec();
    let welcomed = false;
    let socketError: string | undefined;
    if (connectTimer) clearTimeout(connectTimer);
    connectTimer = setTimeout(() => {
      if (ws !== sock || welcomed) return;
      socketError = `no welcome from ${opts.url} within ${connectTimeoutMs} ms`;
      sock.close(4103, 'connect timeout');
      // A socket stuck before open may never fire close: let go of it and retry now.
      if (ws === sock) sock.onclose?.({ code: 4103, reason: 'connect timeout' });
    }, connectTimeoutMs);
    sock.onopen = () => {
      if (ws !== sock) return;
      armWatchdog();
      room.connected();
      scheduleBatch();
    };
    sock.onmessage = (ev) => {
      if (ws !== sock) return;
      armWatchdog();
      const data = ev.data instanceof ArrayBuffer ? new Uint8Array(ev.data) : (ev.data as Uint8Array);
      let msg;
      try {
        msg = codec.decode(data);
      } catch (e) {
        reportError(new Error(`bad frame from the server: ${(e as Error).message}; reconnecting`));
        sock.close(4101, 'bad frame');
        return;
      }
      if (msg.t === 'ping') return;
      room.receive(msg);
      if (msg.t === 'welcome' && !failed && ws === sock) {
        attempt = 0;
        welcomed = true;
        lastFailure = undefined;
        failureReported = false;
        if (connectTimer) clearTimeout(connectTimer);
        setStatus('online');
      }
      scheduleBatch();
    };
    sock.onerror = (ev) => {
      // onclose follows; keep the reason (Node's ws gives one; browsers give none).
      const err = ev as { error?: { code?: string; message?: string }; message?: string } | undefined;
      socketError = describeFailure(opts.url, err?.error?.code, err?.error?.message ?? err?.message);
    };
    sock.onclose = (ev) => {
      if (ws !== sock) return;
      ws = undefined;
      if (watchdog) clearTimeout(watchdog);
      if (connectTimer) clearTimeout(connectTimer);
      room.disconnected();
      if (closed) return setStatus('closed');
      if (failed) return;
      // Not welcomed and no reason from the server (which names its refusals, e.g. room full):
      // the server could not be reached.
      const unreachable = !welcomed && (socketError !== undefined || !ev.reason);
      if (unreachable)
        attemptFailed(
          new HerculesError(
            'unreachable',
            socketError ?? `cannot connect to ${opts.url}: the connection closed before the server welcomed this client (code ${ev.code}); retrying`,
          ),
        );
      setStatus('offline', unreachable ? lastFailure?.message : ev.reason || `closed (${ev.code})`);
      retry();
    };
  };

  const retry = () => {
    if (closed || failed || reconnectTimer) return;
    // Full jitter: spreads reconnects of many clients after a server restart.
    const cap = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 16));
    attempt++;
    reconnectTimer = setTimeout(() => void open(), Math.random() * cap);
  };

  Object.assign(room, {
    room: opts.room,
    status: () => status,
    onStatus: (fn: (s: ConnectionStatus, d?: string) => void) => {
      statusListeners.add(fn);
      return () => statusListeners.delete(fn);
    },
    whenOnline: (o?: { timeoutMs?: number }) =>
      new Promise<void>((resolve, reject) => {
        if (status === 'online') return resolve();
        if (fatalError) return reject(fatalError);
        if (closed) return reject(new HerculesError('closed', 'whenOnline: the room is closed'));
        let timer: ReturnType<typeof setTimeout> | undefined;
        const off = () => {
          statusListeners.delete(watch);
          if (timer) clearTimeout(timer);
        };
        const watch = (s: ConnectionStatus) => {
          if (s === 'online') {
            off();
            resolve();
          } else if (s === 'failed') {
            off();
            reject(fatalError ?? new HerculesError('internal', 'the connection failed'));
          } else if (s === 'closed') {
            off();
            reject(new HerculesError('closed', 'the room was closed before it came online'));
          }
        };
        statusListeners.add(watch);
        if (o?.timeoutMs !== undefined) {
          timer = setTimeout(() => {
            off();
            reject(new HerculesError('timeout', `not online after ${o.timeoutMs} ms${lastFailure ? `: ${lastFailure.message}` : ''}`));
          }, o.timeoutMs);
        }
      }),
    flushed: async () => {
      if (toPersist.length) persistNow();
      await chain;
    },
    close: async () => {
      if (closed) return;
      if (toPersist.length) persistNow();
      await chain;
      closed = true;
      for (const t of [reconnectTimer, watchdog, batchTimer, baseTimer, connectTimer]) if (t) clearTimeout(t);
      ClientRoom.prototype.close.call(room);
      const sock = ws;
      ws = undefined;
      room.disconnected();
      sock?.close(1000, 'client closed');
      setStatus('closed');
      await storage.close();
    },
  });
  void open();
  return room as ConnectedRoom<M>;
}

/** Name a failed connection attempt the way a person can act on it. */
function describeFailure(url: string, code: string | undefined, message: string | undefined): string {
  let host = url;
  try {
    const u = new URL(url);
    host = u.host;
  } catch {
    /* keep the url */
  }
  switch (code) {
    case 'ECONNREFUSED':
      return `connection refused by ${host}: is the Hercules server running there? Retrying`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `cannot resolve the host in ${url} (DNS lookup failed): check the URL. Retrying`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `cannot reach ${host} (${code}): check the network and the URL. Retrying`;
    case 'ECONNRESET':
      return `${host} reset the connection (a server restarting, a proxy, or not a Hercules server). Retrying`;
    default:
      return message
        ? `cannot connect to ${url}: ${message}. Retrying`
        : `cannot connect to ${url} (the browser gives no reason: the server may be down, or the URL wrong). Retrying`;
  }
}
