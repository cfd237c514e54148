/**
 * Shared by the peer adapters. spawnServer runs a peer's server script in its own Node process
 * (so its CPU time is separate and the clients' event loop cannot slow it down) and waits for the
 * line `PORT <n>` it prints once it listens on a free loopback port.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { PeerServer } from './types.ts';

export function spawnServer(script: URL, timeoutMs = 15_000): Promise<PeerServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', script.pathname], {
    cwd: new URL('.', import.meta.url).pathname, // so tsx and the packages resolve from here
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${script.pathname}: no port after ${timeoutMs} ms`)); }, timeoutMs);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${script.pathname} exited with ${code} before listening`)); });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^PORT (\d+)$/.exec(line);
      if (!m) { process.stderr.write(`[server] ${line}\n`); return; }
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

/**
 * Installed version of a package, read from its package.json (found by walking up from an entry
 * point: `entry` for packages that export only subpaths).
 */
export function pkgVersion(name: string, entry = name): string {
  let dir = dirname(fileURLToPath(import.meta.resolve(entry)));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version: string };
      if (pkg.name === name) return pkg.version;
    } catch { /* no package.json here */ }
    if (dirname(dir) === dir) throw new Error(`package.json of ${name} not found`);
    dir = dirname(dir);
  }
}
