/**
 * Hercules behind the common peer interface: the spreadsheet machine, one cell per key. The
 * server runs in its own process with its SQLite store (as in production; the peers keep their
 * documents in memory, which favours them on the acknowledgement signal).
 */
import { readFileSync } from 'node:fs';
import { connect } from '@hercules/client';
import { spreadsheet } from '../../../apps/machines.ts';
import { kvMap } from './kv-machine.ts';
import { startServer } from '../runtime/common.ts';
import type { PeerClient, PeerServer, PeerSystem } from './types.ts';

const version = (JSON.parse(readFileSync(new URL('../../../packages/core/package.json', import.meta.url), 'utf8')) as { version: string }).version;
const ROWS = 12,
  COLS = 6;
/** A key names a cell; keys beyond the grid reuse cells (values are unique anyway). */
const cell = (key: string) => {
  let h = 0;
  for (const ch of key) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return { row: h % ROWS, col: (h >>> 8) % COLS };
};

export const hercules: PeerSystem = {
  name: `Hercules ${version} (SQLite, fsync per commit)`,
  async startServer(): Promise<PeerServer> {
    const s = await startServer();
    return { port: s.port, pid: s.child.proc.pid!, stop: () => s.close() };
  },
  async connect(host, port, doc, clientName): Promise<PeerClient> {
    const room = await connect({ url: `ws://${host}:${port}`, room: doc, machine: spreadsheet, clientId: `${clientName}-${Date.now().toString(36)}` });
    while (room.status() !== 'online') await new Promise((r) => setTimeout(r, 5));
    const own = new Map<string, Promise<void>>();
    const listeners: ((key: string, value: string) => void)[] = [];
    // Delivery: a cell's text changes in the Authoritative view by someone else's op. Rows are
    // shared by identity between snapshots, so only changed rows are compared.
    let prev = room.getState('authoritative');
    room.subscribe('authoritative', (s) => {
      for (let r = 0; r < ROWS; r++) {
        if (s.cells[r] === prev.cells[r]) continue;
        for (let c = 0; c < COLS; c++) {
          const v = s.cells[r][c];
          if (v !== prev.cells[r][c] && !own.has(v)) for (const fn of listeners) fn(`${r},${c}`, v);
        }
      }
      prev = s;
    });
    return {
      set(key, value) {
        const h = room.ops.setCell({ ...cell(key), text: value });
        own.set(
          value,
          h.authoritative.then(() => undefined),
        );
        if (own.size > 100_000) own.delete(own.keys().next().value!);
      },
      acked: (_key, value) => own.get(value) ?? Promise.reject(new Error('not set here')),
      onRemote(fn) {
        listeners.push(fn);
      },
      close: () => room.close(),
    };
  },
};

/**
 * The same server with the state an app writes first: every key in one map (`kv-map`), the
 * shape of a Y.Map. The workload's 4 writers x 64 keys make a map of 256 keys.
 */
export const herculesMap: PeerSystem = {
  name: `Hercules ${version} one map (SQLite, fsync per commit)`,
  startServer: hercules.startServer,
  async connect(host, port, doc, clientName): Promise<PeerClient> {
    const room = await connect({ url: `ws://${host}:${port}`, room: doc, machine: kvMap, clientId: `${clientName}-${Date.now().toString(36)}` });
    while (room.status() !== 'online') await new Promise((r) => setTimeout(r, 5));
    const own = new Map<string, Promise<void>>();
    const listeners: ((key: string, value: string) => void)[] = [];
    // Delivery: a key's value changes in the Authoritative view by someone else's op.
    let prev = room.getState('authoritative').cells;
    room.subscribe('authoritative', (s) => {
      const cells = s.cells;
      if (cells === prev) return;
      for (const k in cells) {
        const v = cells[k];
        if (v !== prev[k] && !own.has(v)) for (const fn of listeners) fn(k, v);
      }
      prev = cells;
    });
    return {
      set(key, value) {
        const h = room.ops.set({ key, value });
        own.set(
          value,
          h.authoritative.then(() => undefined),
        );
        if (own.size > 100_000) own.delete(own.keys().next().value!);
      },
      acked: (_key, value) => own.get(value) ?? Promise.reject(new Error('not set here')),
      onRemote(fn) {
        listeners.push(fn);
      },
      close: () => room.close(),
    };
  },
};
