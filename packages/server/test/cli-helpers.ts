/**
 * The `hercules` command as the CLI tests run it: the bin, a command run to its end without
 * blocking this process's event loop, and `hercules serve` started until it listens.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { until } from './helpers.ts';

export const BIN = fileURLToPath(new URL('../bin/hercules.js', import.meta.url));

/**
 * The command run without blocking this process's event loop: a test's own client must keep
 * answering the server's pings while the commands run (spawnSync would stall it past the
 * heartbeat on a loaded machine, and the server would drop it).
 */
export function herculesAsync(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A server started by `hercules serve`, and its port once it listens (its output so far by `out()`). */
export async function serveCli(args: string[], env: Record<string, string>, cwd: string): Promise<{ child: ChildProcess; port: number; out: () => string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await until(() => /"url":"ws:\/\/127\.0\.0\.1:\d+"/.test(out) || child.exitCode !== null, 30_000, 'the server to listen');
  const m = /"url":"ws:\/\/127\.0\.0\.1:(\d+)"/.exec(out);
  assert.ok(m, out);
  return { child, port: Number(m[1]), out: () => out };
}
