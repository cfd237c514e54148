/**
 * A room store in memory: the `RoomStore` contract with nothing underneath, for tests and the
 * simulator. No timers and no I/O: every call takes effect when it is made, and its promise
 * settles in a microtask, so a run over it is deterministic.
 *
 * What it keeps lives in a `MemoryDisk`, which outlives the store: a new `MemoryStore` over the
 * same disk is a restart (what was appended is there, nothing else is). Values are kept as JSON
 * text, as a real store keeps them, so what comes back is a copy, in the same domain, and a value
 * JSON cannot hold fails its append as it would in SQLite.
 *
 * Faults, for crash-shaped tests: `failAppend` makes a later append fail before it writes
 * anything, part-way through (it is rolled back: nothing is written), or after it is written
 * (the caller is told it failed, as when an acknowledgement is lost in a crash).
 */
import { HerculesError, SYSTEM_CLIENT, type ClientRecord, type LogEntry } from '@hercules/core';
import {
  FencedError,
  StorageError,
  checkAgainstHead,
  checkAppend,
  checkRoomName,
  checkListRooms,
  closedError,
  compareRoomNames,
  type Appended,
  type ListRoomsOptions,
  type StoredRoomInfo,
  type LoadedRoom,
  type RoomAppend,
  type RoomInit,
  type RoomPeek,
  type RoomExport,
  exportProblem,
  type RoomMeta,
  type RoomStore,
  type HistoryEntry,
  type HistoryQuery,
  type RetentionSetting,
  type RoomHistory,
  retentionCut,
  retentionFor,
  retentionStart,
} from './room-store.ts';
import { checkpointDigest, importedDigests, keepDigests, type CheckpointDigest } from './state-digest.ts';

interface MemoryRoom {
  meta: RoomMeta;
  rev: number;
  checkpoint: { pos: number; json: string };
  stable: number;
  /** The entries after the checkpoint, as JSON: index i is position checkpoint.pos + 1 + i. */
  log: string[];
  /** When each entry of `log` was committed (the store's clock), index for index. */
  times: number[];
  /** The history kept behind the checkpoint (HistoryRetention): older states, ascending, and the entries after the oldest, up to the checkpoint. */
  bases: { pos: number; json: string }[];
  past: { json: string; time: number }[];
  clients: Map<string, string>;
  /** The digest of each checkpoint given, within the log kept (state-digest.ts). */
  digests: CheckpointDigest[];
  /** When its last append with entries or client records landed (its creation or import, before any). */
  lastActivity: number;
}

/** What a `MemoryStore` writes to; hand it to a new store to restart over the same data. */
export class MemoryDisk {
  /** @internal */
  readonly rooms = new Map<string, MemoryRoom>();
}

/** When an injected fault strikes an append. */
export type AppendFaultStage =
  /** refused before anything is written (a full disk) */
  | 'before'
  /** part-way through, once the write is prepared: the store rolls it back, nothing is written */
  | 'during'
  /** after it is written: the caller is told it failed (an acknowledgement lost in a crash) */
  | 'after';

export interface AppendFault {
  /** Only appends to this room count (default: any room). */
  room?: string;
  /** Let this many of the appends that count succeed first (default 0: the next one fails). Appends refused or fenced before they write do not count. */
  skip?: number;
  /** Default 'during'. */
  stage?: AppendFaultStage;
}

export interface MemoryStoreOptions {
  /** The data to work on (default: a new, empty disk). */
  disk?: MemoryDisk;
  /** The clock a room's `created` and its entries' commit times are read from (ms since the epoch). Default `Date.now`. */
  now?: () => number;
  /** How much history to keep behind checkpoints, per store or per machine (HistoryRetention). Default DEFAULT_RETENTION. */
  retention?: RetentionSetting;
}

export class MemoryStore implements RoomStore {
  readonly disk: MemoryDisk;
  private readonly now: () => number;
  private readonly retention: RetentionSetting | undefined;
  private faults: { room?: string; skip: number; stage: AppendFaultStage }[] = [];
  private closed = false;

