/** The WebSocket transport (`ws`): a `Connection` over one accepted socket. */
import type { WebSocket } from 'ws';
import type { Connection, ConnectionEvents } from './connection.ts';

/** How long a closed connection's peer has to answer the close before its socket is dropped. */
const CLOSE_GRACE_MS = 1000;

export function wsConnection(ws: WebSocket, remote: string): Connection {
  let listening = false;
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
      if (listening) throw new Error('wsConnection: listen called twice');
      listening = true;
      ws.on('message', (data: Buffer, isBinary: boolean) => events.message(data, isBinary));
      ws.on('pong', () => events.pong?.());
      ws.on('close', () => events.close());
    },
    send(frame) {
      if (ws.readyState === ws.OPEN) ws.send(frame, { binary: true });
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
