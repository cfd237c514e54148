import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectedRoom } from '@hercules/client';

export function tempDir(tag: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `hercules-${tag}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Poll until `fn` returns truthy, or fail after `ms`. Waits on real I/O, not on timing claims. */
export async function until<T>(fn: () => T | Promise<T>, ms = 10_000, what = 'condition'): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn(); // awaited: a promise is always truthy, its value may not be
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const online = (r: ConnectedRoom<any>) => until(() => r.status() === 'online', 10_000, 'online');
