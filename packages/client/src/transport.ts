/**
 * The client's link to the server: a connection that comes back. `ClientTransport` is what the
 * room needs from one; `WebSocketTransport` is the one `connect()` uses: a WebSocket per attempt,
 * a connect timeout, a heartbeat watchdog, and reconnects with exponential backoff and full
 * jitter. It knows frames and connections only; what to send and when an op is durable is the
 * driver's business (@hercules/core's ClientDriver).
 */
import { ClientCodec, HerculesError, errorMessage, type ClientMessage, type Clock, type ServerMessage } from '@hercules/core';

export type ConnectionStatus = 'connecting' | 'online' | 'offline' | 'closed' | 'failed';

/** What a transport tells its user, in order. */
export interface TransportEvents {
  /** A connection is open: say hello on it. */
  opened(): void;
  /** A frame from the server, decoded (pings are the transport's own). */
  message(msg: ServerMessage): void;
  /** The open connection is gone (a reconnect follows unless stopped). */
  lost(): void;
  status(status: ConnectionStatus, detail?: string): void;
  /** A failed attempt, named once per run of the same failure; a bad frame. */
  error(error: Error): void;
}

export interface ClientTransport {
  /** Connect, and connect again whenever the connection is lost, until `stop`. */
  start(events: TransportEvents): void;
  /** Send on the open connection; dropped when there is none (the driver resends after a welcome). */
  send(msg: ClientMessage): void;
  /**
   * Drop the connection and connect again after a backoff; `patient`: after the longest one
   * (two clients under one id then take turns slowly rather than fight).
   */
  restart(reason: string, opts?: { patient?: boolean }): void;
  /**
   * No more connections. 'closed' (the app closed the room) lets go of the connection at once
   * and reports `lost` before returning; 'failed' (a fatal refusal) closes it and reports `lost`
   * when it has closed.
   */
  stop(how: 'closed' | 'failed', detail?: string): void;
  status(): ConnectionStatus;
  /** Why the last attempt failed, while no connection has been welcomed since. */
  lastFailure(): HerculesError | undefined;
  /** Time spent decoding the server's frames, ms, summed (ReceiveStats.decodeMs); absent: not measured. */
  decodeMs?(): number;
}

/** The part of the WebSocket API this uses (the DOM's, and the `ws` package's). */
export type WebSocketLike = {
  binaryType: string;
  readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  /** Drop the connection at once, without a closing handshake (the `ws` package's; browsers have none). */
  terminate?(): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
};

export interface WebSocketTransportOptions {
  /** The server, or several (a cluster's nodes): each reconnect after a lost or failed connection tries the next. */
  url: string | readonly string[];
  room: string;
  WebSocket: new (url: string) => WebSocketLike;
  token?: string | (() => string | Promise<string>);
  clock: Clock;
  /** In [0, 1), for the jitter. Default Math.random. */
  random?: () => number;
  /** Defaults 100 and 5000 ms; starts again from minMs after a connection welcomed that held for maxMs. */
  backoff?: { minMs?: number; maxMs?: number };
  /**
   * Give the connection up once no frame has arrived for this long (pongs do not count).
   * Default: twice the heartbeat the server announces in its pings, at least 2000 ms (a server
   * that pings every 5 s, the default: 10 s; a cluster node, every 1 s: 2 s); 15000 ms until a
   * ping says it, or from a server that does not.
   */
  watchdogMs?: number;
  /** Default 10000 ms; a socket not open is given up sooner once the watchdog is short (#openTimeoutMs). */
  connectTimeoutMs?: number;
}

/**
 * The close code by which a live server asks a welcomed client to reconnect to it: 1012 (a
 * cluster node whose relay to the room's owner was cut, or whose room moved: it relays to the
 * new owner). Not 1011 (the room failed here: a node cut off from NATS fails its rooms so, and
 * can serve none until it is back), 1013, 1001 (the server stops), nor closes of the client's own.
 */
