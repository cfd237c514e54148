/** The WebSocket transport (`ws`): a `Connection` over one accepted socket. */
import { HerculesError } from '@hercules/core';
import type { Connection, ConnectionEvents } from './connection.ts';

/**
 * What is used of a `ws` WebSocket (declared here, so the package's types do not need
 * `@types/ws`): an accepted `WebSocket` from `ws` fits.
 */
export interface WsSocket {
  readonly readyState: number;
  readonly OPEN: number;
  readonly CLOSED: number;
  readonly bufferedAmount: number;
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): unknown;
  on(event: 'pong' | 'close', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  send(data: Uint8Array, options: { binary: boolean }): void;
  close(code: number, reason: string): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  ping(): void;
}

/** How long a closed connection's peer has to answer the close before its socket is dropped. */
const CLOSE_GRACE_MS = 1000;

/** The stream under a WebSocket (`req.socket` of its upgrade): what corking needs of it. */
export interface CorkableSocket {
  cork(): void;
  uncork(): void;
}

/**
 * A connection over `ws`. With `socket` (the upgrade's `req.socket`, the stream `ws` writes to),
 * the frames sent to it in one event-loop turn go out in one write: the socket is corked at the
 * turn's first send and uncorked in a microtask after it, before any I/O, so no frame waits for
 * anything but the end of the code that sent it. A member of a busy room gets its log, committed,
 * visible and stable frames of a turn separately, each one `writev` (ws uncorks its own header
 * and payload pair at once): socket writes were 13.8 % of the server's busy time under the
 * throughput load and 35 % at 100 busy rooms (issue 43).
 */
export function wsConnection(ws: WsSocket, remote: string, socket?: CorkableSocket): Connection {
  let listening = false,
    corked = false;
  const uncork = () => {
    corked = false;
    socket!.uncork();
  };
  ws.on('error', () => {}); // reported as a close; a vanished peer is not our error
  return {
    remote,
    get isOpen() {
      return ws.readyState === ws.OPEN;
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    listen(events: ConnectionEvents) {
      if (listening) throw new HerculesError('bad-argument', 'wsConnection: listen called twice; give each connection one listener');
      listening = true;
      ws.on('message', (data: Buffer, isBinary: boolean) => events.message(data, isBinary));
      ws.on('pong', () => events.pong?.());
      ws.on('close', () => events.close());
    },
    send(frame) {
      if (ws.readyState !== ws.OPEN) return;
      if (socket && !corked) {
        corked = true;
        socket.cork();
        queueMicrotask(uncork);
      }
      ws.send(frame, { binary: true });
    },
    close(code, reason) {
      ws.close(code, reason.slice(0, 120));
      // A peer that never answers the close (a raw socket, a stalled one) would hold its socket
      // for ws's 30 s close timeout: it gets a second.
      setTimeout(() => {
        if (ws.readyState !== ws.CLOSED) ws.terminate();
      }, CLOSE_GRACE_MS).unref();
    },
    terminate: () => ws.terminate(),
    pause: () => ws.pause(),
    resume: () => ws.resume(),
    ping() {
      if (ws.readyState === ws.OPEN) ws.ping();
    },
  };
}
