/**
 * The room service's backend API (issue 36, item 1: one of the service's named parts): what the
 * app's own server code and the admin HTTP API call, beside the clients' connections. `room()`
 * (submit as a named author, state, export, delete, subscribe), `rooms()` (a page of the stored
 * rooms), `importRoom`, `readLog` (for webhooks) and `revoke`. It works on the registry and the
 * store; the sessions it reaches only through `revokeSessions`.
 */
import { HerculesError, machineAt, type ClientRecord, type LogEntry, type Machine, type ServerSubmitResult } from '@hercules/core';
import { ROOM_NAME } from './admission.ts';
import { roomFileProblem } from './room-file.ts';
import type { RoomHost } from './room-host.ts';
import { logPage, stateAt, type LogPage } from './history.ts';
import type { RoomRegistry } from './room-registry.ts';
import { compareRoomNames, type RoomExport, type RoomStore, type StoredRoomInfo } from './store/room-store.ts';
import { stateDigest, type CheckpointDigest } from './store/state-digest.ts';

/** See RoomService.room. */
export interface ServerRoom {
  readonly name: string;
  /**
   * Order an op as `author` (ctx.author; the op's client is SERVER_CLIENT), fanned out to every
   * connection like a client's. Resolves once it is committed, with its position (and `error`
   * if it threw at that position: a no-op in the log). With `key`, a repeat of an op already
   * ordered under that key (among the room's last 1,000 keys) orders nothing and resolves with
   * the first one's result (`duplicate: true`). Rejects with `unknown-op` or `bad-argument`
   * (nothing ordered), `bad-room` (no such room and no machine to create it), or
   * `storage-failed` (the room failed before the commit; try again with the same key).
   */
  submit(op: string, args: unknown, opts: { author: string; key?: string }): Promise<ServerSubmitResult>;
  /** The room's state after the last op it ordered (loading it if needed). */
  state(): Promise<unknown>;
  /** The room as stored (checkpoint, the log after it, client records), to import elsewhere. Rejects with `bad-room` if there is none. */
  export(): Promise<RoomFile>;
  /**
   * The room's state after the op at `position` (0: its initial state), as stored, rebuilt from
   * the history the server keeps (docs/history.md): the same state every replica had there
   * (HIST-REPLAY). Rejects with `not-retained` for a position checkpoints pruned (older than
   * `log().start`), `bad-argument` past the head or for a store that keeps no history, `bad-room`
   * if there is no such room. Ops not yet stored are not in it.
   */
  stateAt(position: number): Promise<unknown>;
  /**
   * A page of the retained log, from `from` (default: the first retained entry) to `to` (default:
   * the head), at most LOG_PAGE_MAX (1,000) entries, `next` naming the next page's `from`. Each
   * entry has its position (`pos`), op (`name`), `args`, `author` (the user id), `client`, `seq`
   * and `time` (the server's commit time, ms since the epoch); `error` if the op threw there,
   * `refused` if it was refused. `start` and `head` bound what can be read. Rejects like `stateAt`
   * (`not-retained` if `from` was pruned).
   */
  log(range?: { from?: number; to?: number }): Promise<LogPage>;
  /**
   * Delete the room: its connections are closed with `bad-room` (fatal), then everything stored
   * goes. False if there was none. A client connecting afterwards starts a new, empty room.
   */
  delete(): Promise<boolean>;
  /** Called with the entries of each commit of this room, once stored. Returns the unsubscribe. */
  subscribe(listener: (entries: readonly LogEntry[]) => void): () => void;
}

/** A room exported (`ServerRoom.export`, `GET /admin/rooms/:room/export`), as JSON. */
export interface RoomFile {
  format: 'hercules-room';
  formatVersion: 1;
  machine: { name: string; version: number };
  checkpoint: { pos: number; state: unknown };
  entries: LogEntry[];
  clients: Record<string, ClientRecord>;
  stable: number;
  /**
   * The digest of the room's state at each checkpoint within this file's log (from
   * `checkpoint.pos` to its head), oldest first (state-digest.ts): what `hercules replay` checks a
   * replay against. Absent in exports from before digests were recorded (they import alike).
   */
  digests?: CheckpointDigest[];
  /**
   * The digest of the state at the file's head, as the server held it when it exported the room
   * (a loaded room whose log in the store reached its head); absent otherwise.
   */
  head?: CheckpointDigest;
}

