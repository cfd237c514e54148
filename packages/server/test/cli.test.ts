/**
 * The hercules command's first hour (and npm start's): usage, --version, one clean line for a bad option, a taken
 * port or a machines module that fails, and a non-zero exit. (The built command, in a fresh
 * CommonJS project with a TypeScript machines module, is test/consumer.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync, readFileSync } from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, until } from './helpers.ts';

const BIN = fileURLToPath(new URL('../bin/hercules.js', import.meta.url));
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));
const hercules = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000 });

test('no command prints the usage and exits 2; --help and --version exit 0', () => {
  const none = hercules();
  assert.equal(none.status, 2);
  assert.match(none.stderr, /^Usage: hercules serve --machines <module>/);
  const help = hercules('--help');
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^Usage: hercules serve/);
  const version = hercules('--version');
  assert.equal(version.status, 0);
  assert.equal(version.stdout, `${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`);
});

test('a bad option or value is one line and exit 2', () => {
  for (const [args, message] of [
    [['serve', '--machines', MACHINES, '--prot', '1'], 'unknown option --prot'],
    [['serve', '--machines', MACHINES, '--port', '70000'], '--port must be an integer from 0 to 65535, got "70000"'],
    [['serve', '--machines', MACHINES, '--log-level', 'loud'], '--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    [['serve'], '--machines is required'],
    [['serve', '--machines', MACHINES, '--memory', '--data-dir', 'x'], '--memory writes nothing, so --data-dir has no use with it; give one'],
    [['serve', '--machines', MACHINES, '--memory', '--nats', 'nats://127.0.0.1:1'], '--memory and --nats each say where the rooms live; give one'],
    [['serve', '--machines', '/nonexistent/machines.ts'], '--machines /nonexistent/machines.ts: no such file'],
    [['serve', '--machines', MACHINES, '--history-ops', '1.5'], '--history-ops must be an integer >= 0, got "1.5"'],
    [['serve', '--machines', MACHINES, '--history-days', '0'], '--history-days must be a number > 0, got "0"'],
    [['start'], 'unknown command "start"'],
  ] as const) {
    const r = hercules(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr, `hercules: ${message} (hercules --help lists every option)\n`);
  }
});

test('a taken port is one line and exit 1', async (t) => {
  const { dir, cleanup } = tempDir('cli-port');
  const holder = createTcpServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.after(() => {
    holder.close();
    cleanup();
  });
  const port = (holder.address() as { port: number }).port;
  const r = hercules('serve', '--machines', MACHINES, '--port', String(port), '--data-dir', dir, '--log-level', 'silent');
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stderr, `hercules: port ${port} on 127.0.0.1 is already in use; stop what holds it or pick another with --port\n`);
});

test("a machines module's own error is shown as it is, with its location", (t) => {
  const { dir, cleanup } = tempDir('cli-module');
  t.after(cleanup);
  const file = join(dir, 'machines.mts');
  writeFileSync(file, `const limit: number = 3;\nif (limit > 2) throw new Error('the machines module refuses to load');\nexport {};\n`);
  const r = hercules('serve', '--machines', file, '--port', '0', '--data-dir', join(dir, 'data'));
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^hercules: cannot load --machines .*machines\.mts:\nError: the machines module refuses to load\n\s+at .*machines\.mts:2:/);
  const empty = join(dir, 'empty.mjs');
  writeFileSync(empty, 'export const notAMachine = 1;\n');
  const none = hercules('serve', '--machines', empty, '--port', '0', '--data-dir', join(dir, 'data'));
  assert.equal(none.status, 1);
  assert.equal(none.stderr, `hercules: --machines ${empty} exports no machines (made with defineMachine)\n`);
});

test('npm start (apps/web/serve.ts) says the same in one line: a bad option, a taken port, a data directory in use', async (t) => {
  const serve = fileURLToPath(new URL('../../../apps/web/serve.ts', import.meta.url));
  const start = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', serve, ...args], { encoding: 'utf8', timeout: 60_000 });
  const bad = start('--prot', '1');
  assert.equal(bad.status, 2, bad.stderr);
  assert.equal(bad.stderr, 'npm start: unknown option --prot (npm start -- --help lists the options)\n');
  const { dir, cleanup } = tempDir('serve');
  const holder = createTcpServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  const { createServer } = await import('../src/index.ts');
  const { chat } = await import('../../../apps/machines.ts');
  const running = await createServer({ port: 0, dataDir: join(dir, 'held'), machines: [chat], log: 'silent' });
  t.after(async () => {
    holder.close();
    await running.close();
    cleanup();
  });
  const port = (holder.address() as { port: number }).port;
  const taken = start('--port', String(port), '--data-dir', join(dir, 'data'), '--log-level', 'silent');
  assert.equal(taken.status, 1, taken.stderr);
  assert.equal(taken.stderr, `npm start: port ${port} on 127.0.0.1 is already in use; stop what holds it or pick another with --port\n`);
  const locked = start('--port', '0', '--data-dir', join(dir, 'held'), '--log-level', 'silent');
  assert.equal(locked.status, 1, locked.stderr);
  assert.match(locked.stderr, /^npm start: the data directory .* is in use by another Hercules server[^\n]*\n$/);
});

test('serve --memory: rooms in memory only, nothing written where it runs, and it says so', async (t) => {
  const { dir, cleanup } = tempDir('cli-memory');
  const child = spawn(process.execPath, [BIN, 'serve', '--machines', MACHINES, '--port', '0', '--memory'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => {
    child.kill('SIGKILL');
    cleanup();
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  await until(() => /"url":"ws:\/\/127\.0\.0\.1:\d+"/.test(out) && out.includes('--memory'), 30_000, 'the server to listen');
  assert.match(out, /rooms are kept in memory only \(--memory\): they are gone when this server stops/);
  assert.match(out, /"store":"MemoryStore"/);
  const port = Number(/"url":"ws:\/\/127\.0\.0\.1:(\d+)"/.exec(out)![1]);
  const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
  assert.equal(health.ok, true);
  // A client's op goes through a room kept in memory.
  const { connect } = await import('@hercules/client');
  const { chat } = await import('../../../apps/machines.ts');
  const a = await connect({ url: `ws://127.0.0.1:${port}`, room: 'mem', machine: chat });
  await a.ops.say({ text: 'hello' }).visible;
  await a.close();
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
  assert.deepEqual(readdirSync(dir), [], 'no data directory, no file');
});
