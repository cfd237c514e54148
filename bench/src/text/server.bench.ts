/**
 * Collaborative text through a real server (issue 38, item 4 (b) and (c)), Hercules beside Yjs in
 * one run, alternating, and Automerge beside them at rest. The trace (default automerge-paper, by
 * Martin Kleppmann, from Joseph Gentle's `editing-traces`, github.com/josephg/editing-traces,
 * CC BY 4.0) is replayed by a writer client while a second client watches.
 *
 *   npm run bench:text:server -- [--traces DIR] [--trace automerge-paper] [--reps 1]
 *
 * (b) Hercules: the benchmark server (runtime/server-process.ts, its own process, SQLite as
 * shipped), the writer's `room.text('doc')` insert/delete per patch; Yjs: the stock y-websocket
 * server (peers/yjs-server.ts, its own process, in memory), `Y.Text` insert/delete per patch on a
 * `WebsocketProvider`'s doc. Both writers yield to the event loop every 1,000 patches (so their
 * clients can send). Time: from the first patch until the watcher's text is `endContent`
 * (checked, exactly). Bytes: counted by a TCP relay in front of each server, both ways, per
 * connection, from when both clients are online.
 *
 * (c) The final document at rest and a new client loading it: Hercules' server store (the
 * room's stored JSON, as `listRooms` counts it, and the SQLite files), a new client's store
 * (`sqliteStorage`: the state it keeps, and the file), the time for a new client to connect and
 * hold the text, and in-process decoding of the state (msgpack, as in the welcome; JSON, as the
 * stores keep it); Yjs's `encodeStateAsUpdate`, a new provider's sync and `applyUpdate`;
 * Automerge's `save()` (the trace replayed in-process, one change per patch) and `load()`.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as A from '@automerge/automerge';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import WebSocket from 'ws';
import { connect, type ConnectedRoom } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { textToString, type OpHandle, type Text } from '@hercules/core';
import { SqliteStore } from '@hercules/server';
import { decode, encode } from '../../../packages/core/src/msgpack.ts';
import { fmt, machineInfo, median, repoRoot } from '../harness.ts';
import { pkgVersion, spawnServer } from '../peers/peer-process.ts';
import { removeTemp, startServer } from '../runtime/common.ts';
import { textBench } from './machine.ts';
import { defaultTracesDir, sequentialPatches, type Patch } from './traces.ts';
import { countingRelay, type CountingRelay, type WireCount } from './wire.ts';

const { values } = parseArgs({
  options: {
    traces: { type: 'string', default: defaultTracesDir(repoRoot) },
    trace: { type: 'string', default: 'automerge-paper' },
    reps: { type: 'string', default: '1' },
  },
});

const YIELD_EVERY = 1000;
const tick = () => new Promise<void>((r) => setImmediate(r));
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** What one system's run measured. */
interface Wire {
  /** ms from the first patch until the writer's loop returned. */
  writerMs: number;
  /** ms from the first patch until the watcher held endContent. */
  watcherMs: number;
  writer: WireCount;
  watcher: WireCount;
}
interface AtRest {
  /** Labelled sizes in bytes. */
  sizes: Record<string, number>;
  /** A new client over the network: connect until it holds endContent, ms. */
  loadMs: number;
  /** Decoding the encoded document in-process, labelled, ms. */
  decodeMs: Record<string, number>;
}
type Run = { wire: Wire; rest: AtRest };

/** Replay the patches through `apply`, yielding every YIELD_EVERY; returns the ms it took. */
async function replay(patches: readonly Patch[], apply: (p: Patch) => void): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < patches.length; i++) {
    apply(patches[i]);
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await tick();
  }
  return performance.now() - t0;
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

const sqliteFilesBytes = (dir: string, match: (f: string) => boolean) =>
  readdirSync(dir)
    .filter(match)
    .reduce((n, f) => n + statSync(join(dir, f)).size, 0);

