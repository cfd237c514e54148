/**
 * Webhooks (issue 16, part 3; issue 41, item 2): each room's commits POSTed at least once, in
 * order, signed in the Standard Webhooks format (verified here with that project's own library,
 * `standardwebhooks`), retried with backoff, resumed after a restart from the position the
 * receiver last accepted. A real receiver (node:http) in this process, real clients on real sockets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { connect } from '@hercules/client';
import { HerculesError, type LogEntry } from '@hercules/core';
import { createServer, MemoryStore, newWebhookSecret, webhookSignature, type WebhookOptions } from '../src/index.ts';
import { createServer as createCoreServer } from '../src/core.ts';
import { chat } from '../../../apps/machines.ts';
import { online, tempDir, until } from './helpers.ts';

const SECRET = newWebhookSecret();
const LEGACY_SECRET = 'a-webhook-secret-of-at-least-32-characters';

interface Delivery {
  id: string;
  body: { room: string; from: number; to: number; entries: LogEntry[]; gap?: { from: number; to: number } };
  raw: string;
  headers: Record<string, string>;
}

/** The request's headers as the standardwebhooks library takes them (one string each). */
function flat(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)]));
}

/** True if `secret`'s receiver, verifying with the standardwebhooks library, accepts `d` now. */
function verifies(secret: string, d: Pick<Delivery, 'raw' | 'headers'>): boolean {
  try {
    new Webhook(secret).verify(d.raw, d.headers);
    return true;
  } catch (e) {
    if (e instanceof WebhookVerificationError) return false;
    throw e;
  }
}

