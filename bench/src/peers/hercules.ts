/**
 * Hercules behind the common peer interface: the spreadsheet machine, one cell per key. The
 * server runs in its own process with its SQLite store (as in production; the peers keep their
 * documents in memory, which favours them on the acknowledgement signal).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '@hercules/client';
import { keyedMap, type KeyedMapNode, type Machine, type OpHandle, type StateOf } from '@hercules/core';
import { spreadsheet } from '../../../apps/machines.ts';
import { kvKeyedMap, kvMap } from './kv-machine.ts';
import { startServer } from '../runtime/common.ts';
import { analyseProfile } from '../runtime/throughput.ts';
import type { PeerClient, PeerServer, PeerSystem } from './types.ts';

/** The largest profile in `dir` (the main thread's; tsx's loader thread writes a small one), analysed. */
function printProfile(dir: string): void {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(dir, f))
    .sort((x, y) => statSync(y).size - statSync(x).size);
  if (files.length === 0) return console.log(`no .cpuprofile in ${dir}`);
  const a = analyseProfile(files[0]);
  console.log(`server profile ${files[0]}: ${a.wallMs} ms, idle ${a.idlePct} %`);
  console.table(a.byCategory);
  console.table(a.topFunctions.slice(0, 12));
}

const version = (JSON.parse(readFileSync(new URL('../../../packages/core/package.json', import.meta.url), 'utf8')) as { version: string }).version;
const ROWS = 12,
  COLS = 6;
/** A key names a cell; keys beyond the grid reuse cells (values are unique anyway). */
const cell = (key: string) => {
  let h = 0;
  for (const ch of key) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return { row: h % ROWS, col: (h >>> 8) % COLS };
};

/**
 * One Hercules client behind the peer interface, for a machine: `set` submits the op that sets a
 * key, `diff` reports (key, value) for what changed between two Submitted snapshots. Our own
 * values are not reported (they are not deliveries); `acked` is the op becoming Authoritative.
 */
async function peerClient<M extends Machine<any, any>>(
  url: string,
  doc: string,
  clientName: string,
  machine: M,
  set: (room: { ops: any }, key: string, value: string) => OpHandle,
  diff: (prev: StateOf<M>, next: StateOf<M>, report: (key: string, value: string) => void) => void,
): Promise<PeerClient> {
  const room = await connect({ url, room: doc, machine, clientId: `${clientName}-${Date.now().toString(36)}`, sendAhead: true });
  while (room.status() !== 'online') await new Promise((r) => setTimeout(r, 5));
  const own = new Map<string, Promise<void>>();
  const listeners: ((key: string, value: string) => void)[] = [];
  const report = (key: string, value: string) => {
    if (!own.has(value)) for (const fn of listeners) fn(key, value);
  };
  // Deliveries are read where an app renders them: the Submitted view (with protocol 4, another
  // client's op reaches it before the server's commit, LOG-TENTATIVE; Authoritative once stored).
  let prev = room.getState('submitted');
  room.subscribe('submitted', (s) => {
    diff(prev, s, report);
    prev = s;
  });
  return {
    set(key, value) {
      own.set(
        value,
        set(room, key, value).authoritative.then(() => undefined),
      );
      if (own.size > 100_000) own.delete(own.keys().next().value!);
    },
    acked: (_key, value) => own.get(value) ?? Promise.reject(new Error('not set here')),
    onRemote(fn) {
      listeners.push(fn);
    },
    close: () => room.close(),
  };
}

/** The Hercules server in its own process, on SQLite as shipped or (`memory`) on a MemoryStore. */
function herculesServer(store: 'sqlite' | 'memory'): () => Promise<PeerServer> {
  return async () => {
    // HERCULES_CPU_PROF_DIR: write the server process's CPU profile there and, once it stops,
    // print where its time went (R3's analyseProfile).
    const profDir = process.env.HERCULES_CPU_PROF_DIR;
    const s = await startServer({ cpuProfDir: profDir, store });
    return {
      port: s.port,
      pid: s.child.proc.pid!,
      async stop() {
        // What the server sent over the whole run (latency and throughput parts), by message type.
        const m = await s.metrics().catch(() => ({}) as Record<string, number>);
        const byType = Object.entries(m)
          .filter(([k]) => k.startsWith('hercules_frames_sent_by_type_total{'))
          .map(([k, n]) => `${/type="(\w+)"/.exec(k)?.[1]} ${n}`);
        if (byType.length) console.log(`server frames sent by type: ${byType.join(', ')}; frames received: ${m.hercules_frames_received_total ?? '?'}`);
        // On SQLite: its group commits (store writes) and the WAL fsyncs that settle them.
        if (m.hercules_commit_sync_seconds_count > 0)
          console.log(
            `server commits: ${m.hercules_commit_seconds_count}; WAL fsyncs: ${m.hercules_commit_sync_seconds_count ?? 0} (mean ${((m.hercules_commit_sync_seconds_sum / m.hercules_commit_sync_seconds_count) * 1000 || 0).toFixed(2)} ms)`,
          );
        await s.close();
        if (profDir) printProfile(profDir);
      },
    };
  };
}

