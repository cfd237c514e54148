/**
 * Presence side by side (issue 15): Hercules' `room.presence` against Yjs awareness (y-websocket's
 * provider.awareness, the stock server), through the same delay proxy.
 *
 *   delivery: A moves its cursor every 50 ms (`updates` times) and B, in the same process (one
 *     clock), notes when it sees each value: p50 and p99 of A's set -> B's listener, at RTT 0
 *     and RTT 67 ms (the network alone takes one RTT: A->server is half, server->B the other half).
 *   fan-out: A and 10 watchers at RTT 0; A moves every 20 ms; the server process's CPU time per
 *     update delivered to a watcher, and the bytes one update costs on the wire (A's frame and a
 *     watcher's, WebSocket headers included, measured at the proxy).
 *
 *   NODE_OPTIONS="-C @hercules/source" NODE_ENV=production node --import tsx bench/src/paper/presence.ts [--updates 200] [--only hercules|yjs]
 */
import { parseArgs } from 'node:util';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import WebSocket from 'ws';
import * as awarenessProtocol from 'y-protocols/awareness';
import * as encoding from 'lib0/encoding';
import { ClientCodec, ServerCodec } from '@hercules/core';
import { connect, memoryStorage } from '@hercules/client';
import { spreadsheet } from '../../../apps/machines.ts';
import { cpuSeconds, sleep, startServer, wsHeader } from '../runtime/common.ts';
import { startDelayProxyProcess } from './delay-proxy.ts';
import { pkgVersion, spawnServer } from '../peers/peer-process.ts';

const { values } = parseArgs({ options: { updates: { type: 'string', default: '200' }, only: { type: 'string' } } });
const UPDATES = Number(values.updates);
const WATCHERS = 10;

/** One presence client, whatever the system. */
interface Presencer {
  set(value: { x: number; y: number; n: number }): void;
  /** Called with each other client's latest value, when it arrives. */
  onOther(fn: (value: { n: number }) => void): void;
  close(): Promise<void>;
}
interface System {
  name: string;
  start(): Promise<{ port: number; cpu(): number; stop(): Promise<void> }>;
  connect(port: number, room: string, name: string): Promise<Presencer>;
}

const hercules: System = {
  name: 'Hercules room.presence',
  async start() {
    const s = await startServer();
    return {
      port: s.port,
      cpu: () => cpuSeconds(s.child.proc.pid!),
      stop: () => s.close(),
    };
  },
  async connect(port, room, name) {
    const r = await connect({
      url: `ws://127.0.0.1:${port}`,
      room,
      machine: spreadsheet,
      clientId: `${name}-${process.pid}`,
      storage: memoryStorage(),
      onError: () => {},
    });
    await r.whenOnline({ timeoutMs: 10_000 });
    return {
      // The demo machine's presence schema does not declare these keys; undeclared keys pass it.
      set: (v) => r.presence.set(v as Parameters<typeof r.presence.set>[0]),
      onOther(fn) {
        let last = new Map<string, unknown>();
        r.presence.subscribe((others) => {
          const now = new Map<string, unknown>();
          for (const p of others) {
            now.set(p.client, p.value);
            if (last.get(p.client) !== p.value) fn(p.value as { n: number });
          }
          last = now;
        });
      },
      close: () => r.close(),
    };
  },
};

const yjs: System = {
  name: `Yjs ${pkgVersion('yjs')} awareness (y-websocket ${pkgVersion('y-websocket')}, server @y/websocket-server ${pkgVersion('@y/websocket-server')})`,
  async start() {
    const s = await spawnServer(new URL('../peers/yjs-server.ts', import.meta.url));
    return { port: s.port, cpu: () => cpuSeconds(s.pid), stop: () => s.stop() };
  },
  async connect(port, room) {
    const doc = new Y.Doc();
    const provider = new WebsocketProvider(`ws://127.0.0.1:${port}`, room, doc, {
      WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket,
      disableBc: true, // (else clients in one process would skip the server)
    });
    if (!provider.synced) await new Promise<void>((resolve) => provider.on('sync', (ok: boolean) => ok && resolve()));
    const aw = provider.awareness;
    return {
      set: (v) => aw.setLocalStateField('cursor', v),
      onOther(fn) {
        aw.on('change', ({ added, updated }: { added: number[]; updated: number[] }, origin: unknown) => {
          if (origin === 'local') return;
          for (const id of [...added, ...updated]) {
            if (id === doc.clientID) continue;
            const c = aw.getStates().get(id)?.cursor as { n: number } | undefined;
            if (c) fn(c);
          }
        });
      },
      async close() {
        provider.destroy();
        doc.destroy();
      },
    };
  },
};

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function delivery(sys: System, rtt: number) {
  const srv = await sys.start();
  const proxy = await startDelayProxyProcess({ target: { port: srv.port }, rttMs: rtt });
  const room = `presence-${rtt}-${Date.now()}`;
  try {
    const a = await sys.connect(proxy.port, room, 'a');
    const b = await sys.connect(proxy.port, room, 'b');
    const sentAt = new Map<number, number>();
    const delays: number[] = [];
    b.onOther((v) => {
      const t = sentAt.get(v.n);
      if (t !== undefined) {
        delays.push(performance.now() - t);
        sentAt.delete(v.n);
      }
    });
    await sleep(500);
    for (let n = 1; n <= UPDATES + 20; n++) {
      if (n === 21) delays.length = 0; // warm-up
      sentAt.set(n, performance.now());
      a.set({ x: n % 97, y: n % 31, n });
      await sleep(50);
    }
    await sleep(rtt + 500);
    await a.close();
    await b.close();
    return { p50: pct(delays, 0.5), p99: pct(delays, 0.99), delivered: delays.length };
  } finally {
    await proxy.close();
    await srv.stop();
  }
}

