/**
 * Presence on the client: each connection's small JSON value (a cursor, a selection, a name),
 * never logged, persisted or part of a view (PresenceMessage). The engine's part (what others
 * show, ours and what the server has yet to hear) and the room's (`room.presence`, its
 * listeners) live here, apart from the view engine and the room, so that a room built without
 * them (`@hercules/client/lean` without `presenceFeature`) leaves them out of its bundle
 * (issue 41, item 5; docs/benchmarks.md, "Browser bundle size"). `ViewEngine` and `ClientRoom`
 * always have them.
 */
import { domainBytes, domainCopy } from './args.ts';
import { HerculesError, errorMessage } from './errors.ts';
import { deepFreeze, type Machine } from './machine.ts';
import { MAX_PRESENCE_BYTES, MAX_PRESENCE_KEYS, presenceTooLarge, type ClientMessage, type PeerPresence } from './protocol.ts';

/** The engine's presence: the other connections', ours, and what is still to be sent. */
export class PresenceState {
  /** The other connections' presence, by client id, and key (protocol 8) if any. */
  #peers = new Map<string, PeerPresence>();
  /** Ours, as last set (undefined: none), and whether the server has yet to hear it. */
  #own: unknown = undefined;
  #due = false;
  /** Our keyed presences (protocol 8: the tabs of a shared client), and the keys the server has yet to hear. */
  #keyed = new Map<string, unknown>();
  #keyedDue = new Set<string>();

  constructor(
    readonly machine: Machine<any, any, any>,
    readonly self: string,
  ) {}

