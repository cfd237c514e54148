/**
 * Child-process entry of the server-saturation benchmark (paper/saturation.ts): the writers of
 * one process, or the observer, for one system. Writers edit one shared map (distinct keys per
 * writer, unique values) as fast as the system confirms them; the observer counts edits arriving.
 * Clients are as cheap as a faithful client can be, so that the server is the bottleneck:
 *
 *   hercules   raw protocol frames through ClientCodec (like runtime/loadgen-process.ts), acking
 *              every log frame as the real client does;
 *   yjs        raw y-protocols messages: each writer sends sync-update messages pre-encoded from a
 *              Y.Doc of its own (one transaction per edit, as y-websocket sends them); received
 *              updates are decoded only as far as their first client id, to count them;
 *   automerge  automerge-repo, fluid SharedMap over tinylicious, colyseus the adapter's client:
 *              their real client libraries.
 *
 * Flow control: a writer keeps at most `window` edits that the server has not confirmed, and sends
 * `chunk` edits per event-loop turn (the Hercules client turns one turn's ops into one frame, Fluid
 * into one batch, Yjs and Colyseus send one message per edit). Confirmed = the server echoed it
 * back: Hercules its Notify-Auth, Yjs the broadcast of our own update, Colyseus a state patch
 * showing it, Automerge the server's heads covering it, Fluid the sequenced op.
 *
 *   child -> parent  { ready: { doc } }   connected (a creating observer reports the document id)
 *   parent -> child  { cmd: 'start' | 'stats' | 'stop', id }
 */
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION, type ServerMessage } from '@hercules/core';

export interface LoadgenOptions {
  system: 'hercules' | 'yjs' | 'automerge' | 'colyseus' | 'fluid';
  port: number;
  /** Room name, or the document id/URL the creating observer reported. */
  doc: string;
  role: 'writer' | 'observer';
  /** Writer numbers in this process (keys and values are unique per writer). */
  writers: number[];
  /** The room of each writer (same order as `writers`), for runs over many rooms (paper/rooms.ts); default `doc` for all. */
  docs?: string[];
  /** Writers connecting at once (default 1: one after another). */
  connectBatch?: number;
  chunk: number;
  window: number;
  /** Yjs: updates to pre-encode per writer. */
  pool: number;
  /** Observer of automerge/fluid: create the document (its id is only known once created). */
  create?: boolean;
}

/** What a load-generator process answers to `stats` (the sums over its clients). */
export interface LoadgenStats {
  sent: number;
  acked: number;
  delivered: number;
  exhausted: boolean;
  errors: string[];
}

/** One connected client. `write` makes n edits; counters are read by the parent. */
interface Conn {
  sent: number;
  /** Own edits the server confirmed. */
  acked: number;
  /** Edits of other clients that arrived here. */
  delivered: number;
  /** Yjs: the pre-encoded updates ran out (the result is then a lower bound). */
  exhausted?: boolean;
  write(n: number): void;
  close(): Promise<void>;
}