/** A receiver that answers `status()` (500 while failing) and records what it accepted and saw. */
async function receiver(t: { after: (fn: () => unknown) => void }) {
  const accepted: Delivery[] = [];
  const seen: Delivery[] = [];
  let status = 200;
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  const http = createHttpServer(async (req, res) => {
    const raw = await read(req);
    const headers = flat(req.headers);
    const d: Delivery = { id: headers['webhook-id'] ?? headers['x-hercules-delivery'], body: JSON.parse(raw), raw, headers };
    seen.push(d);
    if (status === 200) accepted.push(d);
    res.writeHead(status).end();
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  t.after(
    () =>
      new Promise<void>((r) => {
        http.close(() => r());
        http.closeAllConnections();
      }),
  );
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/hook`,
    accepted,
    seen,
    fail: (yes: boolean) => {
      status = yes ? 500 : 200;
    },
    /** The positions accepted, in the order they arrived. */
    positions: () => accepted.flatMap((d) => d.body.entries.map((e) => e.pos)),
  };
}

test('webhooks: commits arrive in order, signed, batched; a failing receiver gets retries with the same delivery id; a restart resumes where it left off', async (t) => {
  const dir = tempDir('webhooks');
  t.after(dir.cleanup);
  const rx = await receiver(t);
  const hook: WebhookOptions = { url: rx.url, secret: SECRET, retryMinMs: 20, maxBatch: 50 };
  let srv = await createServer({ port: 0, dataDir: dir.dir, machines: [chat], log: 'silent', webhooks: [hook] });
  t.after(() => srv.close());
  const c = await connect({ url: srv.url, room: 'hooked', machine: chat, clientId: 'w1' });
  t.after(() => c.close());
  await online(c);
  for (let i = 1; i <= 5; i++) await c.ops.say({ text: `m${i}` }).authoritative;
  await until(() => rx.positions().length === 5, 5000, 'five delivered');
  assert.deepEqual(rx.positions(), [1, 2, 3, 4, 5]);
  assert.ok(
    rx.accepted.every((d) => verifies(SECRET, d)),
    'every request verifies with the standardwebhooks library and the secret',
  );
  const first = rx.accepted[0];
  assert.deepEqual(first.body.entries.map((e) => [e.client, e.seq, e.name, (e.args as { text: string }).text])[0], ['w1', 1, 'say', 'm1']);
  assert.equal(first.id, `hooked:1-${first.body.to}`, 'the delivery id names the positions it carries');
  // The receiver fails: each request is retried (same id) until it answers 2xx; nothing is skipped.
  rx.fail(true);
  const hs = Array.from({ length: 120 }, (_, i) => c.ops.say({ text: `n${i}` }));
  await Promise.all(hs.map((h) => h.authoritative));
  const failed = async () => (await srv.metrics.webhookDeliveries.get()).values.find((v) => v.labels.result === 'failed')?.value ?? 0;
  for (const end = Date.now() + 10_000; (await failed()) < 3; ) {
    assert.ok(Date.now() < end, 'three failed requests within 10 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  const retried = rx.seen.slice(5);
  assert.ok(
    retried.every((d) => d.id === retried[0].id),
    `a retry repeats the same delivery: ${retried.map((d) => d.id).join(' ')}`,
  );
  // Down across a restart: the next server resumes from the last accepted position, from the store.
  await c.close();
  await srv.close();
  rx.fail(false);
  srv = await createServer({ port: 0, dataDir: dir.dir, machines: [chat], log: 'silent', webhooks: [hook] });
  await until(() => rx.positions().length === 125, 10_000, 'the rest after the restart');
  assert.deepEqual(
    rx.positions(),
    Array.from({ length: 125 }, (_, i) => i + 1),
    'each position once, in order',
  );
  assert.ok(
    rx.accepted.every((d) => d.body.entries.length <= 50),
    'batches of at most maxBatch',
  );
  assert.deepEqual(srv.loadedRooms(), [], 'read from the store: the room was not loaded for it');
});

test('webhooks on a store other than SQLite (a MemoryStore, from @hercules/server/core): delivered in order, retried, positions kept in memory', async (t) => {
  const rx = await receiver(t);
  const store = new MemoryStore();
  const srv = await createCoreServer({ port: 0, store, machines: [chat], log: 'silent', webhooks: [{ url: rx.url, secret: SECRET, retryMinMs: 20 }] });
  t.after(() => srv.close());
  const c = await connect({ url: srv.url, room: 'mem', machine: chat, clientId: 'm1' });
  t.after(() => c.close());
  await online(c);
  for (let i = 1; i <= 3; i++) await c.ops.say({ text: `m${i}` }).authoritative;
  await until(() => rx.positions().length === 3, 5000, 'three delivered');
  rx.fail(true);
  await c.ops.say({ text: 'm4' }).authoritative;
  await until(() => rx.seen.length > rx.accepted.length + 1, 5000, 'retried while failing');
  rx.fail(false);
  await until(() => rx.positions().length === 4, 5000, 'the fourth once the receiver answers');
  assert.deepEqual(rx.positions(), [1, 2, 3, 4], 'each position once, in order');
  assert.ok(
    rx.accepted.every((d) => verifies(SECRET, d)),
    'signed',
  );
});

test('webhooks: only the rooms asked for; bad options are refused at start', async (t) => {
  const dir = tempDir('webhooks-rooms');
  t.after(dir.cleanup);
  const rx = await receiver(t);
  const srv = await createServer({
    port: 0,
    dataDir: dir.dir,
    machines: [chat],
    log: 'silent',
    webhooks: [{ url: rx.url, secret: SECRET, rooms: ['wanted'] }],
  });
  t.after(() => srv.close());
  await srv.room('other', 'chat').submit('say', { text: 'not for the hook' }, { author: 'x' });
  await srv.room('wanted', 'chat').submit('say', { text: 'for the hook' }, { author: 'x' });
  await until(() => rx.accepted.length === 1, 5000, 'one delivery');
  assert.equal(rx.accepted[0].body.room, 'wanted');
  const bad = (webhooks: WebhookOptions[]) => createServer({ port: 0, dataDir: dir.dir, machines: [chat], log: 'silent', webhooks });
  await assert.rejects(bad([{ url: 'ftp://x', secret: SECRET }]), (e: unknown) => e instanceof HerculesError && /url must be an http\(s\) URL/.test(e.message));
  const refused = (webhooks: WebhookOptions[], message: RegExp) =>
    assert.rejects(bad(webhooks), (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && message.test(e.message));
  // The old scheme's secret under the default scheme: refused with the way out named.
  await refused([{ url: rx.url, secret: LEGACY_SECRET }], /secret must be whsec_ followed by the base64 of 24 to 64 random bytes.*signature: 'legacy'/);
  await refused([{ url: rx.url, secret: `whsec_${Buffer.alloc(16).toString('base64')}` }], /secret must be whsec_/);
  await refused([{ url: rx.url, secret: `whsec_${Buffer.alloc(65).toString('base64')}` }], /secret must be whsec_/);
  await refused([{ url: rx.url, secret: 'whsec_not base64!' }], /secret must be whsec_/);
  await refused([{ url: rx.url, secret: [] }], /secret must be a whsec_ secret or a non-empty list/);
  await refused([{ url: rx.url, secret: 'short', signature: 'legacy' }], /secret must be a string of at least 32/);
  await refused([{ url: rx.url, secret: [LEGACY_SECRET], signature: 'legacy' }], /signature: 'legacy' takes one secret/);
  await refused([{ url: rx.url, secret: SECRET, signature: 'hmac' as 'standard' }], /signature must be 'standard' or 'legacy'/);
});

test('webhooks: Standard Webhooks signatures verify with the standardwebhooks library; a tampered body, a stale or altered timestamp and a wrong secret are refused; a list of secrets signs with each', async (t) => {
  const dir = tempDir('webhooks-standard');
  t.after(dir.cleanup);
  const rx = await receiver(t);
  const old = newWebhookSecret();
  // Rotation: the new secret first, the old one still signing until every receiver has the new.
  const srv = await createServer({ port: 0, dataDir: dir.dir, machines: [chat], log: 'silent', webhooks: [{ url: rx.url, secret: [SECRET, old] }] });
  t.after(() => srv.close());
  const sentAt = Date.now();
  // A room name with a dot: the id must hold none (the signed text joins id, timestamp and body with dots).
  await srv.room('team.alpha', 'chat').submit('say', { text: 'for the hook' }, { author: 'x' });
  await until(() => rx.accepted.length === 1, 5000, 'one delivery');
  await srv.close();
  const d = rx.accepted[0];
  assert.equal(d.id, 'team%2Ealpha:1-1');
  assert.equal(d.body.room, 'team.alpha');
  assert.ok(Math.abs(Number(d.headers['webhook-timestamp']) - sentAt / 1000) < 5, `webhook-timestamp in seconds: ${d.headers['webhook-timestamp']}`);
  assert.match(d.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/, 'one v1 signature per secret');
  assert.ok(!Object.keys(d.headers).some((h) => h.startsWith('x-hercules-')), 'no legacy headers');

  assert.ok(verifies(SECRET, d), 'the new secret verifies');
  assert.ok(verifies(old, d), 'the old secret verifies');
  assert.ok(!verifies(newWebhookSecret(), d), 'another secret does not');
  assert.ok(!verifies(SECRET, { ...d, raw: d.raw.replace('for the hook', 'for the hooK') }), 'a tampered body is refused');
  assert.ok(!verifies(SECRET, { ...d, headers: { ...d.headers, 'webhook-id': 'team%2Ealpha:1-2' } }), 'an altered id is refused');
  // A replay made fresh by a new timestamp header is refused: the signature covers the timestamp.
  const fresh = String(Math.floor(Date.now() / 1000) + 1);
  assert.ok(!verifies(SECRET, { ...d, headers: { ...d.headers, 'webhook-timestamp': fresh } }), 'an altered timestamp is refused');
  // The same delivery received 6 minutes later is stale (the library's tolerance is 5), 4 later is not.
  const now = Date.now();
  const later = t.mock.method(Date, 'now', () => now + 6 * 60_000);
  assert.throws(() => new Webhook(SECRET).verify(d.raw, d.headers), /timestamp too old/);
  later.mock.mockImplementation(() => now + 4 * 60_000);
  assert.ok(verifies(SECRET, d), 'four minutes later it still verifies');
  later.mock.restore();
});

test("webhooks: signature: 'legacy' (deprecated) keeps the old x-hercules-* headers", async (t) => {
  const dir = tempDir('webhooks-legacy');
  t.after(dir.cleanup);
  const rx = await receiver(t);
  const srv = await createServer({
    port: 0,
    dataDir: dir.dir,
    machines: [chat],
    log: 'silent',
    webhooks: [{ url: rx.url, secret: LEGACY_SECRET, signature: 'legacy' }],
  });
  t.after(() => srv.close());
  await srv.room('old.scheme', 'chat').submit('say', { text: 'legacy' }, { author: 'x' });
  await until(() => rx.accepted.length === 1, 5000, 'one delivery');
  const d = rx.accepted[0];
  assert.equal(d.id, 'old.scheme:1-1');
  assert.equal(d.headers['x-hercules-signature'], webhookSignature(LEGACY_SECRET, d.headers['x-hercules-timestamp'], d.raw));
  assert.ok(Math.abs(Number(d.headers['x-hercules-timestamp']) - Date.now()) < 10_000, 'x-hercules-timestamp in ms');
  assert.ok(!('webhook-signature' in d.headers), 'no Standard Webhooks headers');
});

test('the store keeps what webhooks have not had past a checkpoint, up to retainAtMost; past that a reader sees the gap', async (t) => {
  const { SqliteStore } = await import('../src/index.ts');
  const dir = tempDir('retain');
  t.after(dir.cleanup);
  const entry = (pos: number): LogEntry => ({ pos, client: 'c', seq: pos, name: 'say', args: { text: `m${pos}` }, author: 'c' });
  const fill = async (store: InstanceType<typeof SqliteStore>, room: string) => {
    await store.open(room, { machine: 'chat', version: 1, initial: { messages: [] } });
    for (let p = 1; p <= 10; p++) await store.append(room, { after: p - 1, entries: [entry(p)] });
    await store.append(room, { after: 10, checkpoint: { pos: 8, state: { messages: [] } } });
  };
  let keepFrom = 3;
  // No history kept (retention ops 0): what webhooks keep, alone.
  const store = new SqliteStore(dir.dir, { checkpointEvery: 1, retainFrom: () => keepFrom, retainAtMost: 4, retention: { ops: 0 } });
  t.after(() => store.close());
  await fill(store, 'kept');
  // Wanted from 3, but at most 4 behind the checkpoint at 8: from 5 on is kept, 3 and 4 are a gap.
  const p = await store.peek('kept', 2, 100);
  assert.equal(p?.from, 5);
  assert.deepEqual(
    p?.entries.map((e) => e.pos),
    [5, 6, 7, 8, 9, 10],
  );
  keepFrom = Number.POSITIVE_INFINITY; // nobody waits: a checkpoint prunes what it covers
  await fill(store, 'pruned');
  assert.equal((await store.peek('pruned', 2, 100))?.from, 9);
});
