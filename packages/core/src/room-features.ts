/**
 * The parts of a client room an app opts in to: undo stacks, `room.text(path)`, presence and
 * delivery receipts.
 * They are given to the room rather than imported by it, so a bundle whose app never asks for
 * them leaves them out (issue 41, item 5: 2.3 KiB of the README's 38.4 KiB gzipped browser
 * bundle for undo and text, docs/benchmarks.md "Browser bundle size"). `ClientRoom`
 * (full-client-room.ts) and `connect` of `@hercules/client` give every feature; `LeanClientRoom`
 * and `@hercules/client/lean` only those passed.
 */
import { ViewEngine } from './full-view-engine.ts';
import type { Machine } from './machine.ts';
import { ReceiptBook } from './receipts.ts';
import { presenceApi, type PresenceApi, type PresenceState } from './presence.ts';
import { textHandle, type TextHandle, type TextPath, type TextRoom } from './text.ts';
import { RoomUndo, type UndoOptions, type UndoRoom } from './undo-stack.ts';
import type { LeanViewEngine } from './view-engine.ts';

export interface RoomFeatures {
  /** Undo tracking (room.undo, redo, canUndo...): without it, as with `undo: false`. */
  readonly undoStack?: <S, H>(machine: Machine<S, any, any>, opts: UndoOptions, now: () => number, room: UndoRoom<H>) => RoomUndo<S, H>;
  /** `room.text(path)`: without it, that call throws 'bad-argument'. */
  readonly textHandle?: <H>(room: TextRoom<H>, path: TextPath) => TextHandle<H>;
  /**
   * The room's engine: `ViewEngine` has presence (presence.ts); without it the room's
   * `LeanViewEngine` has none, ignores what the server says of others' presence, and
   * `room.presence` throws 'bad-argument'.
   */
  readonly engine?: typeof LeanViewEngine;
  /** `room.presence` over the engine's presence. */
  readonly presenceApi?: <P>(state: PresenceState, pump: () => void) => PresenceApi<P>;
  /** Delivery receipts (room.onReceipts; without it that call throws 'bad-argument', and seenBy and memberPositions say nothing). */
  readonly receipts?: () => ReceiptBook;
}

/** Undo tracking (docs/undo.md). */
export const undoFeature: RoomFeatures = { undoStack: (machine, opts, now, room) => new RoomUndo(machine, opts, now, room) };

/** `room.text(path)`: a handle on a collaborative text (docs/text.md). */
export const textFeature: RoomFeatures = { textHandle };

/** Presence: `room.presence` and `setPresenceOf` (PRESENCE-EPHEMERAL). */
export const presenceFeature: RoomFeatures = { engine: ViewEngine, presenceApi };

/** Delivery receipts: room.onReceipts, seenBy, memberPositions (RECEIPT-TRUE). */
export const receiptsFeature: RoomFeatures = { receipts: () => new ReceiptBook() };

/** Every room feature: what `ClientRoom` and `connect` of `@hercules/client` give. */
export const ALL_ROOM_FEATURES: RoomFeatures = {
  undoStack: undoFeature.undoStack,
  textHandle,
  engine: ViewEngine,
  presenceApi,
  receipts: receiptsFeature.receipts,
};
