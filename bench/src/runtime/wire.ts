/**
 * R4. Wire bytes per op beyond the app's own arguments.
 *
 * Exact, from the codec (packages/core/src/wire.ts): the frames one op causes in a room of two
 * clients A (submitter) and B, encoded by ClientCodec / ServerCodec with their intern tables
 * already warm (as on a live connection), minus msgpack(args) for each frame that carries the
 * args, plus the WebSocket header of each frame (RFC 6455: server -> client 2 bytes for a payload
 * under 126 bytes, 4 up to 64 KiB; client -> server 4 more for the mask).
 *
 *   the paper's five messages: Deliver-Operation (A -> S `ops`), Notify-Auth (S -> A `log` with
 *   an own entry), Remote-Operation (S -> B `log`), Remote-Ack (B -> S `ack`), Notify-Visible
 *   (S -> A `visible`);
 *   and what this implementation also sends per op: A's own `ack` of its Notify-Auth, and a
 *   `stable` frame to each client once both have acked.
 *
 * Once with one op per frame (typing) and once with 20 ops per frame, amortised per op; each
 * at two sizes of the integers (seq, pos), which msgpack encodes in 1 to 5 bytes.
 *
 * Live, from the runs of R2 (typing, 2 clients) and R3 (load, 2 clients per room): every byte
 * both clients sent and received (payload + WebSocket headers, counted by the clients) over the
 * ops sequenced, minus the args each op carried across the wire (twice: to the server and to the
 * other client). Cross-checked with the server's /metrics byte counters.
 */
import { ClientCodec, ServerCodec, type ClientMessage, type ServerMessage } from '@hercules/core';
import type { Row, Section } from '../harness.ts';
import { argBytes, round, wsHeader } from './common.ts';
import type { LiveBytes } from './latency.ts';

const A = '71280fd3-326c-4aa7-864b-27e727dc8e1a';
const ARGS = { row: 3, col: 2, text: 'Gear' };

interface Frame {
  rpc: string;
  dir: 'A->S' | 'S->A' | 'S->B' | 'B->S';
  payload: number;
  header: number;
  args: number;
  extra: boolean;
}

function frames(n: number, seq: number, pos: number): Frame[] {
  // Warm codecs: one connection per client, tables holding A's id and the op name.
  const aOut = new ClientCodec(),
    bOut = new ClientCodec(),
    toA = new ServerCodec(),
    toB = new ServerCodec();
  aOut.encode({ t: 'ops', ops: [{ seq: 1, name: 'setCell', args: ARGS }] });
  toB.encode({ t: 'log', from: 1, entries: [{ k: 'op', e: { pos: 1, client: A, seq: 1, name: 'setCell', args: ARGS, author: A } }] });
  const ops = Array.from({ length: n }, (_, i) => ({ seq: seq + i, name: 'setCell', args: ARGS }));
  const enc = (c: ClientCodec | ServerCodec, m: ClientMessage | ServerMessage) => (c as { encode(m: unknown): Uint8Array }).encode(m).length;
  const a = argBytes(ARGS);
  const f = (rpc: string, dir: Frame['dir'], payload: number, args: number, extra = false): Frame => ({
    rpc,
    dir,
    payload,
    header: wsHeader(payload, dir === 'A->S' || dir === 'B->S'),
    args,
    extra,
  });
  const last = pos + n - 1;
  return [
    f('Deliver-Operation (ops)', 'A->S', enc(aOut, { t: 'ops', ops }), n * a),
    f('Notify-Auth (log, own entries)', 'S->A', enc(toA, { t: 'log', from: pos, entries: ops.map((o) => ({ k: 'own' as const, seq: o.seq })) }), 0),
    f(
      'Remote-Operation (log)',
      'S->B',
      enc(toB, {
        t: 'log',
        from: pos,
        entries: ops.map((o, i) => ({ k: 'op' as const, e: { pos: pos + i, client: A, seq: o.seq, name: o.name, args: o.args, author: A } })),
      }),
      n * a,
    ),
    f('Remote-Ack (ack)', 'B->S', enc(bOut, { t: 'ack', pos: last }), 0),
    f('Notify-Visible (visible)', 'S->A', enc(toA, { t: 'visible', seq: seq + n - 1 }), 0),
    f('A acks its Notify-Auth (ack)', 'A->S', enc(aOut, { t: 'ack', pos: last }), 0, true),
    f('stable to A', 'S->A', enc(toA, { t: 'stable', pos: last }), 0, true),
    f('stable to B', 'S->B', enc(toB, { t: 'stable', pos: last }), 0, true),
  ];
}

const overhead = (fs: Frame[], n: number) => fs.reduce((s, f) => s + f.payload + f.header - f.args, 0) / n;