export const hercules: PeerSystem = {
  name: `Hercules ${version} (SQLite, fsync per commit)`,
  startServer: herculesServer('sqlite'),
  connect: (host, port, doc, clientName) =>
    peerClient(
      `ws://${host}:${port}`,
      doc,
      clientName,
      spreadsheet,
      (room, key, value) => room.ops.setCell({ ...cell(key), text: value }),
      // Delivery: a cell's text changes by someone else's op. Rows are shared by identity
      // between snapshots, so only changed rows are compared.
      (prev, s, report) => {
        for (let r = 0; r < ROWS; r++) {
          if (s.cells[r] === prev.cells[r]) continue;
          for (let c = 0; c < COLS; c++) if (s.cells[r][c] !== prev.cells[r][c]) report(`${r},${c}`, s.cells[r][c]);
        }
      },
    ),
};

/** A peer over a machine whose `set({ key, value })` op writes one key of one map. */
function mapPeer<M extends Machine<any, any>>(
  name: string,
  machine: M,
  diff: (prev: StateOf<M>, next: StateOf<M>, report: (key: string, value: string) => void) => void,
): PeerSystem {
  return {
    name: `Hercules ${version} ${name} (SQLite, fsync per commit)`,
    startServer: hercules.startServer,
    connect: (host, port, doc, clientName) =>
      peerClient(`ws://${host}:${port}`, doc, clientName, machine, (room, key, value) => room.ops.set({ key, value }), diff),
  };
}

/**
 * The same server with the state an app writes first: every key in one map (`kv-map`), the
 * shape of a Y.Map. The workload's 4 writers x 64 keys (`--keys-per-writer`) make a map of 256 keys.
 */
export const herculesMap = mapPeer('one map', kvMap, (prev, s, report) => {
  if (s.cells === prev.cells) return;
  for (const k in s.cells) if (s.cells[k] !== prev.cells[k]) report(k, s.cells[k]);
});

/** What changed between two versions of a keyedMap's tree: subtrees shared by identity are skipped. */
function diffTrie(prev: KeyedMapNode<string> | null, next: KeyedMapNode<string> | null, report: (key: string, value: string) => void): void {
  if (prev === next || next === null) return;
  if (Array.isArray(next) && Array.isArray(prev)) {
    for (let i = 1; i < next.length; i++) diffTrie(prev[i], next[i], report);
    return;
  }
  if (!Array.isArray(next) && prev !== null && !Array.isArray(prev)) {
    const n = next as Record<string, string>;
    const p = prev as Record<string, string>;
    for (const k in n) if (p[k] !== n[k]) report(k, n[k]);
    return;
  }
  // A leaf split or a branch collapsed (or the subtree is new): compare entry by entry.
  const entries = (node: KeyedMapNode<string> | null) => (node === null ? [] : [...keyedMap.entries({ $keyedMap: 1, size: 0, tree: node })]);
  const old = new Map(entries(prev));
  for (const [k, v] of entries(next)) if (old.get(k) !== v) report(k, v);
}

/** The one-map workload with the map a `keyedMap` (`kv-keyed-map`). */
export const herculesKeyedMap = mapPeer('keyedMap', kvKeyedMap, (prev, s, report) => diffTrie(prev.cells.tree, s.cells.tree, report));

/**
 * The one-map peer on a server that keeps its rooms in memory (a MemoryStore: no disk, nothing
 * survives the process), the storage tldraw's server has by default: its CPU beside tldraw's
 * in-memory server is the comparison on the same footing, as the SQLite one is beside
 * `tldrawSqlite`.
 */
export const herculesMapMemory: PeerSystem = {
  ...herculesMap,
  name: `Hercules ${version} one map (memory store, no disk)`,
  startServer: herculesServer('memory'),
};
