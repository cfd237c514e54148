/**
 * A stored room as the newest machine runs it (docs/migrations.md): the server-side half of
 * machine migrations, pure. `prepareRestore` folds a stored room's entries of older versions into
 * a checkpoint of the newest, and, when the room runs an older version, makes the migration entry
 * the room must store before anything else (REC-MIGRATE-ONCE).
 */
import { HerculesError } from './errors.ts';
import { MIGRATE_OP, SYSTEM_CLIENT, applyOp, isMigrationEntry, machineAt, machineVersions, migrateState, type Machine } from './machine.ts';
import { readLegacyRefusal, type LogEntry } from './protocol.ts';
import type { ClientRecord, RoomDurableState } from './room-engine.ts';

/** The machine version a stored room runs: that of its last migration, else the one it was created under. */
export function storedRoomVersion(d: RoomDurableState, fallback: number): number {
  return d.clients[SYSTEM_CLIENT]?.highWater ?? d.version ?? fallback;
}

/** Why `machine` (the newest a server has of its name) cannot run a room stored at `version`, if it cannot. */
export function cannotRun(machine: Machine<any, any, any>, version: number): { code: 'server-too-old' | 'machine-mismatch'; message: string } | undefined {
  if (version > machine.version)
    return {
      code: 'server-too-old',
      message: `the room runs ${machine.name}@${version}, newer than this server's newest, ${machine.name}@${machine.version}; deploy ${machine.name}@${version} to every server`,
    };
  if (!machineAt(machine, version))
    return {
      code: 'machine-mismatch',
      message: `the room runs ${machine.name}@${version}, and ${machine.name}@${machine.version} cannot migrate from it (its migrateFrom chain reaches ${machineVersions(
        machine,
      )
        .map((m) => m.version)
        .join(', ')}); add that version to the chain`,
    };
  return undefined;
}

export interface PreparedRestore {
  /** The room with every entry of an older version folded into its checkpoint: all of `machine.version`. */
  durable: RoomDurableState;
  /** The migration entry to store before anything else, when the room ran an older version. */
  appended?: LogEntry;
  /** The checkpoint, when it moved (over a migration): to store with `appended`. */
  checkpoint?: { pos: number; state: unknown };
  /** Client records changed (the room's own, and those of folded ops now visible): to store too. */
  dirty: string[];
}

/**
 * A stored room, made one of `machine.version`. A room stored at that version without a
 * migration in its suffix comes back as it is. Throws `server-too-old` or `machine-mismatch`
 * (cannotRun) if the machine cannot run it.
 */
export function prepareRestore(machine: Machine<any, any, any>, d: RoomDurableState): PreparedRestore {
  const current = storedRoomVersion(d, machine.version);
  const no = cannotRun(machine, current);
  if (no) throw new HerculesError(no.code, no.message);
  let lastMig = -1;
  for (let i = d.suffix.length - 1; i >= 0; i--)
    if (isMigrationEntry(d.suffix[i])) {
      lastMig = i;
      break;
    }
  if (current === machine.version && lastMig < 0) return { durable: d, dirty: [] };
  // The checkpoint is of the version the first migration in the suffix came from, else the room's.
  const first = d.suffix.find(isMigrationEntry) as LogEntry | undefined;
  let v = first ? (first.args as { from: number }).from : current;
  let s: unknown = d.checkpoint.state;
  let pos = d.checkpoint.pos;
  const clients: Record<string, ClientRecord> = { ...d.clients };
  const dirty = new Set<string>();
  const fold = (e0: LogEntry) => {
    const e = readLegacyRefusal(e0);
    if (isMigrationEntry(e)) {
      const a = e.args as { from: number; to: number };
      const target = machineAt(machine, a.to);
      if (!target) throw new HerculesError('machine-mismatch', `the room's log migrates to ${machine.name}@${a.to}, which this server does not have`);
      s = migrateState(target, s, a.from);
      v = a.to;
    } else {
      if (e.error === undefined) s = applyOp(machineAt(machine, v)!, s, e, e.pos).state;
      // Folded into the checkpoint, so no longer waiting to be visible: with no member connected,
      // the room would find every op visible at its first input anyway.
      const rec = clients[e.client];
      if (rec && e.seq > rec.visibleSeq && e.seq <= rec.highWater) {
        clients[e.client] = { ...rec, visibleSeq: e.seq };
        dirty.add(e.client);
      }
    }
    pos = e.pos;
  };
  let rest = d.suffix;
  if (lastMig >= 0) {
    for (let i = 0; i <= lastMig; i++) fold(d.suffix[i]);
    rest = d.suffix.slice(lastMig + 1);
  }
  let appended: LogEntry | undefined;
  if (v < machine.version) {
    // The ops after the last migration are of version v: fold them in, then migrate.
    for (const e of rest) fold(e);
    rest = [];
    s = migrateState(machine, s, v);
    pos += 1;
    appended = { pos, client: SYSTEM_CLIENT, seq: machine.version, name: MIGRATE_OP, args: { from: v, to: machine.version }, author: SYSTEM_CLIENT };
    clients[SYSTEM_CLIENT] = { highWater: machine.version, visibleSeq: machine.version };
    dirty.add(SYSTEM_CLIENT);
  }
  const checkpoint = { pos, state: s };
  return {
    durable: { checkpoint, suffix: rest, clients, stable: Math.max(d.stable, pos) },
    ...(appended ? { appended } : {}),
    checkpoint,
    dirty: [...dirty],
  };
}