const COME_BACK: ReadonlySet<number> = new Set([1012]);

/**
 * The least watchdog derived from a server's heartbeat: below it a client would give up a live
 * link at any pause of the server's event loop longer than a second.
 */
const WATCHDOG_FLOOR_MS = 2000;

/**
 * The least wait for a socket to open (the server's answer to the WebSocket upgrade) once the
 * watchdog is derived short (a cluster's heartbeat): `openTimeoutMs` below.
 */
const OPEN_FLOOR_MS = 3000;

/** WebSocket close codes of our own (4000-4999 are the application's). */
const CLOSE = { watchdog: 4100, badFrame: 4101, restart: 4102, connectTimeout: 4103 } as const;

/** One connection attempt: its socket and what is known about it. */
interface Attempt {
  readonly sock: WebSocketLike;
  readonly url: string;
  welcomed: boolean;
  /** When the welcome came (the clock's ms). */
  welcomedAt: number;
  /** Why the socket failed, when it said (Node's ws does; browsers do not). */
  socketError: string | undefined;
  /** The socket opened (the server answered the upgrade). */
  opened?: boolean;
}

export class WebSocketTransport implements ClientTransport {
  readonly #opts: WebSocketTransportOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #minMs: number;
  readonly #maxMs: number;
  /** The watchdog: the app's choice, else derived from the server's announced heartbeat (#heard). */
  #watchdogMs: number;
  readonly #connectTimeoutMs: number;
  #events: TransportEvents | undefined;
  /** The connection in use; a socket let go of is no longer it, even while it closes. */
  #live: Attempt | undefined;
  #codec = new ClientCodec();
  #decodeMs = 0;
  #state: ConnectionStatus = 'connecting';
  #attempt = 0;
  /** restart({ patient }) asked for the longest backoff after this connection, however long it held. */
  #patient = false;
  #stopped: 'closed' | 'failed' | undefined;
  #cancelReconnect: (() => void) | undefined;
  #cancelWatchdog: (() => void) | undefined;
  #cancelConnectTimeout: (() => void) | undefined;
  #failure: HerculesError | undefined;
  #failureReported = false;
  #lastFrameAt = 0;

