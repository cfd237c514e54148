/**
 * Automerge (automerge-repo) behind the common peer interface: one document `{ cells: {} }`
 * per `doc` name, synced through a sync-server Repo (automerge-server.ts, own process).
 *
 * Documents have random ids, not names. The first connect() for a name (in this process)
 * creates the document and waits until the server has it; later connect() calls for that name
 * find() it by URL. The registry is cleared by startServer(), since a new server has none of
 * the old documents.
 */
import * as A from '@automerge/automerge';
import { Repo, decodeHeads, type AutomergeUrl, type DocHandle, type PeerId } from '@automerge/automerge-repo';
import { WebSocketClientAdapter } from '@automerge/automerge-repo-network-websocket';
import { pkgVersion, spawnServer } from './peer-process.ts';
import type { PeerClient, PeerSystem } from './types.ts';

type Sheet = { cells: Record<string, A.ImmutableString> };
const docs = new Map<string, Promise<AutomergeUrl>>();

export const automerge: PeerSystem = {
  name: `Automerge ${pkgVersion('@automerge/automerge')} + automerge-repo ${pkgVersion('@automerge/automerge-repo')} (websocket ${pkgVersion('@automerge/automerge-repo-network-websocket')}, in memory)`,
  startServer() {
    docs.clear();
    return spawnServer(new URL('./automerge-server.ts', import.meta.url));
  },

  async connect(host, port, doc, clientName): Promise<PeerClient> {
    // The client adapter uses the `ws` package in Node (via isomorphic-ws).
    const repo = new Repo({
      network: [new WebSocketClientAdapter(`ws://${host}:${port}`)],
      peerId: `${clientName}-${Math.random().toString(36).slice(2, 8)}` as PeerId,
    });
    // Wait for the server peer: otherwise, if joining takes over 1 s (slow proxy), the adapter
    // gives up waiting and find() would report the document as unavailable.
    while (repo.peers.length === 0) await new Promise((r) => setTimeout(r, 5));
    let handle: DocHandle<Sheet>;
    const known = docs.get(doc);
    if (known) {
      handle = await repo.find<Sheet>(await known); // resolves once the server sent it
    } else {
      handle = repo.create<Sheet>({ cells: {} });
      // Register before the first await so that concurrent connect() calls share this document.
      const created = serverHas(handle, A.getHeads(handle.doc())).then(() => handle.url);
      docs.set(doc, created);
      await created;
    }

    // Local vs remote: handle.change() emits its 'change' event synchronously, so any 'change'
    // event outside our own change() call came from the network. Its patches are a diff of the
    // whole sync message, so only a key's final value in it is reported.
    const listeners: ((key: string, value: string) => void)[] = [];
    let local = false;
    // Acks: the server's heads (from its sync messages) say which of our changes it has applied.
    const acks = ackTracker(handle);
    handle.on('change', ({ doc: d, patches }) => {
      if (local) return;
      acks.settle(); // remote changes may let us resolve acks waiting on unknown server heads
      const keys = new Set<string>();
      for (const p of patches) if (p.path[0] === 'cells' && p.path.length >= 2) keys.add(String(p.path[1]));
      for (const key of keys) {
        const value = d.cells[key]?.toString();
        if (value !== undefined) for (const fn of listeners) fn(key, value);
      }
    });

    return {
      set(key, value) {
        local = true;
        // An ImmutableString is an atomic (last-writer-wins) value, like a Yjs map entry; a plain
        // string would become a collaborative text object, one op per character.
        try {
          handle.change((d) => {
            d.cells[key] = new A.ImmutableString(value);
          });
        } finally {
          local = false;
        }
        acks.sent(value, A.getHeads(handle.doc())[0]);
      },
      acked: acks.acked,
      onRemote(fn) {
        listeners.push(fn);
      },
      async close() {
        await repo.shutdown();
      },
    };
  },
};

/** Resolves once a peer with a storageId (the sync server) reports heads covering `heads`. */
function serverHas(handle: DocHandle<Sheet>, heads: A.Heads): Promise<void> {
  return new Promise((resolve) => {
    const check = ({ heads: remote }: { heads: Parameters<typeof decodeHeads>[0] }) => {
      const r = decodeHeads(remote);
      if (heads.every((h) => r.includes(h))) {
        handle.off('remote-heads', check);
        resolve();
      }
    };
    handle.on('remote-heads', check);
  });
}

/**
 * Per-edit server acknowledgement. A change is acked once it is an ancestor of (or one of) the
 * server's latest heads. Our own changes form a chain, so the acked ones are always a prefix of
 * `pending`. If the server's heads include changes we have not received yet we cannot walk
 * them, so we decide again when they arrive (next remote change) or new server heads come.
 */
function ackTracker(handle: DocHandle<Sheet>) {
  const pending: { hash: string; resolve: () => void }[] = [];
  const byValue = new Map<string, Promise<void>>();
  let server: A.Heads | undefined;
  const settle = () => {
    if (!pending.length || !server) return;
    const doc = handle.doc();
    let n: number;
    if (server.includes(pending[pending.length - 1].hash))
      n = pending.length; // common case, no walk
    else {
      if (!A.hasHeads(doc, server)) return;
      const notAcked = new Set(A.getChangesMetaSince(doc, server).map((c) => c.hash));
      for (n = 0; n < pending.length && !notAcked.has(pending[n].hash); n++);
    }
    for (const p of pending.splice(0, n)) p.resolve();
  };
  handle.on('remote-heads', ({ heads }) => {
    server = decodeHeads(heads);
    settle();
  });
  return {
    settle,
    sent(value: string, hash: string) {
      byValue.set(value, new Promise<void>((resolve) => pending.push({ hash, resolve })));
      if (byValue.size > 100_000) byValue.delete(byValue.keys().next().value!);
    },
    acked: (_key: string, value: string) => byValue.get(value) ?? Promise.reject(new Error('not set here')),
  };
}
