/**
 * tldraw sync (`@tldraw/sync-core`: server-authoritative, clients rebase their pending changes,
 * the closest design to ours) behind the common peer interface. A cell is a `cell` record in the
 * client's store; the server is tldraw-server.ts (own process, in memory; `tldrawSqlite`: on SQLite).
 *
 * tldraw's client is frame-driven: it batches pushes and applies incoming diffs once per
 * animation frame, at most 60 a second (`FpsScheduler`). Node has no requestAnimationFrame; as
 * a browser with an idle main thread would, it runs the callback at the next turn of the event
 * loop (setImmediate), so the 60 Hz limit is tldraw's own and an idle client adds no frame wait.
 * The socket is a minimal `TLPersistentClientSocket` over `ws` (tldraw's ClientWebSocketAdapter
 * needs a DOM), reassembling chunked messages with tldraw's JsonChunkAssembler.
 */
import WebSocket from 'ws';
import { JsonChunkAssembler, TLSyncClient, type TLPersistentClientSocket } from '@tldraw/sync-core';
import { Store } from '@tldraw/store';
import { atom } from '@tldraw/state';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkgVersion, spawnServer } from './peer-process.ts';
import { Cell, cellSchema, type CellRecord } from './tldraw-schema.ts';
import type { PeerClient, PeerSystem } from './types.ts';

const g = globalThis as { requestAnimationFrame?: (cb: (t: number) => void) => unknown; cancelAnimationFrame?: (h: unknown) => void };
g.requestAnimationFrame ??= (cb) => setImmediate(() => cb(performance.now()));
g.cancelAnimationFrame ??= (h) => clearImmediate(h as NodeJS.Immediate);

type Listener<T> = (v: T) => void;

function wsSocket(url: string): TLPersistentClientSocket<object, object> {
  const onMessage = new Set<Listener<object>>();
  const onStatus = new Set<Listener<{ status: 'online' | 'offline' } | { status: 'error'; reason: string }>>();
  const chunks = new JsonChunkAssembler();
  let ws: WebSocket;
  let closed = false;
  const socket: TLPersistentClientSocket<object, object> = {
    connectionStatus: 'offline',
    sendMessage(msg) {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
    },
    onReceiveMessage(cb) {
      onMessage.add(cb);
      return () => onMessage.delete(cb);
    },
    onStatusChange(cb) {
      onStatus.add(cb);
      return () => onStatus.delete(cb);
    },
    restart() {
      ws.close();
    },
    close() {
      closed = true;
      ws.close();
    },
  };
  const open = () => {
    ws = new WebSocket(url);
    ws.on('open', () => {
      socket.connectionStatus = 'online';
      for (const cb of onStatus) cb({ status: 'online' });
    });
    ws.on('message', (data) => {
      const r = chunks.handleMessage(String(data));
      if (r && 'data' in r) for (const cb of onMessage) cb(r.data);
    });
    ws.on('error', () => {});
    ws.on('close', () => {
      socket.connectionStatus = 'offline';
      for (const cb of onStatus) cb({ status: 'offline' });
      if (!closed) setTimeout(open, 100);
    });
  };
  open();
  return socket;
}

export const tldraw: PeerSystem = {
  name: `tldraw sync ${pkgVersion('@tldraw/sync-core')} (in memory)`,
  startServer: () => spawnServer(new URL('./tldraw-server.ts', import.meta.url)),

  async connect(host, port, doc, _clientName): Promise<PeerClient> {
    const store = new Store<CellRecord>({ schema: cellSchema, props: {} });
    let client!: TLSyncClient<CellRecord>;
    await new Promise<void>((resolve, reject) => {
      client = new TLSyncClient<CellRecord>({
        store,
        socket: wsSocket(`ws://${host}:${port}/${doc}`),
        presence: atom('presence', null),
        onLoad: () => resolve(),
        onSyncError: (reason) => reject(new Error(`tldraw sync error: ${reason}`)),
      });
    });
    const listeners: ((key: string, value: string) => void)[] = [];
    // Changes the client applies from the server come with source 'remote'.
    store.listen(
      (entry) => {
        for (const r of Object.values(entry.changes.added)) for (const fn of listeners) fn(r.id.slice(5), r.value);
        for (const [, r] of Object.values(entry.changes.updated)) for (const fn of listeners) fn(r.id.slice(5), r.value);
      },
      { source: 'remote', scope: 'document' },
    );
    return {
      set(key, value) {
        store.put([Cell.create({ id: Cell.createId(key), value })]);
      },
      // No `acked`: a push's confirmation is internal to TLSyncClient.
      onRemote(fn) {
        listeners.push(fn);
      },
      async close() {
        client.close();
      },
    };
  },
};

/**
 * The same client against tldraw's server on its SQLite storage (tldraw-server.ts --sqlite):
 * durable like the Hercules server, each push fsynced before it is broadcast, on the same disk.
 */
export const tldrawSqlite: PeerSystem = {
  ...tldraw,
  name: `tldraw sync ${pkgVersion('@tldraw/sync-core')} (SQLite, fsync per push)`,
  async startServer() {
    const dir = mkdtempSync(join(tmpdir(), 'tldraw-sqlite-'));
    const s = await spawnServer(new URL('./tldraw-server.ts', import.meta.url), 15_000, ['--sqlite', dir]);
    return {
      ...s,
      async stop() {
        await s.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};
