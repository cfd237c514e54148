/**
 * The helpers every test, the soak and the benchmarks share. A workspace package rather than a
 * file reached by relative path, so each importer names it the same way from anywhere in the
 * repository (bench/ included, which is outside the workspaces but resolves from the root
 * node_modules), and nothing needs building first. Node built-ins only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

export { FakeClock } from './fake-clock.ts';
