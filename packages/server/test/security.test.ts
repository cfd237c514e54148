/**
 * A hostile world: authentication, ownership of client ids, room access, op authorization,
 * schema validation and resource limits, each against a real server on loopback.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT } from 'jose';
import { connect, type ConnectedRoom } from '@hercules/client';
import { HerculesError, OpRejectedError, type Machine, type ServerMessage } from '@hercules/core';
import { createServer, type ServerOptions } from '../src/index.ts';
import { chat, interiorDesign } from '../../../apps/machines.ts';
import { tempDir, until, online, rawConnection } from './helpers.ts';

const SECRET = 'test-secret-that-is-at-least-32-bytes-long';
const sign = (sub: string, opts: { secret?: string; exp?: string | number } = {}) =>
  new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime(opts.exp ?? '1h')
    .sign(new TextEncoder().encode(opts.secret ?? SECRET));

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat, interiorDesign], log: 'silent', ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

/** Connect and record every status change with its detail. */
async function client<M extends Machine<any, any>>(url: string, room: string, machine: M, clientId: string, token?: string | (() => Promise<string>)) {
  const statuses: string[] = [];
  const r = await connect({
    url,
    room,
    machine,
    clientId,
    ...(token ? { token } : {}),
    backoff: { minMs: 20, maxMs: 100 },
    onStatus: (s, d) => statuses.push(`${s}: ${d ?? ''}`),
  });
  return Object.assign(r, { statuses }) as ConnectedRoom<M> & { statuses: string[] };
}

/** A hand-driven connection that can send anything, with a token. */
const raw = (url: string, room: string, token?: string) => rawConnection(url, room, token ? `&token=${token}` : '');
const ownVerdicts = (msgs: ServerMessage[]) =>
  msgs.flatMap((m) => (m.t === 'log' ? m.entries.filter((e) => e.k === 'own') : [])) as { seq: number; error?: string; refused?: true }[];

// spec: SEC-AUTHN, SEC-AUTHOR
test('JWT: a valid token stamps its user as author; missing, forged and expired tokens are refused with the reason', async (t) => {
  const srv = await server(t, 'jwt', { jwt: { secret: SECRET } });
  const alice = await client(srv.url, 'r', chat, 'dev-a', await sign('alice'));
  const bob = await client(srv.url, 'r', chat, 'dev-b', await sign('bob'));
  await online(alice);
  await online(bob);
  await alice.ops.say({ text: 'hi' }).visible;
  await until(() => bob.getState('authoritative').messages.length === 1, 5000, 'delivery');
  assert.equal(bob.getState('authoritative').messages[0].author, 'alice', 'the author is the token subject, not the client id');

  const none = await client(srv.url, 'r', chat, 'dev-n');
  const forged = await client(srv.url, 'r', chat, 'dev-f', await sign('alice', { secret: 'x'.repeat(40) }));
  const expired = await client(srv.url, 'r', chat, 'dev-e', await sign('alice', { exp: Math.floor(Date.now() / 1000) - 3600 }));
  for (const [r, why] of [
    [none, /no token/],
    [forged, /bad signature/],
    [expired, /expired/],
  ] as const) {
    await until(() => r.status() === 'failed', 5000, 'refusal');
    assert.match(r.statuses.at(-1)!, /unauthenticated/);
    assert.match(r.statuses.at(-1)!, why);
  }
  // A token function is asked again after a refusal: an expired token is replaced by a fresh one.
  let calls = 0;
  const refreshing = await client(srv.url, 'r', chat, 'dev-r', async () =>
    ++calls === 1 ? sign('carol', { exp: Math.floor(Date.now() / 1000) - 3600 }) : sign('carol'),
  );
  await online(refreshing);
  assert.ok(calls >= 2);
  await refreshing.ops.say({ text: 'back' }).visible;
  assert.equal(refreshing.getState('authoritative').messages.at(-1)!.author, 'carol');
  for (const r of [alice, bob, none, forged, expired, refreshing]) await r.close();
});

