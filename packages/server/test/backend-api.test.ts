/**
 * The server's own API to its rooms (issue 16, part 2): in process (`server.room(name)`:
 * submit, state, subscribe; the `onCommit` hook; `server.rooms()`) and over the admin HTTP API,
 * against real clients on real sockets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@hercules/client';
import { HerculesError, defineMachine, type LogEntry } from '@hercules/core';
import { readFileSync } from 'node:fs';
import { createServer, ROOMS_PAGE_MAX, type RoomFile, type RoomSummary, type ServerOptions } from '../src/index.ts';
import { MAX_STATE_DEPTH } from '../src/room-file.ts';
import { ADMIN_ROUTES } from '../src/admin-http.ts';
import { retentionSetting } from '../src/store/room-store.ts';
import { chat, spreadsheet } from '../../../apps/machines.ts';
import { online, rawConnection, tempDir, until } from './helpers.ts';

const ADMIN = 'an-admin-token-of-at-least-32-characters';

async function server(t: { after: (fn: () => unknown) => void }, extra: Partial<ServerOptions> = {}, dir = tempDir('backend')) {
  const srv = await createServer({ port: 0, dataDir: dir.dir, machines: [chat, spreadsheet], log: 'silent', ...extra });
  t.after(async () => {
    await srv.close();
  });
  return Object.assign(srv, { dir });
}
const isCode = (code: string) => (e: unknown) => e instanceof HerculesError && e.code === code;

// spec: API-SUBMIT
test('server.room(name).submit orders an op as a named author, fanned out like a client op; a key makes it idempotent, across a restart', async (t) => {
  const dir = tempDir('backend-submit');
  t.after(dir.cleanup);
  const hooked: [string, number[]][] = [];
  const srv = await server(t, { onCommit: (room, entries) => hooked.push([room, entries.map((e) => e.pos)]) }, dir);
  const c = await connect({ url: srv.url, room: 'news', machine: chat, clientId: 'reader' });
  t.after(() => c.close());
  await online(c);
  await c.ops.say({ text: 'hello' }).authoritative;
  const room = srv.room('news');
  const seen: LogEntry[][] = [];
  const unsubscribe = room.subscribe((entries) => seen.push([...entries]));
  const first = await room.submit('say', { text: 'from the backend' }, { author: 'newsbot', key: 'item-1' });
  assert.deepEqual(first, { seq: 1, position: 2, duplicate: false });
  await until(() => c.getState('authoritative').messages.length === 2, 5000, 'the client got the backend op');
  assert.deepEqual(c.getState('authoritative').messages[1], { id: '~server:1', author: 'newsbot', text: 'from the backend' });
  // The same key again orders nothing and answers the first result.
  assert.deepEqual(await room.submit('say', { text: 'from the backend' }, { author: 'newsbot', key: 'item-1' }), { ...first, duplicate: true });
  // An op that throws at its position is in the log as a no-op, with its error.
  const threw = await room.submit('say', { text: ' ' }, { author: 'newsbot' });
  assert.equal(threw.position, 3);
  assert.match(threw.error ?? '', /empty message/);
  // Refused before ordering: nothing ordered, the promise says why.
  await assert.rejects(room.submit('shout', {}, { author: 'newsbot' }), isCode('unknown-op'));
  await assert.rejects(room.submit('say', { text: 7 }, { author: 'newsbot' }), isCode('bad-argument'));
  await assert.rejects(room.submit('say', { text: 'x' }, { author: '' }), isCode('bad-argument'));
  await assert.rejects(room.submit('say', { text: 'x' }, undefined as never), isCode('bad-argument'));
  assert.deepEqual(await room.state(), c.getState('authoritative'));
  assert.equal(srv.room('news').name, 'news');
  // Commits, as the hook and the subscription saw them: the client's op, then the two of the backend.
  await until(() => seen.flat().length >= 2, 5000, 'subscription');
  assert.deepEqual(
    seen.flat().map((e) => [e.pos, e.client, e.author]),
    [
      [2, '~server', 'newsbot'],
      [3, '~server', 'newsbot'],
    ],
  );
  assert.deepEqual(
    hooked.filter(([r]) => r === 'news').flatMap(([, p]) => p),
    [1, 2, 3],
  );
  unsubscribe();
  await room.submit('say', { text: 'unseen' }, { author: 'newsbot' });
  assert.equal(seen.flat().length, 2, 'no more after unsubscribe');
  // A room that does not exist needs its machine; with it, it is created.
  await assert.rejects(srv.room('nowhere').submit('say', { text: 'x' }, { author: 'a' }), isCode('bad-room'));
  assert.throws(() => srv.room('bad room!'), isCode('bad-argument'));
  assert.throws(() => srv.room('x', 'no-such-machine'), isCode('bad-argument'));
  assert.deepEqual(await srv.room('fresh', 'chat').submit('say', { text: 'first' }, { author: 'a' }), { seq: 1, position: 1, duplicate: false });
  await assert.rejects(srv.room('fresh').submit('setCell', { row: 0, col: 0, text: 'x' }, { author: 'a' }), isCode('unknown-op'));
  const { rooms } = await srv.rooms();
  assert.deepEqual(
    rooms.map((r) => [r.name, r.loaded, r.machine, r.head]),
    [
      ['fresh', true, 'chat', 1],
      ['news', true, 'chat', 4],
    ],
  );
  assert.deepEqual(rooms.find((r) => r.name === 'news')?.members, ['reader']);
  // The key survives a restart of the server.
  await c.close();
  await srv.close();
  const again = await server(t, {}, dir);
  assert.deepEqual(await again.room('news').submit('say', { text: 'from the backend' }, { author: 'newsbot', key: 'item-1' }), { ...first, duplicate: true });
  assert.deepEqual(
    (await again.rooms()).rooms.map((r) => [r.name, r.loaded]),
    [
      ['fresh', false],
      ['news', true],
    ],
  );
});

// spec: SEC-CLIENT-OWNER
test("a connection may not use the server's own client ids (its API's, its migrations')", async (t) => {
  const srv = await server(t);
  for (const id of ['~server', '~hercules']) {
    const raw = await rawConnection(srv.url, 'r');
    raw.hello(id, chat);
    await until(() => raw.closed() !== undefined, 5000, 'refused');
    const err = raw.msgs.find((m) => m.t === 'error');
    assert.ok(err && err.t === 'error' && err.code === 'forbidden' && /is the server's own/.test(err.message), `${id}: ${JSON.stringify(raw.msgs)}`);
  }
});

test('admin HTTP: list rooms, read a room, submit an op as a named author (idempotent by key); errors as JSON with fitting statuses', async (t) => {
  const srv = await server(t, { admin: { token: ADMIN } });
  const base = srv.url.replace('ws://', 'http://');
  const auth = { authorization: `Bearer ${ADMIN}` };
  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const get = (path: string) => fetch(`${base}${path}`, { headers: auth });
  const c = await connect({ url: srv.url, room: 'board', machine: chat, clientId: 'viewer' });
  t.after(() => c.close());
  await online(c);
  const ok = await post('/admin/rooms/board/ops', { op: 'say', args: { text: 'deploy done' }, author: 'ci', key: 'deploy-42' });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { seq: 1, position: 1, duplicate: false });
  const dup = await post('/admin/rooms/board/ops', { op: 'say', args: { text: 'deploy done' }, author: 'ci', key: 'deploy-42' });
  assert.deepEqual(await dup.json(), { seq: 1, position: 1, duplicate: true });
  await until(() => c.getState('authoritative').messages.length === 1, 5000, 'the client got it');
  const state = await get('/admin/rooms/board/state');
  assert.equal(state.status, 200);
  assert.deepEqual(await state.json(), { state: { messages: [{ id: '~server:1', author: 'ci', text: 'deploy done' }] } });
  const list = await (await get('/admin/rooms')).json();
  const [board] = list.rooms;
  assert.ok(board.bytes > 0 && board.lastActivity >= board.created && board.created > 0, JSON.stringify(board));
  assert.deepEqual(list, {
    rooms: [
      {
        name: 'board',
        loaded: true,
        machine: 'chat',
        version: 1,
        head: 1,
        stable: 1,
        checkpoint: board.checkpoint,
        bytes: board.bytes,
        created: board.created,
        lastActivity: board.lastActivity,
        members: ['viewer'],
      },
    ],
  });
  const status = async (r: Promise<Response>) => {
    const res = await r;
    return [res.status, ((await res.json()) as { error: string }).error];
  };
  assert.deepEqual(await status(post('/admin/rooms/board/ops', { op: 'say', args: { text: 1 }, author: 'ci' })), [400, 'bad-argument']);
  assert.deepEqual(await status(post('/admin/rooms/board/ops', { op: 'fly', author: 'ci' })), [400, 'unknown-op']);
  assert.deepEqual(await status(post('/admin/rooms/board/ops', { op: 'say', args: { text: 'x' } })), [400, 'bad-argument']);
  assert.deepEqual(await status(post('/admin/rooms/ghost/ops', { op: 'say', args: { text: 'x' }, author: 'ci' })), [404, 'bad-room']);
  assert.deepEqual(await status(get('/admin/rooms/ghost/state')), [404, 'bad-room']);
  assert.deepEqual(await status(post('/admin/rooms/board/ops', { op: 'say', args: { text: 'x' }, author: 'ci', machine: 'nope' })), [400, 'bad-argument']);
  assert.deepEqual(await status(get('/admin/rooms/board/ops')), [405, 'method-not-allowed']);
  assert.deepEqual(await status(fetch(`${base}/admin/rooms`, { method: 'POST', headers: auth })), [405, 'method-not-allowed']);
  assert.equal((await fetch(`${base}/admin/rooms`)).status, 401);
  assert.deepEqual(await status(post('/admin/rooms/new-one/ops', { op: 'say', args: { text: 'hi' }, author: 'ci', machine: 'chat' })), [200, undefined]);
  assert.deepEqual(await status(post('/admin/drain', {})), [409, 'bad-argument'], 'an embedded server has no node to drain to');
});

test('docs/admin-api.openapi.json describes exactly the routes the admin API serves', () => {
  const doc = JSON.parse(readFileSync(new URL('../../../docs/admin-api.openapi.json', import.meta.url), 'utf8')) as {
    openapi: string;
    paths: Record<string, Record<string, unknown>>;
  };
  assert.match(doc.openapi, /^3\./);
  const described = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
  assert.deepEqual(described.sort(), ADMIN_ROUTES.map(([m, p]) => `${m} ${p}`).sort());
});

test('export a room from one server, import it into another: its clients resume there exactly once; delete closes them and removes it (in process and over HTTP)', async (t) => {
  const a = await server(t, { admin: { token: ADMIN } });
  const b = await server(t, { admin: { token: ADMIN } });
  const { sqliteStorage } = await import('@hercules/client-sqlite');
  const dir = tempDir('export-client');
  t.after(dir.cleanup);
  const file = `${dir.dir}/c.sqlite`;
  const c1 = await connect({ url: a.url, room: 'moving', machine: chat, clientId: 'mover', storage: sqliteStorage(file) });
  await online(c1);
  for (let i = 1; i <= 3; i++) await c1.ops.say({ text: `on A ${i}` }).visible;
  await c1.close();
  const auth = { authorization: `Bearer ${ADMIN}` };
  const exported = await (await fetch(`${a.url.replace('ws://', 'http://')}/admin/rooms/moving/export`, { headers: auth })).json();
  assert.equal(exported.format, 'hercules-room');
  assert.deepEqual(exported, await a.room('moving').export(), 'HTTP and in process agree');
  const put = await fetch(`${b.url.replace('ws://', 'http://')}/admin/rooms/moved`, {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(exported),
  });
  assert.equal(put.status, 201);
  assert.deepEqual(await b.room('moved').state(), await a.room('moving').state());
  // The same client, its store as it was, resumes in the imported room: nothing twice.
  const c2 = await connect({ url: b.url, room: 'moved', machine: chat, clientId: 'mover', storage: sqliteStorage(file) });
  t.after(() => c2.close());
  await online(c2);
  await c2.ops.say({ text: 'on B' }).authoritative;
  assert.deepEqual(
    c2.getState('authoritative').messages.map((m) => m.text),
    ['on A 1', 'on A 2', 'on A 3', 'on B'],
  );
  assert.deepEqual(c2.pending(), []);
  // Import refuses: an existing room, a file that is not an export, a machine this server does not serve.
  const refused = async (body: unknown, room = 'other') => {
    const r = await fetch(`${b.url.replace('ws://', 'http://')}/admin/rooms/${room}`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return [r.status, ((await r.json()) as { message: string }).message];
  };
  assert.match(String((await refused(exported, 'moved'))[1]), /it exists/);
  assert.match(String((await refused({ hello: 1 }))[1]), /not a room export/);
  assert.match(String((await refused({ ...exported, machine: { name: 'chat', version: 9 } }))[1]), /is not one this server serves/);
  assert.match(
    String((await refused({ ...exported, entries: exported.entries.slice(1) }))[1]),
    /entries\[0\]\.pos must be 1 \(the log follows the checkpoint without a gap\), got 2/,
  );
  assert.deepEqual(
    (await b.rooms()).rooms.map((r) => r.name),
    ['moved'],
  );
  // Delete: the connected client is told (bad-room, fatal); the room is gone.
  const del = await fetch(`${b.url.replace('ws://', 'http://')}/admin/rooms/moved`, { method: 'DELETE', headers: auth });
  assert.deepEqual(await del.json(), { deleted: true });
  await until(() => c2.status() === 'failed', 5000, 'the client stopped');
  assert.deepEqual(await b.rooms(), { rooms: [] });
  assert.equal(await b.room('moved').delete(), false);
  await assert.rejects(b.room('moved').export(), isCode('bad-room'));
});

/** An array nested `n` deep around 0. */
const nested = (n: number): unknown => {
  let v: unknown = 0;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

// spec: SEC-IMPORT
test('an import is checked against the domain of live ops: a hostile file is refused with 400 naming the field, over HTTP and in process, and leaves nothing', async (t) => {
  const srv = await server(t, { admin: { token: ADMIN } });
  const auth = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  await srv.room('src', 'chat').submit('say', { text: 'hi' }, { author: 'a' });
  const file = await srv.room('src').export();
  await srv.room('src').delete();
  const hostile: [string, RoomFile, RegExp][] = [
    [
      'state nested 3,000 deep',
      { ...file, checkpoint: { pos: 0, state: { messages: [], deep: nested(3000) } } },
      /^checkpoint\.state\.deep\[0\]×\d+ is nested deeper than 500 levels/,
    ],
    [
      'arguments nested 3,000 deep',
      { ...file, entries: [{ ...file.entries[0], args: { text: 'x', deep: nested(3000) } }] },
      /^entries\[0\]\.args\.deep\[0\]×255 is nested deeper than 256 levels/,
    ],
    [
      'arguments over 256 KiB',
      { ...file, entries: [{ ...file.entries[0], args: { text: 'x'.repeat(300_000) } }] },
      /^entries\[0\]\.args: arguments of about \d+ bytes exceed/,
    ],
    [
      'highWater 1e300',
      { ...file, clients: { '~server': { highWater: 1e300, visibleSeq: 0 } } },
      /^clients\["~server"\]\.highWater must be an integer from 0 to 9007199254740991, got 1e\+300/,
    ],
    [
      'a seq past its highWater',
      { ...file, entries: [{ ...file.entries[0], seq: 7 }] },
      /^entries\[0\]\.seq must be at most the highWater of client "~server" \(1\), got 7/,
    ],
    ['a position of 1.5', { ...file, checkpoint: { pos: 1.5, state: file.checkpoint.state } }, /^checkpoint\.pos must be an integer/],
    [
      'a digest of -1',
      { ...file, clients: { '~server': { highWater: 1, visibleSeq: 0, digest: -1 } } },
      /^clients\["~server"\]\.digest must be an integer from 0/,
    ],
    ['a field the engine never writes', { ...file, entries: [{ ...file.entries[0], extra: nested(300) } as never] }, /^entries\[0\] has a field "extra"/],
  ];
  for (const [what, body, why] of hostile) {
    const res = await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms/imported`, { method: 'PUT', headers: auth, body: JSON.stringify(body) });
    const answer = (await res.json()) as { error: string; message: string };
    assert.equal(res.status, 400, `${what}: ${answer.message}`);
    assert.equal(answer.error, 'bad-argument', what);
    assert.match(answer.message.replace('importRoom imported: ', ''), why, what);
    // In process (the backend API), the same check and the same message.
    await assert.rejects(
      srv.importRoom('imported', body),
      (e) => isCode('bad-argument')(e) && why.test((e as Error).message.replace('importRoom imported: ', '')),
      what,
    );
    assert.deepEqual(await srv.rooms(), { rooms: [] }, `${what}: nothing stored`);
  }
  // In process, values JSON cannot carry are refused too.
  await assert.rejects(srv.importRoom('imported', { ...file, checkpoint: { pos: 0, state: { n: Number.NaN } } }), /checkpoint\.state\.n is NaN/);
  await assert.rejects(
    srv.importRoom('imported', { ...file, entries: [{ ...file.entries[0], args: { text: new Date(0) } }] }),
    /entries\[0\]\.args\.text is a Date/,
  );
  assert.deepEqual(await srv.rooms(), { rooms: [] });
  // At the bound: a state 500 deep imports, a client gets its welcome, the state endpoint answers.
  const edge = { ...file, checkpoint: { pos: 0, state: { messages: [], deep: nested(MAX_STATE_DEPTH - 2) } } };
  await srv.importRoom('edge', edge);
  const c = await connect({ url: srv.url, room: 'edge', machine: chat, clientId: 'c1' });
  t.after(() => c.close());
  await online(c);
  assert.deepEqual((c.getState('authoritative') as unknown as { deep: unknown }).deep, nested(MAX_STATE_DEPTH - 2));
  const state = await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms/edge/state`, { headers: auth });
  assert.equal(state.status, 200);
});

test('admin HTTP: a body JSON cannot write is a 500, not a 200 with an error text', async (t) => {
  const tower = defineMachine({
    name: 'tower',
    version: 1,
    initial: { v: 0 as unknown },
    ops: {
      build(s, a: { n: number }) {
        s.v = nested(a.n);
      },
    },
  });
  const srv = await server(t, { admin: { token: ADMIN }, machines: [tower] });
  // 3,000 levels: the op runs (6,000 would throw in the engine), JSON.stringify cannot write it.
  assert.equal((await srv.room('t', 'tower').submit('build', { n: 3000 }, { author: 'a' })).error, undefined);
  const res = await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms/t/state`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 500);
});

test('admin HTTP lists rooms not in memory (unloaded when idle, and after a restart) with machine, version, size and last activity, in pages', async (t) => {
  const dir = tempDir('backend-list');
  t.after(dir.cleanup);
  const srv = await server(t, { admin: { token: ADMIN }, idleUnloadMs: 50 }, dir);
  const auth = { authorization: `Bearer ${ADMIN}` };
  const list = async (url: string, query = '') => {
    const res = await fetch(`${url.replace('ws://', 'http://')}/admin/rooms${query}`, { headers: auth });
    assert.equal(res.status, 200, `GET /admin/rooms${query}`);
    return (await res.json()) as { rooms: RoomSummary[]; next?: string };
  };
  const t0 = Date.now();
  const names = Array.from({ length: 25 }, (_, i) => `room-${String(i).padStart(2, '0')}`);
  for (const [i, name] of names.entries()) {
    for (let k = 0; k <= i % 3; k++) await srv.room(name, 'chat').submit('say', { text: `message ${k} in ${name}` }, { author: 'seeder' });
  }
  const t1 = Date.now();
  await until(() => srv.loadedRooms().length === 0, 10_000, 'every room unloaded when idle');
  // Pages of 10: 10, 10, 5, each room once, in order, the cursor from one page to the next.
  const pages: { rooms: RoomSummary[]; next?: string }[] = [];
  let query = '?limit=10';
  for (;;) {
    const page = await list(srv.url, query);
    pages.push(page);
    if (!page.next) break;
    query = `?limit=10&after=${encodeURIComponent(page.next)}`;
  }
  assert.deepEqual(
    pages.map((p) => [p.rooms.length, p.next]),
    [
      [10, 'room-09'],
      [10, 'room-19'],
      [5, undefined],
    ],
  );
  const all = pages.flatMap((p) => p.rooms);
  assert.deepEqual(
    all.map((r) => r.name),
    names,
  );
  for (const [i, r] of all.entries()) {
    assert.deepEqual([r.loaded, r.machine, r.version, r.head, r.members], [false, 'chat', 1, (i % 3) + 1, undefined], `${r.name} as stored`);
    assert.ok(r.bytes! > 0, `${r.name}: its size, ${r.bytes}`);
    assert.ok(r.lastActivity! >= t0 && r.lastActivity! <= t1 && r.lastActivity! >= r.created!, `${r.name}: last activity ${r.lastActivity}, in ${t0}..${t1}`);
  }
  assert.ok(all[2].bytes! > all[0].bytes!, 'a room with more messages takes more bytes');
  // In process, the same; the default page holds them all; a limit over the maximum is the maximum; a bad limit is refused.
  const inProcess = await srv.rooms();
  assert.deepEqual(inProcess, { rooms: all });
  assert.deepEqual((await srv.rooms({ limit: ROOMS_PAGE_MAX + 5 })).rooms.length, 25);
  // Over HTTP too, however many digits (docs/admin-api.md: larger limits are taken as 1,000).
  for (const huge of ['1001', '1000000000', '1'.padEnd(400, '0')])
    assert.equal((await list(srv.url, `?limit=${huge}`)).rooms.length, 25, `limit=${huge.slice(0, 12)}`);
  assert.equal((await srv.rooms({ limit: 1e21 })).rooms.length, 25);
  assert.equal((await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms?limit=0`, { headers: auth })).status, 400);
  assert.equal((await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms?limit=ten`, { headers: auth })).status, 400);
  // A loaded room among unloaded ones: its members and live figures, its store figures too.
  const c = await connect({ url: srv.url, room: 'room-03', machine: chat, clientId: 'reader' });
  await online(c);
  const [r3] = (await list(srv.url, '?after=room-02&limit=1')).rooms;
  assert.deepEqual([r3.name, r3.loaded, r3.members, r3.head, r3.bytes! > 0], ['room-03', true, ['reader'], 1, true]);
  await c.close();
  // After a restart over the same data directory: nothing loaded, the same listing.
  await srv.close();
  const again = await server(t, { admin: { token: ADMIN } }, dir);
  assert.deepEqual(again.loadedRooms(), []);
  const relisted = await list(again.url, '?limit=100');
  assert.equal(relisted.next, undefined);
  const still = (rs: RoomSummary[]) => rs.map((r) => [r.name, r.loaded, r.machine, r.version, r.head]);
  assert.deepEqual(still(relisted.rooms), still(all));
  for (const r of relisted.rooms) assert.ok(r.bytes! > 0 && r.lastActivity! >= t0, `${r.name} after a restart: ${JSON.stringify(r)}`);
});

test('admin HTTP lists a migrated room, not loaded, with the version it migrated to', async (t) => {
  const dir = tempDir('backend-list-migrated');
  t.after(dir.cleanup);
  const notesV1 = defineMachine({
    name: 'notes',
    version: 1,
    initial: { items: [] as string[] },
    ops: {
      add(s, text: string) {
        s.items.push(text);
      },
    },
  });
  const notesV2 = defineMachine({
    name: 'notes',
    version: 2,
    initial: { items: [] as { text: string }[] },
    ops: {
      add(s, a: { text: string }) {
        s.items.push(a);
      },
    },
    migrateFrom: { machine: notesV1, state: (s1) => ({ items: s1.items.map((text) => ({ text })) }) },
  });
  const auth = { authorization: `Bearer ${ADMIN}` };
  const list = async (url: string) =>
    ((await (await fetch(`${url.replace('ws://', 'http://')}/admin/rooms`, { headers: auth })).json()) as { rooms: RoomSummary[] }).rooms;
  const v1 = await createServer({ port: 0, dataDir: dir.dir, machines: [notesV1], log: 'silent', admin: { token: ADMIN } });
  await v1.room('old', 'notes').submit('add', 'written under v1', { author: 'a' });
  await v1.room('untouched', 'notes').submit('add', 'also v1', { author: 'a' });
  await v1.close();
  const v2 = await createServer({ port: 0, dataDir: dir.dir, machines: [notesV2], log: 'silent', admin: { token: ADMIN }, idleUnloadMs: 50 });
  t.after(() => v2.close());
  assert.deepEqual(
    (await list(v2.url)).map((r) => [r.name, r.loaded, r.version, r.head]),
    [
      ['old', false, 1, 1],
      ['untouched', false, 1, 1],
    ],
    'stored under v1, not loaded yet',
  );
  assert.deepEqual(await v2.room('old').state(), { items: [{ text: 'written under v1' }] }, 'loading migrates it');
  await until(() => v2.loadedRooms().length === 0, 10_000, 'unloaded when idle');
  assert.deepEqual(
    (await list(v2.url)).map((r) => [r.name, r.loaded, r.machine, r.version, r.head]),
    [
      ['old', false, 'notes', 2, 2],
      ['untouched', false, 'notes', 1, 1],
    ],
    'the migrated room lists its new version (and the migration entry); the other still v1 until it loads',
  );
});

// spec: HIST-REPLAY, HIST-RETAIN
test('history: server.room(name).stateAt and log, and the admin API over them (/state?at=, /log), with retention honoured by checkpoints', async (t) => {
  const srv = await server(t, { admin: { token: ADMIN }, checkpointEvery: 5, history: { ops: 10, machines: { spreadsheet: { ops: 0 } } } });
  t.after(srv.dir.cleanup);
  const room = srv.room('annals', 'chat');
  for (let i = 1; i <= 40; i++) assert.equal((await room.submit('say', { text: `line ${i}` }, { author: `user${i % 3}` })).position, i);
  // The room checkpoints every 5 ops; each checkpoint prunes what is more than 10 ops (and a checkpoint) behind it.
  let page = await room.log();
  await until(async () => (page = await room.log()).head === 40 && page.start >= 25, 10_000, 'checkpoints pruned the history');
  assert.ok(page.start <= 30, `the last 10 ops behind the newest checkpoint are kept: history starts at ${page.start}`);
  assert.deepEqual(
    page.entries.map((e) => [e.pos, e.name, e.author, e.client, (e.args as { text: string }).text]),
    Array.from({ length: 40 - page.start }, (_, i) => [page.start + 1 + i, 'say', `user${(page.start + 1 + i) % 3}`, '~server', `line ${page.start + 1 + i}`]),
  );
  assert.ok(
    page.entries.every((e) => e.time > 1_600_000_000_000 && e.time <= Date.now()),
    'each entry has its commit time',
  );
  for (let p = page.start; p <= 40; p++) {
    const s = (await room.stateAt(p)) as { messages: { text: string }[] };
    assert.deepEqual(
      s.messages.map((m) => m.text),
      Array.from({ length: p }, (_, i) => `line ${i + 1}`),
      `the state at ${p}`,
    );
  }
  assert.deepEqual(await room.stateAt(40), await room.state());
  await assert.rejects(room.stateAt(page.start - 1), isCode('not-retained'));
  await assert.rejects(room.stateAt(41), isCode('bad-argument'));
  await assert.rejects(room.log({ from: 1 }), isCode('not-retained'));
  await assert.rejects(srv.room('no-such-room').stateAt(0), isCode('bad-room'));
  // The same over HTTP.
  const base = srv.url.replace('ws://', 'http://');
  const get = (path: string) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const at = await get(`/admin/rooms/annals/state?at=${page.start + 1}`);
  assert.equal(at.status, 200);
  assert.deepEqual(await at.json(), { position: page.start + 1, state: await room.stateAt(page.start + 1) });
  const log = await get(`/admin/rooms/annals/log?from=${page.start + 1}&to=${page.start + 2}`);
  assert.deepEqual(await log.json(), { start: page.start, head: 40, entries: page.entries.slice(0, 2) });
  const gone = await get('/admin/rooms/annals/state?at=0');
  assert.equal(gone.status, 410);
  assert.equal(((await gone.json()) as { error: string }).error, 'not-retained');
  for (const q of ['state?at=x', 'state?at=-1', 'log?from=1.5', 'log?to=']) assert.equal((await get(`/admin/rooms/annals/${q}`)).status, 400, q);
  assert.equal((await get('/admin/rooms/nowhere/log')).status, 404);
  assert.deepEqual(await (await get('/admin/rooms/annals/state')).json(), { state: await room.state() });
  // Per machine: spreadsheet rooms keep nothing behind the checkpoint.
  const sheet = srv.room('sheet', 'spreadsheet');
  for (let i = 0; i < 12; i++) await sheet.submit('setCell', { row: 0, col: 0, text: `v${i}` }, { author: 'a' });
  await until(async () => (await sheet.log()).start >= 10, 10_000, 'the spreadsheet room keeps no history');
  assert.throws(() => retentionSetting('createServer', { ops: -1 }), isCode('bad-argument'));
  assert.throws(() => retentionSetting('createServer', { days: 0 }), isCode('bad-argument'));
  assert.throws(() => retentionSetting('createServer', { machines: { chat: { ops: 1.5 } } }), isCode('bad-argument'));
});