const opt = JSON.parse(process.argv[2] ?? '{}') as LoadgenOptions;
const errors: string[] = [];
const err = (e: unknown) => {
  if (errors.length < 5) errors.push(String((e as Error)?.message ?? e));
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Bounded in time whatever the parent does.
setTimeout(() => process.exit(3), 600_000).unref();

/** Keys: writer w cycles over 2 × window keys, so an edit in flight is never overwritten by its own next one (Colyseus would coalesce them). */
const KEYS = 2 * opt.window;
const key = (w: number, n: number) => `w${w}-${n % KEYS}`;
const value = (w: number, n: number) => `${w}-${n}`;

function openWs(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.on('error', err);
  return new Promise((res, rej) => {
    ws.once('open', () => res(ws));
    ws.once('error', rej);
  });
}
async function closeWs(ws: WebSocket) {
  ws.close();
  await Promise.race([new Promise((r) => ws.once('close', r)), sleep(1000)]);
}

// ------------------------------------------------------------------ Hercules: raw frames

async function hercules(w: number, onAck: () => void, _created: unknown, doc = opt.doc): Promise<Conn> {
  const ws = await openWs(`ws://127.0.0.1:${opt.port}/?room=${doc}`);
  const codec = new ClientCodec();
  let welcomed = false,
    seq = 0;
  const c: Conn = {
    sent: 0,
    acked: 0,
    delivered: 0,
    write(n) {
      const ops = [];
      // Writer w owns rows 3w..3w+2 of the 12 × 6 grid.
      for (let i = 0; i < n; i++, c.sent++)
        ops.push({ seq: ++seq, name: 'setCell', args: { row: (3 * w + (c.sent % 3)) % 12, col: Math.floor(c.sent / 3) % 6, text: value(w, c.sent) } });
      ws.send(codec.encode({ t: 'ops', ops }));
    },
    close: () => closeWs(ws),
  };
  ws.on('message', (data: Buffer) => {
    let m: ServerMessage;
    try {
      m = codec.decode(data);
    } catch (e) {
      err(e);
      return;
    }
    if (m.t === 'welcome') welcomed = true;
    else if (m.t === 'log') {
      let own = 0;
      for (const e of m.entries) if (e.k === 'own') own++;
      c.acked += own;
      c.delivered += m.entries.length - own;
      ws.send(codec.encode({ t: 'ack', pos: m.from + m.entries.length - 1 }));
      if (own) onAck();
    } else if (m.t === 'error' || m.t === 'deregister') err(JSON.stringify(m));
  });
  ws.send(
    codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: `sat-${opt.role}${w}-${process.pid}`, machine: { name: 'spreadsheet', version: 1 }, have: 0 }),
  );
  for (let i = 0; !welcomed; i++) {
    if (i > 2000) throw new Error('no welcome in 10 s');
    await sleep(5);
  }
  return c;
}

// ------------------------------------------------------------------ Yjs: raw y-protocols messages

async function yjs(w: number, onAck: () => void, _created: unknown, doc = opt.doc): Promise<Conn> {
  // Imported here, like the other peers' packages, so that a missing peer fails only its own run.
  const Y = await import('yjs');
  const encoding = await import('lib0/encoding');
  const decoding = await import('lib0/decoding');
  const syncProtocol = await import('y-protocols/sync');
  // Sync-update messages of the writer's edits, made on a fresh Y.Doc (one transaction each).
  const pool = { id: -1, msgs: [] as Uint8Array[] };
  if (opt.role === 'writer') {
    const doc = new Y.Doc();
    const cells = doc.getMap<string>('cells');
    doc.on('update', (u: Uint8Array) => {
      const e = encoding.createEncoder();
      encoding.writeVarUint(e, 0); // messageSync
      syncProtocol.writeUpdate(e, u);
      pool.msgs.push(encoding.toUint8Array(e));
    });
    for (let i = 0; i < opt.pool; i++) doc.transact(() => cells.set(key(w, i), value(w, i)));
    pool.id = doc.clientID;
    doc.destroy();
  }
  const ws = await openWs(`ws://127.0.0.1:${opt.port}/${doc}`);
  const c: Conn = {
    sent: 0,
    acked: 0,
    delivered: 0,
    exhausted: false,
    write(n) {
      for (let i = 0; i < n; i++) {
        if (c.sent >= pool.msgs.length) {
          c.exhausted = true;
          return;
        }
        ws.send(pool.msgs[c.sent++]);
      }
    },
    close: () => closeWs(ws),
  };
  // The server sends sync step 1 (its state vector, asking for ours) and awareness on connect:
  // not answered, the writers' documents are pre-generated and the observer's is empty. Every
  // applied update is broadcast to every connection of the room, the sender's included.
  ws.on('message', (data: Buffer) => {
    const d = decoding.createDecoder(data);
    if (decoding.readVarUint(d) !== 0 || decoding.readVarUint(d) !== syncProtocol.messageYjsUpdate) return;
    const u = decoding.createDecoder(decoding.readVarUint8Array(d));
    // Update: number of clients with structs, then per client: number of structs, client id.
    let client = -1;
    if (decoding.readVarUint(u) > 0) {
      decoding.readVarUint(u); // the first client's number of structs
      client = decoding.readVarUint(u);
    }
    if (client === pool.id) {
      c.acked++;
      onAck();
    } else c.delivered++;
  });
  return c;
}