  /** The other connections' presence, as last heard (none while offline). */
  others(): PeerPresence[] {
    return [...this.#peers.values()];
  }

  /** Our presence as last set (undefined: none). */
  own(): unknown {
    return this.#own;
  }

  /**
   * Set our presence (null or undefined clears it). Only the latest value is sent, when the
   * adapter calls flushPresence (it paces them).
   */
  set(value: unknown, key?: string): void {
    if (key !== undefined && (typeof key !== 'string' || key.length === 0 || key.length > 128))
      throw new HerculesError('bad-argument', 'presence key must be a non-empty string of at most 128 characters');
    if (value !== undefined && value !== null) {
      const size = domainBytes(value);
      if (typeof size !== 'number') throw new HerculesError('bad-argument', `presence: ${size.problem}`);
      if (size > MAX_PRESENCE_BYTES)
        throw new HerculesError('too-large', `presence not set: ${presenceTooLarge(size)}; keep it small (cursor, selection, name)`);
      const invalid = this.machine.validatePresence(value);
      if (invalid !== undefined) throw new HerculesError('bad-argument', `${invalid}; room.presence.set takes what the machine's presence schema allows`);
      value = deepFreeze(domainCopy('presence', value));
    }
    if (key === undefined) {
      this.#own = value ?? undefined;
      this.#due = true;
      return;
    }
    if (value === undefined || value === null) {
      if (!this.#keyed.delete(key)) return;
    } else {
      if (!this.#keyed.has(key) && this.#keyed.size >= MAX_PRESENCE_KEYS)
        throw new HerculesError('too-large', `presence not set: ${MAX_PRESENCE_KEYS} keyed presences are set already; clear one first`);
      this.#keyed.set(key, value);
    }
    this.#keyedDue.add(key);
  }

  /** Whether a change waits to be sent. */
  due(): boolean {
    return this.#due || this.#keyedDue.size > 0;
  }

  /** Our latest presence, if it changed since the last one sent, into `send`. */
  flush(send: ClientMessage[]): void {
    if (this.#due) send.push({ t: 'presence', value: this.#own ?? null });
    this.#due = false;
    for (const key of this.#keyedDue) send.push({ t: 'presence', key, value: this.#keyed.get(key) ?? null });
    this.#keyedDue.clear();
  }

  /** What the server says changed; `all`: a welcome's whole list, replacing what was heard before. */
  heard(peers: readonly PeerPresence[], all: boolean): void {
    if (all) {
      this.#peers = new Map(peers.filter((p) => p.client !== this.self).map((p) => [peerId(p), p]));
      return;
    }
    for (const p of peers) {
      if (p.client === this.self) continue;
      const id = peerId(p);
      if (p.value === null || p.value === undefined) this.#peers.delete(id);
      else this.#peers.set(id, p);
    }
  }

  /** The connection closed: others' presence is unknown offline, ours is said again after the next welcome. Whether others' changed. */
  offline(): boolean {
    const had = this.#peers.size > 0;
    this.#peers.clear();
    if (this.#own !== undefined) this.#due = true;
    this.#keyedDue = new Set(this.#keyed.keys());
    return had;
  }
}

/** A peer's presence is one per client, or per client and key (protocol 8, PRESENCE-PER-KEY). */
function peerId(p: PeerPresence): string {
  return p.key === undefined ? p.client : `${p.client}\n${p.key}`;
}

/**
 * Who else is in the room and what they show: each connection's small JSON value (a cursor, a
 * selection, a name), never logged, stored or part of any view; cleared when it leaves.
 */
export interface RoomPresence<P = unknown> {
  /**
   * Set ours (null clears it); only the latest is sent, at most every `presenceEveryMs`. Throws
   * 'bad-argument' for a value outside the JSON domain or the machine's presence schema.
   */
  set(value: P | null): void;
  /** Merge `partial` into ours (an object) and set the result. */
  update(partial: unknown extends P ? Record<string, unknown> : Partial<P>): void;
  /** Ours, as last set (undefined: none). */
  get(): P | undefined;
  /** The other connections' presence (none while offline). The same array until it changes. */
  others(): readonly PeerPresence<P>[];
  /** Called with others() whenever it changes. */
  subscribe(listener: (others: readonly PeerPresence<P>[]) => void): () => void;
}

/** `room.presence` and what its room tells it: built by presenceFeature (room-features.ts). */
export interface PresenceApi<P = unknown> extends RoomPresence<P> {
  /** Set one of this client's keyed presences (ClientRoom.setPresenceOf). */
  setOf(key: string, value: P | null): void;
  /** Others' presence changed: tell the listeners (one that throws is reported through `warn`). */
  changed(warn: ((message: string) => void) | undefined): void;
  /** The room closed: forget the listeners. */
  close(): void;
}

/** `room.presence` over `state`; `pump`: the room's round after an input (ClientRoom). */
export function presenceApi<P>(state: PresenceState, pump: () => void): PresenceApi<P> {
  const listeners = new Set<(others: readonly PeerPresence<P>[]) => void>();
  let cache: readonly PeerPresence<P>[] | undefined;
  const api: PresenceApi<P> = {
    set: (value) => {
      state.set(value);
      pump();
    },
    setOf: (key, value) => {
      state.set(value, key);
      pump();
    },
    update: (partial) => {
      if (partial === null || typeof partial !== 'object' || Array.isArray(partial))
        throw new HerculesError('bad-argument', 'presence.update(partial): partial must be an object');
      const cur = state.own();
      const base = cur !== null && typeof cur === 'object' && !Array.isArray(cur) ? cur : {};
      api.set({ ...base, ...partial } as P);
    },
    get: () => state.own() as P | undefined,
    others: () => (cache ??= Object.freeze(state.others() as PeerPresence<P>[])),
    subscribe: (listener) => {
      if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'presence.subscribe(listener): listener must be a function');
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    changed: (warn) => {
      cache = undefined;
      const others = api.others();
      for (const fn of [...listeners]) {
        try {
          fn(others);
        } catch (e) {
          warn?.(`a presence listener threw: ${errorMessage(e)}`);
        }
      }
    },
    close: () => listeners.clear(),
  };
  return api;
}