async function fanout(sys: System) {
  const srv = await sys.start();
  const proxy = await startDelayProxyProcess({ target: { port: srv.port }, rttMs: 0 });
  const room = `fanout-${Date.now()}`;
  try {
    const a = await sys.connect(proxy.port, room, 'a');
    const watchers: Presencer[] = [];
    let delivered = 0;
    for (let i = 0; i < WATCHERS; i++) {
      const w = await sys.connect(proxy.port, room, `w${i}`);
      w.onOther(() => delivered++);
      watchers.push(w);
    }
    await sleep(500);
    const n0 = 400;
    const cpu0 = srv.cpu();
    const d0 = delivered;
    for (let n = 1; n <= n0; n++) {
      a.set({ x: n % 97, y: n % 31, n });
      await sleep(20);
    }
    await sleep(300);
    const cpu = srv.cpu() - cpu0;
    const got = delivered - d0;
    for (const w of watchers) await w.close();
    await a.close();
    return { updates: n0, deliveredToWatchers: got, serverUsPerDelivered: (cpu * 1e6) / got };
  } finally {
    await proxy.close();
    await srv.stop();
  }
}

/** Bytes one cursor update costs on the wire, WebSocket headers included: from the mover, and to one watcher. */
function wireBytes(): Record<string, { up: number; down: number }> {
  const value = { x: 42, y: 17, n: 1234 };
  const up = new ClientCodec().encode({ t: 'presence', value }).length;
  const down = new ServerCodec().encode({ t: 'presence', peers: [{ client: 'a-4f9c2d1e', value }] }).length;
  const doc = new Y.Doc();
  const aw = new awarenessProtocol.Awareness(doc);
  aw.setLocalStateField('cursor', value);
  const enc = encoding.createEncoder();
  encoding.writeVarUint(enc, 1); // y-websocket's messageAwareness
  encoding.writeVarUint8Array(enc, awarenessProtocol.encodeAwarenessUpdate(aw, [doc.clientID]));
  const y = encoding.toUint8Array(enc).length;
  return {
    hercules: { up: up + wsHeader(up, true), down: down + wsHeader(down, false) },
    yjs: { up: y + wsHeader(y, true), down: y + wsHeader(y, false) },
  };
}

const bytes = wireBytes();
const systems = [hercules, yjs].filter((s) => !values.only || s.name.toLowerCase().startsWith(values.only));
const rows: Record<string, unknown>[] = [];
for (const sys of systems) {
  const d0 = await delivery(sys, 0);
  const d67 = await delivery(sys, 67);
  const f = await fanout(sys);
  rows.push({
    system: sys.name,
    'p50 RTT 0 ms': d0.p50.toFixed(2),
    'p99 RTT 0 ms': d0.p99.toFixed(2),
    'p50 RTT 67 ms': d67.p50.toFixed(2),
    'p50 - RTT': (d67.p50 - 67).toFixed(2),
    'p99 RTT 67 ms': d67.p99.toFixed(2),
    'server µs / delivered update (10 watchers)': f.serverUsPerDelivered.toFixed(1),
    'delivered / sent×10': (f.deliveredToWatchers / (f.updates * WATCHERS)).toFixed(3),
    'bytes per update, up / down': sys === hercules ? `${bytes.hercules.up} / ${bytes.hercules.down}` : `${bytes.yjs.up} / ${bytes.yjs.down}`,
  });
}
console.table(rows);