// spec: SEC-CLIENT-OWNER
test('a client id belongs to the user who first used it: another user can neither resume it nor kick it off, even after a restart', async (t) => {
  const { dir, cleanup } = tempDir('owner');
  t.after(cleanup);
  let srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent', jwt: { secret: SECRET } });
  const alice = await client(srv.url, 'r', chat, 'laptop-1', await sign('alice'));
  await online(alice);
  await alice.ops.say({ text: 'mine' }).visible;
  const mallory = await client(srv.url, 'r', chat, 'laptop-1', await sign('mallory'));
  await until(() => mallory.status() === 'failed', 5000, 'refusal');
  assert.match(mallory.statuses.at(-1)!, /forbidden: client id laptop-1 belongs to another user/);
  assert.equal(alice.status(), 'online', 'the owner was not kicked off');
  await alice.ops.say({ text: 'still here' }).visible;
  await mallory.close();
  await alice.close();
  const port = srv.port;
  await srv.close();
  srv = await createServer({ port, dataDir: dir, machines: [chat], log: 'silent', jwt: { secret: SECRET } });
  t.after(() => srv.close());
  const mallory2 = await client(srv.url, 'r', chat, 'laptop-1', await sign('mallory'));
  await until(() => mallory2.status() === 'failed', 5000, 'refusal after restart');
  const alice2 = await client(srv.url, 'r', chat, 'laptop-1', await sign('alice'));
  await online(alice2);
  await mallory2.close();
  await alice2.close();
});

// spec: SEC-ACCESS
test('room access: read-only clients receive everything and can submit nothing; no access is refused', async (t) => {
  const srv = await server(t, 'access', {
    jwt: { secret: SECRET },
    access: (id, room) => (id?.user === 'stranger' ? 'none' : id?.user === 'viewer' && room === 'r' ? 'read' : 'write'),
  });
  const writer = await client(srv.url, 'r', chat, 'w', await sign('writer'));
  const viewer = await client(srv.url, 'r', chat, 'v', await sign('viewer'));
  await online(writer);
  await online(viewer);
  assert.equal(viewer.access(), 'read');
  assert.equal(writer.access(), 'write');
  assert.throws(
    () => viewer.ops.say({ text: 'let me in' }),
    (e: unknown) => e instanceof HerculesError && e.code === 'forbidden',
  );
  await writer.ops.say({ text: 'for all' }).visible;
  await until(() => viewer.getState('authoritative').messages.length === 1, 5000, 'viewer receives');

  // A read-only connection that sends ops anyway (not our client library) has them refused.
  const sneaky = await raw(srv.url, 'r', await sign('viewer'));
  sneaky.hello('v2', chat);
  sneaky.send({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'sneaky' } }] });
  await until(() => ownVerdicts(sneaky.msgs).length === 1, 5000, 'verdict');
  assert.match(ownVerdicts(sneaky.msgs)[0].error ?? '', /^read-only/);
  assert.equal(ownVerdicts(sneaky.msgs)[0].refused, true);
  await writer.ops.say({ text: 'after' }).visible;
  assert.deepEqual(
    writer.getState('authoritative').messages.map((m) => m.text),
    ['for all', 'after'],
  );
  assert.equal(sneaky.closed(), undefined, 'a refused op is not a reason to disconnect');

  const stranger = await client(srv.url, 'r', chat, 's', await sign('stranger'));
  await until(() => stranger.status() === 'failed', 5000, 'refusal');
  assert.match(stranger.statuses.at(-1)!, /forbidden: user stranger has no access to room r/);
  sneaky.ws.close();
  for (const r of [writer, viewer, stranger]) await r.close();
});

