/**
 * automerge-repo sync server in its own process: a Repo behind the stock WebSocket server
 * adapter. It has an in-memory storage adapter only so that it owns a storageId: clients track
 * the heads of peers that have a storageId (handle 'remote-heads'), which is what their `acked`
 * is built on. Documents are kept in memory. Prints `PORT <n>` once listening on 127.0.0.1.
 */
import { WebSocketServer } from 'ws';
import { Repo, type Chunk, type StorageAdapterInterface, type StorageKey } from '@automerge/automerge-repo';
import { WebSocketServerAdapter } from '@automerge/automerge-repo-network-websocket';

/** Storage keys are paths (arrays of strings); a range is every key under a prefix. */
class MemoryStorage implements StorageAdapterInterface {
  #data = new Map<string, { key: StorageKey; data: Uint8Array }>();
  #under = (prefix: StorageKey) => [...this.#data.entries()].filter(([, c]) => prefix.every((p, i) => c.key[i] === p));
  async load(key: StorageKey) {
    return this.#data.get(key.join('/'))?.data;
  }
  async save(key: StorageKey, data: Uint8Array) {
    this.#data.set(key.join('/'), { key, data });
  }
  async remove(key: StorageKey) {
    this.#data.delete(key.join('/'));
  }
  async loadRange(prefix: StorageKey): Promise<Chunk[]> {
    return this.#under(prefix).map(([, c]) => ({ key: c.key, data: c.data }));
  }
  async removeRange(prefix: StorageKey) {
    for (const [k] of this.#under(prefix)) this.#data.delete(k);
  }
}

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
const repo = new Repo({
  // Same `ws` server class; the adapter's typings just name it through isomorphic-ws.
  network: [new WebSocketServerAdapter(wss as unknown as ConstructorParameters<typeof WebSocketServerAdapter>[0])],
  storage: new MemoryStorage(),
  // A sync server does not announce documents; it syncs those a client asks for or sends.
  sharePolicy: async () => false,
});

wss.on('listening', () => console.log(`PORT ${(wss.address() as { port: number }).port}`));

process.on('SIGTERM', async () => {
  setTimeout(() => process.exit(0), 1000).unref();
  await repo.shutdown(); // terminates the client sockets
  wss.close(() => process.exit(0));
});
