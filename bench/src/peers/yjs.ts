/**
 * Yjs behind the common peer interface: a Y.Map 'cells' in the room `doc`, synced through the
 * stock y-websocket server (yjs-server.ts, own process, documents in memory).
 */
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import WebSocket from 'ws';
import { pkgVersion, spawnServer } from './peer-process.ts';
import type { PeerClient, PeerSystem } from './types.ts';

export const yjs: PeerSystem = {
  name: `Yjs ${pkgVersion('yjs')} + y-websocket ${pkgVersion('y-websocket')} (server @y/websocket-server ${pkgVersion('@y/websocket-server')}, in memory)`,
  startServer: () => spawnServer(new URL('./yjs-server.ts', import.meta.url)),

  async connect(host, port, doc, _clientName): Promise<PeerClient> {
    const ydoc = new Y.Doc();
    const cells = ydoc.getMap<string>('cells');
    const provider = new WebsocketProvider(`ws://${host}:${port}`, doc, ydoc, {
      WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket, // Node 20 has no global WebSocket (without a flag)
      // Node 20 has a global BroadcastChannel: without this, clients in one process would also
      // exchange updates directly, bypassing the server and the delay proxy.
      disableBc: true,
    });
    // 'sync' fires (true) once the server's state has been received after connecting.
    if (!provider.synced)
      await new Promise<void>((resolve) => {
        const onSync = (synced: boolean) => {
          if (synced) {
            provider.off('sync', onSync);
            resolve();
          }
        };
        provider.on('sync', onSync);
      });
    const listeners: ((key: string, value: string) => void)[] = [];
    // Updates applied by the provider run in transactions with local === false; our own set()
    // transactions are local. Within one remote update only a key's final value is reported.
    cells.observe((event, txn) => {
      if (txn.local) return;
      for (const [key, change] of event.changes.keys) {
        if (change.action === 'delete') continue;
        const value = cells.get(key)!;
        for (const fn of listeners) fn(key, value);
      }
    });
    return {
      // One transaction per edit: y-websocket sends each transaction's update right away.
      set(key, value) {
        ydoc.transact(() => cells.set(key, value));
      },
      // No `acked`: the y-websocket protocol has no server acknowledgement of updates.
      onRemote(fn) {
        listeners.push(fn);
      },
      async close() {
        const ws = provider.ws;
        provider.destroy(); // closes the socket, stops the resync/liveness timers
        if (ws && ws.readyState !== ws.CLOSED) {
          await Promise.race([new Promise((r) => ws.addEventListener('close', r, { once: true })), new Promise((r) => setTimeout(r, 1000))]);
        }
        ydoc.destroy();
      },
    };
  },
};
