/**
 * y-websocket server in its own process: the stock connection handler of @y/websocket-server
 * (documents in memory, no persistence since YPERSISTENCE is unset), one Y.Doc per room, the
 * room being the URL path. Prints `PORT <n>` once listening on a free port on 127.0.0.1.
 */
import http from 'node:http';
import { WebSocketServer } from 'ws';
import { setupWSConnection } from '@y/websocket-server/utils';

const server = http.createServer((_req, res) => {
  res.writeHead(426);
  res.end('websocket only');
});
const wss = new WebSocketServer({ server });
wss.on('connection', (conn, req) => setupWSConnection(conn, req));

server.listen(0, '127.0.0.1', () => {
  console.log(`PORT ${(server.address() as { port: number }).port}`);
});

process.on('SIGTERM', () => {
  // setupWSConnection keeps a ping interval per connection; terminating the sockets clears them.
  for (const ws of wss.clients) ws.terminate();
  wss.close();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
