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
  /** Defaults 100 and 5000 ms. */
  backoff?: { minMs?: number; maxMs?: number };
  /** Default 15000 ms. */
  watchdogMs?: number;
  /** Default 10000 ms. */
  connectTimeoutMs?: number;
}

/** WebSocket close codes of our own (4000-4999 are the application's). */
const CLOSE = { watchdog: 4100, badFrame: 4101, restart: 4102, connectTimeout: 4103 } as const;

export class WebSocketTransport implements ClientTransport {
  readonly #opts: WebSocketTransportOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #minMs: number;
  readonly #maxMs: number;
  readonly #watchdogMs: number;
  readonly #connectTimeoutMs: number;
  #events: TransportEvents | undefined;
  #ws: WebSocketLike | undefined;
  #codec = new ClientCodec();
  #decodeMs = 0;
  #state: ConnectionStatus = 'connecting';
  #attempt = 0;
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
    const ws = this.#ws;
    if (!ws || ws.readyState !== 1) return;
    try {
      ws.send(this.#codec.encode(msg));
    } catch (e) {
      this.#events?.error(new Error(`send failed: ${errorMessage(e)}`));
    }
  }

  restart(reason: string, opts?: { patient?: boolean }): void {
    if (opts?.patient) this.#attempt = 16;
    // A close reason is at most 123 bytes of UTF-8, or close() throws: keep it short and ASCII.
    this.#ws?.close(CLOSE.restart, reason.replace(/[^\x20-\x7e]/g, '?').slice(0, 120));
  }

  stop(how: 'closed' | 'failed', detail?: string): void {
    if (this.#stopped) return;
    this.#stopped = how;
    this.#cancelReconnect?.();
    this.#cancelConnectTimeout?.();
    this.#cancelReconnect = this.#cancelConnectTimeout = undefined;
    if (how === 'failed') {
      this.#setStatus('failed', detail);
      this.#ws?.close(1000, 'fatal');
      return;
    }
    const ws = this.#ws;
    this.#ws = undefined;
    this.#cancelWatchdog?.();
    this.#cancelWatchdog = undefined;
    if (ws) this.#events?.lost();
    ws?.close(1000, 'client closed');
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
    const ws = this.#ws;
    this.#cancelWatchdog = this.#clock.after(ms, () => {
      this.#cancelWatchdog = undefined;
      if (this.#ws !== ws || !ws) return;
      const quiet = this.#clock.now() - this.#lastFrameAt;
      if (quiet >= this.#watchdogMs) ws.close(CLOSE.watchdog, 'no frame from the server; reconnecting');
      else this.#watch(this.#watchdogMs - quiet);
    });
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
      this.#events?.error(new Error(`the token function failed: ${errorMessage(e)}; retrying`));
      return this.#retry();
    }
    if (this.#stopped) return;
    if (t) u.searchParams.set('token', t);
    let sock: WebSocketLike;
    try {
      sock = new this.#opts.WebSocket(u.toString());
    } catch (e) {
      this.#events?.error(new Error(`cannot open ${url}: ${errorMessage(e)}`));
      return this.#retry();
    }
    this.#ws = sock;
    sock.binaryType = 'arraybuffer';
    this.#codec = new ClientCodec();
    let welcomed = false;
    let socketError: string | undefined;
    this.#cancelConnectTimeout?.();
    this.#cancelConnectTimeout = this.#clock.after(this.#connectTimeoutMs, () => {
      this.#cancelConnectTimeout = undefined;
      if (this.#ws !== sock || welcomed) return;
      socketError = `no welcome from ${url} within ${this.#connectTimeoutMs} ms`;
      sock.close(CLOSE.connectTimeout, 'connect timeout');
      // A socket stuck before open may never fire close: let go of it and retry now.
      if (this.#ws === sock) sock.onclose?.({ code: CLOSE.connectTimeout, reason: 'connect timeout' });
    });
    sock.onopen = () => {
      if (this.#ws !== sock) return;
      this.#armWatchdog();
      this.#events?.opened();
    };
    sock.onmessage = (ev) => {
      if (this.#ws !== sock) return;
      this.#armWatchdog();
      const data = ev.data instanceof ArrayBuffer ? new Uint8Array(ev.data) : (ev.data as Uint8Array);
      let msg: ServerMessage;
      const t0 = performance.now();
      try {
        msg = this.#codec.decode(data);
        this.#decodeMs += performance.now() - t0;
      } catch (e) {
        this.#events?.error(new Error(`bad frame from the server: ${errorMessage(e)}; reconnecting`));
        sock.close(CLOSE.badFrame, 'bad frame');
        return;
      }
      if (msg.t === 'ping') return;
      this.#events?.message(msg);
      // The room may have stopped on this very frame (a fatal verdict in the welcome).
      if (msg.t === 'welcome' && !this.#stopped && this.#ws === sock) {
        this.#attempt = 0;
        welcomed = true;
        this.#failure = undefined;
        this.#failureReported = false;
        this.#cancelConnectTimeout?.();
        this.#cancelConnectTimeout = undefined;
        this.#setStatus('online');
      }
    };
    sock.onerror = (ev) => {
      // onclose follows; keep the reason (Node's ws gives one; browsers give none).
      const err = ev as { error?: { code?: string; message?: string }; message?: string } | undefined;
      socketError = describeFailure(url, err?.error?.code, err?.error?.message ?? err?.message);
    };
    sock.onclose = (ev) => {
      if (this.#ws !== sock) return;
      this.#ws = undefined;
      this.#cancelWatchdog?.();
      this.#cancelConnectTimeout?.();
      this.#cancelWatchdog = this.#cancelConnectTimeout = undefined;
      this.#events?.lost();
      if (this.#stopped) return;
      // With several servers, the next attempt goes to the next one (this one died, or moved the room).
      this.#urlIndex++;
      // Not welcomed and no reason from the server (which names its refusals, e.g. room full):
      // the server could not be reached.
      const unreachable = !welcomed && (socketError !== undefined || !ev.reason);
      if (unreachable)
        this.#attemptFailed(
          new HerculesError(
            'unreachable',
            socketError ?? `cannot connect to ${url}: the connection closed before the server welcomed this client (code ${ev.code}); retrying`,
          ),
        );
      this.#setStatus('offline', unreachable ? this.#failure?.message : ev.reason || `closed (${ev.code})`);
      this.#retry();
    };
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
