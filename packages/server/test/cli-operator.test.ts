/**
 * The operator kit (issue 41, item 1): every serve option has an environment variable and --help
 * lists both; the admin API, a webhook and static files are turned on from the command line
 * alone; `hercules rooms` and `hercules revoke` drive a running server through the typed admin
 * client; a JavaScript syntax error in the machines module is shown with its file and line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import { Webhook } from 'standardwebhooks';
import { tempDir, until } from './helpers.ts';
import { BIN, herculesAsync, serveCli } from './cli-helpers.ts';
import { envName } from '../src/cli/options.ts';
import { SERVE_OPTIONS } from '../src/cli/serve-options.ts';
import { newWebhookSecret } from '../src/webhooks.ts';

const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));
const TOKEN = 'an-admin-token-of-at-least-32-characters';

function hercules(args: string[], env: Record<string, string> = {}, cwd?: string) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...env }, ...(cwd ? { cwd } : {}) });
}

/** The status of a GET whose path goes out exactly as given. */
function rawStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

test('--help lists every serve option with its environment variable', () => {
  const help = hercules(['--help']);
  assert.equal(help.status, 0);
  for (const o of SERVE_OPTIONS.flatMap((g) => g.options)) {
    assert.match(help.stdout, new RegExp(`--${o.name}\\b`), o.name);
    assert.ok(help.stdout.includes(`env ${envName(o.name)}`), `${o.name}: env ${envName(o.name)}`);
  }
  assert.equal(envName('max-clients-per-room'), 'HERCULES_MAX_CLIENTS_PER_ROOM');
});

test('an environment variable sets its option, a flag wins over it, and a bad value is refused as the flag would be', () => {
  const bad = hercules(['serve', '--machines', MACHINES], { HERCULES_PORT: '70000' });
  assert.equal(bad.status, 2, bad.stderr);
  assert.equal(bad.stderr, 'hercules: --port must be an integer from 0 to 65535, got "70000" (hercules --help lists every option)\n');
  const memory = hercules(['serve', '--machines', MACHINES, '--data-dir', 'x'], { HERCULES_MEMORY: 'yes' });
  assert.equal(memory.status, 2);
  assert.match(memory.stderr, /HERCULES_MEMORY must be 1, true, 0 or false, got "yes"/);
  const unknown = hercules(['rooms', 'list', '--shards', '3']);
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /^hercules: unknown option --shards for rooms/);
  const noSecret = hercules(['serve', '--machines', MACHINES, '--memory', '--webhook-url', 'http://127.0.0.1:1/']);
  assert.equal(noSecret.status, 2);
  assert.match(noSecret.stderr, /--webhook-url needs a secret/);
  const noToken = hercules(['rooms', 'list'], { HERCULES_ADMIN_TOKEN: '' });
  assert.equal(noToken.status, 2);
  assert.match(noToken.stderr, /the admin API needs its token/);
});