/** What `rooms()` takes: the page after `after` (a room name: the previous page's `next`), of at most `limit` rooms. */
export interface RoomsQuery {
  after?: string;
  limit?: number;
}

/** A page of `rooms()`. */
export interface RoomsPage {
  rooms: RoomSummary[];
  /** The `after` of the next page; absent on the last page. */
  next?: string;
}

/** How many rooms a page of `rooms()` lists by default, and at most. */
export const ROOMS_PAGE_DEFAULT = 100;
export const ROOMS_PAGE_MAX = 1000;

/**
 * A stored room as `rooms()` lists it. A loaded room's `machine`, `version`, `head` and `stable`
 * are its engine's (they may be ahead of the store by appends in flight); an unloaded room's are
 * the store's. The figures other than `name` and `loaded` are there when the store lists them
 * (`RoomStore.listRooms`: the SQLite, memory and cluster stores) or the room is loaded; a store without
 * `listRooms` gives an unloaded room's name only.
 */
export interface RoomSummary {
  name: string;
  /** In memory on this server now. */
  loaded: boolean;
  /** The machine it runs, and the version: after a migration, the version it migrated to. */
  machine?: string;
  version?: number;
  /** Its log length (the position of its last entry) and stable frontier. */
  head?: number;
  stable?: number;
  /** The position of its stored checkpoint. */
  checkpoint?: number;
  /** What it occupies in the store, in bytes (StoredRoomInfo.bytes: its stored JSON, not the database's overhead). */
  bytes?: number;
  /** When it was created and when its last append landed, in ms since the epoch (0: unknown, written before this was recorded). */
  created?: number;
  lastActivity?: number;
  /** Only for a loaded room: its members (client ids). An unloaded room has none on this server; the field is left out. */
  members?: string[];
}

export interface BackendApiDeps {
  store: RoomStore;
  registry: RoomRegistry;
  /** The machines rooms may run, by name. */
  machines: ReadonlyMap<string, Machine<any, any>>;
  /** Whether the service is closing: the API then refuses with `closed`. */
  closing(): boolean;
  /** Close, with `revoked` (fatal, 4403), every open connection of `user` (to `room`, if given); returns how many. */
  revokeSessions(user: string, room: string | undefined, message: string): number;
}

export class BackendApi {
  /** Each room's commit listeners (ServerRoom.subscribe). */
  private readonly listeners = new Map<string, Set<(entries: readonly LogEntry[]) => void>>();

  constructor(private readonly deps: BackendApiDeps) {}

  /** The commit listeners of `room` now, for the service's committedEntries event. */
  commitListeners(room: string): Iterable<(entries: readonly LogEntry[]) => void> {
    return this.listeners.get(room) ?? [];
  }

  room(name: string, machineName?: string): ServerRoom {
    const { machines } = this.deps;
    this.checkName('room', name);
    if (machineName !== undefined && !machines.has(machineName))
      throw new HerculesError(
        'bad-argument',
        `room(${name}, ${machineName}): this server has no machine ${machineName}; it has ${[...machines.keys()].join(', ')}`,
      );
    return this.serverRoom(name, machineName);
  }