/** A Hercules client through the relay, online; `end` resolves once its Submitted text is `end`. */
async function herculesClient(relay: CountingRelay, end: string, storage?: ReturnType<typeof sqliteStorage>) {
  const room = await connect({ url: `ws://127.0.0.1:${relay.port}`, room: 'trace', machine: textBench, storage });
  let done!: () => void;
  const has = new Promise<void>((r) => (done = r));
  const check = (s: { doc: Text }) => {
    if (s.doc.len === end.length && textToString(s.doc) === end) done();
  };
  room.subscribe('submitted', check, { immediate: true });
  await room.whenOnline({ timeoutMs: 30_000 });
  return { room, has };
}

async function herculesWire(room: ConnectedRoom<typeof textBench>, watcher: Promise<void>, relay: CountingRelay, patches: readonly Patch[]) {
  const text = room.text('doc');
  relay.reset();
  let last: OpHandle | undefined;
  const t0 = performance.now();
  const writerMs = await replay(patches, ([pos, del, ins]) => {
    if (del > 0) last = text.delete(pos, del);
    if (ins.length > 0) last = text.insert(pos, ins);
  });
  await watcher;
  const watcherMs = performance.now() - t0;
  await last?.authoritative;
  return { writerMs, watcherMs };
}

/** The median ms of `fn` over 5 runs (after one not counted). */
function timedMedian(fn: () => unknown): number {
  fn();
  return median(Array.from({ length: 5 }, () => timed(fn)[1]));
}

/**
 * (c) for Hercules: a new client with a SQLite store loads the room, keeps it once Stable (its
 * base is written 2 s after Stable moves: `baseEveryMs`) and closes; the same client comes back
 * from its store; then the sizes and the in-process decoding.
 */
async function herculesRest(relay: CountingRelay, end: string, state: { doc: Text }, dir: string): Promise<AtRest> {
  const file = join(dir, 'client.db');
  const t0 = performance.now();
  const c = await herculesClient(relay, end, sqliteStorage(file));
  await c.has;
  const loadMs = performance.now() - t0;
  await c.room.until('stable', (s) => s.doc.len === end.length, { timeoutMs: 60_000 });
  await new Promise((r) => setTimeout(r, 3000));
  await c.room.close();
  const storeBytes = sqliteFilesBytes(dir, (f) => f.startsWith('client.db'));
  const t1 = performance.now();
  const back = await herculesClient(relay, end, sqliteStorage(file));
  await back.has;
  const reopenMs = performance.now() - t1;
  await back.room.close();
  const json = JSON.stringify(state);
  const packed = encode(state);
  const sizes = {
    'state as msgpack (the welcome)': packed.length,
    'state as JSON (what both stores keep)': bytes(json),
    'client store: SQLite files': storeBytes,
  };
  const decodeMs = {
    'the same client again, from its store, until it holds the text': reopenMs,
    'msgpack decode + toString': timedMedian(() => textToString((decode(packed) as { doc: Text }).doc)),
    'JSON.parse + toString': timedMedian(() => textToString((JSON.parse(json) as { doc: Text }).doc)),
  };
  return { sizes, loadMs, decodeMs };
}

/** The server's store, read back after the server closed: the room's bytes as listRooms counts them, and the files. */
async function serverStoreSizes(dataDir: string): Promise<Record<string, number>> {
  const store = new SqliteStore(dataDir);
  const rooms = await store.listRooms!({ limit: 10 });
  await store.close();
  const room = rooms.find((r) => r.name === 'trace');
  if (!room) throw new Error('the server store has no room "trace"');
  return {
    'server store: the room (listRooms bytes)': room.bytes,
    'server store: SQLite files': sqliteFilesBytes(dataDir, (f) => !f.startsWith('.')),
  };
}

