import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTcpServer } from 'node:net';
import { WebSocket } from 'ws';
import type { ConnectedRoom } from '@hercules/client';
import { ClientCodec, PROTOCOL_VERSION, type ClientMessage, type Machine, type ServerMessage } from '@hercules/core';

export function tempDir(tag: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `hercules-${tag}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Poll until `fn` returns truthy, or fail after `ms`. Waits on real I/O, not on timing claims. */
export async function until<T>(fn: () => T | Promise<T>, ms = 10_000, what = 'condition'): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn(); // awaited: a promise is always truthy, its value may not be
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const online = (r: ConnectedRoom<any>) => until(() => r.status() === 'online', 10_000, 'online');

/**
 * A hand-driven WebSocket connection that can send anything a client could: for tests of what
 * the server does with hostile, wrong or silent peers. `query` is appended to `?room=`.
 */
export async function rawConnection(url: string, room: string, query = '') {
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
    /** hello for `machine`, optionally claiming another machine version or protocol version. */
    hello: (client: string, machine: Machine<any, any>, o: { version?: number; protocol?: number } = {}) =>
      ws.send(codec.encode({ t: 'hello', v: o.protocol ?? PROTOCOL_VERSION, client, machine: { name: machine.name, version: o.version ?? machine.version }, have: 0 })),
    welcomed: () => msgs.some((m) => m.t === 'welcome'),
    /** How many of its own ops the server has given a verdict on. */
    verdicts: () => msgs.reduce((n, m) => n + (m.t === 'log' ? m.entries.filter((e) => e.k === 'own').length : 0), 0),
  };
}

/** A loopback port nothing listens on now (bound, then released): for a server to start on, or a dead address. */
export async function freePort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}