  async rooms(query: RoomsQuery = {}): Promise<RoomsPage> {
    const { store, registry } = this.deps;
    if (query === null || typeof query !== 'object') throw new HerculesError('bad-argument', 'rooms({ after?, limit? }): the query must be an object');
    const { after } = query;
    if (after !== undefined && typeof after !== 'string') throw new HerculesError('bad-argument', 'rooms: after must be a room name (a string)');
    const limit = query.limit ?? ROOMS_PAGE_DEFAULT;
    if (!Number.isInteger(limit) || limit < 1) throw new HerculesError('bad-argument', `rooms: limit must be an integer >= 1, got ${String(query.limit)}`);
    const max = Math.min(limit, ROOMS_PAGE_MAX);
    const isAfter = (n: string) => after === undefined || compareRoomNames(n, after) > 0;
    // The store's page, one more than asked to know whether another follows; the loaded rooms
    // in its range (a room is stored before it loads, but one may be loading or deleted meanwhile).
    // A room being unloaded writes its last appends on the way out: list it once they are stored.
    await registry.handedBack();
    const info = new Map<string, StoredRoomInfo>();
    let names: string[];
    let more = false;
    if (store.listRooms) {
      const got = await store.listRooms({ after, limit: max + 1 });
      more = got.length > max;
      const page = more ? got.slice(0, max) : got;
      for (const r of page) info.set(r.name, r);
      const bound = more ? page[page.length - 1].name : undefined;
      names = [...info.keys()];
      for (const n of registry.names()) if (!info.has(n) && isAfter(n) && (bound === undefined || compareRoomNames(n, bound) <= 0)) names.push(n);
    } else {
      // A store that cannot page (the cluster's): every name, then this page of them.
      names = [...new Set([...(await store.rooms()), ...registry.names()])].filter(isAfter);
    }
    names.sort(compareRoomNames);
    if (names.length > max) more = true;
    const taken = names.slice(0, max);
    const rooms = taken.map((name): RoomSummary => {
      const host = registry.get(name);
      const r = info.get(name);
      const stored = r && { checkpoint: r.checkpoint, bytes: r.bytes, created: r.created, lastActivity: r.lastActivity };
      if (host) {
        const e = host.engine;
        return {
          name,
          loaded: true,
          machine: host.machine.name,
          version: host.machine.version,
          head: e.head(),
          stable: e.stableFrontier(),
          ...stored,
          members: [...e.members()],
        };
      }
      if (!r) return { name, loaded: false };
      return { name, loaded: false, machine: r.machine, version: r.version, head: r.head, stable: r.stable, ...stored };
    });
    return more && taken.length > 0 ? { rooms, next: taken[taken.length - 1] } : { rooms };
  }

  async importRoom(name: string, file: RoomFile): Promise<void> {
    const { store, registry, machines } = this.deps;
    this.checkName('importRoom', name);
    if (!store.importRoom) throw new HerculesError('bad-argument', 'this room store cannot import rooms (no importRoom)');
    if (!file || file.format !== 'hercules-room' || file.formatVersion !== 1)
      throw new HerculesError(
        'bad-argument',
        'importRoom: not a room export (format "hercules-room", formatVersion 1: what export() and GET /admin/rooms/:room/export give)',
      );
    // A version this server's machine migrates from is fine: the room is migrated when it loads.
    const machine = machines.get(file.machine?.name);
    if (!machine || !machineAt(machine, file.machine.version))
      throw new HerculesError(
        'bad-argument',
        `importRoom ${name}: the export's machine ${file.machine?.name}@${file.machine?.version} is not one this server serves (${[...machines.values()].map((m) => `${m.name}@${m.version}`).join(', ')})`,
      );
    // The same domain as live ops, checked before anything is stored (room-file.ts).
    const problem = roomFileProblem(file);
    if (problem) throw new HerculesError('bad-argument', `importRoom ${name}: ${problem}`);
    if (registry.get(name)) throw new HerculesError('bad-argument', `import room ${name}: it exists; delete it first or import under another name`);
    await store.importRoom(name, {
      meta: { machine: file.machine.name, version: file.machine.version },
      durable: { checkpoint: file.checkpoint, suffix: file.entries, clients: file.clients, stable: file.stable },
      ...(file.digests ? { digests: file.digests } : {}),
    });
  }

  async readLog(name: string, after: number, max: number): Promise<{ from: number; entries: readonly LogEntry[] }> {
    const { store } = this.deps;
    // From the store, loaded or not: a room's engine keeps only what its members still need.
    if (!store.peek) throw new HerculesError('bad-argument', 'this room store cannot be read apart from its writer (no peek): webhooks need one that can');
    const p = await store.peek(name, after, max);
    return p ? { from: p.from, entries: p.entries } : { from: after + 1, entries: [] };
  }

  revoke(target: { user: string; room?: string; reason?: string }): number {
    if (!target || typeof target.user !== 'string' || target.user.length === 0)
      throw new HerculesError('bad-argument', 'revoke({ user, room?, reason? }): user must be a non-empty string');
    if (target.room !== undefined && typeof target.room !== 'string') throw new HerculesError('bad-argument', 'revoke: room must be a string');
    const why = typeof target.reason === 'string' && target.reason.length > 0 ? `: ${target.reason.slice(0, 200)}` : '';
    return this.deps.revokeSessions(
      target.user,
      target.room,
      `access of user ${target.user} ${target.room !== undefined ? `to room ${target.room} ` : ''}was revoked${why}`,
    );
  }

