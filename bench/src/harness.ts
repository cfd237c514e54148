/**
 * A small measurement harness shared by the benchmarks.
 *
 * Why not tinybench or mitata: tinybench times every iteration with `performance.now()`, whose
 * own cost (tens of ns) swamps a ~1 ns `getState`; mitata handles that but would add a
 * dependency and its own output format, while these benchmarks need specific shapes (per-call
 * time of a batched tight loop, per-sample median/p99 of one submit, interleaved repetitions of
 * several competitors so ratios come from the same run). Each of those is a few lines here.
 *
 * Rules every benchmark follows:
 *  - warm up before measuring (JIT tiers, inline caches, lazily built structures);
 *  - repeat and report the median (the machine is shared and noisy);
 *  - interleave competitors inside each repetition, so a noisy moment hurts all of them;
 *  - feed results into `sink` so the optimiser cannot drop the measured work.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Dead-code-elimination guard: benchmarks fold what they computed into it. */
export const sink = { n: 0, o: undefined as unknown };

export function consume(v: unknown): void {
  sink.o = v;
}

const gcFn = (globalThis as { gc?: () => void }).gc;
/** Collect garbage between repetitions when node runs with --expose-gc (the npm script does). */
export function gc(): void {
  if (gcFn) gcFn();
}
export const gcExposed = typeof gcFn === 'function';

export interface Stats {
  n: number;
  median: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

export function stats(samples: readonly number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  // Median: average the two middle values for even counts.
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { n: s.length, median, p99: quantile(s, 0.99), min: s[0], max: s[s.length - 1], mean };
}

export const median = (xs: readonly number[]) => stats(xs).median;

/** Milliseconds taken by one call of `fn`. */
export function timeOnce(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

/**
 * Run several competitors `reps` times each, interleaved (A B C, A B C, ...), after `warmup`
 * interleaved rounds. Returns each competitor's per-rep milliseconds.
 */
export function interleaved(
  competitors: Record<string, () => void>,
  reps: number,
  warmup: number,
  opts: { gcBetween?: boolean } = {},
): Record<string, number[]> {
  const names = Object.keys(competitors);
  const out: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < warmup + reps; r++) {
    for (const n of names) {
      if (opts.gcBetween) gc();
      const ms = timeOnce(competitors[n]);
      if (r >= warmup) out[n].push(ms);
    }
  }
  return out;
}

/** Median cost of `performance.now()` itself, in µs (to read per-sample timings against). */
export function timerOverheadUs(): number {
  const xs: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const a = performance.now();
    const b = performance.now();
    xs.push((b - a) * 1000);
  }
  return stats(xs.slice(5_000)).median;
}

// ------------------------------------------------------------------ output

export type Cell = string | number;
export type Row = Record<string, Cell>;

/** Format a number with a sensible number of significant digits. */
export function fmt(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a === 0) return '0';
  return x
    .toPrecision(digits)
    .replace(/(\.\d*?)0+$/, '$1')
    .replace(/\.$/, '');
}

export function printTable(title: string, rows: readonly Row[]): void {
  console.log(`\n## ${title}\n`);
  if (rows.length === 0) return;
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: Cell | undefined) => (v === undefined ? '' : typeof v === 'number' ? fmt(v) : v);
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => '| ' + vals.map((v, i) => (i === 0 ? v.padEnd(w[i]) : v.padStart(w[i]))).join(' | ') + ' |';
  console.log(line(cols));
  console.log('|' + w.map((x, i) => (i === 0 ? '-'.repeat(x + 2) : '-'.repeat(x + 1) + ':')).join('|') + '|');
  for (const r of rows) console.log(line(cols.map((c) => cell(r[c]))));
}

export interface Goal {
  what: string;
  goal: string;
  measured: string;
  met: boolean;
}

/** One benchmark's machine-readable result: a section of docs/benchmarks/core.json. */
export interface Section {
  id: string;
  title: string;
  /** How to run just this benchmark. */
  command: string;
  /** Parameters that define the workload. */
  params: Record<string, unknown>;
  rows: Row[];
  goals: Goal[];
  notes?: string[];
  measuredAt?: string;
  seconds?: number;
  /** 1-minute load average when the benchmark started. */
  loadAvg1m?: number;
}