async function hercules(patches: readonly Patch[], end: string): Promise<Run> {
  const server = await startServer({ store: 'sqlite' });
  const relay = await countingRelay(server.port);
  const dir = mkdtempSync(join(tmpdir(), 'hercules-text-client-'));
  try {
    const writer = await herculesClient(relay, end);
    const watcher = await herculesClient(relay, end);
    const { writerMs, watcherMs } = await herculesWire(writer.room, watcher.has, relay, patches);
    const [w, v] = relay.conns;
    const wire = { writerMs, watcherMs, writer: { ...w }, watcher: { ...v } };
    const state = watcher.room.getState('authoritative');
    if (textToString(state.doc) !== end) throw new Error('Hercules: the watcher’s Authoritative text is not endContent');
    const rest = await herculesRest(relay, end, state, dir);
    await writer.room.close();
    await watcher.room.close();
    await server.child.call({ cmd: 'close' }, 60_000);
    await server.child.exited;
    Object.assign(rest.sizes, await serverStoreSizes(server.dataDir));
    return { wire, rest };
  } finally {
    await relay.close();
    await server.close();
    removeTemp(server.dataDir);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A y-websocket client through the relay, synced; `has` resolves once its text is `end`. */
async function yjsClient(relay: CountingRelay, end: string) {
  const doc = new Y.Doc();
  const text = doc.getText('doc');
  let done!: () => void;
  const has = new Promise<void>((r) => (done = r));
  const check = () => {
    if (text.length === end.length && text.toString() === end) done();
  };
  text.observe(check);
  const provider = new WebsocketProvider(`ws://127.0.0.1:${relay.port}`, 'trace', doc, {
    WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket,
    disableBc: true,
  });
  await new Promise<void>((resolve) => {
    if (provider.synced) return resolve();
    const onSync = (synced: boolean) => {
      if (!synced) return;
      provider.off('sync', onSync);
      resolve();
    };
    provider.on('sync', onSync);
  });
  check();
  return { doc, text, provider, has };
}

async function yjs(patches: readonly Patch[], end: string): Promise<Run> {
  const server = await spawnServer(new URL('../peers/yjs-server.ts', import.meta.url));
  const relay = await countingRelay(server.port);
  const clients: Awaited<ReturnType<typeof yjsClient>>[] = [];
  try {
    const writer = await yjsClient(relay, end);
    const watcher = await yjsClient(relay, end);
    clients.push(writer, watcher);
    relay.reset();
    const t0 = performance.now();
    const writerMs = await replay(patches, ([pos, del, ins]) => {
      if (del > 0) writer.text.delete(pos, del);
      if (ins.length > 0) writer.text.insert(pos, ins);
    });
    await watcher.has;
    const watcherMs = performance.now() - t0;
    const [w, v] = relay.conns;
    const wire = { writerMs, watcherMs, writer: { ...w }, watcher: { ...v } };
    const t1 = performance.now();
    const loader = await yjsClient(relay, end);
    clients.push(loader);
    await loader.has;
    const loadMs = performance.now() - t1;
    const update = Y.encodeStateAsUpdate(watcher.doc);
    const applyMs = timedMedian(() => {
      const d = new Y.Doc();
      Y.applyUpdate(d, update);
      return d.getText('doc').toString();
    });
    return { wire, rest: { sizes: { 'encodeStateAsUpdate (the document)': update.length }, loadMs, decodeMs: { 'applyUpdate + toString': applyMs } } };
  } finally {
    for (const c of clients) {
      c.provider.destroy();
      c.doc.destroy();
    }
    await relay.close();
    await server.stop();
  }
}

/** Automerge at rest: the trace replayed in-process (one change per patch), save() and load(). */
function automerge(patches: readonly Patch[], end: string): { replayMs: number; sizes: Record<string, number>; decodeMs: Record<string, number> } {
  let doc = A.from<{ text: string }>({ text: '' });
  const t0 = performance.now();
  for (const [pos, del, ins] of patches) doc = A.change(doc, (d) => A.splice(d, ['text'], pos, del, ins));
  const replayMs = performance.now() - t0;
  if (doc.text !== end) throw new Error('Automerge: the replay does not give endContent');
  const [saved, saveMs] = timed(() => A.save(doc));
  if (A.load<{ text: string }>(saved).text !== end) throw new Error('Automerge: load() does not give endContent');
  const loadMs = timedMedian(() => A.load<{ text: string }>(saved).text);
  return { replayMs, sizes: { 'save()': saved.length }, decodeMs: { 'load() + text': loadMs, 'save()': saveMs } };
}

const kib = (n: number) => `${(n / 1024).toLocaleString('en-US', { maximumFractionDigits: 1 })} KiB`;
const total = (w: Wire) => w.writer.up + w.writer.down + w.watcher.up + w.watcher.down;

function printWire(name: string, patches: number, runs: Record<string, Run[]>): void {
  console.log(`\n## (b) ${name} through a server, a second client watching (median of ${values.reps}, alternating)\n`);
  console.log('| system | writer loop ms | watcher has endContent, ms | writer up | writer down | watcher up | watcher down | total | bytes per patch |');
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const [sys, rs] of Object.entries(runs)) {
    const m = (f: (w: Wire) => number) => median(rs.map((r) => f(r.wire)));
    const w = rs[0].wire;
    console.log(
      `| ${sys} | ${fmt(m((x) => x.writerMs))} | ${fmt(m((x) => x.watcherMs))} | ${kib(w.writer.up)} | ${kib(w.writer.down)} | ${kib(w.watcher.up)} | ${kib(w.watcher.down)} | ${kib(total(w))} | ${fmt(total(w) / patches)} |`,
    );
  }
}

function printRest(runs: Record<string, Run[]>, am: ReturnType<typeof automerge>): void {
  console.log('\n## (c) the final document at rest, and loading it\n');
  console.log('| system | what | bytes |\n|---|---|--:|');
  for (const [sys, rs] of Object.entries(runs))
    for (const [k, v] of Object.entries(rs[0].rest.sizes)) console.log(`| ${sys} | ${k} | ${v.toLocaleString('en-US')} |`);
  for (const [k, v] of Object.entries(am.sizes)) console.log(`| Automerge ${pkgVersion('@automerge/automerge')} | ${k} | ${v.toLocaleString('en-US')} |`);
  console.log('\n| system | what | ms |\n|---|---|--:|');
  for (const [sys, rs] of Object.entries(runs)) {
    console.log(`| ${sys} | a new client connects until it holds the text | ${fmt(median(rs.map((r) => r.rest.loadMs)))} |`);
    for (const k of Object.keys(rs[0].rest.decodeMs)) console.log(`| ${sys} | ${k} | ${fmt(median(rs.map((r) => r.rest.decodeMs[k])))} |`);
  }
  for (const [k, v] of Object.entries(am.decodeMs)) console.log(`| Automerge | ${k} | ${fmt(v)} |`);
  console.log(`| Automerge | the replay, one change per patch (for reference) | ${fmt(am.replayMs)} |`);
}

async function main(): Promise<void> {
  console.log(JSON.stringify(machineInfo()));
  const { patches, end } = sequentialPatches(values.traces!, values.trace!);
  const systems = { 'Hercules (SQLite)': hercules, [`Yjs ${pkgVersion('yjs')} + y-websocket`]: yjs };
  const runs: Record<string, Run[]> = {};
  for (let r = 0; r < Number(values.reps); r++)
    for (const [sys, fn] of Object.entries(systems)) {
      console.error(`rep ${r + 1}: ${sys}...`);
      (runs[sys] ??= []).push(await fn(patches, end));
    }
  printWire(values.trace!, patches.length, runs);
  console.error('Automerge...');
  printRest(runs, automerge(patches, end));
}

await main();
process.exit(0);
