/**
 * `ViewEngine`: the client view engine with presence (presence.ts) unless told `presence:
 * false`, `setPresence` and its kin included, as it always was. The engine itself
 * (view-engine.ts, `LeanViewEngine`) has presence only when given it, so a bundle of a room
 * without presence leaves it out (room-features.ts).
 */
import { HerculesError } from './errors.ts';
import type { Machine } from './machine.ts';
import { PresenceState } from './presence.ts';
import type { PeerPresence } from './protocol.ts';
import { LeanViewEngine, type ClientRestore, type ViewEngineOptions } from './view-engine.ts';

export class ViewEngine<S = unknown> extends LeanViewEngine<S> {
  constructor(machine: Machine<S>, opts: ViewEngineOptions<S>, restore?: ClientRestore) {
    super(machine, opts?.presence === undefined && opts ? { ...opts, presence: new PresenceState(machine, opts.clientId) } : opts, restore);
  }

  /** The other connections' presence, as last heard (none while offline). */
  presence(): readonly PeerPresence[] {
    return this.presenceState?.others() ?? [];
  }

  /** Our presence as last set (undefined: none). */
  ownPresenceValue(): unknown {
    return this.presenceState?.own();
  }

  /**
   * Set our presence (null or undefined clears it). Only the latest value is sent, when the
   * adapter calls flushPresence (it paces them); never logged, persisted or part of a view.
   */
  setPresence(value: unknown, key?: string): void {
    if (!this.presenceState) throw new HerculesError('bad-argument', 'setPresence: this engine has no presence (presence: false)');
    this.presenceState.set(value, key);
  }
}
