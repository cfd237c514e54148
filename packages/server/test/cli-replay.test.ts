/**
 * `hercules replay` run as a user would (issue 39, item 4): a server started by the command, ops
 * ordered over the admin API, the room exported with `hercules rooms export`, then replayed:
 * exit 0 when it matches, 1 with the first differing position, the op there and its author when
 * the file was tampered with, 2 with a closed-vocabulary code and no stack trace when the file is
 * not a room export.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './helpers.ts';
import { herculesAsync, serveCli } from './cli-helpers.ts';

const MACHINES = fileURLToPath(new URL('./fixtures/replay-machines.ts', import.meta.url));
const TOKEN = 'an-admin-token-of-at-least-32-characters';

/** A server started by the command on a memory store, with the admin API on. */
function serve(dir: string) {
  return serveCli([], { HERCULES_MACHINES: MACHINES, HERCULES_PORT: '0', HERCULES_MEMORY: '1', HERCULES_ADMIN_TOKEN: TOKEN }, dir);
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
  const exported = await herculesAsync(['rooms', 'export', 'bug', '--out', file], { HERCULES_ADMIN_TOKEN: TOKEN, HERCULES_URL: http });
  assert.equal(exported.status, 0, exported.stderr);

  const clean = await herculesAsync(['replay', file, '--machines', MACHINES]);
  assert.equal(clean.status, 0, clean.stdout + clean.stderr);
  assert.match(clean.stdout, /^replayed tally@1 from position 0 to 3: 3 ops$/m);
  assert.match(clean.stdout, /^match: \d+ recorded digests \(.*\b3\) and every op's outcome are as recorded$/m);

  const data = JSON.parse(readFileSync(file, 'utf8'));
  data.entries[2].args.by = 30;
  const tampered = join(dir, 'tampered.json');
  writeFileSync(tampered, JSON.stringify(data));
  const bad = await herculesAsync(['replay', tampered, '--machines', MACHINES]);
  assert.equal(bad.status, 1, bad.stdout + bad.stderr);
  assert.match(bad.stdout, /^DIFFERS at position 3: /m);
  assert.match(bad.stdout, /^ {2}the op at 3: add \{"by":30,"note":"by ada"\} by ada \(client ~server, seq \d+\)$/m);
  const json = await herculesAsync(['replay', tampered, '--machines', MACHINES, '--json']);
  assert.equal(json.status, 1);
  assert.equal(JSON.parse(json.stdout).difference.pos, 3);

  const notRoom = join(dir, 'not-a-room.json');
  writeFileSync(notRoom, '{"hello": 1}');
  for (const [path, code] of [
    [notRoom, 'bad-argument'],
    [join(dir, 'missing.json'), 'not-found'],
    [MACHINES, 'bad-argument'], // not JSON
  ]) {
    const refused = await herculesAsync(['replay', path, '--machines', MACHINES]);
    assert.equal(refused.status, 2, `${path}: ${refused.stderr}`);
    assert.match(refused.stderr, new RegExp(`^hercules replay: .+: ${code}: `), path);
    assert.doesNotMatch(refused.stderr, /\n\s+at /, 'no stack trace');
  }
  const noMachines = await herculesAsync(['replay', file]);
  assert.equal(noMachines.status, 2);
  assert.match(noMachines.stderr, /--machines/);
  const help = await herculesAsync(['--help']);
  assert.match(help.stdout, /hercules replay <file> --machines <module>/);
});
