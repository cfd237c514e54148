/**
 * The bound on a connection before it is a WebSocket (or an HTTP request): from accept until its
 * first request's headers are in (the 'upgrade' or 'request' event) at most `upgradeTimeoutMs`,
 * and at most `maxPendingConnections` such connections at once. Both servers (createServer and a
 * cluster node) put their HTTP server under it.
 *
 * Node's HTTP server does not bound this by itself: its headersTimeout starts at a request's
 * first byte and is enforced by a sweep every 30 s, so a socket that sends nothing was never
 * closed (Node 20, measured: still open after 70 s; the issue 40 harness: 500 of 500 after
 * 330 s), and one that sent half its headers waited for the sweep. The room service counts a
 * connection only once it is a WebSocket, so none of these was counted anywhere: a slowloris
 * held file descriptors for ever. After the first request, Node's own timers take over: a later
 * request on a kept-alive connection has `upgradeTimeoutMs` for its headers (headersTimeout,
 * swept every upgradeTimeoutMs at most), an idle kept-alive connection is closed after 5 s
 * (keepAliveTimeout), and a request's body after 300 s (requestTimeout).
 */
import type { IncomingMessage, Server as HttpServer, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Metrics } from './metrics.ts';

export interface UpgradeBound {
  /** Time from accept to the first request's headers, ms. */
  upgradeTimeoutMs: number;
  /** Connections accepted whose first request's headers are not in yet; past this the oldest is closed. */
  maxPendingConnections: number;
}

/** Why a connection was closed before its first request (a reason of hercules_connections_refused_total). */
export type PendingCloseReason = 'upgrade-timeout' | 'server-full';

export interface PendingEvents {
  /** A connection was closed for `reason`, from `remote`; `message` says why, for the log. */
  closed(reason: PendingCloseReason, remote: string, message: string): void;
  /** The number of pending connections changed (for a gauge). */
  pending?(n: number): void;
}

/** A Node default kept for a request's whole time (an admin import's body may take a while). */
const REQUEST_TIMEOUT_MS = 300_000;
/** Node's sweep of expired requests runs at most this far apart (its default). */
const SWEEP_MS = 30_000;

/** What Node answers a client error with when the server has no 'clientError' listener (node:_http_server's socketOnError). */
const CLIENT_ERROR_STATUS: Record<string, string> = {
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: '413 Payload Too Large',
};

/** Answer a client error as Node does by default: a status if no response is under way, then close. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { _headerSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?._headerSent)
    socket.write(`HTTP/1.1 ${CLIENT_ERROR_STATUS[err.code ?? ''] ?? '400 Bad Request'}\r\nConnection: close\r\n\r\n`);
  socket.destroy();
}

/** Options for node:http's createServer that give later requests on a connection the same time for their headers. */
export function boundedHttpOptions(bound: UpgradeBound): ServerOptions {
  return {
    headersTimeout: bound.upgradeTimeoutMs,
    requestTimeout: Math.max(REQUEST_TIMEOUT_MS, bound.upgradeTimeoutMs),
    connectionsCheckingInterval: Math.min(SWEEP_MS, bound.upgradeTimeoutMs),
  };
}

/**
 * Watch every connection `http` accepts until its first request's headers are in; close the
 * ones that take longer than the bound, and the oldest pending one when there are more than
 * `maxPendingConnections` (an honest client sends its headers at once, so the oldest is the
 * likeliest to be holding a slot). Returns `close()`, which closes every pending connection
 * (for shutdown: Node's server.close waits for them), and the current count.
 */
export function boundConnections(http: HttpServer, bound: UpgradeBound, events: PendingEvents): { close(): void; pending(): number } {
  const pending = new Map<Duplex, NodeJS.Timeout>();
  const changed = () => events.pending?.(pending.size);
  const release = (socket: Duplex) => {
    const timer = pending.get(socket);
    if (timer === undefined) return false;
    clearTimeout(timer);
    pending.delete(socket);
    changed();
    return true;
  };
  const cut = (socket: Socket, reason: PendingCloseReason, status: string, message: string) => {
    if (!release(socket)) return;
    // A peer that sent something is told, as Node tells a request that timed out; one that sent nothing is not.
    if (socket.bytesRead > 0 && socket.writable) socket.write(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    socket.destroy();
    events.closed(reason, socket.remoteAddress ?? '?', message);
  };
  http.on('connection', (socket: Socket) => {
    const timer = setTimeout(
      () => cut(socket, 'upgrade-timeout', '408 Request Timeout', `no complete request within ${bound.upgradeTimeoutMs} ms of connecting`),
      bound.upgradeTimeoutMs,
    );
    timer.unref();
    pending.set(socket, timer);
    socket.once('close', () => release(socket));
    if (pending.size > bound.maxPendingConnections) {
      const oldest = pending.keys().next().value as Socket;
      cut(
        oldest,
        'server-full',
        '503 Service Unavailable',
        `more than ${bound.maxPendingConnections} connections without a complete request; closing the oldest`,
      );
    }
    changed();
  });
  http.on('upgrade', (_req: IncomingMessage, socket: Duplex) => release(socket));
  http.on('request', (req: IncomingMessage) => release(req.socket));
  // Node's own sweep (headersTimeout) reaches a pending connection before its timer when the
  // event loop was held up past both (measured in the soak: a server loading large rooms after
  // a restart): the same close, counted the same. Other client errors are answered as Node
  // answers them without a listener.
  http.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && pending.has(socket))
      return cut(socket as Socket, 'upgrade-timeout', '408 Request Timeout', `no complete request within ${bound.upgradeTimeoutMs} ms of connecting`);
    answerClientError(err, socket);
  });
  return {
    close() {
      for (const socket of [...pending.keys()]) {
        release(socket);
        socket.destroy();
      }
    },
    pending: () => pending.size,
  };
}

/** Count each close in hercules_connections_refused_total and log it with its reason, as every refused connection is; keep the pending gauge. */
export function countPendingCloses(metrics: Metrics, log: () => Logger | undefined): PendingEvents {
  return {
    closed(reason, remote, message) {
      metrics.refusedConnections.inc({ reason });
      log()?.info({ remote, reason }, `connection closed: ${message}`);
    },
    pending: (n) => metrics.pendingConnections.set(n),
  };
}
