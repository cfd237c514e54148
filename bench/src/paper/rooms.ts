/**
 * Many busy rooms (issue 43), Hercules beside Yjs in one run: R rooms of 4 writers each, every
 * writer editing its room's shared map as fast as its server confirms, all clients in 2
 * processes (peers/saturation-loadgen.ts: raw protocol clients, as cheap as a faithful client
 * can be, so the server is what is measured). For each R, in rounds that alternate the systems'
 * order: the server in its own process, warm-up, then over the window: updates delivered per
 * second (each edit counted at each of its room's 3 other writers), and the server's CPU per
 * delivered update (from /proc). Ratios ours/theirs are taken within a round.
 *
 *   npm run bench:rooms -- [--rooms 1,10,100,1000] [--rounds 2] [--seconds 6] [--only hercules,hercules-memory,yjs]
 *
 * Per writer: at most `window` unconfirmed edits, `chunk` per event-loop turn; both shrink as R
 * grows so that the edits in flight stay about 8,000 whatever R (4,000 writers with the
 * 1-room window of 500 would queue 2 million).
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { cpuSeconds, killOnExit, round, sleep, spawnChild, type Child } from '../runtime/common.ts';
import type { PeerServer, PeerSystem } from '../peers/types.ts';
import type { LoadgenOptions, LoadgenStats } from '../peers/saturation-loadgen.ts';

const { values } = parseArgs({
  options: {
    rooms: { type: 'string', default: '1,10,100,1000' },
    rounds: { type: 'string', default: '2' },
    seconds: { type: 'string', default: '6' },
    only: { type: 'string', default: 'hercules,yjs' },
  },
});
const ROOMS = values.rooms.split(',').map(Number);
const ROUNDS = Number(values.rounds),
  SECONDS = Number(values.seconds);
const SYSTEMS = values.only.split(',');
if (ROOMS.some((r) => !(r >= 1)) || !(ROUNDS >= 1) || !(SECONDS >= 2)) {
  console.error('rooms: --rooms a list of positive numbers, --rounds >= 1, --seconds >= 2');
  process.exit(2);
}
const WRITERS_PER_ROOM = 4,
  PROCS = 2;
/** Warm-up before the window: connections of 1,000 rooms take their first frames for a while. */
const warmupMs = (rooms: number) => (rooms >= 100 ? 3000 : 1000);
const windowOf = (rooms: number) => Math.max(8, Math.min(500, Math.round(2000 / rooms)));
const chunkOf = (rooms: number) => Math.max(1, Math.min(50, Math.floor(windowOf(rooms) / 4)));
/** Yjs writers send pre-encoded updates: several times the per-writer rate seen at each R. */
const poolOf = (rooms: number) => Math.max(100, Math.ceil((SECONDS * 60_000) / (WRITERS_PER_ROOM * rooms)));

type Stats = LoadgenStats;
interface Result {
  system: string;
  rooms: number;
  round: number;
  deliveredPerS: number;
  serverCores: number;
  serverUsPerUpdate: number;
  clientCores: number[];
  loadavg1: number;
  notes: string[];
}

async function stopChild(c: Child): Promise<void> {
  if (c.proc.exitCode === null && c.proc.signalCode === null) await c.call({ cmd: 'stop' }, 10_000).catch(() => c.proc.kill('SIGKILL'));
  await c.exited;
}

/** The loadgen processes' options: writers of rooms [p*R/PROCS, (p+1)*R/PROCS) in process p. */
function writerSpecs(system: string, server: PeerServer, rooms: number): Partial<LoadgenOptions>[] {
  const tag = `rooms-${Date.now().toString(36)}`;
  return Array.from({ length: PROCS }, (_, p) => {
    const writers: number[] = [],
      docs: string[] = [];
    for (let r = Math.floor((p * rooms) / PROCS); r < Math.floor(((p + 1) * rooms) / PROCS); r++)
      for (let i = 0; i < WRITERS_PER_ROOM; i++) {
        writers.push(r * WRITERS_PER_ROOM + i);
        docs.push(`${tag}-${r}`);
      }
    const id: LoadgenOptions['system'] = system === 'yjs' ? 'yjs' : 'hercules';
    return {
      system: id,
      port: server.port,
      role: 'writer' as const,
      doc: docs[0] ?? tag,
      writers,
      docs,
      chunk: chunkOf(rooms),
      window: windowOf(rooms),
      pool: poolOf(rooms),
      connectBatch: 50,
    };
  }).filter((o) => o.writers!.length > 0);
}