// ------------------------------------------------------------------ Colyseus: the adapter's client

async function colyseus(w: number, onAck: () => void): Promise<Conn> {
  const { colyseus: sys } = await import('./colyseus.ts');
  const client = await sys.connect('127.0.0.1', opt.port, opt.doc, `${opt.role}${w}`);
  const c: Conn = {
    sent: 0,
    acked: 0,
    delivered: 0,
    write(n) {
      for (let i = 0; i < n; i++) client.set(key(w, c.sent), value(w, c.sent++));
      // Only the chunk's last edit is waited for: the server handles one client's messages in order.
      const upTo = c.sent;
      client.acked!(key(w, upTo - 1), value(w, upTo - 1)).then(() => {
        c.acked = Math.max(c.acked, upTo);
        onAck();
      }, err);
    },
    close: () => client.close(),
  };
  client.onRemote(() => {
    c.delivered++;
  });
  return c;
}

// ------------------------------------------------------------------ Automerge: automerge-repo

type Sheet = { cells: Record<string, unknown> };

async function automerge(w: number, onAck: () => void, created: (doc: string) => void): Promise<Conn> {
  const A = await import('@automerge/automerge');
  const { Repo, decodeHeads } = await import('@automerge/automerge-repo');
  const { WebSocketClientAdapter } = await import('@automerge/automerge-repo-network-websocket');
  const repo = new Repo({ network: [new WebSocketClientAdapter(`ws://127.0.0.1:${opt.port}`)], peerId: `sat-${opt.role}${w}-${process.pid}` as never });
  for (let i = 0; repo.peers.length === 0; i++) {
    if (i > 2000) throw new Error('no server peer in 10 s');
    await sleep(5);
  }
  let server: string[] = [];
  const handle = opt.create ? repo.create<Sheet>({ cells: {} }) : await repo.find<Sheet>(opt.doc as never);
  const actor = A.getActorId(handle.doc());
  const c: Conn = {
    sent: 0,
    acked: 0,
    delivered: 0,
    write(n) {
      for (let i = 0; i < n; i++)
        handle.change((d) => {
          d.cells[key(w, c.sent)] = new A.ImmutableString(value(w, c.sent++));
        });
    },
    close: () => repo.shutdown(),
  };
  // Confirmed: our changes not among those the server's heads lack. (If the server's heads hold
  // changes we have not received yet, decide again at the next heads.)
  handle.on('remote-heads', ({ heads }) => {
    server = decodeHeads(heads);
    const doc = handle.doc();
    if (!A.hasHeads(doc, server)) return;
    let missing = 0;
    for (const ch of A.getChangesMetaSince(doc, server)) if (ch.actor === actor) missing++;
    c.acked = c.sent - missing;
    onAck();
  });
  // Delivered (observer only, it makes no changes): one change per edit, from the change count.
  let changes = A.stats(handle.doc()).numChanges;
  if (opt.role === 'observer')
    handle.on('change', ({ doc }) => {
      const now = A.stats(doc).numChanges;
      c.delivered += now - changes;
      changes = now;
    });
  if (opt.create) {
    const mine = A.getHeads(handle.doc());
    for (let i = 0; !mine.every((h) => server.includes(h)); i++) {
      if (i > 2000) throw new Error('server did not take the document in 10 s');
      await sleep(5);
    }
    created(handle.url);
  }
  return c;
}