test('serve from the environment alone: static files, the admin API; rooms and revoke commands drive it', { timeout: 120_000 }, async (t) => {
  const { dir, cleanup } = tempDir('cli-operator');
  const site = join(dir, 'site');
  mkdirSync(site);
  writeFileSync(join(site, 'index.html'), '<!doctype html><title>app</title>');
  writeFileSync(join(site, 'app.js'), 'console.log(1);\n');
  writeFileSync(join(dir, 'secret.txt'), 'outside the static directory');
  const jwtSecret = 'a-jwt-secret-of-at-least-32-bytes-long';
  writeFileSync(join(dir, 'jwt-secret'), jwtSecret);
  const env = {
    HERCULES_MACHINES: MACHINES,
    HERCULES_PORT: '0',
    HERCULES_MEMORY: '1',
    HERCULES_STATIC: site,
    HERCULES_ADMIN_TOKEN: TOKEN,
    HERCULES_JWT_SECRET_FILE: join(dir, 'jwt-secret'),
    // This process blocks in spawnSync while each CLI command runs, so its client cannot answer
    // pings meanwhile: on a loaded machine the commands below took 12-24 s (2026-11-28), past two
    // of the default 5 s heartbeats, and the server dropped the client before `revoke` counted it.
    HERCULES_HEARTBEAT: '60000',
  };
  const server = await serveCli([], env, dir);
  t.after(() => {
    server.child.kill('SIGKILL');
    cleanup();
  });
  const http = `http://127.0.0.1:${server.port}`;
  const index = await fetch(`${http}/`);
  assert.equal(index.status, 200);
  assert.equal(index.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(await index.text(), '<!doctype html><title>app</title>');
  assert.equal((await fetch(`${http}/app.js`)).headers.get('content-type'), 'text/javascript; charset=utf-8');
  // Sent as written (fetch would resolve the dots itself): none leaves the static directory.
  for (const path of ['/../secret.txt', '/%2e%2e/secret.txt', '/..%2fsecret.txt', '/%2e%2e%2fsecret.txt', '/%00', '/%E0%A4%A'])
    assert.equal(await rawStatus(server.port, path), 404, path);
  assert.equal(await rawStatus(server.port, '/./app.js'), 200);
  assert.equal((await fetch(`${http}/app.js`, { method: 'POST' })).status, 404);
  assert.equal((await fetch(`${http}/healthz`)).status, 200, 'the server routes still come first');

  // A room with an op in it, then the rooms commands against it.
  const { connect } = await import('@hercules/client');
  const { chat } = await import('../../../apps/machines.ts');
  const token = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('ada').setExpirationTime('1h').sign(new TextEncoder().encode(jwtSecret));
  const room = await connect({ url: `ws://127.0.0.1:${server.port}`, room: 'ops-room', machine: chat, token, onError: () => {} });
  t.after(() => room.close()); // also when an assertion fails: a live client would keep this process up
  await room.ops.say({ text: 'kept' }).authoritative;
  const admin = { HERCULES_ADMIN_TOKEN: TOKEN, HERCULES_URL: http };
  const list = await herculesAsync(['rooms', 'list'], admin);
  assert.equal(list.status, 0, list.stderr);
  assert.deepEqual(
    list.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).name),
    ['ops-room'],
  );
  const show = await herculesAsync(['rooms', 'show', 'ops-room'], admin);
  assert.equal(show.status, 0, show.stderr);
  assert.deepEqual(
    JSON.parse(show.stdout).messages.map((m: { text: string }) => m.text),
    ['kept'],
  );
  const exported = join(dir, 'ops-room.json');
  assert.equal((await herculesAsync(['rooms', 'export', 'ops-room', '--out', exported], admin)).status, 0);
  const imported = await herculesAsync(['rooms', 'import', 'copy', exported], admin);
  assert.equal(imported.status, 0, imported.stderr);
  assert.equal(imported.stdout, 'imported copy\n');
  assert.deepEqual(JSON.parse((await herculesAsync(['rooms', 'show', 'copy'], admin)).stdout), JSON.parse(show.stdout));
  const again = await herculesAsync(['rooms', 'import', 'copy', exported], admin);
  assert.equal(again.status, 1, 'a room that exists is not overwritten');
  assert.match(again.stderr, /^hercules: rooms import copy: [a-z-]+: /);
  assert.equal((await herculesAsync(['rooms', 'delete', 'copy'], admin)).stdout, 'deleted copy\n');
  const wrongToken = await herculesAsync(['rooms', 'list'], { ...admin, HERCULES_ADMIN_TOKEN: 'not-the-token-but-as-long-as-it-should-be' });
  assert.equal(wrongToken.status, 1);
  assert.match(wrongToken.stderr, /^hercules: rooms list: unauthenticated: /);
  await room.whenOnline({ timeoutMs: 10_000 });
  const revoke = await herculesAsync(['revoke', '--user', 'ada', '--room', 'ops-room', '--reason', 'test'], admin);
  assert.equal(revoke.status, 0, revoke.stderr);
  assert.equal(revoke.stdout, 'closed 1 connection of ada\n');
  const gone = await herculesAsync(['rooms', 'list'], { ...admin, HERCULES_URL: 'http://127.0.0.1:1' });
  assert.equal(gone.status, 1);
  assert.match(gone.stderr, /^hercules: rooms list: unreachable: /);
});

test('--webhook-url with the secret from a file: commits arrive signed the Standard Webhooks way', { timeout: 60_000 }, async (t) => {
  const { dir, cleanup } = tempDir('cli-webhook');
  const secret = newWebhookSecret();
  writeFileSync(join(dir, 'whsec'), `${secret}\n`);
  const received: { headers: Record<string, string>; body: string }[] = [];
  const receiver = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ headers: req.headers as Record<string, string>, body });
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  const server = await serveCli(['--machines', MACHINES, '--port', '0', '--webhook-url', hook, '--webhook-secret-file', join(dir, 'whsec')], {}, dir);
  t.after(() => {
    server.child.kill('SIGKILL');
    receiver.close();
    cleanup();
  });
  const { connect } = await import('@hercules/client');
  const { chat } = await import('../../../apps/machines.ts');
  const room = await connect({ url: `ws://127.0.0.1:${server.port}`, room: 'hooked', machine: chat });
  t.after(() => room.close());
  await room.ops.say({ text: 'to the hook' }).authoritative;
  await until(() => received.length > 0, 20_000, 'a webhook request');
  const verified = new Webhook(secret).verify(received[0].body, received[0].headers) as { room: string };
  assert.equal(verified.room, 'hooked');
  assert.match(received[0].body, /to the hook/);
});

test('a JavaScript syntax error in the machines module is shown with its file and line', (t) => {
  const { dir, cleanup } = tempDir('cli-syntax');
  t.after(cleanup);
  const file = join(dir, 'machines.mjs');
  writeFileSync(file, 'export const ok = 1;\nexport const broken = {;\n');
  const r = hercules(['serve', '--machines', file, '--memory', '--port', '0']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^hercules: cannot load --machines .*machines\.mjs:\n.*machines\.mjs:2\n/);
  assert.match(r.stderr, /SyntaxError: Unexpected token ';'/);
});