// spec: OP-REFUSED
test('schemas and the authorize hook refuse ops before ordering; the submitter learns why; the room goes on', async (t) => {
  const srv = await server(t, 'authz', {
    jwt: { secret: SECRET },
    authorize: (op, ctx) => (op.name === 'move' && (op.args as { id: string }).id === 'lamp' && ctx.user !== 'owner' ? 'only the owner moves the lamp' : true),
  });
  const alice = await client(srv.url, 'd', interiorDesign, 'a', await sign('alice'));
  const bob = await client(srv.url, 'd', interiorDesign, 'b', await sign('bob'));
  await online(alice);
  await online(bob);
  const lamp0 = alice.getState('authoritative').items.lamp;
  const h = alice.ops.move({ id: 'lamp', x: 1, y: 1 });
  assert.equal(alice.getState('submitted').items.lamp.x, 1, 'applied speculatively');
  await assert.rejects(
    h.authoritative,
    (e: unknown) => e instanceof OpRejectedError && e.refused && e.message === `operation ${h.id} was refused: not authorized: only the owner moves the lamp`,
  );
  assert.equal(h.stage, 'rejected');
  assert.equal(h.refused, true);
  assert.equal(h.error, 'not authorized: only the owner moves the lamp');
  assert.deepEqual(alice.getState('submitted').items.lamp, lamp0, 'the refused op left the speculative views');
  const ok = alice.ops.move({ id: 'sofa', x: 5, y: 6 });
  await ok.visible;
  await until(() => bob.getState('authoritative').items.sofa.x === 5, 5000, 'bob sees the allowed op');
  assert.deepEqual(bob.getState('authoritative').items.lamp, lamp0, 'bob never saw the lamp move');

  // The schema stops a bad call at the stub, before anything is submitted.
  assert.throws(
    () => alice.ops.move({ id: 'sofa', x: 'left' as unknown as number, y: 0 }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /x must be a number/.test(e.message),
  );

  // A client that skips the stub: bad arguments and unknown ops are refused, one by one.
  const rogue = await raw(srv.url, 'd', await sign('rogue'));
  rogue.hello('r', interiorDesign);
  rogue.send({
    t: 'ops',
    ops: [
      { seq: 1, name: 'move', args: { id: 'sofa', x: 1e12, y: 0 } },
      { seq: 2, name: 'burn', args: { id: 'sofa' } },
      { seq: 3, name: 'move', args: { id: 'table', x: 7, y: 8 } },
    ],
  });
  await until(() => ownVerdicts(rogue.msgs).length === 3, 5000, 'three verdicts');
  const [v1, v2, v3] = ownVerdicts(rogue.msgs);
  assert.match(v1.error ?? '', /^invalid arguments for move: x must be at most 100000/);
  assert.match(v2.error ?? '', /^unknown op "burn"/);
  assert.deepEqual([v1.refused, v2.refused, v3.refused], [true, true, undefined]);
  assert.equal(v3.error, undefined);
  await until(() => bob.getState('authoritative').items.table.x === 7, 5000, 'the valid op arrives');
  assert.equal(bob.getState('authoritative').items.sofa.x, 5, 'the refused ops had no effect');
  assert.ok(!rogue.msgs.some((m) => m.t === 'error'), 'refusals are verdicts, not protocol errors');

  // A newer machine version than the server's: a clear error to that client only.
  const old = await raw(srv.url, 'd', await sign('old'));
  old.hello('o', interiorDesign, { version: interiorDesign.version + 1 });
  await until(() => old.closed(), 5000, 'close');
  const err = old.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'server-too-old' && err.fatal, JSON.stringify(err));
  await bob.ops.move({ id: 'chair-1', x: 9, y: 9 }).visible;
  rogue.ws.close();
  await alice.close();
  await bob.close();
});