  constructor(opts: WebSocketTransportOptions) {
    this.#opts = opts;
    this.#clock = opts.clock;
    this.#random = opts.random ?? Math.random;
    this.#minMs = opts.backoff?.minMs ?? 100;
    this.#maxMs = opts.backoff?.maxMs ?? 5000;
    this.#watchdogMs = opts.watchdogMs ?? 15_000;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  }

  start(events: TransportEvents): void {
    if (this.#events) throw new HerculesError('bad-argument', 'WebSocketTransport.start: already started');
    this.#events = events;
    void this.#open();
  }

  send(msg: ClientMessage): void {
    const ws = this.#live?.sock;
    if (!ws || ws.readyState !== 1) return;
    try {
      ws.send(this.#codec.encode(msg));
    } catch (e) {
      this.#events?.error(new HerculesError('unreachable', `send failed: ${errorMessage(e)}; the op is resent after the reconnect`));
    }
  }

  restart(reason: string, opts?: { patient?: boolean }): void {
    if (opts?.patient) {
      this.#attempt = 16;
      this.#patient = true;
    }
    // A close reason is at most 123 bytes of UTF-8, or close() throws: keep it short and ASCII.
    this.#live?.sock.close(CLOSE.restart, reason.replace(/[^\x20-\x7e]/g, '?').slice(0, 120));
  }

  stop(how: 'closed' | 'failed', detail?: string): void {
    if (this.#stopped) return;
    this.#stopped = how;
    this.#cancelReconnect?.();
    this.#cancelConnectTimeout?.();
    this.#cancelReconnect = this.#cancelConnectTimeout = undefined;
    if (how === 'failed') {
      this.#setStatus('failed', detail);
      this.#live?.sock.close(1000, 'fatal');
      return;
    }
    const live = this.#live;
    this.#live = undefined;
    this.#cancelWatchdog?.();
    this.#cancelWatchdog = undefined;
    if (live) this.#events?.lost();
    live?.sock.close(1000, 'client closed');
    this.#setStatus('closed');
  }

  status(): ConnectionStatus {
    return this.#state;
  }

  decodeMs(): number {
    return this.#decodeMs;
  }

  lastFailure(): HerculesError | undefined {
    return this.#failure;
  }

  // ---------------------------------------------------------------- internals

  #setStatus(s: ConnectionStatus, detail?: string): void {
    if (this.#state === s) return;
    this.#state = s;
    this.#events?.status(s, detail);
  }

  /** A failed attempt: named once per run of failures with the same reason, not at every retry. */
  #attemptFailed(e: HerculesError): void {
    const same = this.#failure?.message === e.message;
    this.#failure = e;
    if (!same || !this.#failureReported) {
      this.#failureReported = true;
      this.#events?.error(e);
    }
  }

  /**
   * A frame arrived: the link is alive. One timer per watchdog period rather than one per frame:
   * when it fires early it waits out the rest of the period since the last frame.
   */
  #armWatchdog(): void {
    this.#lastFrameAt = this.#clock.now();
    if (!this.#cancelWatchdog) this.#watch(this.#watchdogMs);
  }

  #watch(ms: number): void {
    const live = this.#live;
    this.#cancelWatchdog = this.#clock.after(ms, () => {
      this.#cancelWatchdog = undefined;
      if (this.#live !== live || !live) return;
      const quiet = this.#clock.now() - this.#lastFrameAt;
      if (quiet >= this.#watchdogMs) this.#letGo(live, CLOSE.watchdog, `no frame from the server for ${Math.round(quiet)} ms; reconnecting`);
      else this.#watch(this.#watchdogMs - quiet);
    });
  }

  /**
   * Give a connection up now, without waiting for it to close. A link that went quiet (a proxy
   * that stopped forwarding, a frozen server) can never complete a closing handshake: the `ws`
   * package waits 30 s for one (a client was measured offline 32 s after its link went silent,
   * with a 2 s watchdog), a browser as long as its TCP stack takes. So the socket stops being
   * this transport's at once (offline, `lost`, a reconnect on its way) and is closed in the
   * background: terminated where the WebSocket can be (`ws`), else closed and no longer heard.
   */
  #letGo(a: Attempt, code: number, reason: string): void {
    if (this.#live !== a) return;
    this.#lost(a, { code, reason });
    const sock = a.sock;
    sock.onopen = sock.onmessage = sock.onclose = null;
    // Not null: `ws` emits 'error' for a socket closed while connecting, and an EventEmitter's
    // 'error' with no listener throws.
    sock.onerror = () => {};
    try {
      if (typeof sock.terminate === 'function') sock.terminate();
      else sock.close(code, reason.slice(0, 120));
    } catch {
      /* it is no longer ours; the reconnect does not depend on it */
    }
  }

  /** Which of several URLs the next connection attempt uses. */
  #urlIndex = 0;

  async #open(): Promise<void> {
    this.#cancelReconnect = undefined;
    if (this.#stopped) return;
    this.#setStatus('connecting');
    const { room, token } = this.#opts;
    const urls = typeof this.#opts.url === 'string' ? [this.#opts.url] : this.#opts.url;
    const url = urls[this.#urlIndex % urls.length];
    const u = new URL(url);
    u.searchParams.set('room', room);
    let t: string | undefined;
    try {
      t = typeof token === 'function' ? await token() : token;
    } catch (e) {
      this.#events?.error(
        new HerculesError('unauthenticated', `the token function failed: ${errorMessage(e)}; retrying (check the function that fetches the token)`),
      );
      return this.#retry();
    }
    if (this.#stopped) return;
    if (t) u.searchParams.set('token', t);
    let sock: WebSocketLike;
    try {
      sock = new this.#opts.WebSocket(u.toString());
    } catch (e) {
      this.#events?.error(new HerculesError('unreachable', `cannot open ${url}: ${errorMessage(e)}; check the URL and that the server runs there`));
      return this.#retry();
    }
    const a: Attempt = { sock, url, welcomed: false, welcomedAt: 0, socketError: undefined };
    this.#live = a;
    sock.binaryType = 'arraybuffer';
    this.#codec = new ClientCodec();
    this.#cancelConnectTimeout?.();
    this.#cancelConnectTimeout = this.#clock.after(this.#connectTimeoutMs, () => {
      this.#cancelConnectTimeout = undefined;
      if (this.#live !== a || a.welcomed) return;
      a.socketError = `no welcome from ${url} within ${this.#connectTimeoutMs} ms`;
      // A socket stuck before open may never fire close: let go of it and retry now.
      this.#letGo(a, CLOSE.connectTimeout, 'connect timeout');
    });
    const openMs = this.#openTimeoutMs();
    if (openMs < this.#connectTimeoutMs)
      this.#clock.after(openMs, () => {
        if (this.#live !== a || a.opened) return;
        a.socketError = `no answer from ${url} within ${openMs} ms (a server that accepts connections and does not answer: frozen or overloaded)`;
        this.#letGo(a, CLOSE.connectTimeout, 'open timeout');
      });
    this.#listen(a);
  }

  /**
   * How long a socket may take to open: the connect timeout, or less once the watchdog follows a
   * short heartbeat (the larger of it and OPEN_FLOOR_MS). A live server answers the upgrade at
   * once, before it locates and loads the room (which the connect timeout bounds); a frozen one
   * (SIGSTOP, a stalled VM) accepts the TCP connection in its kernel and never answers. A client
   * that rotated onto a frozen cluster node waited the whole 10 s connect timeout there
   * (11.6-12.3 s to its next op Authoritative, freeze.bench.ts).
   */
  #openTimeoutMs(): number {
    return Math.min(this.#connectTimeoutMs, Math.max(OPEN_FLOOR_MS, this.#watchdogMs));
  }

  #listen(a: Attempt): void {
    const sock = a.sock;
    sock.onopen = () => {
      if (this.#live !== a) return;
      a.opened = true;
      // No watchdog until a frame comes: before its welcome the server sends none (no pings
      // either) while it locates and loads the room, which the connect timeout bounds. A 2 s
      // watchdog armed here cut cluster clients waiting for a new owner's claim, again and again
      // (reconnects every 2-2.3 s for 10-20 s at a load average of 45, freeze.bench.ts).
      this.#events?.opened();
    };
    sock.onmessage = (ev) => this.#received(a, ev.data);
    sock.onerror = (ev) => {
      // onclose follows; keep the reason (Node's ws gives one; browsers give none).
      const err = ev as { error?: { code?: string; message?: string }; message?: string } | undefined;
      a.socketError = describeFailure(a.url, err?.error?.code, err?.error?.message ?? err?.message);
    };
    sock.onclose = (ev) => this.#lost(a, ev);
  }

  #received(a: Attempt, data: unknown): void {
    if (this.#live !== a) return;
    this.#armWatchdog();
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array);
    let msg: ServerMessage;
    const t0 = performance.now();
    try {
      msg = this.#codec.decode(bytes);
      this.#decodeMs += performance.now() - t0;
    } catch (e) {
      this.#events?.error(
        new HerculesError('malformed-frame', `bad frame from the server: ${errorMessage(e)}; reconnecting (use @hercules/client of the server's version)`),
      );
      a.sock.close(CLOSE.badFrame, 'bad frame');
      return;
    }
    if (msg.t === 'ping') return this.#heard(msg.every);
    this.#events?.message(msg);
    // The room may have stopped on this very frame (a fatal verdict in the welcome).
    if (msg.t === 'welcome' && !this.#stopped && this.#live === a) {
      a.welcomed = true;
      a.welcomedAt = this.#clock.now();
      this.#failure = undefined;
      this.#failureReported = false;
      this.#cancelConnectTimeout?.();
      this.#cancelConnectTimeout = undefined;
      this.#setStatus('online');
    }
  }