async function measure(system: string, server: PeerServer, rooms: number, round_: number): Promise<Result> {
  const children = writerSpecs(system, server, rooms).map((o) => spawnChild('../peers/saturation-loadgen.ts', o, [], 300_000)); // 2,000 connections a process take a while on a busy machine
  try {
    await Promise.all(children.map((c) => c.ready));
    await Promise.all(children.map((c) => c.call({ cmd: 'start' })));
    await sleep(warmupMs(rooms));
    const snap = async () => ({
      t: performance.now(),
      server: cpuSeconds(server.pid),
      cpu: children.map((c) => cpuSeconds(c.proc.pid!)),
      stats: await Promise.all(children.map((c) => c.call<Stats>({ cmd: 'stats' }, 30_000))),
    });
    const a = await snap();
    await sleep(SECONDS * 1000);
    const b = await snap();
    const dt = (b.t - a.t) / 1000;
    const delivered = b.stats.reduce((s, x, i) => s + x.delivered - a.stats[i].delivered, 0);
    const notes = [...new Set(b.stats.flatMap((s) => s.errors))];
    if (b.stats.some((s) => s.exhausted)) notes.push('Yjs writers ran out of pre-encoded updates: a lower bound');
    return {
      system,
      rooms,
      round: round_,
      deliveredPerS: Math.round(delivered / dt),
      serverCores: round((b.server - a.server) / dt, 2),
      serverUsPerUpdate: round(((b.server - a.server) * 1e6) / delivered, 2),
      clientCores: children.map((_, i) => round((b.cpu[i] - a.cpu[i]) / dt, 2)),
      loadavg1: round(loadavg()[0], 2),
      notes,
    };
  } finally {
    await Promise.all(children.map(stopChild));
  }
}

async function serverOf(system: string): Promise<PeerServer> {
  if (system === 'yjs') return ((await import('../peers/yjs.ts')) as Record<string, PeerSystem>).yjs.startServer();
  const mod = (await import('../peers/hercules.ts')) as Record<string, PeerSystem>;
  const sys = system === 'hercules-memory' ? mod.herculesMapMemory : mod.hercules; // both serve the spreadsheet machine the raw writers use
  if (!sys) throw new Error(`rooms: no peer adapter for ${system}`);
  return sys.startServer();
}

let live: PeerServer | undefined;
killOnExit(() => live);

const results: Result[] = [];
for (const rooms of ROOMS)
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? SYSTEMS : [...SYSTEMS].reverse();
    for (const system of order) {
      live = await serverOf(system);
      try {
        results.push(await measure(system, live, rooms, r));
        const x = results.at(-1)!;
        console.log(
          `rooms ${rooms} round ${r} ${system}: ${x.deliveredPerS} updates/s delivered, server ${x.serverCores} cores, ${x.serverUsPerUpdate} µs/update, clients ${x.clientCores.join(' + ')} cores, load ${x.loadavg1}${x.notes.length ? `; ${x.notes.join('; ')}` : ''}`,
        );
      } finally {
        await live.stop();
        live = undefined;
      }
    }
  }

const base = SYSTEMS.includes('yjs') ? 'yjs' : SYSTEMS[SYSTEMS.length - 1];
const table = results
  .filter((x) => x.system !== base)
  .map((x) => {
    const y = results.find((o) => o.system === base && o.rooms === x.rooms && o.round === x.round)!;
    return {
      rooms: x.rooms,
      round: x.round,
      system: x.system,
      'updates/s': x.deliveredPerS,
      [`${base} updates/s`]: y.deliveredPerS,
      'rate ours/theirs': round(x.deliveredPerS / y.deliveredPerS, 2),
      'server µs/update': x.serverUsPerUpdate,
      [`${base} µs/update`]: y.serverUsPerUpdate,
      'CPU/update ours/theirs': round(x.serverUsPerUpdate / y.serverUsPerUpdate, 2),
      load: x.loadavg1,
    };
  });
console.table(table);
console.log(`machine: ${cpus().length} × ${cpus()[0]?.model}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`);
process.exit(0);
