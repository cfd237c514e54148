/**
 * The flight recorder's check (`hercules replay`, docs/replay.md): a room file's log run again
 * through the machine, from the file's checkpoint, with the state's digest compared at every
 * position the file recorded one (its checkpoint digests and the head's), and each op's outcome
 * (applied, or threw) compared with the one stored. Reports the first position where they differ.
 *
 * Pure but for the hash: no disk, no clock. The file is checked as an import checks it
 * (room-file.ts) before anything runs; a file that is not a room export, or names a machine not
 * given, is refused with a HerculesError from the closed vocabulary.
 */
import {
  HerculesError,
  SYSTEM_CLIENT,
  applyOp,
  cannotRun,
  deepFreeze,
  isMigrationEntry,
  machineAt,
  migrateState,
  readLegacyRefusal,
  type LogEntry,
  type Machine,
} from '@hercules/core';
import type { RoomFile } from './backend-api.ts';
import { roomFileProblem } from './room-file.ts';
import { stateDigest } from './store/state-digest.ts';

/** The first place a replay differs from what the file recorded. */
export interface ReplayDifference {
  /** The position: the state after the op there (or the checkpoint's) is not the one recorded. */
  pos: number;
  /**
   * 'state': the state's digest differs from the checkpoint digest recorded at `pos`; 'head': from
   * the head's; 'outcome': the op at `pos` threw in one run and not in the other.
   */
  kind: 'state' | 'head' | 'outcome';
  expected: string;
  actual: string;
  /** The last position before `pos` whose recorded digest matched (the file's checkpoint if none). */
  lastMatch: number;
  /** The op at `pos` (absent when `pos` is the file's checkpoint). */
  op?: Pick<LogEntry, 'name' | 'args' | 'client' | 'seq' | 'author'>;
}

export interface ReplayReport {
  machine: string;
  version: number;
  /** The file's checkpoint, where the replay starts, and its head, where it ends. */
  from: number;
  head: number;
  /** Ops run (entries neither refused nor migrations). */
  ops: number;
  /** Positions whose recorded digest was compared (before the first difference). */
  checked: number[];
  /** Whether the file records checkpoint digests at all (exports before them do not). */
  hasDigests: boolean;
  /** Whether it records the head's digest. */
  hasHead: boolean;
  /** The digest of the state the replay ends with (at the head, or at the difference). */
  finalDigest: string;
  difference?: ReplayDifference;
}

/** The file as a room file, checked as an import checks it; throws `bad-argument`. */
function checkFile(file: unknown): RoomFile {
  const f = file as RoomFile;
  if (!f || typeof f !== 'object' || f.format !== 'hercules-room' || f.formatVersion !== 1)
    throw new HerculesError(
      'bad-argument',
      'not a room export (format "hercules-room", formatVersion 1: what hercules rooms export and GET /admin/rooms/:room/export give)',
    );
  if (!f.machine || typeof f.machine.name !== 'string' || !Number.isSafeInteger(f.machine.version))
    throw new HerculesError('bad-argument', 'machine must be { name: string, version: integer }');
  const problem = roomFileProblem(f);
  if (problem) throw new HerculesError('bad-argument', problem);
  return f;
}

/** The machine the file's room runs, among those given, and the version its checkpoint is of; throws `machine-mismatch`. */
function machineFor(f: RoomFile, machines: readonly Machine<any, any>[]): { machine: Machine<any, any>; version: number } {
  const machine = machines.find((m) => m.name === f.machine.name);
  if (!machine)
    throw new HerculesError(
      'machine-mismatch',
      `the room runs machine ${f.machine.name}, which the machines module does not export (it exports ${machines.map((m) => `${m.name}@${m.version}`).join(', ') || 'none'})`,
    );
  // The checkpoint is of the version the first migration in the log came from, else the room's (room-migration.ts).
  const first = f.entries.find(isMigrationEntry);
  const version = first ? (first.args as { from: number }).from : (f.clients[SYSTEM_CLIENT]?.highWater ?? f.machine.version);
  const no = cannotRun(machine, version);
  if (no) throw new HerculesError(no.code, no.message);
  return { machine, version };
}

/** Replay `file` with `machines` (a machines module's exports). Throws `bad-argument` or `machine-mismatch` if it cannot run. */
export function replayRoom(file: unknown, machines: readonly Machine<any, any>[]): ReplayReport {
  const f = checkFile(file);
  const { machine, version } = machineFor(f, machines);
  const want = new Map((f.digests ?? []).map((d) => [d.pos, d.digest]));
  const head = f.checkpoint.pos + f.entries.length;
  const report: ReplayReport = {
    machine: machine.name,
    version: f.machine.version,
    from: f.checkpoint.pos,
    head,
    ops: 0,
    checked: [],
    hasDigests: f.digests !== undefined && f.digests.length > 0,
    hasHead: f.head !== undefined,
    finalDigest: '',
  };
  let v = version;
  let s: unknown = deepFreeze(f.checkpoint.state);
  let lastMatch = f.checkpoint.pos;
  const differs = (pos: number, kind: ReplayDifference['kind'], expected: string, actual: string, e?: LogEntry) => {
    report.difference = {
      pos,
      kind,
      expected,
      actual,
      lastMatch,
      ...(e ? { op: { name: e.name, args: e.args, client: e.client, seq: e.seq, author: e.author } } : {}),
    };
  };
  const check = (pos: number, e?: LogEntry): void => {
    const expected = want.get(pos);
    if (expected === undefined) return;
    const actual = stateDigest(s);
    if (actual !== expected) return differs(pos, 'state', expected, actual, e);
    report.checked.push(pos);
    lastMatch = pos;
  };
  check(f.checkpoint.pos);
  for (const stored of f.entries) {
    if (report.difference) break;
    const e = readLegacyRefusal(stored);
    if (isMigrationEntry(e)) {
      const a = e.args as { from: number; to: number };
      const target = machineAt(machine, a.to);
      if (!target)
        throw new HerculesError('machine-mismatch', `the room's log migrates to ${machine.name}@${a.to} at ${e.pos}, which the machines module does not have`);
      s = migrateState(target, s, a.from);
      v = a.to;
    } else if (!e.refused) {
      const r = applyOp(machineAt(machine, v)!, s, e, e.pos);
      report.ops++;
      s = r.state;
      // Whether it threw, not its message (a message may name what differs between builds).
      if ((e.error === undefined) !== (r.error === undefined)) differs(e.pos, 'outcome', outcome(e.error), outcome(r.error), e);
    }
    if (!report.difference) check(e.pos, e);
  }
  report.finalDigest = stateDigest(s);
  if (!report.difference && f.head) {
    if (f.head.digest !== report.finalDigest) differs(head, 'head', f.head.digest, report.finalDigest, f.entries[f.entries.length - 1]);
    else if (report.checked[report.checked.length - 1] !== head) report.checked.push(head);
  }
  return report;
}

const outcome = (error: string | undefined): string => (error === undefined ? 'applied' : `threw: ${error}`);
