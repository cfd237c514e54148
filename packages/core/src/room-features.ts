/**
 * The parts of a client room an app opts in to: undo stacks and `room.text(path)`. They are
 * given to the room rather than imported by it, so a bundle whose app never asks for them
 * leaves them out (issue 41, item 5: 2.3 KiB of the README's 38.4 KiB gzipped browser bundle,
 * docs/benchmarks.md "Browser bundle size"). `ClientRoom` (full-client-room.ts) and
 * `connect` of `@hercules/client` give every feature; `LeanClientRoom` and
 * `@hercules/client/lean` only those passed.
 */
import type { Machine } from './machine.ts';
import { textHandle, type TextHandle, type TextPath, type TextRoom } from './text.ts';
import { UndoStack, type UndoOptions } from './undo-stack.ts';

export interface RoomFeatures {
  /** Undo tracking (room.undo, redo, canUndo...): without it, as with `undo: false`. */
  readonly undoStack?: <S>(machine: Machine<S, any, any>, opts: UndoOptions, now: () => number) => UndoStack<S>;
  /** `room.text(path)`: without it, that call throws 'bad-argument'. */
  readonly textHandle?: <H>(room: TextRoom<H>, path: TextPath) => TextHandle<H>;
}

/** Undo tracking (docs/undo.md). */
export const undoFeature: RoomFeatures = { undoStack: (machine, opts, now) => new UndoStack(machine, opts, now) };

/** `room.text(path)`: a handle on a collaborative text (docs/text.md). */
export const textFeature: RoomFeatures = { textHandle };

/** Every room feature: what `ClientRoom` and `connect` of `@hercules/client` give. */
export const ALL_ROOM_FEATURES: RoomFeatures = { undoStack: undoFeature.undoStack, textHandle };
