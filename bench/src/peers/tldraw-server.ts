/**
 * tldraw sync server in its own process: one `TLSocketRoom` per room (the URL path), sockets
 * from `ws`. Documents in memory (its default `InMemorySyncStorage`), or with `--sqlite <dir>` in
 * its `SQLiteSyncStorage`, one better-sqlite3 file per room, set up as the Hercules server sets
 * up its own (WAL, synchronous=FULL: each push's transaction is fsynced before it is broadcast).
 * Prints `PORT <n>` once listening on a free port on 127.0.0.1.
 */
import http from 'node:http';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import Database from 'better-sqlite3';
import { NodeSqliteWrapper, SQLiteSyncStorage, TLSocketRoom } from '@tldraw/sync-core';
import { cellSchema, emptySnapshot, type CellRecord } from './tldraw-schema.ts';

const sqliteAt = process.argv.indexOf('--sqlite');
const sqliteDir = sqliteAt > 0 ? process.argv[sqliteAt + 1] : undefined;
const dbs: Database.Database[] = [];

function newRoom(name: string): TLSocketRoom<CellRecord> {
  if (!sqliteDir) return new TLSocketRoom<CellRecord>({ schema: cellSchema, initialSnapshot: emptySnapshot() });
  const db = new Database(join(sqliteDir, `${encodeURIComponent(name)}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  dbs.push(db);
  const storage = new SQLiteSyncStorage<CellRecord>({ sql: new NodeSqliteWrapper(db), snapshot: emptySnapshot() });
  return new TLSocketRoom<CellRecord>({ schema: cellSchema, storage });
}

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
    room = newRoom(name);
    rooms.set(name, room);
  }
  room.handleSocketConnect({ sessionId: `s${++sessions}`, socket: ws });
});

server.listen(0, '127.0.0.1', () => {
  console.log(`PORT ${(server.address() as { port: number }).port}`);
});

process.on('SIGTERM', () => {
  for (const r of rooms.values()) r.close();
  for (const db of dbs) db.close();
  for (const ws of wss.clients) ws.terminate();
  wss.close();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