// ------------------------------------------------------------------ Fluid: SharedMap over tinylicious

async function fluid(w: number, onAck: () => void, created: (doc: string) => void): Promise<Conn> {
  const { TinyliciousClient } = await import('@fluidframework/tinylicious-client');
  const { ConnectionState } = await import('fluid-framework');
  const { SharedMap } = await import('fluid-framework/legacy');
  const schema = { initialObjects: { cells: SharedMap } } as const;
  const client = new TinyliciousClient({ connection: { domain: 'http://127.0.0.1', port: opt.port } });
  let container;
  if (opt.create) {
    ({ container } = await client.createContainer(schema, '2'));
    created(await container.attach());
  } else ({ container } = await client.getContainer(opt.doc, schema, '2'));
  if (container.connectionState !== ConnectionState.Connected) await new Promise<void>((r) => container.once('connected', () => r()));
  const map = container.initialObjects.cells;
  const c: Conn = {
    sent: 0,
    acked: 0,
    delivered: 0,
    write(n) {
      for (let i = 0; i < n; i++) map.set(key(w, c.sent), value(w, c.sent++));
    },
    async close() {
      // As in fluid.ts: dispose the inner container too, or its runtime keeps the process alive.
      const inner = (container as unknown as { container?: { dispose(): void } }).container;
      if (inner) inner.dispose();
      else container.dispose();
    },
  };
  // Every sequenced op of the map; local = ours coming back from the ordering service.
  map.on('op', (_msg, local) => {
    if (local) {
      c.acked++;
      onAck();
    } else c.delivered++;
  });
  return c;
}

// ------------------------------------------------------------------ the process

const connectors = { hercules, yjs, colyseus, automerge, fluid } as const;
let running = false,
  scheduled = false;
const conns: Conn[] = [];

/** One chunk per writer per turn while its window allows; re-armed by confirmations. */
function pump(): void {
  if (scheduled || !running) return;
  scheduled = true;
  setImmediate(() => {
    scheduled = false;
    let wrote = false;
    for (const c of conns) {
      if (c.exhausted || c.sent - c.acked + opt.chunk > opt.window) continue;
      try {
        c.write(opt.chunk);
      } catch (e) {
        err(e);
      }
      wrote = true;
    }
    if (wrote) pump();
  });
}

let doc = opt.doc;
try {
  const batch = opt.connectBatch ?? 1;
  for (let i = 0; i < opt.writers.length; i += batch) {
    const part = opt.writers.slice(i, i + batch);
    const connect = connectors[opt.system] as (w: number, onAck: () => void, created: (d: string) => void, doc?: string) => Promise<Conn>;
    conns.push(
      ...(await Promise.all(
        part.map((w, j) =>
          connect(
            w,
            pump,
            (d) => {
              doc = d;
            },
            opt.docs?.[i + j],
          ),
        ),
      )),
    );
  }
} catch (e) {
  console.error(`saturation-loadgen (${opt.system} ${opt.role}): ${(e as Error).stack}`);
  process.exit(1);
}

const sum = (f: (c: Conn) => number) => conns.reduce((a, c) => a + f(c), 0);
process.on('message', async (m: { cmd: string; id: number }) => {
  if (m.cmd === 'start') {
    running = opt.role === 'writer';
    pump();
    process.send!({ id: m.id });
  } else if (m.cmd === 'stats') {
    process.send!({
      id: m.id,
      sent: sum((c) => c.sent),
      acked: sum((c) => c.acked),
      delivered: sum((c) => c.delivered),
      exhausted: conns.some((c) => c.exhausted),
      errors,
    });
  } else if (m.cmd === 'stop') {
    running = false;
    await Promise.race([Promise.all(conns.map((c) => c.close().catch(() => {}))), sleep(3000)]);
    process.send!({ id: m.id }, () => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: { doc } });
