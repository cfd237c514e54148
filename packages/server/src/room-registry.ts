/**
 * The rooms a server holds in memory: each loaded from the store on its first join (created if
 * new), kept while it has members, and handed back to the store (`RoomHost.release`) once it
 * has been empty for `idleUnloadMs`. A room that failed (RoomHost poisoned itself) is dropped
 * and reloads from the store on its next join.
 *
 * Fencing: a room is loaded at the store's rev and its host appends after it, so a host that
 * lost the room to another writer finds out on its next append and fails. Within one registry a
 * room is never loaded twice: a load waits for the same room's unloading (release) to finish,
 * and joins during a load wait for that load.
 */
import { HerculesError, cannotRun, storedRoomVersion, type ErrorCode, type LogEntry, type Machine, type RoomOutput } from '@hercules/core';
import { RoomHost, type OutputPath, type RoomHostOptions } from './room-host.ts';
import type { LoadedRoom } from './store/room-store.ts';
import { reconnectToResume } from './recovery.ts';

export interface RoomRegistryEvents {
  /** A room was loaded (or created: `loaded.fresh`). */
  loaded?(host: RoomHost, loaded: LoadedRoom): void;
  unloaded?(name: string): void;
  /** A room failed and was dropped from memory (RoomHost `failed`). */
  failed?(host: RoomHost, stage: string, error: unknown, why: string): void;
  warning?(host: RoomHost, message: string): void;
  delivered?(host: RoomHost, out: RoomOutput, at: number, now: number, path: OutputPath): void;
  committed?(host: RoomHost, ops: number, ms: number): void;
  committedEntries?(host: RoomHost, entries: readonly LogEntry[]): void;
  checkpointed?(host: RoomHost, pos: number): void;
  /** Handing a room back to the store failed (on unload or close); the log is intact. */
  releaseFailed?(name: string, error: unknown): void;
}

/** What every room's host is given as it is (see RoomHostOptions), and the registry's own. */
export interface RoomRegistryOptions
  extends Pick<
    RoomHostOptions,
    'store' | 'clock' | 'ackTimeoutMs' | 'authorize' | 'readersPresence' | 'presenceEveryMs' | 'checkpointEvery' | 'commitWindowMs'
  > {
  /** Unload a room this long after its last member left. Default 30,000 ms. */
  idleUnloadMs?: number;
  events?: RoomRegistryEvents;
  /** Make a room's host (default `new RoomHost`): the simulator's tests plant faulty hosts here. */
  createHost?: (opts: RoomHostOptions) => RoomHost;
}

export class RoomRegistry {
  private readonly opts: RoomRegistryOptions;
  private readonly events: RoomRegistryEvents;
  private readonly hosts = new Map<string, RoomHost>();
  private readonly loading = new Map<string, Promise<RoomHost | string>>();
  private readonly unloading = new Map<string, Promise<void>>();
  private closed = false;

  constructor(opts: RoomRegistryOptions) {
    this.opts = opts;
    this.events = opts.events ?? {};
  }

  /** The host of a loaded room. */
  get(name: string): RoomHost | undefined {
    return this.hosts.get(name);
  }
  /** Rooms in memory. */
  names(): string[] {
    return [...this.hosts.keys()];
  }
  get size(): number {
    return this.hosts.size;
  }
  hostsInMemory(): IterableIterator<RoomHost> {
    return this.hosts.values();
  }

  /**
   * The room's host, loaded (or created with `machine`) on first use; a string says why the
   * room cannot serve this machine. Rejects if the store cannot load it. For a join (`join`), a
   * room already in memory is served only once the store confirms this server still writes it
   * (`RoomStore.confirmWriter`, if the store has it): a cluster node that lost the room without
   * knowing it yet would welcome the joiner with a log older than one it may have seen elsewhere.
   * If the store cannot confirm it, the room is failed here (its members reconnect, and the next
   * join reloads it) and this rejects, so the joiner retries.
   */
  async acquire(name: string, machine: Machine<any, any>, opts: { join?: boolean } = {}): Promise<RoomHost | string> {
    if (this.closed) throw new HerculesError('closed', 'the server is shutting down');
    let host: RoomHost | string | undefined = this.hosts.get(name);
    if (host && opts.join && this.opts.store.confirmWriter) {
      const held = host;
      try {
        await this.opts.store.confirmWriter(name);
      } catch (e) {
        const why = reconnectToResume(`this server cannot confirm it still serves room ${name} (${(e as Error)?.message ?? String(e)})`);
        if (this.hosts.get(name) === held) held.fail('moved', e, why);
        throw e;
      }
      if (this.closed) throw new HerculesError('closed', 'the server is shutting down');
      // Dropped meanwhile (it failed): load it again below.
      host = this.hosts.get(name);
    }
    if (!host) {
      let loading = this.loading.get(name);
      if (!loading) {
        loading = this.load(name, machine);
        this.loading.set(name, loading);
        const forget = () => {
          if (this.loading.get(name) === loading) this.loading.delete(name);
        };
        loading.then(forget, forget);
      }
      host = await loading;
      if (typeof host === 'string') return host;
    }
    if (host.machine !== machine)
      return `room ${name} runs ${host.machine.name}@${host.machine.version}, not ${machine.name}@${machine.version}; use another room name or deploy the matching machine`;
    return host;
  }

