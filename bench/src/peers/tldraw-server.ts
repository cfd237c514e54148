/**
 * tldraw sync server in its own process: one `TLSocketRoom` per room (the URL path), documents
 * in memory (its default `InMemorySyncStorage`), sockets from `ws`. Prints `PORT <n>` once
 * listening on a free port on 127.0.0.1.
 */
import http from 'node:http';
import { WebSocketServer } from 'ws';
import { TLSocketRoom } from '@tldraw/sync-core';
import { cellSchema, emptySnapshot, type CellRecord } from './tldraw-schema.ts';

const rooms = new Map<string, TLSocketRoom<CellRecord>>();
let sessions = 0;
const server = http.createServer((_req, res) => {
  res.writeHead(426);
  res.end('websocket only');
});
const wss = new WebSocketServer({ server });
wss.on('connection', (ws, req) => {
  const name = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
  let room = rooms.get(name);
  if (!room) {
    room = new TLSocketRoom<CellRecord>({ schema: cellSchema, initialSnapshot: emptySnapshot() });
    rooms.set(name, room);
  }
  room.handleSocketConnect({ sessionId: `s${++sessions}`, socket: ws });
});

server.listen(0, '127.0.0.1', () => {
  console.log(`PORT ${(server.address() as { port: number }).port}`);
});

process.on('SIGTERM', () => {
  for (const r of rooms.values()) r.close();
  for (const ws of wss.clients) ws.terminate();
  wss.close();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
