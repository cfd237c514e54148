/**
 * `ClientRoom`: the client room with every feature (undo, `room.text`), as it always was. The
 * room itself (client-room.ts, `LeanClientRoom`) takes its features as options, so an app that
 * bundles only the lean one leaves the others out (room-features.ts).
 */
import { LeanClientRoom, type ClientRoomOptions, type RoomDriver } from './client-room.ts';
import type { Machine, StateOf } from './machine.ts';
import type { ViewEngine } from './full-view-engine.ts';
import { ALL_ROOM_FEATURES } from './room-features.ts';

export class ClientRoom<M extends Machine<any, any>> extends LeanClientRoom<M> {
  // (With every feature, the engine is a ViewEngine: presence included.)
  declare readonly engine: ViewEngine<StateOf<M>>;

  constructor(machine: M, opts: ClientRoomOptions, driver?: RoomDriver) {
    super(machine, { ...opts, features: opts.features ?? ALL_ROOM_FEATURES }, driver);
  }
}