  private async load(name: string, machine: Machine<any, any>): Promise<RoomHost | string> {
    // The same room being handed back must be stored first: loading it before would miss that.
    const unloading = this.unloading.get(name);
    if (unloading) await unloading;
    const loaded = await this.opts.store.open(name, { machine: machine.name, version: machine.version, initial: machine.initial });
    if (this.closed) throw new HerculesError('closed', 'the server is shutting down');
    if (loaded.meta.machine !== machine.name)
      return `room ${name} runs ${loaded.meta.machine}@${loaded.meta.version}, not ${machine.name}@${machine.version}; use another room name or deploy the matching machine`;
    // A room of an older version the machine migrates from is migrated by its engine, on load;
    // one of a newer version, or one the chain does not reach, is refused (docs/migrations.md).
    loaded.durable.version = loaded.meta.version;
    const no = cannotRun(machine, storedRoomVersion(loaded.durable, machine.version));
    if (no) throw new HerculesError(no.code, `room ${name}: ${no.message}`);
    const ev = this.events;
    const hostOpts: ConstructorParameters<typeof RoomHost>[0] = {
      name,
      machine,
      loaded,
      store: this.opts.store,
      clock: this.opts.clock,
      ackTimeoutMs: this.opts.ackTimeoutMs,
      authorize: this.opts.authorize,
      readersPresence: this.opts.readersPresence,
      presenceEveryMs: this.opts.presenceEveryMs,
      checkpointEvery: this.opts.checkpointEvery,
      commitWindowMs: this.opts.commitWindowMs,
      events: {
        warning: ev.warning && ((m) => ev.warning!(host, m)),
        delivered: ev.delivered && ((out, at, now, path) => ev.delivered!(host, out, at, now, path)),
        committed: ev.committed && ((ops, ms) => ev.committed!(host, ops, ms)),
        committedEntries: ev.committedEntries && ((entries) => ev.committedEntries!(host, entries)),
        checkpointed: ev.checkpointed && ((pos) => ev.checkpointed!(host, pos)),
        failed: (stage, error, why) => this.failed(host, stage, error, why),
      },
    };
    const host = this.opts.createHost ? this.opts.createHost(hostOpts) : new RoomHost(hostOpts);
    this.hosts.set(name, host);
    ev.loaded?.(host, loaded);
    return host;
  }

  private failed(host: RoomHost, stage: string, error: unknown, why: string): void {
    if (this.hosts.get(host.name) === host) {
      this.hosts.delete(host.name);
      // Drop what the store caches about the room before it is loaded again.
      this.handBack(host.name, this.opts.store.release(host.name));
    }
    this.events.failed?.(host, stage, error, why);
  }

  private handBack(name: string, released: Promise<void>): void {
    const done = released.catch((e) => this.events.releaseFailed?.(name, e));
    this.unloading.set(name, done);
    done.then(() => {
      if (this.unloading.get(name) === done) this.unloading.delete(name);
    });
  }

  /**
   * Stop serving the rooms `match` picks, now: their members are told `why` and closed, and each
   * reloads from the store on its next join (a cluster node does this for the rooms of a shard it
   * gave up). How many rooms that was.
   */
  failRooms(match: (room: string) => boolean, why: string): number {
    let n = 0;
    for (const host of [...this.hosts.values()]) {
      if (!match(host.name)) continue;
      host.fail('moved', new HerculesError('storage-failed', why), why);
      n++;
    }
    return n;
  }

  /**
   * Stop serving `name` now (if it is loaded): its members are told `why` with `code`, fatal, and
   * closed; resolves once the store has the room back (to delete it, say).
   */
  async evict(name: string, code: ErrorCode, why: string): Promise<void> {
    await this.loading.get(name)?.catch(() => {});
    this.hosts.get(name)?.fail('evicted', new HerculesError(code, why), why, { code, fatal: true });
    await this.unloading.get(name);
  }

  /** Resolves once the rooms being handed back to the store now are there (what they wrote on the way out included). */
  async handedBack(): Promise<void> {
    if (this.unloading.size > 0) await Promise.allSettled([...this.unloading.values()]);
  }

  /** Keep time in every room (ack timeouts) and unload the rooms idle for `idleUnloadMs`. */
  tick(): void {
    const now = this.opts.clock.now();
    const idle = this.opts.idleUnloadMs ?? 30_000;
    for (const host of [...this.hosts.values()]) {
      host.tick();
      if (host.state === 'serving' && host.memberCount === 0 && now - host.emptySince > idle) this.unload(host);
    }
  }

  /** Hand a room back to the store now (it has no members, or they are closed). */
  unload(host: RoomHost): void {
    if (this.hosts.get(host.name) !== host) return;
    this.hosts.delete(host.name);
    this.handBack(host.name, host.release());
    this.events.unloaded?.(host.name);
  }

  /** Unload every room and wait for them to be stored. The store stays open (its owner closes it). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.loading.values()]);
    for (const host of [...this.hosts.values()]) this.unload(host);
    await Promise.allSettled([...this.unloading.values()]);
  }
}