// spec: SEC-LIMITS
test('limits: a full room turns clients away until there is space; oversized frames and ops are refused', async (t) => {
  const srv = await server(t, 'limits', { limits: { maxClientsPerRoom: 2, maxFrameBytes: 64 * 1024 } });
  const a = await client(srv.url, 'r', chat, 'a');
  const b = await client(srv.url, 'r', chat, 'b');
  await online(a);
  await online(b);
  const c = await client(srv.url, 'r', chat, 'c');
  await until(() => c.statuses.some((s) => /offline: room full/.test(s)), 5000, 'room full');
  assert.notEqual(c.status(), 'failed', 'a full room is worth retrying');
  await b.close();
  await online(c);

  const big = await raw(srv.url, 'other');
  big.hello('big', chat);
  big.ws.send(new Uint8Array(100 * 1024));
  await until(() => big.closed(), 5000, 'close');
  assert.equal(big.closed()!.code, 1009, 'message too big');
  assert.throws(() => a.ops.say({ text: 'x'.repeat(300 * 1024) }), HerculesError);
  await a.ops.say({ text: 'the room goes on' }).visible;
  await a.close();
  await c.close();
});

// spec: SEC-LIMITS
test('limits: a client over its op rate is slowed by backpressure and loses nothing', async (t) => {
  const srv = await server(t, 'rate', { limits: { opsPerSecond: 400, opsBurst: 100 } });
  const a = await client(srv.url, 'r', chat, 'a');
  await online(a);
  const t0 = performance.now();
  // Ten frames of 100 ops (ops submitted in one tick share a frame).
  const hs = [];
  for (let f = 0; f < 10; f++) {
    for (let i = 0; i < 100; i++) hs.push(a.ops.say({ text: `m${f * 100 + i}` }));
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(hs.map((h) => h.authoritative));
  const elapsed = performance.now() - t0;
  const rateLimited = (await srv.metrics.rateLimited.get()).values[0]?.value ?? 0;
  assert.ok(rateLimited > 0, 'the connection was paused at least once');
  // A frame is charged whole, so at most the bucket (100) and one frame (100) go at once; the
  // other 800 take at least 2 s at 400/s, whatever the machine.
  assert.ok(elapsed >= 1900, `1000 ops went through in ${elapsed.toFixed(0)} ms despite the limit`);
  assert.deepEqual(
    a.getState('authoritative').messages.map((m) => m.text),
    hs.map((_, i) => `m${i}`),
  );
  await a.close();
});

// spec: SEC-LIMITS
test("limits: a user's connections share the per-user op rate; each is slowed, nothing is lost, another user is not charged", async (t) => {
  const srv = await server(t, 'user-rate', {
    authenticate: (req) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' }),
    limits: { opsPerSecond: 1e6, opsBurst: 1e6, userOpsPerSecond: 400, userOpsBurst: 100 },
  });
  const a1 = await client(srv.url, 'r1', chat, 'u-a1', 'una');
  const a2 = await client(srv.url, 'r2', chat, 'u-a2', 'una');
  const b = await client(srv.url, 'r1', chat, 'u-b', 'bo');
  t.after(() => Promise.all([a1.close(), a2.close(), b.close()]));
  await Promise.all([online(a1), online(a2), online(b)]);
  const t0 = performance.now();
  // Five frames of 100 ops on each of the user's two connections: 1,000 ops for one user.
  const hs: { room: typeof a1; h: ReturnType<typeof a1.ops.say> }[] = [];
  for (let f = 0; f < 5; f++) {
    for (const room of [a1, a2]) for (let i = 0; i < 100; i++) hs.push({ room, h: room.ops.say({ text: `${room.clientId}-${f * 100 + i}` }) });
    await new Promise((r) => setTimeout(r, 1));
  }
  const bobs = Array.from({ length: 50 }, (_, i) => b.ops.say({ text: `b${i}` }));
  await Promise.all([...hs.map((x) => x.h.authoritative), ...bobs.map((h) => h.authoritative)]);
  const elapsed = performance.now() - t0;
  // A frame is charged whole: at most the user's bucket (100) and one frame per connection (200)
  // go at once; the other 700 take at least 1.75 s at 400/s, whatever the machine. Each
  // connection alone (1e6/s) would not have waited at all.
  assert.ok(elapsed >= 1600, `1000 ops of one user went through in ${elapsed.toFixed(0)} ms despite the per-user limit`);
  assert.ok(((await srv.metrics.rateLimited.get()).values[0]?.value ?? 0) > 0, 'connections were paused');
  for (const room of [a1, a2])
    assert.deepEqual(
      room
        .getState('authoritative')
        .messages.filter((m) => m.author === 'una')
        .map((m) => m.text),
      Array.from({ length: 500 }, (_, i) => `${room.clientId}-${i}`),
      'every op once, in order',
    );
  assert.equal(b.getState('authoritative').messages.filter((m) => m.author === 'bo').length, 50);
});

// spec: SEC-LIMITS, REC-CATCHUP
test('limits: a consumer that stops reading is cut off at the send-buffer bound and catches up later', async (t) => {
  const srv = await server(t, 'slow', { limits: { maxSendBufferBytes: 256 * 1024, opsPerSecond: 1e6, opsBurst: 1e6, bytesPerSecond: 1e9, bytesBurst: 1e9 } });
  const slow = await raw(srv.url, 'r');
  slow.hello('slow', chat);
  await until(() => slow.msgs.some((m) => m.t === 'welcome'), 5000, 'welcome');
  (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause(); // stop reading: the kernel buffers fill, then ours
  const w = await client(srv.url, 'r', chat, 'w');
  await online(w);
  const text = 'y'.repeat(1900);
  let last;
  for (let i = 0; i < 8000; i++) last = w.ops.say({ text });
  await last!.authoritative;
  await until(async () => ((await srv.metrics.slowConsumers.get()).values[0]?.value ?? 0) >= 1, 20_000, 'slow consumer cut');
  // The same client comes back (as our library would) and catches up with all of it.
  const back = await client(srv.url, 'r', chat, 'slow');
  await until(() => back.getState('authoritative').messages.length === 8000, 20_000, 'catch-up');
  await back.close();
  await w.close();
  slow.ws.terminate();
});

// spec: SEC-AUTHN
test('JWT: a public key (PEM) or a JWKS file verifies asymmetric tokens; a token from another key is refused', async (t) => {
  const { generateKeyPair, exportSPKI, exportJWK } = await import('jose');
  const { writeFileSync } = await import('node:fs');
  const good = await generateKeyPair('ES256'),
    other = await generateKeyPair('ES256');
  const es = (key: CryptoKey, sub: string, kid?: string) =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', ...(kid ? { kid } : {}) })
      .setSubject(sub)
      .setExpirationTime('1h')
      .sign(key);
  const { dir, cleanup } = tempDir('jwks');
  t.after(cleanup);
  const jwksFile = `${dir}/jwks.json`;
  writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(good.publicKey)), kid: 'k1', alg: 'ES256' }] }));
  for (const jwt of [{ publicKey: await exportSPKI(good.publicKey) }, { jwksFile }]) {
    const srv = await server(t, 'asym', { jwt });
    const ok = await client(srv.url, 'r', chat, 'dev', await es(good.privateKey, 'dana', 'k1'));
    await online(ok);
    await ok.ops.say({ text: 'signed' }).visible;
    assert.equal(ok.getState('authoritative').messages[0].author, 'dana');
    const bad = await client(srv.url, 'r', chat, 'dev2', await es(other.privateKey, 'dana', 'k1'));
    await until(() => bad.status() === 'failed', 5000, 'refusal');
    assert.match(bad.statuses.at(-1)!, /unauthenticated: invalid token: bad signature/);
    await ok.close();
    await bad.close();
  }
});

