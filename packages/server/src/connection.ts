/**
 * The transport seam: what the room service needs of one client connection, whatever carries
 * it. `wsConnection` (ws-connection.ts) is the WebSocket one; `delayedConnection` below wraps any
 * connection to emulate a wide-area round trip (`--simulate-rtt`). A new transport (WebTransport,
 * a test harness) implements `Connection` and hands it to `RoomService.handleConnection`.
 */
import type { Clock } from './clock.ts';

/** What a connection tells its owner. Set once, with `Connection.listen`. */
export interface ConnectionEvents {
  /** A complete frame from the peer. `isBinary` false: a text frame (Hercules speaks binary only). */
  message(data: Uint8Array, isBinary: boolean): void;
  /** The connection is gone (closed by either side, or broken). Called once. */
  close(): void;
  /** The peer answered a `ping` (proof of life while no frames flow). */
  pong?(): void;
}

export interface Connection {
  /** The peer's address, for logs ('?' if unknown). */
  readonly remote: string;
  /** Frames can still be sent. */
  readonly isOpen: boolean;
  /** Bytes handed to `send` and not yet written to the network. */
  readonly bufferedAmount: number;
  listen(events: ConnectionEvents): void;
  /** Send one binary frame. Dropped if the connection is no longer open. */
  send(frame: Uint8Array): void;
  /** Close with a code (WebSocket close codes: 1000-4999) and a short reason. A peer that does not answer is cut off after a grace period. */
  close(code: number, reason: string): void;
  /** Drop at once, without a closing handshake (a dead or hopelessly slow peer). */
  terminate(): void;
  /** Stop reading from the peer (backpressure: the transport's own flow control holds what it sends). */
  pause(): void;
  resume(): void;
  /** Ask the peer for a `pong` (transports without pings leave this out). */
  ping?(): void;
}

/**
 * Delay every frame, in each direction, by `delayMs` (half the round trip to emulate), and the
 * close with it, so a close never overtakes the frames sent before it. Order is kept both ways.
 */
export function delayedConnection(inner: Connection, delayMs: number, clock: Clock): Connection {
  if (!(delayMs > 0)) return inner;
  /** Bytes given to `send` and not yet to the inner connection: they count as buffered. */
  let delayed = 0;
  return {
    get remote() {
      return inner.remote;
    },
    get isOpen() {
      return inner.isOpen;
    },
    get bufferedAmount() {
      return inner.bufferedAmount + delayed;
    },
    listen(events) {
      inner.listen({
        message: (data, isBinary) => void clock.after(delayMs, () => events.message(data, isBinary)),
        close: () => void clock.after(delayMs, () => events.close()),
        pong: () => events.pong?.(),
      });
    },
    send(frame) {
      delayed += frame.length;
      clock.after(delayMs, () => {
        delayed -= frame.length;
        inner.send(frame);
      });
    },
    // One more millisecond: the close leaves after the frames sent in the same instant.
    close: (code, reason) => void clock.after(delayMs + 1, () => inner.close(code, reason)),
    terminate: () => inner.terminate(),
    pause: () => inner.pause(),
    resume: () => inner.resume(),
    ...(inner.ping ? { ping: () => inner.ping!() } : {}),
  };
}
