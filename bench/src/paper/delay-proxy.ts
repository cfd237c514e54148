/**
 * Wide-area emulation for the benchmarks: a TCP proxy on loopback that delays each direction
 * of every connection by RTT/2 (plus optional jitter) and can cap bandwidth. It sits between a
 * client and any server (ours or a peer's), so every system sees the same network.
 *
 * Order is preserved per direction: a chunk is released at max(arrival + delay, previous
 * release), so jitter delays but never reorders (TCP would not reorder either). With a
 * bandwidth cap, a chunk also waits until the previous one has "left the wire".
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Rng } from '@hercules/test-utils';
import { spawnChild } from '../runtime/common.ts';

export interface DelayProxyOptions {
  /** Where to forward. */
  target: { host?: string; port: number };
  /** Round-trip time to emulate, ms; each direction gets half. */
  rttMs: number;
  /** Uniform extra delay in [0, jitterMs] per chunk, ms. Default 0. */
  jitterMs?: number;
  /** Bytes per second per direction per connection; 0 or absent: unlimited. */
  bandwidthBytesPerSec?: number;
  /** Deterministic jitter. */
  seed?: number;
  /**
   * When a client's side closes, keep the server's side open and silent, as when a device
   * loses power or its network: the server sees no FIN, only missing acks and pongs. (A process
   * killed on this machine would otherwise close its socket at once, which a server notices
   * immediately.)
   */
  silentOnClientClose?: boolean;
}

export interface DelayProxy {
  readonly port: number;
  readonly url: (scheme?: string) => string;
  /** Open connections (client side). */
  connections(): number | Promise<number>;
  /** Cut every connection, as a network failure would. */
  cutAll(): void;
  close(): Promise<void>;
}

export async function startDelayProxy(opts: DelayProxyOptions): Promise<DelayProxy> {
  if (!(opts.rttMs >= 0)) throw new Error(`delay proxy: rttMs must be >= 0, got ${opts.rttMs}`);
  const half = opts.rttMs / 2;
  const jitter = opts.jitterMs ?? 0;
  const bw = opts.bandwidthBytesPerSec ?? 0;
  const rand = new Rng(opts.seed ?? 1).source();
  const socks = new Set<Socket>();

  /** Forward `from` to `to` with the delay; returns nothing, wires events. */
  const held = new Set<Socket>();
  const pipe = (from: Socket, to: Socket, muted: () => boolean) => {
    /** This direction's chunks waiting in timers. */
    let inTimers = 0;
    let lastRelease = 0;
    let wireFreeAt = 0;
    from.on('data', (chunk: Buffer) => {
      const now = performance.now();
      let at = Math.max(now + half + (jitter ? rand() * jitter : 0), lastRelease);
      if (bw > 0) {
        const start = Math.max(at, wireFreeAt);
        wireFreeAt = start + (chunk.length / bw) * 1000;
        at = wireFreeAt;
      }
      lastRelease = at;
      const wait = at - now;
      // Due now with nothing waiting before it (RTT 0): forwarded at once. A timer would hold it
      // Node's least, a millisecond: 1.1 ms a direction measured, a 1-byte round trip through
      // the proxy at "RTT 0" 2.40 ms against 0.23 forwarded at once (0.13 without the proxy).
      if (wait <= 0 && inTimers === 0) {
        if (!to.destroyed && !muted()) to.write(chunk);
        return;
      }
      // Timers fire in order of their due time when due times are non-decreasing. (A timer may
      // fire up to a millisecond early or late: libuv keeps time in whole milliseconds.)
      inTimers++;
      setTimeout(() => {
        inTimers--;
        if (!to.destroyed && !muted()) to.write(chunk);
      }, wait);
    });
    from.on('end', () =>
      setTimeout(
        () => {
          if (!muted()) to.end();
        },
        Math.max(0, lastRelease - performance.now()) + 1,
      ),
    );
  };

  const server: Server = createServer({ noDelay: true }, (client) => {
    const upstream = connect({ host: opts.target.host ?? '127.0.0.1', port: opts.target.port, noDelay: true });
    socks.add(client);
    const kill = () => {
      socks.delete(client);
      client.destroy();
      upstream.destroy();
    };
    let silenced = false;
    const clientGone = () => {
      if (!opts.silentOnClientClose) return kill();
      // Keep the server's side open; swallow what it sends until the proxy closes.
      socks.delete(client);
      silenced = true;
      upstream.removeAllListeners('data');
      upstream.on('data', () => {});
      held.add(upstream);
    };
    client.on('error', clientGone);
    upstream.on('error', kill);
    client.on('close', clientGone);
    upstream.on('close', () => {
      held.delete(upstream);
      if (!silenced) kill();
    });
    pipe(client, upstream, () => silenced);
    pipe(upstream, client, () => silenced);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: (scheme = 'ws') => `${scheme}://127.0.0.1:${port}`,
    connections: () => socks.size,
    cutAll: () => {
      for (const c of [...socks]) c.destroy();
    },
    close: async () => {
      for (const c of [...socks, ...held]) c.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * The same proxy in a process of its own, so the emulated network keeps time whatever the
 * benchmark's client process is doing. `connections()` then answers asynchronously.
 */
export async function startDelayProxyProcess(opts: DelayProxyOptions): Promise<DelayProxy> {
  const child = spawnChild(fileURLToPath(new URL('./delay-proxy-process.ts', import.meta.url)), opts);
  const { port } = (await child.ready) as { port: number };
  return {
    port,
    url: (scheme = 'ws') => `${scheme}://127.0.0.1:${port}`,
    connections: async () => (await child.call<{ n: number }>({ cmd: 'connections' })).n,
    cutAll: () => {
      void child.call({ cmd: 'cutAll' });
    },
    close: async () => {
      if (child.proc.exitCode !== null) return;
      await child.call({ cmd: 'close' }, 10_000).catch(() => child.proc.kill('SIGKILL'));
      await child.exited;
    },
  };
}