// spec: SEC-AUTHN
test('an open connection closes when its JWT expires; a client whose token is a function comes back with a fresh one and loses no op', async (t) => {
  const srv = await server(t, 'exp', { jwt: { secret: SECRET, clockToleranceSec: 0 } });
  let issued = 0;
  const token = async () => {
    issued++;
    return sign('ana', { exp: Math.floor(Date.now() / 1000) + 2 }); // expires within 1-2 s
  };
  const errors: Error[] = [];
  const r = await connect({
    url: srv.url,
    room: 'expiry',
    machine: chat,
    clientId: 'ana-1',
    token,
    backoff: { minMs: 20, maxMs: 100 },
    onError: (e) => errors.push(e),
  });
  t.after(() => r.close());
  await online(r);
  // Ops all through the expiry: each must be ordered exactly once.
  const handles = [];
  const until3s = Date.now() + 3000;
  for (let i = 0; Date.now() < until3s; i++) {
    handles.push(r.ops.say({ text: `m${i}` }));
    await new Promise((res) => setTimeout(res, 50));
  }
  await Promise.all(handles.map((h) => h.authoritative));
  assert.ok(issued >= 2, `a fresh token was asked for after the expiry (tokens issued: ${issued})`);
  const expired = errors.filter((e) => e instanceof HerculesError && e.code === 'unauthenticated');
  assert.ok(expired.length >= 1, `the client heard why: ${errors.map((e) => e.message).join(' | ')}`);
  assert.match(expired[0].message, /the credential expired at .*; reconnect with a fresh token/);
  // Each token lives 1-2 s, so another expiry may fall just now: the client is back online after it.
  await online(r);
  const texts = r.getState('authoritative').messages.map((m) => m.text);
  assert.deepEqual(
    texts,
    handles.map((_, i) => `m${i}`),
    'every op once, in order',
  );
});