export function liveRow(l: LiveBytes): Row & { overheadPerOp: number } {
  const c = l.clients;
  const total = c.txPayload + c.txHeader + c.rxPayload + c.rxHeader + c.ctlBytes;
  const perOp = total / l.ops;
  const args = l.argBytes / l.ops;
  const srvPayload = l.server.bytesIn + l.server.bytesOut;
  return {
    run: l.label,
    ops: l.ops,
    'frames per op': round((c.txFrames + c.rxFrames) / l.ops, 2),
    'bytes per op (payload + WS headers)': round(perOp, 1),
    'args bytes per op × copies': `${round(args, 2)} × ${l.argCopies}`,
    'overhead per op': round(perOp - args * l.argCopies, 1),
    'server /metrics payload ÷ client-counted payload': round(srvPayload / (c.txPayload + c.rxPayload), 4),
    overheadPerOp: perOp - args * l.argCopies,
  };
}

export function run(live: { latency?: LiveBytes; throughput?: LiveBytes } = {}): Section {
  const rows: Row[] = [];
  const totals: Record<string, { paper: number; full: number; paperFrames: number; fullFrames: number }> = {};
  for (const [label, seq, pos] of [
    ['seq 4,212, pos 123,456', 4212, 123_456],
    ['seq, pos < 128 (a new room)', 5, 9],
  ] as const) {
    for (const n of [1, 20]) {
      const fs = frames(n, seq, pos);
      const paper = fs.filter((f) => !f.extra);
      const key = `${n} op${n > 1 ? 's' : ''} per frame, ${label}`;
      totals[key] = { paper: overhead(paper, n), full: overhead(fs, n), paperFrames: paper.length / n, fullFrames: fs.length / n };
      if (label.startsWith('seq 4')) {
        for (const f of fs)
          rows.push({
            case: `${n}/frame`,
            message: f.rpc,
            direction: f.dir,
            'payload B': f.payload,
            'WS header B': f.header,
            'args B': f.args,
            'overhead per op B': round((f.payload + f.header - f.args) / n, 2),
          });
      }
    }
  }
  const P = "overhead B/op, paper's 5 messages",
    F = 'overhead B/op, every frame sent',
    N = 'frames per op (paper / all)';
  const summary: Row[] = Object.entries(totals).map(([k, v]) => ({
    case: `exact: ${k}`,
    [N]: `${round(v.paperFrames, 2)} / ${round(v.fullFrames, 2)}`,
    [P]: round(v.paper, 2),
    [F]: round(v.full, 2),
  }));
  const liveRows = [live.latency, live.throughput].filter((x): x is LiveBytes => !!x).map(liveRow);
  for (const r of liveRows) summary.push({ case: `live: ${r.run}`, [N]: `- / ${r['frames per op']}`, [P]: '-', [F]: round(r.overheadPerOp, 1) });
  const one = totals['1 op per frame, seq 4,212, pos 123,456'];
  const twenty = totals['20 ops per frame, seq 4,212, pos 123,456'];
  const goals = [
    {
      what: "overhead per op, 1 op per frame, paper's 5 messages",
      goal: '≤ 16 B (SwiftCloud: 15 B)',
      measured: `${round(one.paper, 1)} B (${round(one.full, 1)} B with every frame sent)`,
      met: one.paper <= 16,
    },
    {
      what: "overhead per op, 20 ops per frame, paper's 5 messages",
      goal: '≤ 16 B',
      measured: `${round(twenty.paper, 2)} B (${round(twenty.full, 2)} B with every frame sent)`,
      met: twenty.paper <= 16,
    },
  ];
  for (const r of liveRows)
    goals.push({ what: `overhead per op, live: ${r.run}`, goal: '≤ 16 B', measured: `${round(r.overheadPerOp, 1)} B`, met: r.overheadPerOp <= 16 });
  const notes = [
    `args ${JSON.stringify(ARGS)} = ${argBytes(ARGS)} B of msgpack; client id is a 36-character UUID (interned after first use on a connection)`,
    ...[live.latency, live.throughput].filter((x): x is LiveBytes => !!x).flatMap((l) => l.notes.map((n) => `${l.label}: ${n}`)),
  ];
  return {
    id: 'wire',
    title: "R4. Wire bytes per op beyond the app's arguments (2-client room)",
    command: 'npm run bench:runtime -- --only wire (exact part); the live rows need latency and throughput in the same run: npm run bench:runtime',
    params: { args: ARGS, wsHeaders: 'RFC 6455: 2 B server->client (<126 B payload), +4 B mask client->server' },
    rows: summary,
    goals,
    notes,
    extra: { frames: rows, totals, live: liveRows.map(({ overheadPerOp: _, ...r }) => r), liveRaw: live },
  } as Section & { extra: unknown };
}
