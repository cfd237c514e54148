/**
 * A TCP proxy on loopback for network faults: between a client and a server it forwards every
 * byte both ways until told otherwise. `cut` is a partition that both ends hear about (every link
 * closed, new ones refused); `silence` is one that neither end hears about (a proxy or NAT that
 * stops forwarding without a FIN or a reset: each side's bytes are taken and dropped, so its
 * kernel sees them acknowledged and only the other side's silence tells).
 */
import { type Server, Socket, createServer } from 'node:net';

export interface FaultProxy {
  readonly port: number;
  /** Links open now (each a client's connection and its upstream one). */
  links(): number;
  /** Close every link and refuse new ones until `heal`: a partition both ends notice at once. */
  cut(): void;
  /**
   * Close each link open now for which `choose()` says so (a partial partition: those clients
   * reconnect at once, through the proxy); returns how many were closed. New links are taken.
   */
  cutSome(choose: () => boolean): number;
  /** Take new links again after a `cut`. */
  heal(): void;
  /**
   * Stop forwarding on every link open now, both ways, closing neither side; links opened later
   * are forwarded. `targetClosed` resolves once the target (the server) has closed every one of
   * them, which its side learns from nothing but the silence.
   */
  silence(): { links: number; targetClosed: Promise<void> };
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket;
  silent: boolean;
  upstreamClosed: Promise<void>;
}

/** A proxy to 127.0.0.1:`targetPort`. */
export async function faultProxy(targetPort: number): Promise<FaultProxy> {
  const links = new Set<Link>();
  let refusing = false;
  const server: Server = createServer((client) => {
    if (refusing) return client.destroy();
    const upstream = new Socket();
    let upstreamGone: () => void = () => {};
    const link: Link = { client, upstream, silent: false, upstreamClosed: new Promise((r) => (upstreamGone = r)) };
    links.add(link);
    upstream.connect(targetPort, '127.0.0.1');
    const end = () => {
      if (link.silent) return; // a silenced link tells neither side
      client.destroy();
      upstream.destroy();
      links.delete(link);
    };
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      from.on('data', (chunk: Buffer) => {
        // Backpressure as pipe() has it: a slow reader slows its writer rather than filling the proxy's memory.
        if (!link.silent && !to.destroyed && !to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
      });
      from.on('error', end);
      from.on('close', end);
    }
    upstream.on('close', () => upstreamGone());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const destroyAll = () => {
    for (const l of links) {
      l.client.destroy();
      l.upstream.destroy();
    }
    links.clear();
  };
  return {
    port: (server.address() as { port: number }).port,
    links: () => links.size,
    cut() {
      refusing = true;
      for (const l of links) l.silent = false;
      destroyAll();
    },
    cutSome(choose) {
      let n = 0;
      for (const l of [...links]) {
        if (l.silent || !choose()) continue;
        l.client.destroy();
        l.upstream.destroy();
        links.delete(l);
        n++;
      }
      return n;
    },
    heal() {
      refusing = false;
    },
    silence() {
      const now = [...links];
      for (const l of now) {
        l.silent = true;
        // A side paused for backpressure reads again: a silenced link takes every byte and drops it.
        l.client.resume();
        l.upstream.resume();
      }
      return { links: now.length, targetClosed: Promise.all(now.map((l) => l.upstreamClosed)).then(() => {}) };
    },
    close() {
      destroyAll();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
