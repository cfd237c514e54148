/**
 * The TCP proxy on loopback for network faults (the tests', the soak's and the paper benchmarks'
 * wide-area emulation): between a client and a server it forwards every byte both ways until
 * told otherwise. `cut` is a partition that both ends hear about (every link closed, new ones
 * refused); `silence` is one that neither end hears about (a proxy or NAT that stops forwarding
 * without a FIN or a reset: each side's bytes are taken and dropped, so its kernel sees them
 * acknowledged and only the other side's silence tells).
 *
 * With `rttMs` (and optionally jitter and a bandwidth cap) each direction of every link is
 * delayed by RTT/2. Order is preserved per direction: a chunk is released at max(arrival +
 * delay, previous release), so jitter delays but never reorders (TCP would not reorder either);
 * with a bandwidth cap a chunk also waits until the previous one has "left the wire".
 */
import { type Server, Socket, createServer } from 'node:net';
import { Rng } from './rng.ts';

export interface FaultProxyOptions {
  /** Round-trip time to emulate, ms; each direction gets half. Default 0: forwarded at once, with backpressure. */
  rttMs?: number;
  /** Uniform extra delay in [0, jitterMs] per chunk, ms (drawn from the seeded Rng). Default 0. */
  jitterMs?: number;
  /** The jitter's seed. Default 1. */
  seed?: number;
  /** Bytes per second per direction per link; 0 or absent: unlimited. */
  bandwidthBytesPerSec?: number;
  /**
   * When a client's side closes, keep the server's side open and silent, as when a device loses
   * power or its network: the server sees no FIN, only missing acks and pongs.
   */
  silentOnClientClose?: boolean;
}

export interface FaultProxy {
  readonly port: number;
  /** `ws://127.0.0.1:port` (or another scheme). */
  url(scheme?: string): string;
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

/** One direction of a delayed link: `send(chunk, write)` calls `write` when the chunk is due; `drainedAt` is when the last one is. */
interface Delay {
  send(chunk: Buffer, write: () => void): void;
  drainedAt(): number;
}

/** Each chunk RTT/2 (plus jitter, plus its time on a capped wire) after it came, in order. */
function delays(o: FaultProxyOptions): () => Delay {
  const half = (o.rttMs ?? 0) / 2;
  const jitter = o.jitterMs ?? 0;
  const bw = o.bandwidthBytesPerSec ?? 0;
  const rand = new Rng(o.seed ?? 1).source();
  return () => {
    /** Chunks waiting, in the order they came (due times never go down): one timer, for the first. */
    const queue: { at: number; write: () => void }[] = [];
    let lastRelease = 0;
    let wireFreeAt = 0;
    /** A timer is set for the first chunk waiting. */
    let armed = false;
    const release = () => {
      armed = false;
      // Everything due now goes out, in order; Node's timers of different lengths might not keep it.
      while (queue.length > 0 && queue[0]!.at <= performance.now() + 1) queue.shift()!.write();
      if (queue.length > 0) {
        armed = true;
        setTimeout(release, queue[0]!.at - performance.now());
      }
    };
    return {
      drainedAt: () => lastRelease,
      send(chunk, write) {
        const now = performance.now();
        let at = Math.max(now + half + (jitter ? rand() * jitter : 0), lastRelease);
        if (bw > 0) {
          wireFreeAt = Math.max(at, wireFreeAt) + (chunk.length / bw) * 1000;
          at = wireFreeAt;
        }
        lastRelease = at;
        // Due now with nothing waiting before it (RTT 0): forwarded at once; a timer would hold it
        // Node's least, a millisecond.
        if (at <= now && queue.length === 0) return write();
        queue.push({ at, write });
        if (!armed) {
          armed = true;
          setTimeout(release, at - now);
        }
      },
    };
  };
}

/** A proxy to 127.0.0.1:`targetPort`, at once or delayed as `opts` say. */
export async function faultProxy(targetPort: number, opts: FaultProxyOptions = {}): Promise<FaultProxy> {
  const links = new Set<Link>();
  let refusing = false;
  const delay = opts.rttMs || opts.jitterMs || opts.bandwidthBytesPerSec ? delays(opts) : undefined;
  const server: Server = createServer({ noDelay: true }, (client) => {
    if (refusing) return client.destroy();
    const upstream = new Socket();
    let upstreamGone: () => void = () => {};
    const link: Link = { client, upstream, silent: false, upstreamClosed: new Promise((r) => (upstreamGone = r)) };
    links.add(link);
    upstream.setNoDelay(true);
    upstream.connect(targetPort, '127.0.0.1');
    const directions = [
      { from: client, to: upstream, delay: delay?.() },
      { from: upstream, to: client, delay: delay?.() },
    ];
    const destroy = () => {
      if (link.silent) return; // a silenced link tells neither side
      client.destroy();
      upstream.destroy();
      links.delete(link);
    };
    // A delayed link closes once what it holds has gone out.
    const end = () => {
      const wait = Math.max(0, ...directions.map((d) => d.delay?.drainedAt() ?? 0)) - performance.now();
      if (wait > 0) setTimeout(destroy, wait + 1);
      else destroy();
    };
    for (const { from, to, delay } of directions) {
      from.on('data', (chunk: Buffer) => {
        if (link.silent || to.destroyed) return;
        if (delay) return delay.send(chunk, () => void (link.silent || to.destroyed || to.write(chunk)));
        // Backpressure as pipe() has it: a slow reader slows its writer rather than filling the proxy's memory.
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
      });
      // A device gone dark: its server's side stays open and hears nothing more.
      const gone = from === client && opts.silentOnClientClose ? () => void (link.silent = true) : end;
      from.on('error', gone);
      from.on('close', gone);
    }
    upstream.on('close', () => upstreamGone());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const destroyAll = () => {
    for (const l of links) {
      l.client.destroy();
      l.upstream.destroy();
    }
    links.clear();
  };
  return {
    port,
    url: (scheme = 'ws') => `${scheme}://127.0.0.1:${port}`,
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