  constructor(opts: MemoryStoreOptions = {}) {
    this.disk = opts.disk ?? new MemoryDisk();
    this.now = opts.now ?? Date.now;
    this.retention = opts.retention;
    if (typeof this.retention !== 'function') retentionFor(this.retention, 'any'); // checked now
  }

  /** Make a later append fail (see `AppendFault`). Faults queue up; each strikes once. */
  failAppend(fault: AppendFault = {}): void {
    const skip = fault.skip ?? 0;
    if (!Number.isSafeInteger(skip) || skip < 0) throw new HerculesError('bad-argument', `failAppend: skip must be an integer >= 0, got ${String(fault.skip)}`);
    this.faults.push({ room: fault.room, skip, stage: fault.stage ?? 'during' });
  }

  async exportRoom(room: string): Promise<RoomExport | undefined> {
    if (this.closed) throw closedError(`export room ${String(room)}`);
    checkRoomName(room);
    const r = this.disk.rooms.get(room);
    if (!r) return undefined;
    const clients: Record<string, ClientRecord> = {};
    for (const [c, json] of r.clients) clients[c] = JSON.parse(json);
    return {
      meta: { machine: r.meta.machine, version: r.meta.version },
      durable: {
        checkpoint: { pos: r.checkpoint.pos, state: JSON.parse(r.checkpoint.json) },
        suffix: r.log.map((j) => JSON.parse(j) as LogEntry),
        clients,
        stable: r.stable,
      },
      digests: r.digests.map((d) => ({ ...d })),
    };
  }

  async importRoom(room: string, data: RoomExport): Promise<void> {
    if (this.closed) throw closedError(`import room ${String(room)}`);
    checkRoomName(room);
    const problem = exportProblem(data);
    if (problem) throw new HerculesError('bad-argument', `import room ${room}: ${problem}`);
    if (this.disk.rooms.has(room)) throw new HerculesError('bad-argument', `import room ${room}: it exists; delete it first or import under another name`);
    const d = data.durable;
    this.disk.rooms.set(room, {
      meta: { machine: data.meta.machine, version: data.meta.version, created: this.now() },
      rev: 0,
      checkpoint: { pos: d.checkpoint.pos, json: toJson(room, d.checkpoint.state, 'its checkpoint') },
      stable: d.stable,
      log: d.suffix.map((e) => toJson(room, e, `log entry ${e.pos}`)),
      times: d.suffix.map(() => this.now()),
      bases: [],
      past: [],
      clients: new Map(Object.entries(d.clients).map(([c, rec]) => [c, toJson(room, rec, `client record ${c}`)])),
      digests: importedDigests(data),
      lastActivity: this.now(),
    });
  }

  async deleteRoom(room: string): Promise<boolean> {
    if (this.closed) throw closedError(`delete room ${String(room)}`);
    checkRoomName(room);
    return this.disk.rooms.delete(room);
  }

  async peek(room: string, after: number, max: number): Promise<RoomPeek | undefined> {
    if (this.closed) throw closedError(`peek at room ${String(room)}`);
    checkRoomName(room);
    const r = this.disk.rooms.get(room);
    if (!r) return undefined;
    const from = Math.max(after + 1, r.checkpoint.pos + 1);
    const i = from - r.checkpoint.pos - 1;
    return { meta: { ...r.meta }, from, entries: r.log.slice(i, i + Math.max(0, max)).map((json) => JSON.parse(json) as LogEntry) };
  }

  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  async open(room: string, init?: RoomInit): Promise<LoadedRoom | undefined> {
    if (this.closed) throw closedError(`open room ${String(room)}`);
    checkRoomName(room);
    let r = this.disk.rooms.get(room);
    let fresh = false;
    if (!r) {
      if (!init) return undefined;
      const now = this.now();
      r = {
        meta: { machine: init.machine, version: init.version, created: now },
        rev: 0,
        checkpoint: { pos: 0, json: toJson(room, init.initial, 'its initial state') },
        stable: 0,
        log: [],
        times: [],
        bases: [],
        past: [],
        clients: new Map(),
        digests: [{ pos: 0, digest: checkpointDigest(room, 0, init.initial) }],
        lastActivity: now,
      };
      this.disk.rooms.set(room, r);
      fresh = true;
    }
    const clients: Record<string, ClientRecord> = {};
    for (const [c, json] of r.clients) clients[c] = JSON.parse(json);
    return {
      meta: { ...r.meta },
      durable: {
        checkpoint: { pos: r.checkpoint.pos, state: JSON.parse(r.checkpoint.json) },
        suffix: r.log.map((json) => JSON.parse(json) as LogEntry),
        clients,
        stable: r.stable,
      },
      rev: r.rev,
      fresh,
    };
  }

