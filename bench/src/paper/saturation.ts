/**
 * Server saturation, Hercules and its peers: how many edits per second one server process
 * delivers when the clients are not the limit, and how much server CPU each edit costs.
 * (peers.ts's throughput test runs all clients in the bench process, so it measures the clients.)
 *
 * For each system: its server in its own process (the adapter's startServer()), clients connected
 * directly on loopback (RTT 0), in processes of their own (peers/saturation-loadgen.ts): 4 writers
 * in 2 processes and 1 observer in a third. The writers edit one shared map (distinct keys per
 * writer, unique values), 50 edits per event-loop turn, at most WINDOW unconfirmed each (below); the
 * observer counts the edits arriving. After 1 s of warm-up, over the rest of `--seconds`:
 * edits/s delivered at the observer, edits/s the server confirmed to the writers, and CPU time
 * (from /proc/<pid>/stat) of the server and of the load-generator processes. A server at ~1 core
 * is saturated (Node runs JavaScript on one thread); otherwise the table says what limited it.
 *
 *   node --import tsx bench/src/paper/saturation.ts [--only hercules,yjs,...] [--seconds 6]
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { cpuSeconds, killOnExit, round, sleep, spawnChild, type Child } from '../runtime/common.ts';
import { writePaperSection } from './report.ts';
import { saturationChart, short } from './charts.ts';
import type { PeerServer, PeerSystem } from '../peers/types.ts';
import type { LoadgenOptions, LoadgenStats } from '../peers/saturation-loadgen.ts';

const { values } = parseArgs({ options: { only: { type: 'string' }, seconds: { type: 'string', default: '6' } } });
const SECONDS = Number(values.seconds),
  WARMUP_S = 1;
const IDS = ['hercules', 'yjs', 'automerge', 'colyseus', 'fluid'] as const;
type Id = (typeof IDS)[number];

// On 2 cores the server needs one; the clients share the other. Two writer processes rather than
// one, so that a writer event loop busy with a heavy client library (Automerge, Fluid) does not cap
// the offered load on its own; not more, since more processes than cores only add switching. The
// observer gets its own process so that counting never delays the writers (or vice versa).
const WRITER_PROCS = 2,
  WRITERS_PER_PROC = 2;
/** Edits per writer per event-loop turn. */
const CHUNK = 50;
/** Unconfirmed edits per writer: enough to keep the server busy across a confirmation round trip,
 *  small enough that memory and the server's queues stay bounded. Hercules and Yjs confirm in the
 *  server's next turn, so 500 suffices (more only queues; Hercules then spends more CPU per edit,
 *  18k vs 31k edits/s at 2000 here); Colyseus confirms on its 50 ms patch tick, Automerge syncs
 *  at most every 100 ms, Fluid's sequencing is a pipeline: 2000. */
const WINDOW: Record<Id, number> = { hercules: 500, yjs: 500, automerge: 2000, colyseus: 2000, fluid: 2000 };
/** Yjs writers send pre-encoded updates: enough for the whole run at several times the rate seen. */
const YJS_POOL = Math.ceil(SECONDS * 10_000);

/** CPU time of the whole machine since boot, [busy, total] in jiffies (others' work included). */
function machineJiffies(): [number, number] {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return [total - f[3] - f[4], total]; // minus idle and iowait
}

/** Seconds the process's main (JavaScript) thread ran plus waited for a CPU: near the wall time
 *  means its event loop never idled, i.e. saturated, even if other work kept it off the CPU. */
function runnableSeconds(pid: number): number {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
    return (run + wait) / 1e9;
  } catch {
    return NaN;
  }
}

type Stats = LoadgenStats;
interface Result {
  system: string;
  deliveredPerS: number;
  confirmedPerS: number;
  serverCores: number;
  /** Share of the time the server's JavaScript thread was running or waiting for a CPU. */
  serverRunnable: number;
  serverUsPerEdit: number;
  writerCores: number[];
  observerCores: number;
  /** Busy cores of the whole machine over the window, other users' processes included. */
  machineCores: number;
  limit: string;
  loadavg1: number;
  notes: string[];
}

/** Ask a child to stop, and kill it if it does not. */
async function stopChild(c: Child): Promise<void> {
  if (c.proc.exitCode === null && c.proc.signalCode === null) {
    await c.call({ cmd: 'stop' }, 5000).catch(() => c.proc.kill('SIGKILL'));
  }
  await c.exited;
}

