/**
 * @hercules/admin-client against a real server's admin API: every method, the server's error
 * codes as HerculesErrors, paging, a server that does not answer; and src/schema.ts is what
 * openapi-typescript makes of docs/admin-api.openapi.json today.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import openapiTS, { astToString } from 'openapi-typescript';
import { HerculesError } from '@hercules/core';
import { createServer, MemoryStore } from '@hercules/server';
import { chat } from '../../../apps/machines.ts';
import { createAdminClient } from '../src/index.ts';

const TOKEN = 'an-admin-token-of-at-least-32-characters';

async function rejectsWith(p: Promise<unknown>, code: string) {
  await assert.rejects(p, (e: unknown) => e instanceof HerculesError && e.code === code);
}

test('src/schema.ts is generated from docs/admin-api.openapi.json as it is now (npm run generate -w packages/admin-client)', async () => {
  const doc = new URL('../../../docs/admin-api.openapi.json', import.meta.url);
  const generated = astToString(await openapiTS(doc));
  const committed = readFileSync(new URL('../src/schema.ts', import.meta.url), 'utf8');
  // The CLI writes a header above what astToString returns.
  assert.ok(committed.endsWith(generated), 'regenerate src/schema.ts: the OpenAPI description changed');
});

test('every method against a server; errors keep the server code', async (t) => {
  const server = await createServer({ port: 0, store: new MemoryStore(), machines: [chat], log: 'silent', admin: { token: TOKEN } });
  t.after(() => server.close());
  const admin = createAdminClient({ url: server.url, token: TOKEN });
  for (let i = 0; i < 5; i++) await admin.submit(`room-${i}`, { op: 'say', args: { text: `hello ${i}` }, author: 'backend', machine: 'chat' });
  assert.deepEqual(
    (await admin.rooms({ limit: 2 })).rooms.map((r) => r.name),
    ['room-0', 'room-1'],
  );
  const all: string[] = [];
  for await (const r of admin.allRooms(2)) all.push(r.name);
  assert.deepEqual(all, ['room-0', 'room-1', 'room-2', 'room-3', 'room-4'], 'every page, in order');
  assert.deepEqual(
    ((await admin.state('room-3')) as { messages: { text: string }[] }).messages.map((m) => m.text),
    ['hello 3'],
  );
  // History: the state at a position, and the log with each entry's author and commit time.
  await admin.submit('room-3', { op: 'say', args: { text: 'again' }, author: 'other' });
  assert.deepEqual(await admin.stateAt('room-3', 1), { messages: [{ id: '~server:1', author: 'backend', text: 'hello 3' }] });
  const log = await admin.log('room-3', { from: 2 });
  assert.deepEqual(
    log.entries.map((e) => [e.pos, e.name, e.author, e.client]),
    [[2, 'say', 'other', '~server']],
  );
  assert.ok(log.entries[0].time > 0);
  assert.deepEqual([log.start, log.head], [0, 2]);
  await rejectsWith(admin.stateAt('room-3', 3), 'bad-argument');
  const file = await admin.exportRoom('room-3');
  await admin.importRoom('copy', file);
  assert.deepEqual(await admin.state('copy'), await admin.state('room-3'));
  await rejectsWith(admin.importRoom('copy', file), 'bad-argument');
  assert.equal(await admin.deleteRoom('copy'), true);
  assert.deepEqual((await admin.revoke({ user: 'nobody' })).closed, 0);
  await rejectsWith(admin.submit('room-0', { op: 'shout', args: {}, author: 'x' }), 'unknown-op');
  await rejectsWith(createAdminClient({ url: server.url, token: 'wrong-token-wrong-token-wrong-token' }).rooms(), 'unauthenticated');
  const raw = await admin.raw.GET('/admin/rooms/{room}/state', { params: { path: { room: 'room-0' } } });
  assert.equal(raw.response.status, 200);
});

test('a server that does not answer is unreachable; bad options are refused at once', async () => {
  await rejectsWith(createAdminClient({ url: 'http://127.0.0.1:1', token: TOKEN }).rooms(), 'unreachable');
  assert.throws(
    () => createAdminClient({ url: 'localhost:8787', token: TOKEN }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  assert.throws(
    () => createAdminClient({ url: 'http://x', token: '' }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
});