  /** A room name from the server's own API, as `?room=` must be. */
  private checkName(call: string, name: unknown): void {
    if (typeof name !== 'string' || !ROOM_NAME.test(name))
      throw new HerculesError('bad-argument', `${call}(name): ${JSON.stringify(String(name)).slice(0, 80)} is not a room name (1-128 of A-Z a-z 0-9 . _ ~ -)`);
  }

  /** The host of a room for the server's own API: loaded with the machine it was stored with (or `create`'s, if new). */
  private async hostFor(name: string, create: string | undefined): Promise<RoomHost> {
    if (this.deps.closing()) throw new HerculesError('closed', 'the server is shutting down');
    const { store, registry, machines } = this.deps;
    let machine = registry.get(name)?.machine;
    if (!machine) {
      // Its machine, without loading it (a store that cannot peek: the one named, else the room is refused below).
      const stored = store.peek ? await store.peek(name, 0, 0) : undefined;
      const want = stored ? stored.meta.machine : create;
      if (want === undefined) throw new HerculesError('bad-room', `room ${name} does not exist; name its machine to create it: room(${name}, machineName)`);
      machine = machines.get(want);
      if (!machine) throw new HerculesError('machine-mismatch', `room ${name} runs ${want}, which this server does not serve; deploy that machine`);
    }
    const host = await registry.acquire(name, machine);
    if (typeof host === 'string') throw new HerculesError('machine-mismatch', host);
    return host;
  }

  private serverRoom(name: string, create: string | undefined): ServerRoom {
    const { store, registry, machines } = this.deps;
    const hostFor = (n: string, c: string | undefined) => this.hostFor(n, c);
    const listeners = this.listeners;
    return {
      name,
      async submit(op, args, o) {
        if (!o || typeof o !== 'object')
          throw new HerculesError('bad-argument', 'submit(op, args, { author, key? }): the options are required (author names who submits)');
        const host = await hostFor(name, create);
        return host.submit(o.author, op, args, o.key);
      },
      async state() {
        return (await hostFor(name, create)).engine.headSnapshot();
      },
      async export() {
        if (!store.exportRoom) throw new HerculesError('bad-argument', 'this room store cannot export rooms (no exportRoom)');
        const ex = await store.exportRoom(name);
        if (!ex) throw new HerculesError('bad-room', `room ${name} does not exist`);
        return roomFileOf(ex, registry.get(name)?.engine);
      },
      stateAt: (position) => stateAt(store, machines, name, position),
      log: (range) => logPage(store, name, range),
      async delete() {
        if (!store.deleteRoom) throw new HerculesError('bad-argument', 'this room store cannot delete rooms (no deleteRoom)');
        await registry.evict(name, 'bad-room', `room ${name} was deleted`);
        return store.deleteRoom(name);
      },
      subscribe(listener) {
        if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'subscribe(listener): listener must be a function');
        let set = listeners.get(name);
        if (!set) listeners.set(name, (set = new Set()));
        set.add(listener);
        return () => {
          set.delete(listener);
          if (set.size === 0 && listeners.get(name) === set) listeners.delete(name);
        };
      },
    };
  }
}

/**
 * A store's export as a room file: its checkpoint digests within the file's log, and the digest
 * of the state at its head when `engine` (the room loaded here) is at that head.
 */
function roomFileOf(ex: RoomExport, engine: { head(): number; headSnapshot(): unknown } | undefined): RoomFile {
  const d = ex.durable;
  const head = d.checkpoint.pos + d.suffix.length;
  const digests = (ex.digests ?? []).filter((x) => x.pos >= d.checkpoint.pos && x.pos <= head);
  return {
    format: 'hercules-room',
    formatVersion: 1,
    machine: { name: ex.meta.machine, version: ex.meta.version },
    checkpoint: d.checkpoint,
    entries: d.suffix,
    clients: d.clients,
    stable: d.stable,
    ...(ex.digests ? { digests } : {}),
    ...(engine && engine.head() === head ? { head: { pos: head, digest: stateDigest(engine.headSnapshot()) } } : {}),
  };
}