// spec: SEC-ACCESS, HANDLE-DURABLE-AFTER-FATAL
test('server.revoke closes a user’s connections (one room, or all) with the fatal revoked; others go on; the ops its store holds go out when it comes back', async (t) => {
  const { sqliteStorage } = await import('@hercules/client-sqlite');
  const { dir, cleanup } = tempDir('revoke-client');
  t.after(cleanup);
  const srv = await server(t, 'revoke', { authenticate: (req) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' }) });
  const open = async (user: string, room: string, clientId: string, file?: string) => {
    const errors: Error[] = [];
    const r = await connect({
      url: srv.url,
      room,
      machine: chat,
      clientId,
      token: user,
      ...(file ? { storage: sqliteStorage(file) } : {}),
      backoff: { minMs: 20, maxMs: 100 },
      onError: (e) => errors.push(e),
    });
    t.after(() => r.close().catch(() => {}));
    await online(r);
    return Object.assign(r, { errors });
  };
  const file = `${dir}/alice.sqlite`;
  const a1 = await open('alice', 'r1', 'alice-1', file);
  const a2 = await open('alice', 'r2', 'alice-2');
  const b = await open('bob', 'r1', 'bob-1');
  await a1.ops.say({ text: 'before' }).visible;
  // An op submitted in the same turn as the revocation: saved on alice's device, never ordered.
  // Its durable promise resolves even if the fatal frame is read before the store confirms.
  const pending = a1.ops.say({ text: 'in flight' });
  assert.equal(srv.revoke({ user: 'alice', room: 'r1', reason: 'left the team' }), 1);
  await until(() => a1.status() === 'failed', 5000, 'alice in r1 stopped');
  const revoked = a1.errors.find((e) => e instanceof HerculesError && e.code === 'revoked');
  assert.ok(revoked, `alice heard why: ${a1.errors.map((e) => e.message).join(' | ')}`);
  assert.match(revoked.message, /access of user alice to room r1 was revoked: left the team/);
  await pending.durable;
  await assert.rejects(pending.authoritative, (e: unknown) => e instanceof HerculesError && e.code === 'revoked');
  // Bob, and alice's other room, go on.
  await b.ops.say({ text: 'bob goes on' }).authoritative;
  assert.equal(a2.status(), 'online');
  assert.equal(srv.revoke({ user: 'alice' }), 1, "now alice's connection to r2");
  await until(() => a2.status() === 'failed', 5000, 'alice in r2 stopped');
  assert.equal(srv.revoke({ user: 'carol' }), 0);
  assert.throws(
    () => srv.revoke({ user: '' }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  // Access back (the authenticate hook still lets alice in): her store's op goes out, once.
  await a1.close();
  const again = await open('alice', 'r1', 'alice-1', file);
  await until(() => again.getState('visible').messages.some((m) => m.text === 'in flight'), 10_000, 'the op saved before the revocation arrived');
  assert.deepEqual(
    b.getState('authoritative').messages.map((m) => m.text),
    ['before', 'bob goes on', 'in flight'],
  );
});

// spec: SEC-ACCESS
test('admin HTTP API: POST /admin/revoke with the admin token; 401 without it, 400 on a bad body, 405 on GET, 404 elsewhere; absent without admin', async (t) => {
  const ADMIN = 'an-admin-token-of-at-least-32-characters';
  const srv = await server(t, 'admin', { admin: { token: ADMIN }, authenticate: () => ({ user: 'dora' }) });
  const base = srv.url.replace('ws://', 'http://');
  const r = await client(srv.url, 'adm', chat, 'dora-1', 'x');
  await online(r);
  const post = (path: string, body: unknown, token: string | null = ADMIN) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  assert.equal((await post('/admin/revoke', { user: 'dora' }, null)).status, 401);
  assert.equal((await post('/admin/revoke', { user: 'dora' }, `${ADMIN}x`)).status, 401);
  assert.equal((await post('/admin/revoke', 'not json')).status, 400);
  assert.equal((await post('/admin/revoke', { room: 'adm' })).status, 400);
  assert.equal((await fetch(`${base}/admin/revoke`, { headers: { authorization: `Bearer ${ADMIN}` } })).status, 405);
  assert.equal((await post('/admin/nope', {})).status, 404);
  assert.equal(r.status(), 'online', 'nothing so far touched the connection');
  const ok = await post('/admin/revoke', { user: 'dora', room: 'adm', reason: 'audit' });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { closed: 1 });
  await until(() => r.status() === 'failed', 5000, 'dora stopped');
  await assert.rejects(
    server(t, 'admin-short', { admin: { token: 'short' } }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /admin.token must be a string of at least 32 characters/.test(e.message),
  );
  const plain = await server(t, 'no-admin');
  assert.equal(
    (await fetch(`${plain.url.replace('ws://', 'http://')}/admin/revoke`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })).status,
    404,
  );
});

// spec: PRESENCE-EPHEMERAL, SEC-ACCESS
test('readersPresence as a hook: the server decides per read-only connection whether it may set presence', async (t) => {
  const srv = await server(t, 'readers-presence', {
    authenticate: (req) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' }),
    access: (identity) => (identity?.user === 'writer' ? 'write' : 'read'),
    readersPresence: (identity, room) => identity?.user === 'guide' && room === 'tour',
  });
  const w = await client(srv.url, 'tour', chat, 'w-1', 'writer');
  const guide = await client(srv.url, 'tour', chat, 'g-1', 'guide');
  const viewer = await client(srv.url, 'tour', chat, 'v-1', 'viewer');
  t.after(() => Promise.all([w.close(), guide.close(), viewer.close()]));
  await Promise.all([online(w), online(guide), online(viewer)]);
  guide.presence.set({ name: 'Guide' });
  viewer.presence.set({ name: 'Viewer' });
  await until(() => w.presence.others().some((p) => p.user === 'guide'), 5000, 'the guide is seen');
  // The viewer's was refused (forbidden, not fatal): a later one from the guide arrives, the viewer's never.
  guide.presence.set({ name: 'Guide again' });
  await until(() => w.presence.others().some((p) => (p.value as { name?: string }).name === 'Guide again'), 5000, 'the next one');
  assert.deepEqual(
    w.presence.others().map((p) => p.user),
    ['guide'],
  );
  assert.equal(viewer.status(), 'online', 'refusing presence does not close the connection');
  await assert.rejects(server(t, 'bad-readers', { readersPresence: 'yes' as never }), (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument');
});
