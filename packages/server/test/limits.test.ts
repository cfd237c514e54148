/**
 * Resource bounds of the server adapter (docs/security.md, "Limits and backpressure"): every
 * refusal counted and logged with its reason. Structural checks only (counters, bounds, order
 * of events), never timings.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { WebSocket } from 'ws';
import pino from 'pino';
import { ClientCodec, PROTOCOL_VERSION, type ClientMessage, type Machine, type ServerMessage } from '@hercules/core';
import { createServer, AuthError, type ServerOptions } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until } from './helpers.ts';

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk, _enc, done) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); done(); } });
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: pino({ level: 'info' }, sink), ...extra });
  t.after(async () => { await srv.close(); cleanup(); });
  return Object.assign(srv, { lines });
}

async function raw(url: string, room: string, query = '') {
  const ws = new WebSocket(`${url}/?room=${room}${query}`);
  const codec = new ClientCodec();
  const msgs: ServerMessage[] = [];
  let closed: { code: number; reason: string } | undefined;
  ws.on('message', (d: Buffer) => msgs.push(codec.decode(new Uint8Array(d))));
  ws.on('close', (code, reason) => { closed = { code, reason: reason.toString() }; });
  ws.on('error', () => {});
  await new Promise<void>((res) => { ws.once('open', () => res()); ws.once('close', () => res()); });
  return {
    ws, msgs, codec,
    closed: () => closed,
    send: (m: ClientMessage) => ws.send(codec.encode(m)),
    hello: (client: string, machine: Machine<any, any> = chat, v = PROTOCOL_VERSION) => ws.send(codec.encode({ t: 'hello', v, client, machine: { name: machine.name, version: machine.version }, have: 0 })),
    welcomed: () => msgs.some((m) => m.t === 'welcome'),
    verdicts: () => msgs.reduce((n, m) => n + (m.t === 'log' ? m.entries.filter((e) => e.k === 'own').length : 0), 0),
  };
}

const value = async (srv: { metrics: any }, name: string, labels: Record<string, string> = {}) => {
  const v = srv.metrics[name] ? ((await srv.metrics[name].get()).values as { value: number; labels: Record<string, string> }[]) : [];
  return v.filter((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l)).reduce((a, x) => a + x.value, 0);
};
const says = (from: number, n: number, text = 'x') => ({ t: 'ops' as const, ops: Array.from({ length: n }, (_, i) => ({ seq: from + i, name: 'say', args: { text } })) });

test('every refused or cut connection is counted and logged with its reason', async (t) => {
  const srv = await server(t, 'reasons', {
    authenticate: (req) => {
      const token = new URL(req.url ?? '/', 'http://x').searchParams.get('token');
      if (token === 'bad') throw new AuthError('bad signature');
      return { user: token ?? 'anon' };
    },
    access: (id) => (id?.user === 'nobody' ? 'none' : 'write'),
    limits: { maxClientsPerRoom: 1 },
    heartbeatMs: 60_000,
  });
  const first = await raw(srv.url, 'full');
  first.hello('first');
  await until(() => first.welcomed(), 5000, 'welcome');
  const cases: [string, () => Promise<{ closed: () => unknown }>][] = [
    ['unauthenticated', () => raw(srv.url, 'r', '&token=bad')],
    ['forbidden', () => raw(srv.url, 'r', '&token=nobody')],
    ['bad-room', () => raw(srv.url, '')],
    ['room-full', async () => { const c = await raw(srv.url, 'full'); c.hello('second'); return c; }],
    ['machine-mismatch', async () => { const c = await raw(srv.url, 'r'); c.hello('m', { ...chat, version: 99 } as Machine<any, any>); return c; }],
    ['protocol-version', async () => { const c = await raw(srv.url, 'r'); c.hello('p', chat, PROTOCOL_VERSION + 1); return c; }],
    ['malformed-frame', async () => { const c = await raw(srv.url, 'r'); c.ws.send(new Uint8Array([0xc1, 0xc1])); return c; }],
    ['not-ready', async () => { const c = await raw(srv.url, 'r'); c.send({ t: 'ack', pos: 0 }); return c; }],
    ['seq-gap', async () => { const c = await raw(srv.url, 'r'); c.hello('g'); c.send(says(5, 1)); return c; }],
  ];
  for (const [reason, open] of cases) {
    const c = await open();
    await until(() => c.closed(), 5000, `${reason}: closed`);
    assert.equal(await value(srv, 'refusedConnections', { reason }), 1, `${reason} counted`);
    assert.ok(srv.lines.some((l) => l.reason === reason), `${reason} logged`);
  }
  first.ws.close();
});
