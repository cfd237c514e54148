/**
 * `hercules replay <file> --machines <module>`: the flight recorder (docs/replay.md). Runs a room
 * export's log through the machines module's machine and compares the state's digest at every
 * checkpoint the export recorded, and at its head, and each op's outcome. Exit 0: all match;
 * 1: they differ (the first position where, the op there and its author are printed); 2: the
 * file or the module cannot be replayed (a one-line error with its code, no stack trace).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { HerculesError, type Machine } from '@hercules/core';
import { replayRoom, type ReplayReport } from '../replay.ts';
import { MAX_IMPORT_BYTES } from '../room-file.ts';
import { fail } from './common.ts';
import type { OptionGroup, Values } from './options.ts';
import { loadError, loadModule, machinesOf } from './machines-module.ts';

export const REPLAY_OPTIONS: readonly OptionGroup[] = [
  {
    title: 'replay (docs/replay.md)',
    options: [
      { name: 'machines', arg: 'module', help: 'module exporting the state machines (as for serve); required' },
      { name: 'json', noEnv: true, help: 'replay: print the report as JSON' },
    ],
  },
];

/** A file that cannot be replayed: its code from the closed vocabulary, one line, exit 2. */
function refuse(code: string, file: string, message: string): never {
  console.error(`hercules replay: ${file}: ${code}: ${message}`);
  process.exit(2);
}

function readExport(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return refuse('not-found', file, err.code === 'ENOENT' ? 'no such file' : err.message);
  }
  if (Buffer.byteLength(text) > MAX_IMPORT_BYTES) refuse('too-large', file, `over the ${MAX_IMPORT_BYTES}-byte limit of a room file`);
  try {
    return JSON.parse(text);
  } catch (e) {
    return refuse('bad-argument', file, `not JSON: ${(e as Error).message}`);
  }
}

/** The machines module's machines; one that cannot be loaded is refused like a bad file (exit 2). */
async function machinesFrom(given: string | undefined): Promise<Machine<any, any>[]> {
  if (!given) fail("replay needs --machines <module>: the module exporting the room's machine (as for serve)");
  const file = resolve(given);
  if (!existsSync(file)) refuse('not-found', `--machines ${given}`, 'no such file');
  let mod: Record<string, unknown>;
  try {
    mod = await loadModule(file);
  } catch (e) {
    return refuse('bad-machine', `--machines ${given}`, `cannot load it:\n${loadError(e, file)}`);
  }
  const machines = machinesOf(mod);
  if (machines.length === 0) refuse('bad-machine', `--machines ${given}`, 'it exports no machines (made with defineMachine)');
  return machines;
}

const short = (v: unknown): string => {
  const json = JSON.stringify(v) ?? String(v);
  return json.length > 200 ? `${json.slice(0, 200)}…` : json;
};

function describe(r: ReplayReport): string[] {
  const to = r.difference ? `${r.difference.pos} of ${r.head}` : `${r.head}`;
  const lines = [`replayed ${r.machine}@${r.version} from position ${r.from} to ${to}: ${r.ops} ops`];
  if (!r.hasDigests && !r.hasHead)
    lines.push(
      "this export records no state digests (made before they were recorded, or by a store that keeps none): only each op's outcome (applied or threw) was checked; the final state's digest is below",
    );
  else if (!r.hasHead) lines.push("this export records no digest of its head's state (the room was not loaded when exported): the final state is not checked");
  const d = r.difference;
  if (!d) {
    lines.push(`match: ${r.checked.length} recorded digests (${r.checked.join(', ') || 'none'}) and every op's outcome are as recorded`);
    lines.push(`final state digest ${r.finalDigest}`);
    return lines;
  }
  const what = {
    state: 'the state after it differs from the checkpoint digest recorded there',
    head: "the state at the head differs from the head's digest recorded",
    outcome: "the op's outcome differs",
  }[d.kind];
  lines.push(`DIFFERS at position ${d.pos}: ${what}`);
  lines.push(`  recorded: ${d.expected}`, `  replayed: ${d.actual}`);
  if (d.op) lines.push(`  the op at ${d.pos}: ${d.op.name} ${short(d.op.args)} by ${d.op.author ?? '(no author)'} (client ${d.op.client}, seq ${d.op.seq})`);
  if (d.kind !== 'outcome') lines.push(`  the last position that matched: ${d.lastMatch}; the first op that differs is in ${d.lastMatch + 1}..${d.pos}`);
  return lines;
}

export async function replay(values: Values, positionals: string[]): Promise<void> {
  if (positionals.length < 2) fail('replay needs the room file: hercules replay <file> --machines <module>');
  if (positionals.length > 2) fail(`unexpected argument ${JSON.stringify(positionals[2])}`);
  const file = positionals[1];
  const data = readExport(file);
  const machines = await machinesFrom(values.machines as string | undefined);
  let report: ReplayReport;
  try {
    report = replayRoom(data, machines);
  } catch (e) {
    if (e instanceof HerculesError) refuse(e.code, file, e.message);
    return refuse('internal', file, `the replay failed: ${(e as Error).message}`);
  }
  console.log(values.json ? JSON.stringify(report, null, 2) : describe(report).join('\n'));
  if (report.difference) process.exit(1);
}
