/**
 * Shared pieces of the runtime benchmarks (server, client, wire): child processes with an IPC
 * request/reply channel, a server in its own process, /metrics scraping, temp directories,
 * exact WebSocket frame sizes, and the writer of docs/benchmarks/runtime.json.
 */
import { fork, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Packr } from 'msgpackr';
import { codeVersion, machineInfo, repoRoot, type Section } from '../harness.ts';

export { until } from '@hercules/test-utils';

const here = dirname(fileURLToPath(import.meta.url));
export const runtimeResultsFile = resolve(repoRoot, 'docs', 'benchmarks', 'runtime.json');

// ------------------------------------------------------------------ temp dirs

const made = new Set<string>();
/** A fresh directory under the OS temp dir; removed by `cleanupTemp` (also on exit). */
export function tempDir(tag: string): string {
  const d = mkdtempSync(join(tmpdir(), `hercules-bench-${tag}-`));
  made.add(d);
  return d;
}
export function removeTemp(d: string): void {
  rmSync(d, { recursive: true, force: true });
  made.delete(d);
}
export function cleanupTemp(): void {
  for (const d of [...made]) removeTemp(d);
}

/** Filesystem type of a directory as `stat -f -c %T` reports it, and the mount's type if known. */
export function fsType(dir: string): { statF: string; mount?: string } {
  let statF = 'unknown';
  try {
    statF = execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
  } catch {
    /* not Linux */
  }
  let mount: string | undefined;
  try {
    // `stat -f` says ext2/ext3 for ext4 (same magic number); findmnt knows the real type.
    mount = execFileSync('findmnt', ['-n', '-o', 'FSTYPE', '-T', dir], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    /* no findmnt */
  }
  return { statF, mount };
}

/** CPU seconds of another process (and its waited-for children), from /proc; NaN if gone. */
export function cpuSeconds(pid: number): number {
  const t = cpuTimes(pid);
  return t.user + t.system;
}

/**
 * A process's CPU seconds in user space and in the kernel (its waited-for children included),
 * from /proc/<pid>/stat: the kernel share is where socket writes and fsyncs show. NaN off Linux.
 */
export function cpuTimes(pid: number): { user: number; system: number } {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime stime cutime cstime, in ticks of 1/100 s
    return { user: (Number(f[11]) + Number(f[13])) / 100, system: (Number(f[12]) + Number(f[14])) / 100 };
  } catch {
    return { user: NaN, system: NaN };
  }
}

// ------------------------------------------------------------------ child processes

const tsxUrl = import.meta.resolve('tsx');
const children = new Set<ChildProcess>();

export interface Child {
  proc: ChildProcess;
  /** Send a command and wait for the reply carrying the same id. */
  call<T = any>(msg: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /** First message with a `ready` field. */
  ready: Promise<any>;
  exited: Promise<number | null>;
  /** Resolves the first message matching `pred`. */
  wait<T = any>(pred: (m: any) => boolean, timeoutMs?: number): Promise<T>;
}

export function spawnChild(script: string, arg: unknown, extraExecArgv: string[] = [], readyTimeoutMs = 60_000): Child {
  const proc = fork(resolve(here, script), [JSON.stringify(arg)], {
    execArgv: [...extraExecArgv, '--import', tsxUrl],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    cwd: repoRoot,
  });
  children.add(proc);
  const exited = new Promise<number | null>((r) =>
    proc.on('exit', (code) => {
      children.delete(proc);
      r(code);
    }),
  );
  let nextId = 1;
  const waiters: { pred: (m: any) => boolean; resolve: (m: any) => void }[] = [];
  proc.on('message', (m: any) => {
    const i = waiters.findIndex((w) => w.pred(m));
    if (i >= 0) waiters.splice(i, 1)[0].resolve(m);
  });
  const wait = <T>(pred: (m: any) => boolean, timeoutMs = 60_000) =>
    new Promise<T>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`${script}: no reply within ${timeoutMs} ms`)), timeoutMs);
      const w = {
        pred,
        resolve: (m: any) => {
          clearTimeout(t);
          res(m);
        },
      };
      waiters.push(w);
      void exited.then((code) => {
        clearTimeout(t);
        const i = waiters.indexOf(w);
        if (i >= 0) {
          waiters.splice(i, 1);
          rej(new Error(`${script} exited (${code}) before replying`));
        }
      });
    });
  const ready = wait((m) => m && m.ready !== undefined, readyTimeoutMs).then((m: any) => m.ready);
  return {
    proc,
    ready,
    exited,
    wait,
    call: <T>(msg: Record<string, unknown>, timeoutMs?: number) => {
      const id = nextId++;
      const p = wait<T>((m) => m && m.id === id, timeoutMs);
      proc.send({ ...msg, id });
      return p;
    },
  };
}

