/**
 * A TCP relay that counts the bytes each way, put between the benchmark's clients and a server
 * (Hercules' or y-websocket's): the bytes on the wire, WebSocket framing and handshakes included,
 * counted alike for every system.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface WireCount {
  /** Client to server. */
  up: number;
  /** Server to client. */
  down: number;
}

export interface CountingRelay {
  port: number;
  /** One count per connection, in the order they were accepted. */
  readonly conns: WireCount[];
  /** Forget the counts so far (the connections stay; their counts restart at 0). */
  reset(): void;
  close(): Promise<void>;
}

export function countingRelay(targetPort: number): Promise<CountingRelay> {
  const conns: WireCount[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const count: WireCount = { up: 0, down: 0 };
    conns.push(count);
    const upstream = connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.setNoDelay(true);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (b: Buffer) => {
      count.up += b.length;
      upstream.write(b);
    });
    upstream.on('data', (b: Buffer) => {
      count.down += b.length;
      client.write(b);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        conns,
        reset() {
          for (const c of conns) {
            c.up = 0;
            c.down = 0;
          }
        },
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      }),
    ),
  );
}
