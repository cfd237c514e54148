/**
 * Isolation: no failure while storing, encoding or delivering one room's output reaches another
 * output, another connection or another room, and none escapes into the process (these tests
 * run the server embedded, so an escaped exception fails them as an uncaught exception).
 *
 * The failures are injected after ordering (a RoomEngine method is wrapped to put arguments
 * nested 5,000 deep into one output, as an op that passed every check could), so the tests hold
 * whatever the engine refuses before ordering.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect } from 'node:net';
import { connect } from '@hercules/client';
import { RoomEngine, type RoomOutput } from '@hercules/core';
import { createServer, type ServerOptions } from '../src/index.ts';
import { chat, interiorDesign } from '../../../apps/machines.ts';
import { tempDir, until, online, rawConnection } from './helpers.ts';

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat, interiorDesign], log: 'silent', ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

const deep = (n: number): unknown => {
  let v: unknown = 'bottom';
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

/** Wrap RoomEngine.prototype.message for the test: `edit` may change an output after ordering. */
function tamper(t: { after: (fn: () => unknown) => void }, edit: (out: RoomOutput) => void): void {
  const proto = RoomEngine.prototype as unknown as { message: (...a: unknown[]) => RoomOutput };
  const real = proto.message;
  proto.message = function (this: RoomEngine, ...a: unknown[]) {
    const out = real.apply(this, a);
    edit(out);
    return out;
  };
  t.after(() => {
    proto.message = real;
  });
}

const counter = async (srv: { metrics: any }, name: string, labels: Record<string, string> = {}) => {
  if (!srv.metrics[name]) return 0;
  const v = (await srv.metrics[name].get()).values as { value: number; labels: Record<string, string> }[];
  return v.filter((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l)).reduce((a, x) => a + x.value, 0);
};

// spec: SEC-CONTAINED
test('an output that cannot be serialised for storage fails only its own room; the other rooms of the group commit are stored and announced', async (t) => {
  // Outputs wait 500 ms for the group commit, so the three below share one.
  const srv = await server(t, 'iso-commit', { commitWindowMs: 500 });
  tamper(t, (out) => {
    for (const e of out.persist.appended) if ((e.args as { text?: string })?.text === 'POISON') (e as { args: unknown }).args = deep(5000);
  });
  const statuses: string[] = [];
  const good = await connect({
    url: srv.url,
    room: 'good',
    machine: chat,
    clientId: 'good',
    backoff: { minMs: 20, maxMs: 100 },
    onStatus: (st) => statuses.push(st),
  });
  await online(good);
  // An honest client in the failing room, whose op shares the failed commit.
  const neighbour = await connect({ url: srv.url, room: 'bad', machine: chat, clientId: 'neighbour', backoff: { minMs: 20, maxMs: 100 } });
  await online(neighbour);
  const bad = await rawConnection(srv.url, 'bad');
  bad.hello('bad', chat);
  await until(() => bad.msgs.some((m) => m.t === 'welcome'), 5000, 'welcome');

  bad.send({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'POISON' } }] });
  const h = good.ops.say({ text: 'in the same commit' });
  const n = neighbour.ops.say({ text: 'next door' });
  await h.authoritative;
  assert.ok(!statuses.includes('offline'), `the client of the other room was disconnected: ${[...new Set(statuses)].join(', ')}`);
  // The failing room was dropped (its sender told why), counted, and comes back from disk.
  await until(() => bad.closed(), 5000, 'the poisoning connection closed');
  const err = bad.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'storage-failed' && /could not store/.test(err.message), JSON.stringify(err));
  assert.equal(await counter(srv, 'outputFailures', { stage: 'serialize' }), 1);
  assert.equal(await counter(srv, 'storageErrors'), 0, 'not a storage error: the disk is fine');
  await n.visible; // the neighbour reconnects and resends: nothing durable is lost
  assert.deepEqual(
    neighbour.getState('authoritative').messages.map((m) => m.text),
    ['next door'],
  );
  await good.ops.say({ text: 'later' }).visible;
  bad.ws.close();
  await good.close();
  await neighbour.close();
});

