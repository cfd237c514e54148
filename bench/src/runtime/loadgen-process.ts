/**
 * Child-process entry: the load generator of the throughput benchmark (R3). Raw `ws`
 * WebSockets speaking the wire protocol through ClientCodec, no client engine: each client sends
 * hello, waits for the welcome, then pipelines `ops` frames of `opsPerFrame` setCell ops (at most
 * three frames' worth awaiting their Notify-Auth per client), and acks every log frame it receives (as the
 * real client does: one cumulative ack per frame). The senders take turns (round-robin) under a
 * global budget of ops in flight, so the server always has input queued but never a backlog of
 * seconds (which would make its group commits huge and trip the 2 s ack timeout).
 *
 *   parent -> child  { cmd: 'start', id }   begin sending
 *   parent -> child  { cmd: 'stats', id }   reply with counters, CPU usage, event-loop utilisation
 *   parent -> child  { cmd: 'stop', id }    stop, close the sockets, reply, exit
 *   child -> parent  { ready: { clients } } once every client has its welcome
 */
import { performance as perf } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION, type ServerMessage } from '@hercules/core';
import { loadArgs, wsHeader } from './common.ts';

const opt = JSON.parse(process.argv[2] ?? '{}') as {
  url: string;
  rooms: number;
  clientsPerRoom: number;
  opsPerFrame: number;
  inFlight: number;
  tag: string;
  /** The rooms' names (default `<tag>-<i>` for i < rooms): a cluster benchmark picks the rooms of the shards a node owns. */
  roomNames?: string[];
};
/** One client never has more than this many ops awaiting Notify-Auth. */
const PER_CLIENT = 3 * opt.opsPerFrame;

const c = {
  ownAuth: 0,
  remoteOps: 0,
  opsSent: 0,
  framesSent: 0,
  framesRecv: 0,
  txPayload: 0,
  txHeader: 0,
  rxPayload: 0,
  rxHeader: 0,
  byType: {} as Record<string, { frames: number; bytes: number }>,
  errors: [] as string[],
};

interface Cl {
  ws: WebSocket;
  codec: ClientCodec;
  seq: number;
  outstanding: number;
  ready: boolean;
}
const clients: Cl[] = [];
let running = false;
let argN = 0;
/** Ops sent, Notify-Auth not yet received, over all clients: bounded by opt.inFlight. */
let inFlight = 0;
let rr = 0;

function sendFrame(cl: Cl, msg: Parameters<ClientCodec['encode']>[0]): void {
  const buf = cl.codec.encode(msg);
  cl.ws.send(buf);
  c.framesSent++;
  c.txPayload += buf.length;
  c.txHeader += wsHeader(buf.length, true);
}

/** Send frames round-robin over the clients while the global in-flight budget allows. */
function pump(): void {
  if (!running) return;
  let skipped = 0;
  while (inFlight + opt.opsPerFrame <= opt.inFlight && skipped < clients.length) {
    const cl = clients[rr];
    rr = (rr + 1) % clients.length;
    if (!cl.ready || cl.outstanding + opt.opsPerFrame > PER_CLIENT) {
      skipped++;
      continue;
    }
    skipped = 0;
    const ops = [];
    for (let i = 0; i < opt.opsPerFrame; i++) ops.push({ seq: ++cl.seq, name: 'setCell', args: loadArgs(argN++) });
    cl.outstanding += ops.length;
    inFlight += ops.length;
    c.opsSent += ops.length;
    sendFrame(cl, { t: 'ops', ops });
  }
}

function onMessage(cl: Cl, data: Buffer): void {
  c.framesRecv++;
  c.rxPayload += data.length;
  c.rxHeader += wsHeader(data.length, false);
  let m: ServerMessage;
  try {
    m = cl.codec.decode(data);
  } catch (e) {
    if (c.errors.length < 5) c.errors.push(String(e));
    return;
  }
  const bt = (c.byType[m.t] ??= { frames: 0, bytes: 0 });
  bt.frames++;
  bt.bytes += data.length;
  if (m.t === 'welcome') {
    cl.ready = true;
    return;
  }
  if (m.t === 'log') {
    let own = 0;
    for (const e of m.entries) if (e.k === 'own') own++;
    c.ownAuth += own;
    c.remoteOps += m.entries.length - own;
    cl.outstanding -= own;
    inFlight -= own;
    sendFrame(cl, { t: 'ack', pos: m.from + m.entries.length - 1 });
    if (own) pump();
  } else if (m.t === 'error' || m.t === 'deregister') {
    if (c.errors.length < 5) c.errors.push(JSON.stringify(m));
  }
}

async function open(room: string, id: string): Promise<void> {
  const ws = new WebSocket(`${opt.url}/?room=${room}`, { perMessageDeflate: false });
  const cl: Cl = { ws, codec: new ClientCodec(), seq: 0, outstanding: 0, ready: false };
  clients.push(cl);
  ws.on('message', (d: Buffer) => onMessage(cl, d));
  ws.on('error', (e) => {
    if (c.errors.length < 5) c.errors.push(e.message);
  });
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  sendFrame(cl, { t: 'hello', v: PROTOCOL_VERSION, client: id, machine: { name: 'spreadsheet', version: 1 }, have: 0 });
  while (!cl.ready) await new Promise((r) => setTimeout(r, 2));
}

// Connect in parallel batches (a thousand simultaneous handshakes would just queue).
const all: [string, string][] = [];
const roomNames = opt.roomNames ?? Array.from({ length: opt.rooms }, (_, r) => `${opt.tag}-${r}`);
for (const room of roomNames) for (let k = 0; k < opt.clientsPerRoom; k++) all.push([room, `${room}-c${k}`]);
for (let i = 0; i < all.length; i += 100) await Promise.all(all.slice(i, i + 100).map(([room, id]) => open(room, id)));

process.on('message', async (m: { cmd: string; id: number }) => {
  if (m.cmd === 'start') {
    running = true;
    pump();
    process.send!({ id: m.id });
  } else if (m.cmd === 'stats') {
    process.send!({ id: m.id, ...c, cpu: process.cpuUsage(), elu: perf.eventLoopUtilization(), at: performance.now() });
  } else if (m.cmd === 'stop') {
    running = false;
    for (const cl of clients) cl.ws.close(1000, 'done');
    await new Promise((r) => setTimeout(r, 200));
    process.send!({ id: m.id }, () => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: { clients: clients.length } });