  /**
   * A ping saying the server's heartbeat: unless the app chose its watchdog, give a link up after
   * two heartbeats without a frame (not less than WATCHDOG_FLOOR_MS). A frozen cluster node's
   * clients then leave it within 2 s of its last frame rather than 15 s (freeze.bench.ts).
   */
  #heard(every: unknown): void {
    if (this.#opts.watchdogMs !== undefined || typeof every !== 'number' || !(every >= 100 && every <= 600_000)) return;
    const ms = Math.max(WATCHDOG_FLOOR_MS, 2 * every);
    if (ms === this.#watchdogMs) return;
    this.#watchdogMs = ms;
    // The timer armed under the old value would fire only at its end (15 s): arm it again.
    this.#cancelWatchdog?.();
    this.#cancelWatchdog = undefined;
    if (this.#live) this.#watch(Math.max(0, ms - (this.#clock.now() - this.#lastFrameAt)));
  }

  /** The connection in use closed, or was let go of: offline, and a reconnect unless stopped. */
  #lost(a: Attempt, ev: { code: number; reason: string }): void {
    if (this.#live !== a) return;
    this.#live = undefined;
    this.#cancelWatchdog?.();
    this.#cancelConnectTimeout?.();
    this.#cancelWatchdog = this.#cancelConnectTimeout = undefined;
    this.#events?.lost();
    if (this.#stopped) return;
    // With several servers, the next attempt goes to the next one (this one died, went silent or
    // is going away), unless the server closed a welcomed connection asking the client back
    // (COME_BACK): it is alive, and a cluster node serves any room. Rotating then could pick a frozen node,
    // which accepts TCP but never answers: 11.6-11.9 s to the next Authoritative op (the 10 s
    // connect timeout) against 1.7-2.8 s, measured with bench/src/cluster/freeze.bench.ts.
    if (!(a.welcomed && COME_BACK.has(ev.code))) this.#urlIndex++;
    // The backoff starts again only after a connection that held for its cap: one welcomed and
    // then closed at once by a refusal that recurs (a resync every welcome, a room that fails on
    // a frame) would otherwise reconnect every 50 ms on average (full jitter over 100) for ever.
    if (a.welcomed && !this.#patient && this.#clock.now() - a.welcomedAt >= this.#maxMs) this.#attempt = 0;
    this.#patient = false;
    // Not welcomed and no reason from the server (which names its refusals, e.g. room full):
    // the server could not be reached.
    const unreachable = !a.welcomed && (a.socketError !== undefined || !ev.reason);
    if (unreachable)
      this.#attemptFailed(
        new HerculesError(
          'unreachable',
          a.socketError ?? `cannot connect to ${a.url}: the connection closed before the server welcomed this client (code ${ev.code}); retrying`,
        ),
      );
    this.#setStatus('offline', unreachable ? this.#failure?.message : ev.reason || `closed (${ev.code})`);
    this.#retry();
  }

  #retry(): void {
    if (this.#stopped || this.#cancelReconnect) return;
    // Full jitter: spreads the reconnects of many clients after a server restart.
    const cap = Math.min(this.#maxMs, this.#minMs * 2 ** Math.min(this.#attempt, 16));
    this.#attempt++;
    this.#cancelReconnect = this.#clock.after(this.#random() * cap, () => void this.#open());
  }
}

/** Name a failed connection attempt the way a person can act on it. */
export function describeFailure(url: string, code: string | undefined, message: string | undefined): string {
  let host = url;
  try {
    host = new URL(url).host;
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
