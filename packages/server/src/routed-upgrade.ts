/**
 * WebSocket upgrades through a room locator whose rooms may be served elsewhere (a cluster
 * node's): every WebSocket is accepted here, then its room is located; a room served here goes to
 * the room service (`handleConnection`), one served by another node is relayed to it. The client
 * waits in between: the frames it sends meanwhile are held and handed over first, in order. An
 * embedded server, whose rooms are all here, mounts `RoomService.handleUpgrade` instead.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { type WebSocket, WebSocketServer } from 'ws';
import { acceptClock, type ConnectionRequest } from './admission.ts';
import type { Connection } from './connection.ts';
import type { RemoteRooms, RoomLocation, RoomLocator } from './room-locator.ts';
import type { RoomService } from './room-service.ts';
import { wsConnection, type WsSocket } from './ws-connection.ts';

export interface RoutedUpgrade {
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): void;
}

/** The 'upgrade' handler of a front door whose locator has `remote`. */
export function routedUpgrade(service: RoomService, locator: RoomLocator & { remote: RemoteRooms }, log: Logger): RoutedUpgrade {
  const wss = new WebSocketServer({ noServer: true, maxPayload: service.limits.maxFrameBytes });
  return {
    upgrade(req, socket, head) {
      socket.on('error', () => {});
      wss.handleUpgrade(req, socket, head, (ws) => {
        serve(service, locator, log, req, ws).catch((e) => {
          log.error({ err: (e as Error).stack }, 'serving a connection failed');
          ws.close(1011, 'internal error');
        });
      });
    },
    close: () => wss.close(),
  };
}

async function serve(service: RoomService, locator: RoomLocator & { remote: RemoteRooms }, log: Logger, req: IncomingMessage, ws: WebSocket): Promise<void> {
  const remote = req.socket.remoteAddress ?? '?';
  const request: ConnectionRequest = { url: req.url, headers: req.headers, socket: { remoteAddress: remote }, acceptedAt: acceptClock() };
  const early: Uint8Array[] = [];
  let gone = false;
  const hold = (data: Buffer) => early.push(data);
  ws.on('message', hold);
  ws.on('close', () => {
    gone = true;
  });
  ws.on('error', () => {});
  // The frames that arrive until the service listens (its admission is async) are held, then handed over in order.
  const local = () =>
    service.handleConnection(
      withEarlyFrames(wsConnection(ws as unknown as WsSocket, remote, req.socket), early, () => {
        ws.off('message', hold);
        return gone;
      }),
      request,
    );
  const room = roomParam(req.url);
  if (room === undefined) return local(); // the service refuses it, naming what is wrong
  // Until a dead owner's lease has surely expired, keep trying: its rooms come here or to another node.
  const deadline = performance.now() + locator.remote.rerouteMs;
  for (;;) {
    if (gone) return;
    let at: RoomLocation;
    try {
      at = await locator.locate(room);
    } catch (e) {
      log.warn({ room, err: (e as Error).message }, 'no node can serve this room now');
      ws.close(1013, 'room unavailable, retry');
      return;
    }
    if (gone) return;
    if (at.here) return local();
    try {
      const link = await locator.remote.relay(at.node, room, request, {
        send: (frame) => ws.readyState === ws.OPEN && ws.send(frame, { binary: true }),
        close: (code, reason) => ws.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1011, reason),
        get bufferedAmount() {
          return ws.bufferedAmount;
        },
        pause: () => ws.pause(),
        resume: () => ws.resume(),
        ping: () => ws.readyState === ws.OPEN && ws.ping(),
      });
      ws.off('message', hold);
      if (gone) return link.close(1000, 'client left');
      ws.on('message', (data: Buffer) => link.send(data));
      ws.on('close', () => link.close(1000, 'client left'));
      ws.on('pong', () => link.pong?.());
      for (const f of early) link.send(f);
      return;
    } catch (e) {
      log.info({ room, owner: at.node, err: (e as Error).message }, 'relay not accepted; routing again');
      if (performance.now() > deadline) {
        ws.close(1012, 'room moved, reconnect');
        return;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  }
}

/**
 * A connection whose first frames arrived before anyone listened: `stopHolding` ends that (and
 * says whether the socket closed meanwhile), and they are handed over first, in order.
 */
export function withEarlyFrames(conn: Connection, early: Uint8Array[], stopHolding: () => boolean): Connection {
  return {
    get remote() {
      return conn.remote;
    },
    get isOpen() {
      return conn.isOpen;
    },
    get bufferedAmount() {
      return conn.bufferedAmount;
    },
    listen(events) {
      const closedAlready = stopHolding(); // its close event has passed: say so, once
      conn.listen(events);
      for (const f of early.splice(0)) events.message(f, true);
      if (closedAlready) queueMicrotask(() => events.close());
    },
    send: (f) => conn.send(f),
    close: (code, reason) => conn.close(code, reason),
    terminate: () => conn.terminate(),
    pause: () => conn.pause(),
    resume: () => conn.resume(),
    ...(conn.ping ? { ping: () => conn.ping!() } : {}),
  };
}

function roomParam(url: string | undefined): string | undefined {
  try {
    const room = new URL(url ?? '/', 'http://x').searchParams.get('room');
    return room === null || room === '' ? undefined : room;
  } catch {
    return undefined;
  }
}