  append(room: string, write: RoomAppend): Promise<Appended> {
    try {
      return Promise.resolve(this.write(room, write));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private write(room: string, w: RoomAppend): Appended {
    if (this.closed) throw closedError(`append to room ${String(room)}`);
    const checked = checkAppend(room, w);
    const r = this.disk.rooms.get(room);
    if (!r) throw new FencedError(room, w.after, undefined);
    if (r.rev !== w.after) throw new FencedError(room, w.after, r.rev);
    const head = checkAgainstHead(room, checked, r.checkpoint.pos + r.log.length);
    const fault = this.takeFault(room);
    if (fault === 'before') throw injected(room, fault);
    // Prepared first, applied after: nothing below the fault point can fail, so an append
    // either changes everything it names or nothing.
    const entries = (w.entries ?? []).map((e, i) => toJson(room, e, `its entry ${i}`));
    const clients = Object.entries(w.clients ?? {}).map(([c, rec]) => [c, toJson(room, rec, `the record of client ${c}`)] as const);
    const cp =
      w.checkpoint && w.checkpoint.pos > r.checkpoint.pos ? { pos: w.checkpoint.pos, json: toJson(room, w.checkpoint.state, 'its checkpoint') } : undefined;
    const digest = cp && { pos: cp.pos, digest: checkpointDigest(room, cp.pos, w.checkpoint!.state) };
    if (fault === 'during') throw injected(room, fault);
    const now = this.now();
    for (const e of entries) {
      r.log.push(e);
      r.times.push(now);
    }
    for (const [c, json] of clients) r.clients.set(c, json);
    if (cp) {
      this.advance(r, cp, now);
      r.digests = keepDigests(r.digests, digest, cp.pos);
    }
    if (w.checkpoint) r.stable = Math.max(r.stable, w.checkpoint.pos);
    r.rev++;
    if (entries.length > 0 || clients.length > 0) r.lastActivity = now;
    if (fault === 'after') throw injected(room, fault);
    return { rev: r.rev, head };
  }

  /** Move the checkpoint to `cp`: what it covers becomes history, then retention prunes it. */
  private advance(r: MemoryRoom, cp: { pos: number; json: string }, now: number): void {
    const n = cp.pos - r.checkpoint.pos;
    const covered = r.log.splice(0, n);
    const times = r.times.splice(0, n);
    r.bases.push(r.checkpoint);
    for (let i = 0; i < covered.length; i++) r.past.push({ json: covered[i], time: times[i] });
    r.checkpoint = cp;
    const policy = retentionFor(this.retention, r.meta.machine);
    // The first kept position (past[0]) follows the oldest base.
    const first = r.bases[0].pos + 1;
    let older = 0;
    if (policy.days !== undefined) {
      const before = now - policy.days * 86_400_000;
      for (let i = 0; i < r.past.length && r.past[i].time < before; i++) older = first + i;
    }
    const start = retentionStart(
      r.bases.map((b) => b.pos),
      cp.pos,
      retentionCut(policy, cp.pos, older),
    );
    r.bases = r.bases.filter((b) => b.pos >= start && b.pos < cp.pos);
    r.past.splice(0, start - first + 1);
  }

  async history(room: string, q: HistoryQuery): Promise<RoomHistory | undefined> {
    if (this.closed) throw closedError(`read the history of room ${String(room)}`);
    checkRoomName(room);
    const r = this.disk.rooms.get(room);
    if (!r) return undefined;
    const head = r.checkpoint.pos + r.log.length;
    const start = r.bases.length > 0 ? r.bases[0].pos : r.checkpoint.pos;
    // Every kept entry from start + 1 on: the past, then the log.
    const at = (pos: number): HistoryEntry => {
      const i = pos - start - 1;
      const j = i - r.past.length;
      return j < 0 ? { ...JSON.parse(r.past[i].json), time: r.past[i].time } : { ...JSON.parse(r.log[j]), time: r.times[j] };
    };
    const range = (from: number, to: number) => {
      const out: HistoryEntry[] = [];
      for (let p = Math.max(from, start + 1); p <= Math.min(to, head); p++) out.push(at(p));
      return out;
    };
    const meta = { ...r.meta };
    if (!('stateAt' in q)) return { meta, start, head, entries: range(q.from, q.to) };
    const p = q.stateAt;
    if (!(p >= start && p <= head)) return { meta, start, head, entries: [] };
    let base = r.checkpoint;
    if (p < base.pos) for (const b of r.bases) if (b.pos <= p) base = b;
    return { meta, start, head, base: { pos: base.pos, state: JSON.parse(base.json) }, entries: range(base.pos + 1, p) };
  }

  private takeFault(room: string): AppendFaultStage | undefined {
    const i = this.faults.findIndex((f) => f.room === undefined || f.room === room);
    if (i < 0) return undefined;
    const f = this.faults[i];
    if (f.skip > 0) {
      f.skip--;
      return undefined;
    }
    this.faults.splice(i, 1);
    return f.stage;
  }

  async release(room: string): Promise<void> {
    if (this.closed) throw closedError(`release room ${String(room)}`);
    checkRoomName(room);
    // Nothing deferred, nothing cached.
  }

  async rooms(): Promise<string[]> {
    if (this.closed) throw closedError('list its rooms');
    return [...this.disk.rooms.keys()];
  }

  /**
   * Sorts every room's name on each call (this store is for tests and the simulator); `bytes` is
   * the UTF-8 length of the room's name and of the JSON it keeps.
   */
  async listRooms(opts: ListRoomsOptions): Promise<StoredRoomInfo[]> {
    if (this.closed) throw closedError('list its rooms');
    const { after, limit } = checkListRooms(opts);
    const names = [...this.disk.rooms.keys()].filter((n) => after === undefined || compareRoomNames(n, after) > 0).sort(compareRoomNames);
    return names.slice(0, limit).map((name) => {
      const r = this.disk.rooms.get(name)!;
      let bytes = Buffer.byteLength(name) + Buffer.byteLength(r.checkpoint.json);
      for (const e of r.log) bytes += Buffer.byteLength(e);
      for (const [c, json] of r.clients) bytes += Buffer.byteLength(c) + Buffer.byteLength(json);
      const sys = r.clients.get(SYSTEM_CLIENT);
      const migrated = sys === undefined ? undefined : (JSON.parse(sys) as ClientRecord).highWater;
      return {
        name,
        machine: r.meta.machine,
        version: Number.isSafeInteger(migrated) ? (migrated as number) : r.meta.version,
        head: r.checkpoint.pos + r.log.length,
        checkpoint: r.checkpoint.pos,
        stable: r.stable,
        bytes,
        created: r.meta.created,
        lastActivity: r.lastActivity,
      };
    });
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

function toJson(room: string, v: unknown, what: string): string {
  try {
    const json = JSON.stringify(v);
    if (json === undefined) throw new HerculesError('bad-argument', `it is ${v === undefined ? 'undefined' : `a ${typeof v}`}, which JSON cannot hold`);
    return json;
  } catch (e) {
    throw new StorageError(`room ${room}: cannot store ${what}: ${(e as Error).message}; nothing of this write was stored`, e, 'value');
  }
}

function injected(room: string, stage: AppendFaultStage): StorageError {
  return new StorageError(
    stage === 'after'
      ? `room ${room}: injected fault: the append was written but is reported failed (a lost acknowledgement); reload the room to see it`
      : `room ${room}: injected fault (${stage === 'before' ? 'before the write' : 'part-way through the write'}): nothing of the append was written`,
  );
}
