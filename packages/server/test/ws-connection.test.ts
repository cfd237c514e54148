/**
 * wsConnection's corking: the frames a connection is sent in one turn leave in one socket write
 * (one `writev`), and a frame sent in a later turn is not held for it.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { wsConnection, type WsSocket } from '../src/ws-connection.ts';

/** A real server-side WebSocket and the socket under it, with the writes that reach the socket's stream counted. */
async function pair(t: { after(fn: () => unknown): void }) {
  const http = createServer();
  const wss = new WebSocketServer({ noServer: true });
  const accepted = new Promise<{ ws: WebSocket; socket: Socket }>((resolve) =>
    http.on('upgrade', (req: IncomingMessage, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => resolve({ ws, socket: req.socket }))),
  );
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const client = new WebSocket(`ws://127.0.0.1:${(http.address() as { port: number }).port}`);
  const received: Buffer[] = [];
  client.on('message', (d: Buffer) => received.push(d));
  const { ws, socket } = await accepted;
  t.after(() => {
    client.terminate();
    wss.close();
    http.close();
  });
  const writes = { n: 0 };
  const s = socket as unknown as { _writev: (...a: unknown[]) => unknown; _write: (...a: unknown[]) => unknown };
  for (const m of ['_writev', '_write'] as const) {
    const orig = s[m].bind(socket);
    s[m] = (...a: unknown[]) => {
      writes.n++;
      return orig(...a);
    };
  }
  return { ws: ws as unknown as WsSocket, socket, writes, received };
}

const frame = (i: number) => new Uint8Array([0x92, i, i]);
const until = async (ok: () => boolean) => {
  for (let i = 0; !ok(); i++) {
    if (i > 500) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

test('the frames of one turn leave in one socket write; each arrives whole and in order', async (t) => {
  const { ws, socket, writes, received } = await pair(t);
  const conn = wsConnection(ws, '127.0.0.1', socket);
  for (let i = 0; i < 5; i++) conn.send(frame(i));
  assert.equal(writes.n, 0, 'nothing written before the turn ends');
  await Promise.resolve();
  assert.equal(writes.n, 1, 'one write for the turn');
  await until(() => received.length === 5);
  assert.deepEqual(
    received.map((b) => [...b]),
    [0, 1, 2, 3, 4].map((i) => [...frame(i)]),
  );
  // A later turn's frame goes at the end of that turn, not later.
  await new Promise((r) => setTimeout(r, 10));
  conn.send(frame(9));
  await Promise.resolve();
  assert.equal(writes.n, 2);
  await until(() => received.length === 6);
});

test('without the socket (another transport), each frame is its own write, as ws writes it', async (t) => {
  const { ws, writes, received } = await pair(t);
  const conn = wsConnection(ws, '127.0.0.1');
  for (let i = 0; i < 3; i++) conn.send(frame(i));
  await Promise.resolve();
  assert.equal(writes.n, 3);
  await until(() => received.length === 3);
});