async function measure(id: Id, sys: PeerSystem, server: PeerServer): Promise<Result> {
  const base = { system: id, port: server.port, chunk: CHUNK, window: WINDOW[id], pool: YJS_POOL };
  const spawn = (o: Partial<LoadgenOptions>) => spawnChild('../peers/saturation-loadgen.ts', { ...base, ...o });
  const children: Child[] = [];
  try {
    // Automerge and Fluid documents get their ids when created: the observer creates it first.
    const observer = spawn({ role: 'observer', writers: [0], doc: `sat-${Date.now().toString(36)}`, create: id === 'automerge' || id === 'fluid' });
    children.push(observer);
    const { doc } = (await observer.ready) as { doc: string };
    for (let p = 0; p < WRITER_PROCS; p++) {
      children.push(spawn({ role: 'writer', doc, writers: Array.from({ length: WRITERS_PER_PROC }, (_, i) => p * WRITERS_PER_PROC + i) }));
    }
    await Promise.all(children.map((c) => c.ready));
    const writers = children.slice(1);
    await Promise.all(children.map((c) => c.call({ cmd: 'start' })));
    await sleep(WARMUP_S * 1000);
    const snap = async () => {
      const stats = await Promise.all(children.map((c) => c.call<Stats>({ cmd: 'stats' }, 10_000)));
      return {
        t: performance.now(),
        server: cpuSeconds(server.pid),
        runnable: runnableSeconds(server.pid),
        cpu: children.map((c) => cpuSeconds(c.proc.pid!)),
        machine: machineJiffies(),
        stats,
      };
    };
    const a = await snap();
    await sleep((SECONDS - WARMUP_S) * 1000);
    const b = await snap();
    const dt = (b.t - a.t) / 1000;
    const delivered = b.stats[0].delivered - a.stats[0].delivered;
    const confirmed = writers.reduce((s, _, i) => s + b.stats[i + 1].acked - a.stats[i + 1].acked, 0);
    const serverCpu = b.server - a.server;
    const cores = children.map((_, i) => round((b.cpu[i] - a.cpu[i]) / dt, 2));
    const serverCores = round(serverCpu / dt, 2);
    const serverRunnable = round((b.runnable - a.runnable) / dt, 2);
    const machineCores = round(((b.machine[0] - a.machine[0]) / (b.machine[1] - a.machine[1])) * cpus().length, 2);
    const notes = [...new Set(b.stats.flatMap((s) => s.errors))];
    if (b.stats.some((s) => s.exhausted)) notes.push('Yjs writers ran out of pre-encoded updates: a lower bound');
    // Node runs a server's JavaScript on one thread: near one core, it is the bottleneck.
    // Otherwise: clients short of CPU (the machine's cores all busy, other users' work included),
    // one client process at a core, or neither (the system's confirmations come too slowly).
    const limit =
      serverCores >= 0.85
        ? 'server'
        : serverRunnable >= 0.9
          ? 'server (short of CPU)'
          : machineCores >= cpus().length - 0.2
            ? 'CPU (all cores busy)'
            : cores.slice(1).some((c) => c >= 0.85)
              ? 'writers'
              : cores[0] >= 0.85
                ? 'observer'
                : 'confirmation round trip';
    return {
      system: sys.name,
      deliveredPerS: Math.round(delivered / dt),
      confirmedPerS: Math.round(confirmed / dt),
      serverCores,
      serverRunnable,
      serverUsPerEdit: round((serverCpu * 1e6) / delivered, 1),
      writerCores: cores.slice(1),
      observerCores: cores[0],
      machineCores,
      limit,
      loadavg1: round(loadavg()[0], 2),
      notes,
    };
  } finally {
    await Promise.all(children.map(stopChild));
  }
}

/** The adapter of a system, or undefined (reported) if its packages do not load. */
async function load(id: Id): Promise<PeerSystem | undefined> {
  try {
    return ((await import(`../peers/${id}.ts`)) as Record<string, PeerSystem>)[id];
  } catch (e) {
    console.log(`saturation: ${id} not available (${(e as Error).message.split('\n')[0]})`);
    return undefined;
  }
}

// Servers started through spawn() (not spawnChild) must not outlive a crash or Ctrl-C either.
let liveServer: PeerServer | undefined;
killOnExit(() => liveServer);

const only = values.only?.split(',');
const results: Result[] = [];
const skipped: string[] = [];
for (const id of IDS.filter((i) => !only || only.includes(i))) {
  const sys = await load(id);
  if (!sys) {
    skipped.push(`${id}: failed to load`);
    continue;
  }
  console.log(`saturation: ${sys.name}`);
  try {
    liveServer = await sys.startServer();
  } catch (e) {
    console.log(`saturation: ${id} server did not start (${(e as Error).message})`);
    skipped.push(`${id}: server did not start`);
    continue;
  }
  try {
    results.push(await measure(id, sys, liveServer));
    console.log(results.at(-1));
  } catch (e) {
    console.log(`saturation: ${id} failed: ${(e as Error).stack}`);
    skipped.push(`${id}: failed (${(e as Error).message})`);
  } finally {
    await liveServer.stop();
    liveServer = undefined;
  }
}

console.table(
  results.map((r) => ({
    system: short(r.system),
    'delivered edits/s': r.deliveredPerS,
    'confirmed edits/s': r.confirmedPerS,
    'server cores': r.serverCores,
    'server runnable': r.serverRunnable,
    'server µs/edit': r.serverUsPerEdit,
    'writer cores': r.writerCores.join(' + '),
    'observer cores': r.observerCores,
    'machine busy cores': r.machineCores,
    limit: r.limit,
  })),
);
const ours = results.find((r) => r.system.startsWith('Hercules'));
const ratios = ours
  ? results
      .filter((r) => r !== ours)
      .map((r) => ({
        peer: short(r.system),
        'delivered edits/s, ours/theirs': round(ours.deliveredPerS / r.deliveredPerS, 2),
        'server CPU per edit, ours/theirs': round(ours.serverUsPerEdit / r.serverUsPerEdit, 3),
        // A peer whose server was not the limit was not saturated: its edits/s is a lower bound.
        'their limit': r.limit,
      }))
  : [];
if (ratios.length) console.table(ratios);
for (const s of skipped) console.log(`saturation: skipped ${s}`);
const section = {
  params: {
    seconds: SECONDS,
    warmupSeconds: WARMUP_S,
    writers: WRITER_PROCS * WRITERS_PER_PROC,
    writerProcesses: WRITER_PROCS,
    observers: 1,
    editsPerTurn: CHUNK,
    unconfirmedPerWriter: WINDOW,
    keysPerWriter: '2 × unconfirmedPerWriter (Hercules: 18 cells of the 12 × 6 grid)',
    yjsPoolPerWriter: YJS_POOL,
    rttMs: 0,
  },
  results,
  ratios,
  skipped,
};
writePaperSection('saturation', section, saturationChart(section));
process.exit(0);