/** Kill children still running when the parent exits (a crash mid-benchmark). */
process.on('exit', () => {
  for (const c of children) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  cleanupTemp();
});

export interface ServerHandle {
  url: string;
  http: string;
  port: number;
  dataDir: string;
  child: Child;
  stats(
    resetHops?: boolean,
  ): Promise<{ cpu: NodeJS.CpuUsage; elu: { idle: number; active: number; utilization: number }; writeBytes: number; monoUs: number; hops: number[] }>;
  metrics(): Promise<Record<string, number>>;
  /** Close the server, wait for the process to exit, remove its data directory. */
  close(): Promise<void>;
}

export async function startServer(
  opts: { simulateRttMs?: number; commitWindowMs?: number; hopProbe?: boolean; cpuProfDir?: string; store?: 'sqlite' | 'memory' } = {},
): Promise<ServerHandle> {
  const dataDir = tempDir('server');
  const execArgv = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [];
  const child = spawnChild(
    'server-process.ts',
    { dataDir, simulateRttMs: opts.simulateRttMs, commitWindowMs: opts.commitWindowMs, hopProbe: opts.hopProbe, store: opts.store },
    execArgv,
  );
  const { url, port } = await child.ready;
  const http = `http://127.0.0.1:${port}`;
  return {
    url,
    http,
    port,
    dataDir,
    child,
    stats: (resetHops) => child.call({ cmd: 'stats', resetHops }),
    metrics: async () => parseProm(await (await fetch(`${http}/metrics`)).text()),
    close: async () => {
      if (child.proc.exitCode === null) {
        await child.call({ cmd: 'close' }, 30_000).catch(() => child.proc.kill('SIGKILL'));
        await child.exited;
      }
      removeTemp(dataDir);
    },
  };
}

/** Prometheus text format -> { 'name{labels}': value } (only what the benchmarks read). */
export function parseProm(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

export function delta(a: Record<string, number>, b: Record<string, number>, key: string): number {
  return (b[key] ?? 0) - (a[key] ?? 0);
}

// ------------------------------------------------------------------ sizes

/** msgpack, as the wire codec packs args (same options as packages/core/src/wire.ts). */
export const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });
export const argBytes = (args: unknown) => packr.pack(args).length;

/** WebSocket frame header bytes for a payload (RFC 6455 §5.2); client frames carry a 4-byte mask. */
export function wsHeader(payload: number, fromClient: boolean): number {
  const len = payload < 126 ? 2 : payload < 65_536 ? 4 : 10;
  return len + (fromClient ? 4 : 0);
}

/** The args of the load generator's k-th op (R3): a small setCell. */
const LOAD_WORDS = ['Gear', 'Bolt', 'Nut', 'Axle', 'Cam', 'Pin', 'Shaft', 'Lever'];
export const loadArgs = (k: number) => ({ row: k % 12, col: (k >> 3) % 6, text: LOAD_WORDS[k & 7] });
/** Mean msgpack size of loadArgs over one period of k (48). */
export const loadArgBytes = () => Array.from({ length: 48 }, (_, k) => argBytes(loadArgs(k))).reduce((a, b) => a + b) / 48;

// ------------------------------------------------------------------ misc

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

/** Merge sections into docs/benchmarks/runtime.json (same shape as core.json). */
export function writeRuntimeSections(sections: (Section & { extra?: unknown })[]): void {
  let doc: { sections: Record<string, unknown> } = { sections: {} };
  try {
    const prev = JSON.parse(readFileSync(runtimeResultsFile, 'utf8'));
    if (prev && typeof prev === 'object' && prev.sections && typeof prev.sections === 'object') doc = prev;
  } catch {
    // first run
  }
  const machine = machineInfo();
  const code = codeVersion();
  for (const s of sections) doc.sections[s.id] = { ...s, machine: { ...machine, loadAvg1m: s.loadAvg1m }, code };
  mkdirSync(dirname(runtimeResultsFile), { recursive: true });
  writeFileSync(
    runtimeResultsFile,
    JSON.stringify(
      {
        about: 'Hercules runtime benchmarks (server, client, wire); regenerate with `npm run bench:runtime` (see docs/benchmarks.md).',
        updatedAt: new Date().toISOString(),
        sections: doc.sections,
      },
      null,
      2,
    ) + '\n',
  );
}

/**
 * Kill a process the benchmark started outside spawnChild (a peer's server) if the benchmark
 * exits first, by a crash or Ctrl-C: `current()` names it, if any, at that moment.
 */
export function killOnExit(current: () => { pid: number } | undefined): void {
  process.on('exit', () => {
    const p = current();
    if (p)
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));
}
