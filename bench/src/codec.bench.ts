/**
 * Wire encoding: JSON text vs generic MessagePack (msgpackr) vs our codec (MessagePack with
 * positional tuples and per-connection interning, packages/core/src/wire.ts: the server's side on
 * msgpackr, the client's on its own small codec, msgpack.ts), on the frames an op causes. Sizes
 * are exact; times are medians of interleaved repetitions (noisy machine). Our codec's encode time
 * is the server's (ServerCodec) writing the remote-op frame, its decode time the client's
 * (ClientCodec) reading it. client-codec.bench.ts compares the client's codec with msgpackr.
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/codec.bench.ts
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { Packr } from 'msgpackr';
import { ClientCodec, ServerCodec, type ClientMessage, type ServerMessage } from '@hercules/core';

const args = { row: 3, col: 2, text: 'Gear' };
const remote: ServerMessage = {
  t: 'log',
  from: 123456,
  entries: [
    {
      k: 'op',
      e: { pos: 123456, client: '71280fd3-326c-4aa7-864b-27e727dc8e1a', seq: 4211, name: 'setCell', args, author: '71280fd3-326c-4aa7-864b-27e727dc8e1a' },
    },
  ],
};
const own: ServerMessage = { t: 'log', from: 123457, entries: [{ k: 'own', seq: 4212 }] };
const ops: ClientMessage = { t: 'ops', ops: [{ seq: 4212, name: 'setCell', args }] };
const ack: ClientMessage = { t: 'ack', pos: 123457 };
const visible: ServerMessage = { t: 'visible', seq: 4212 };

const te = new TextEncoder(),
  td = new TextDecoder();
const packr = new Packr({ useRecords: false });
const json = { name: 'JSON', enc: (m: unknown) => te.encode(JSON.stringify(m)), dec: (b: Uint8Array) => JSON.parse(td.decode(b)) };
const mp = { name: 'msgpackr (generic)', enc: (m: unknown) => packr.pack(m), dec: (b: Uint8Array) => packr.unpack(b) };
// Our codec is stateful: warm the intern tables as a live connection would be.
const sc = new ServerCodec(),
  cc = new ClientCodec(),
  sc2 = new ServerCodec(),
  cc2 = new ClientCodec();
cc.decode(sc.encode(remote));
sc2.decode(cc2.encode(ops));
const ours = {
  name: 'Hercules codec',
  enc: (m: unknown) => ((m as { t: string }).t === 'ops' || (m as { t: string }).t === 'ack' ? cc2.encode(m as ClientMessage) : sc.encode(m as ServerMessage)),
  dec: (b: Uint8Array) => cc.decode(b),
};
const argBytes = packr.pack(args).length;

function median(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}
const rows: Record<string, unknown>[] = [];
const N = 100_000;
const times: Record<string, { enc: number[]; dec: number[] }> = {};
for (let rep = 0; rep < 7; rep++) {
  for (const c of [json, mp, ours]) {
    const t = (times[c.name] ??= { enc: [], dec: [] });
    let sink = 0;
    let t0 = performance.now();
    for (let i = 0; i < N; i++) sink += c.enc(remote).length;
    t.enc.push(((performance.now() - t0) / N) * 1000);
    const b = c.enc(remote);
    t0 = performance.now();
    for (let i = 0; i < N; i++) sink += (c.dec(b) as { from: number }).from;
    t.dec.push(((performance.now() - t0) / N) * 1000);
    if (sink === 42) console.log('');
  }
}
for (const c of [json, mp, ours]) {
  const size = (m: unknown) => c.enc(m).length;
  rows.push({
    encoding: c.name,
    'remote op frame B': size(remote),
    'own Notify-Auth B': size(own),
    'ops frame B': size(ops),
    'ack B': size(ack),
    'visible B': size(visible),
    'remote-op overhead beyond args B': size(remote) - argBytes,
    'encode µs (remote op)': +median(times[c.name].enc).toFixed(2),
    'decode µs (remote op)': +median(times[c.name].dec).toFixed(2),
  });
}
console.log(`args alone: ${argBytes} B (msgpack); WebSocket framing adds 2 B server->client, 6 B client->server (mask) per small frame`);
console.table(rows);
mkdirSync('docs/benchmarks', { recursive: true });
writeFileSync('docs/benchmarks/codec.json', JSON.stringify({ when: new Date().toISOString(), node: process.version, argBytes, rows }, null, 2));
