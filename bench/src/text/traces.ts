/**
 * Reading Joseph Gentle's `editing-traces` (github.com/josephg/editing-traces, CC BY 4.0):
 * automerge-paper by Martin Kleppmann (automerge-perf), seph-blog1, friendsforever and
 * friendsforever_flat by Joseph Gentle. Default directory: ../shared/data/editing-traces from the
 * repository root (override with HERCULES_TRACES or a benchmark's --traces).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/** `[position, characters deleted, text inserted]`, positions in Unicode characters. */
export type Patch = readonly [pos: number, del: number, ins: string];

export interface SequentialTrace {
  startContent: string;
  endContent: string;
  txns: { patches: Patch[] }[];
}

/** One transaction of a concurrent trace: its positions are in the document after `parents`. */
export interface ConcurrentTxn {
  parents: number[];
  agent: number;
  patches: Patch[];
}

export interface ConcurrentTrace {
  kind: 'concurrent';
  endContent: string;
  numAgents: number;
  txns: ConcurrentTxn[];
}

export function defaultTracesDir(repoRoot: string): string {
  return process.env.HERCULES_TRACES ?? join(repoRoot, '..', 'shared', 'data', 'editing-traces');
}

export function readTrace<T>(dir: string, name: string): T {
  return JSON.parse(gunzipSync(readFileSync(join(dir, `${name}.json.gz`))).toString('utf8')) as T;
}

/**
 * A sequential trace's patches in order. Positions are in Unicode characters, Hercules' and the
 * peers' indexes in UTF-16 units: equal without astral characters, which this checks.
 */
export function sequentialPatches(dir: string, name: string): { patches: Patch[]; end: string } {
  const t = readTrace<SequentialTrace>(dir, name);
  if (t.startContent !== '') throw new Error(`${name} starts with content; the replays start empty`);
  const patches = t.txns.flatMap((x) => x.patches);
  assertBmp(name, t.endContent + patches.map((p) => p[2]).join(''));
  return { patches, end: t.endContent };
}

export function assertBmp(name: string, s: string): void {
  if (/[\u{10000}-\u{10FFFF}]/u.test(s)) throw new Error(`${name} has characters outside the BMP; convert its positions first`);
}
