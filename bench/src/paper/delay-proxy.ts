/**
 * Wide-area emulation for the benchmarks: @hercules/test-utils' fault proxy with a delay (each
 * direction of every connection RTT/2, optional jitter and a bandwidth cap: see fault-proxy.ts),
 * in a process of its own. It sits between a client and any server (ours or a peer's), so every
 * system sees the same network.
 */
import { fileURLToPath } from 'node:url';
import { type FaultProxyOptions, faultProxy } from '@hercules/test-utils';
import { spawnChild } from '../runtime/common.ts';

export interface DelayProxyOptions extends FaultProxyOptions {
  /** Where to forward (on loopback). */
  target: { port: number };
  /** Round-trip time to emulate, ms; each direction gets half. */
  rttMs: number;
}

export interface DelayProxy {
  readonly port: number;
  readonly url: (scheme?: string) => string;
  /** The proxy's process, when it runs in one of its own (startDelayProxyProcess). */
  readonly pid?: number;
  /** Open connections (client side). */
  connections(): number | Promise<number>;
  /** Cut every connection, as a network failure would. */
  cutAll(): void;
  close(): Promise<void>;
}

export async function startDelayProxy(opts: DelayProxyOptions): Promise<DelayProxy> {
  if (!(opts.rttMs >= 0)) throw new Error(`delay proxy: rttMs must be >= 0, got ${opts.rttMs}`);
  const proxy = await faultProxy(opts.target.port, opts);
  return {
    port: proxy.port,
    url: (scheme) => proxy.url(scheme),
    connections: () => proxy.links(),
    cutAll: () => void proxy.cutSome(() => true),
    close: () => proxy.close(),
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
    pid: child.proc.pid,
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
