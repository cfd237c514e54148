/**
 * Shared by the peer adapters. spawnServer runs a peer's server script in its own Node process
 * (so its CPU time is separate and the clients' event loop cannot slow it down) and waits for the
 * line `PORT <n>` it prints once it listens on a free loopback port.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { PeerServer } from './types.ts';

export function spawnServer(script: URL, timeoutMs = 15_000, args: string[] = []): Promise<PeerServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', script.pathname, ...args], {
    cwd: new URL('.', import.meta.url).pathname, // so tsx and the packages resolve from here
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script.pathname}: no port after ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script.pathname} exited with ${code} before listening`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^PORT (\d+)$/.exec(line);
      if (!m) {
        process.stderr.write(`[server] ${line}\n`);
        return;
      }
      clearTimeout(timer);
      resolve({
        port: Number(m[1]),
        pid: child.pid!,
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          // A server that ignores SIGTERM must not outlive the benchmark.
          const force = setTimeout(() => child.kill('SIGKILL'), 3000);
          await exited;
          clearTimeout(force);
        },
      });
    });
  });
}

/** Installed version of a package, read from its package.json (some packages do not export it). */
export function pkgVersion(name: string): string {
  for (const dir of createRequire(import.meta.url).resolve.paths(name) ?? []) {
    const file = join(dir, name, 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return '?';
}
