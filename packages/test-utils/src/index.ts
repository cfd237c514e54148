/**
 * The helpers every test, the soak and the benchmarks share. A workspace package rather than a
 * file reached by relative path, so each importer names it the same way from anywhere in the
 * repository (bench/ included, which is outside the workspaces but resolves from the root
 * node_modules), and nothing needs building first. Node built-ins only, and core's types
 * (`serveProcess` runs the built CLI).
 */
import { type ChildProcess, type StdioOptions, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Machine } from '@hercules/core';

/** A fresh directory under the OS temp dir, and a function that removes it. */
export function tempDir(tag: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `hercules-${tag}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Poll until `fn` returns truthy (every `everyMs`), or fail after `ms` naming `what`. Waits on
 * real I/O, not on timing claims.
 */
export async function until<T>(fn: () => T | Promise<T>, ms = 10_000, what = 'condition', everyMs = 10): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn(); // awaited: a promise is always truthy, its value may not be
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * A loopback port nothing listens on now (bound, then released): for a server that must be
 * told its port before it starts, or a dead address. Another process may take it in between;
 * prefer listening on port 0 where the server allows it.
 */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** This repository's `hercules` CLI (what an app's `npx hercules` runs; it needs `npm run build`). */
export const HERCULES_BIN = fileURLToPath(new URL('../../server/bin/hercules.js', import.meta.url));

export interface ServeProcess {
  port: number;
  /** ws://127.0.0.1:port */
  url: string;
  proc: ChildProcess;
  exited: Promise<unknown>;
}

/**
 * `hercules serve --port <port> ...args` as a child process (a free port unless given), once its
 * /healthz answers 200. Fails naming what it wrote to stderr if it exits first. With the default
 * stdio its stdout is dropped and its stderr kept for that message.
 */
export async function serveProcess(
  args: string[],
  /** `nodeArgs`: node's own options before the script (e.g. `--cpu-prof`, which NODE_OPTIONS does not take); `bin`: another build's bin/hercules.js (a benchmark's baseline). */
  opts: { port?: number; stdio?: StdioOptions; env?: NodeJS.ProcessEnv; timeoutMs?: number; nodeArgs?: string[]; bin?: string } = {},
): Promise<ServeProcess> {
  const port = opts.port ?? (await freePort());
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), opts.bin ?? HERCULES_BIN, 'serve', '--port', String(port), ...args], {
    stdio: opts.stdio ?? ['ignore', 'ignore', 'pipe'],
    ...(opts.env ? { env: opts.env } : {}),
  });
  let stderr = '';
  proc.stderr?.on('data', (d) => (stderr += d));
  const exited = new Promise((r) => proc.once('exit', r));
  await until(
    async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`hercules serve ${args.join(' ')} exited: ${stderr}`);
      return fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.ok,
        () => false,
      );
    },
    opts.timeoutMs ?? 30_000,
    `hercules serve on ${port} to answer /healthz`,
    50,
  );
  return { port, url: `ws://127.0.0.1:${port}`, proc, exited };
}

/**
 * `machine` with each op calling `onRun(opName)` before it runs: to see when an engine runs ops
 * (a side effect in an op, which an app must never have). Every other part is the machine's own.
 */
export function watchRuns<M extends Machine<any, any>>(machine: M, onRun: (op: string) => void): M {
  const ops = Object.fromEntries(
    Object.entries(machine.ops as Record<string, (...a: unknown[]) => void>).map(([name, fn]) => [
      name,
      (...a: unknown[]) => {
        onRun(name);
        fn(...a);
      },
    ]),
  );
  return { ...machine, ops };
}

export { FakeClock } from './fake-clock.ts';
export { Rng } from './rng.ts';
export { faultProxy, type FaultProxy, type FaultProxyOptions } from './fault-proxy.ts';
export { CHROMIUM_ARGS, findChromium } from './chromium.ts';
export { countSubscriptions } from './subscriptions.ts';
