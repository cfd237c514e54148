/**
 * `hercules replay` run as a user would (issue 39, item 4): a server started by the command, ops
 * ordered over the admin API, the room exported with `hercules rooms export`, then replayed:
 * exit 0 when it matches, 1 with the first differing position, the op there and its author when
 * the file was tampered with, 2 with a closed-vocabulary code and no stack trace when the file is
 * not a room export.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, until } from './helpers.ts';

const BIN = fileURLToPath(new URL('../bin/hercules.js', import.meta.url));
const MACHINES = fileURLToPath(new URL('./fixtures/replay-machines.ts', import.meta.url));
const TOKEN = 'an-admin-token-of-at-least-32-characters';

function hercules(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

async function serve(dir: string): Promise<{ child: ChildProcess; port: number }> {
  const env = { HERCULES_MACHINES: MACHINES, HERCULES_PORT: '0', HERCULES_MEMORY: '1', HERCULES_ADMIN_TOKEN: TOKEN };
  const child = spawn(process.execPath, [BIN, 'serve'], { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await until(() => /"url":"ws:\/\/127\.0\.0\.1:\d+"/.test(out) || child.exitCode !== null, 30_000, 'the server to listen');
  const m = /"url":"ws:\/\/127\.0\.0\.1:(\d+)"/.exec(out);
  assert.ok(m, out);
  return { child, port: Number(m[1]) };
}

test('hercules replay: an exported room replays clean (exit 0); a tampered one is reported at its position (exit 1); a bad file is refused (exit 2)', async (t) => {
  const { dir, cleanup } = tempDir('cli-replay');
  const server = await serve(dir);
  t.after(() => {
    server.child.kill('SIGKILL');
    cleanup();
  });
  const http = `http://127.0.0.1:${server.port}`;
  for (const [by, author] of [
    [1, 'ada'],
    [2, 'bob'],
    [3, 'ada'],
  ] as const) {
    const res = await fetch(`${http}/admin/rooms/bug/ops`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ op: 'add', args: { by, note: `by ${author}` }, author, machine: 'tally' }),
    });
    assert.equal(res.status, 200, await res.text());
  }
  const file = join(dir, 'bug.json');
  const exported = await hercules(['rooms', 'export', 'bug', '--out', file], { HERCULES_ADMIN_TOKEN: TOKEN, HERCULES_URL: http });
  assert.equal(exported.status, 0, exported.stderr);

  const clean = await hercules(['replay', file, '--machines', MACHINES]);
  assert.equal(clean.status, 0, clean.stdout + clean.stderr);
  assert.match(clean.stdout, /^replayed tally@1 from position 0 to 3: 3 ops$/m);
  assert.match(clean.stdout, /^match: \d+ recorded digests \(.*\b3\) and every op's outcome are as recorded$/m);

  const data = JSON.parse(readFileSync(file, 'utf8'));
  data.entries[2].args.by = 30;
  const tampered = join(dir, 'tampered.json');
  writeFileSync(tampered, JSON.stringify(data));
  const bad = await hercules(['replay', tampered, '--machines', MACHINES]);
  assert.equal(bad.status, 1, bad.stdout + bad.stderr);
  assert.match(bad.stdout, /^DIFFERS at position 3: /m);
  assert.match(bad.stdout, /^ {2}the op at 3: add \{"by":30,"note":"by ada"\} by ada \(client ~server, seq \d+\)$/m);
  const json = await hercules(['replay', tampered, '--machines', MACHINES, '--json']);
  assert.equal(json.status, 1);
  assert.equal(JSON.parse(json.stdout).difference.pos, 3);

  const notRoom = join(dir, 'not-a-room.json');
  writeFileSync(notRoom, '{"hello": 1}');
  for (const [path, code] of [
    [notRoom, 'bad-argument'],
    [join(dir, 'missing.json'), 'not-found'],
    [MACHINES, 'bad-argument'], // not JSON
  ]) {
    const refused = await hercules(['replay', path, '--machines', MACHINES]);
    assert.equal(refused.status, 2, `${path}: ${refused.stderr}`);
    assert.match(refused.stderr, new RegExp(`^hercules replay: .+: ${code}: `), path);
    assert.doesNotMatch(refused.stderr, /\n\s+at /, 'no stack trace');
  }
  const noMachines = await hercules(['replay', file]);
  assert.equal(noMachines.status, 2);
  assert.match(noMachines.stderr, /--machines/);
  const help = await hercules(['--help']);
  assert.match(help.stdout, /hercules replay <file> --machines <module>/);
});