// spec: SEC-CONTAINED
test('a message that cannot be encoded for one connection closes only that connection; the rest of the batch and other rooms are delivered', async (t) => {
  const srv = await server(t, 'iso-encode', { commitWindowMs: 150 });
  // After ordering, the copy of the op sent to other members gets arguments msgpack cannot
  // encode; what is stored (and sent later from the log) is intact.
  tamper(t, (out) => {
    for (const s of out.send) {
      if (s.msg.t !== 'log') continue;
      s.msg = {
        ...s.msg,
        entries: s.msg.entries.map((w) =>
          w.k === 'op' && (w.e.args as { text?: string })?.text === 'POISON' ? { k: 'op' as const, e: { ...w.e, args: deep(5000) } } : w,
        ),
      };
    }
  });
  const bad = await rawConnection(srv.url, 'bad');
  bad.hello('bad', chat);
  await until(() => bad.msgs.some((m) => m.t === 'welcome'), 5000, 'welcome');
  const victimStatuses: string[] = [];
  const victim = await connect({
    url: srv.url,
    room: 'bad',
    machine: chat,
    clientId: 'victim',
    backoff: { minMs: 20, maxMs: 100 },
    onStatus: (st, detail) => victimStatuses.push(`${st}: ${detail ?? ''}`),
  });
  const good = await connect({ url: srv.url, room: 'good', machine: chat, clientId: 'good', backoff: { minMs: 20, maxMs: 100 } });
  await online(victim);
  await online(good);

  // The poison first, then an op of another room, in one group commit: the failure must not
  // drop what follows it in the batch.
  bad.send({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'POISON' } }] });
  await new Promise((r) => setTimeout(r, 20));
  const h = good.ops.say({ text: 'after the poison' });
  await h.visible;
  // The submitter's own verdict (compact, no arguments) went out; the victim was cut, counted,
  // and recovers the op from the log when it reconnects.
  await until(() => bad.msgs.some((m) => m.t === 'log'), 5000, 'the submitter hears its verdict');
  await until(() => victim.getState('authoritative').messages.length === 1, 10_000, 'the victim catches up from the log');
  assert.ok(
    victimStatuses.some((st) => /^offline: encode failed/.test(st)),
    `the victim connection was closed with the reason: ${victimStatuses.join(' | ')}`,
  );
  assert.equal(await counter(srv, 'outputFailures', { stage: 'encode' }), 1);
  assert.ok((await counter(srv, 'refusedConnections', { reason: 'encode-failed' })) >= 1);
  await good.ops.say({ text: 'still serving' }).visible;
  bad.ws.close();
  await victim.close();
  await good.close();
});

// spec: SEC-CONTAINED
test('a throw in one room while ticking, closing or handling a frame stays in that room; the process and the other rooms go on', async (t) => {
  const srv = await server(t, 'iso-engine', { ackTimeoutMs: 200 });
  const proto = RoomEngine.prototype as unknown as Record<'tick' | 'close', (...a: unknown[]) => RoomOutput>;
  const real = { tick: proto.tick, close: proto.close };
  let armed = false;
  for (const k of ['tick', 'close'] as const) {
    proto[k] = function (this: RoomEngine, ...a: unknown[]) {
      if (armed && this.machine === interiorDesign) throw new Error(`planted ${k} bug`);
      return real[k].apply(this, a);
    };
  }
  t.after(() => {
    proto.tick = real.tick;
    proto.close = real.close;
  });
  const good = await connect({ url: srv.url, room: 'good', machine: chat, clientId: 'good' });
  const d = await connect({ url: srv.url, room: 'design', machine: interiorDesign, clientId: 'd', backoff: { minMs: 20, maxMs: 100 } });
  await online(good);
  await online(d);
  armed = true;
  await until(async () => (await counter(srv, 'outputFailures', { stage: 'tick' })) >= 1, 5000, 'tick failure counted');
  await good.ops.say({ text: 'ticking on' }).visible;
  await d.close(); // the engine's close throws for this room
  await good.ops.say({ text: 'closing on' }).visible;
  armed = false;
  const d2 = await connect({ url: srv.url, room: 'design', machine: interiorDesign, clientId: 'd2' });
  await online(d2);
  await d2.ops.move({ id: 'sofa', x: 1, y: 2 }).visible;
  await good.close();
  await d2.close();
});

// spec: SEC-CONTAINED
test('an upgrade request whose URL cannot be parsed is refused, not thrown', async (t) => {
  const srv = await server(t, 'iso-url');
  for (const path of ['http://[', '/?room=%zz%', '//']) {
    const s = netConnect(srv.port, '127.0.0.1');
    s.on('error', () => {});
    let reply = '';
    s.on('data', (b) => {
      reply += String(b);
    });
    s.write(
      `GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    await until(() => reply.length > 0, 5000, `a reply to ${path}`);
    s.destroy();
  }
  const good = await connect({ url: srv.url, room: 'good', machine: chat, clientId: 'good' });
  await good.ops.say({ text: 'still here' }).visible;
  await good.close();
});