export function printSection(s: Section): void {
  printTable(s.title, s.rows);
  for (const g of s.goals) console.log(`  goal ${g.met ? 'MET   ' : 'MISSED'} ${g.what}: ${g.measured} (goal ${g.goal})`);
  for (const n of s.notes ?? []) console.log(`  note: ${n}`);
}

/** CPU family/model/MHz from /proc/cpuinfo where available (Linux), else empty. */
function cpuDetails(): { cpuFamily?: number; cpuModel?: number; mhz?: number } {
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (name: string) => {
      const m = new RegExp(`^${name}\\s*:\\s*(.+)$`, 'm').exec(text);
      return m ? Number(m[1]) : undefined;
    };
    return { cpuFamily: field('cpu family'), cpuModel: field('model'), mhz: Math.round(field('cpu MHz') ?? NaN) || undefined };
  } catch {
    return {};
  }
}

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model?.trim() ?? 'unknown',
    ...cpuDetails(),
    logicalCpus: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    v8: process.versions.v8,
    nodeEnv: process.env.NODE_ENV ?? '(unset)',
    gcExposed,
    /** 1-minute load average when this was taken: other work on a shared machine shows here. */
    loadAvg1m: Math.round(os.loadavg()[0] * 100) / 100,
  };
}

/** The commit measured, and whether the working tree had uncommitted changes. */
export function codeVersion(): { commit: string; uncommittedChanges: boolean } | undefined {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return { commit: git('rev-parse', '--short', 'HEAD'), uncommittedChanges: git('status', '--porcelain', '--', 'packages').length > 0 };
  } catch {
    return undefined;
  }
}

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '..', '..');
export const resultsFile = resolve(repoRoot, 'docs', 'benchmarks', 'core.json');

/**
 * Merge sections into docs/benchmarks/core.json (sections not re-run keep their last result,
 * each with its own measuredAt and machine).
 */
export function writeSections(sections: Section[]): void {
  let doc: { sections: Record<string, unknown> } = { sections: {} };
  try {
    const prev = JSON.parse(readFileSync(resultsFile, 'utf8'));
    if (prev && typeof prev === 'object' && prev.sections && typeof prev.sections === 'object') doc = prev;
  } catch {
    // first run
  }
  const machine = machineInfo();
  const code = codeVersion();
  // A run with NODE_ENV=production (Mutative's and Immer's production builds) is kept apart.
  const suffix = process.env.NODE_ENV === 'production' ? '@production' : '';
  for (const s of sections) doc.sections[s.id + suffix] = { ...s, machine: { ...machine, loadAvg1m: s.loadAvg1m }, code };
  const ordered = {
    about: 'Hercules core benchmarks; regenerate with `npm run bench` (see docs/benchmarks.md).',
    updatedAt: new Date().toISOString(),
    sections: doc.sections,
  };
  mkdirSync(dirname(resultsFile), { recursive: true });
  writeFileSync(resultsFile, JSON.stringify(ordered, null, 2) + '\n');
}

export type Bench = () => Section | Promise<Section>;

export async function runBench(bench: Bench): Promise<Section> {
  gc();
  const load = Math.round(os.loadavg()[0] * 100) / 100;
  const t0 = performance.now();
  const s = await bench();
  s.loadAvg1m = load;
  s.seconds = Math.round((performance.now() - t0) / 100) / 10;
  s.measuredAt = new Date().toISOString();
  printSection(s);
  console.log(`  (${s.seconds} s; 1-minute load average at start: ${load} on ${os.cpus().length} CPUs)`);
  return s;
}

/** True when `metaUrl` is the module node was started with (a benchmark run on its own). */
export function isMain(metaUrl: string): boolean {
  const arg = process.argv[1];
  return arg !== undefined && pathToFileURL(resolve(arg)).href === metaUrl;
}

/** Run one benchmark on its own: print its table and merge its section into core.json. */
export async function standalone(metaUrl: string, bench: Bench): Promise<void> {
  if (!isMain(metaUrl)) return;
  console.log(`machine: ${JSON.stringify(machineInfo())}`);
  const s = await runBench(bench);
  writeSections([s]);
  console.log(`\nwrote section "${s.id}" to docs/benchmarks/core.json`);
  console.log(`(sink ${sink.n & 1})`);
}
