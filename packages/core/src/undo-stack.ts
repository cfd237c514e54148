/**
 * A client's undo and redo stacks (docs/undo.md). Pure bookkeeping: the room tells it what each
 * of its ops changed and which were rejected; it says what an undo or a redo op must carry.
 */
import { errorMessage } from './errors.ts';
import type { Machine, Patch } from './machine.ts';
import { UNDO_OP, changesFromPatches, restoreActions, sameJson, type Change, type UndoAction, type UndoArgs } from './undo.ts';

export interface UndoOptions {
  /**
   * Ops within this many ms of the step's last op join it, as Yjs's captureTimeout does, so a
   * burst of typing is one step. Default 500 (Yjs's). 0: only ops of one turn or one
   * undoGroup() form a step.
   */
  captureMs?: number;
  /** Steps kept; the oldest goes first. Default 500. */
  maxSteps?: number;
}

/** What a run of our ops did: the paths they changed, or one op's declared inverse. */
/** Its ops are seqs `first` to `last` (consecutive: a step's ops are), `left` of them not rejected. */
type Item = { first: number; last: number; left: number } & ({ changes: Change[] } | { undo: UndoAction; redo: UndoAction });

interface Step {
  items: Item[];
  /** Its ops: seqs `first` to `last` (an undo op, which is not in a step, ends the step). */
  first: number;
  last: number;
  /** Ops of the step submitted but not run yet: their item comes when they run. */
  waiting: number;
  /** When its last op was submitted (the room's clock). */
  lastAt: number;
}

export interface UndoStatus {
  readonly canUndo: boolean;
  readonly canRedo: boolean;
}

/**
 * Ops join steps when submitted (by time: one turn, one group, the merge window), and their
 * changes are recorded when they run on Submitted (ViewEngineOptions.onOwnRun), after they were
 * sent: the bookkeeping adds no op run and no delay before the send.
 */
export class UndoStack<S> {
  readonly #undos: Step[] = [];
  #redos: Step[] = [];
  /** The redo stack the last submitted op emptied, until the next one (abandon puts it back). */
  #emptied: Step[] = [];
  /** The top undo step may still take ops (none of undo, redo or stopCapturing since). */
  private open = false;
  #turnOpen = false;
  #groupDepth = 0;
  readonly #captureMs: number;
  readonly #maxSteps: number;

  constructor(
    private readonly machine: Machine<S, any, any>,
    opts: UndoOptions,
    private readonly now: () => number,
  ) {
    this.#captureMs = opts.captureMs ?? 500;
    this.#maxSteps = opts.maxSteps ?? 500;
  }

  status(): UndoStatus {
    return { canUndo: this.canUndo(), canRedo: this.canRedo() };
  }

  canUndo(): boolean {
    return this.#undos.length > 0;
  }

  canRedo(): boolean {
    return this.#redos.length > 0;
  }

  /** Whether an op submitted now joins the top step (else it starts a new one). */
  joins(): boolean {
    const top = this.#undos[this.#undos.length - 1];
    return top !== undefined && this.open && (this.#groupDepth > 0 || this.#turnOpen || this.now() - top.lastAt < this.#captureMs);
  }

  /** Our op `seq` was submitted: it joins the top step (`joins()`), or starts one. New ops end redo. */
  submitted(seq: number, joins: boolean): void {
    const t = this.now();
    if (joins) {
      const top = this.#undos[this.#undos.length - 1];
      top.last = seq;
      top.waiting++;
      top.lastAt = t;
    } else {
      this.#undos.push({ items: [], first: seq, last: seq, waiting: 1, lastAt: t });
      // Trimmed in batches: shifting a 500-step array on every op costs more than the op's record.
      if (this.#undos.length > this.#maxSteps + 64) this.#undos.splice(0, this.#undos.length - this.#maxSteps);
    }
    this.#emptied = this.#redos;
    if (this.#redos.length > 0) this.#redos = [];
    this.open = true;
    if (!this.#turnOpen) {
      this.#turnOpen = true;
      queueMicrotask(() => {
        this.#turnOpen = false;
      });
    }
  }

  /** Ops of ours ran on Submitted, from `before` to `after` (ViewEngineOptions.onOwnRun). */
  ran(before: S, after: S, ops: readonly { readonly seq: number; readonly name: string; readonly args: unknown }[], patches: readonly Patch[]): void {
    const last = ops[ops.length - 1].seq;
    // The step is the top one but where steps met in one turn (then the room ran them apart).
    let at = this.#undos.length - 1;
    while (at >= 0 && !(this.#undos[at].first <= last && last <= this.#undos[at].last)) at--;
    if (at < 0) return; // not ours to track (an undo or a redo op, or ops restored from storage)
    const step = this.#undos[at];
    const first = ops[0].seq;
    const left = ops.length;
    step.waiting = step.waiting > left ? step.waiting - left : 0;
    const inverse = ops.length === 1 ? this.machine.inverses?.[ops[0].name] : undefined;
    if (inverse) {
      const op = ops[0];
      const inv = inverse(op.args, before);
      step.items.push({
        first,
        last,
        left,
        undo: { op: inv.name, ...(inv.args !== undefined ? { args: inv.args } : {}) },
        redo: { op: op.name, ...(op.args !== undefined ? { args: op.args } : {}) },
      });
    } else {
      const changes = changesFromPatches(before, after, patches);
      if (changes !== undefined && changes.length > 0) {
        const item: Item = { first, last, left, changes };
        if (!mergeTyping(step.items, item)) step.items.push(item);
      }
    }
    // A step whose ops all ran and changed nothing is no step.
    if (step.items.length === 0 && step.waiting === 0) this.#undos.splice(at, 1);
  }

  /** Steps whose ops all ran and changed nothing are no steps. */
  #dropEmpty(): void {
    for (const stack of [this.#undos, this.#redos])
      for (let i = stack.length - 1; i >= 0; i--) if (stack[i].items.length === 0 && stack[i].waiting === 0) stack.splice(i, 1);
  }

  /** Run `fn`; the ops it submits are one step (nested groups join the outer one). */
  group<T>(fn: () => T): T {
    if (this.#groupDepth === 0) this.stopCapturing();
    this.#groupDepth++;
    try {
      return fn();
    } finally {
      this.#groupDepth--;
      if (this.#groupDepth === 0) this.stopCapturing();
    }
  }

  /** The next op starts a new step, however soon it comes. */
  stopCapturing(): void {
    this.open = false;
  }

  /** Take the top undo step (its ops have all run): the arguments of the op that undoes it. */
  takeUndo(): UndoArgs | undefined {
    if (this.#undos.length > this.#maxSteps) this.#undos.splice(0, this.#undos.length - this.#maxSteps);
    const step = this.#undos.pop();
    if (!step) return undefined;
    this.#redos.push(step);
    this.open = false;
    return { do: actionsOf(step, false), of: step.items[0].first };
  }

  /** Take the top redo step: the arguments of the op that redoes it (undefined: none). */
  takeRedo(): UndoArgs | undefined {
    const step = this.#redos.pop();
    if (!step) return undefined;
    this.#undos.push(step);
    this.open = false;
    return { do: actionsOf(step, true), of: step.items[0].first, redo: true };
  }

  /** The submit of `seq` threw (nothing was submitted): as if it had not come. */
  abandon(seq: number): void {
    this.rejected(seq);
    if (this.#emptied.length > 0 && this.#redos.length === 0) this.#redos = this.#emptied;
    this.#emptied = [];
  }

  /** Our op `seq` was rejected: it did nothing, so there is nothing of it to undo. */
  rejected(seq: number): void {
    for (const stack of [this.#undos, this.#redos]) {
      for (const step of stack) {
        if (seq < step.first || seq > step.last) continue;
        const at = step.items.findIndex((it) => it.first <= seq && seq <= it.last);
        if (at < 0) step.waiting = Math.max(0, step.waiting - 1);
        else if (--step.items[at].left === 0) step.items.splice(at, 1);
      }
    }
    this.#dropEmpty();
  }
}

/** The actions of an undo (newest change first) or a redo (oldest first) of `step`. */
function actionsOf(step: Step, redo: boolean): UndoAction[] {
  const units = chainFree(step.items);
  const out: UndoAction[] = [];
  const n = units.length;
  for (let i = 0; i < n; i++) {
    const u = units[redo ? i : n - 1 - i];
    if ('path' in u) out.push(...restoreActions([u], redo));
    else out.push(redo ? u.redo : u.undo);
  }
  return out;
}

type Unit = Change | { undo: UndoAction; redo: UndoAction };

/**
 * The step's changes, oldest first, with each run of changes of one path that follow on from one
 * another (each from the value the one before left) made one change, from the first's before to
 * the last's after. Else the undo's restores of that path form a chain (v2 -> v1, then v1 -> v0):
 * when another client had put back the middle value v1, the undo did only the second (v1 -> v0),
 * and the redo, oldest first, did both (v0 -> v1, then v1 -> v2), leaving v2 where its undo took
 * away v1 (UNDO-REDO; the undo simulator's seed 1213). Changes are not joined across a change of
 * a path above or below (an array grown between two edits of its element: the order of their
 * restores matters) nor across a declared inverse.
 */
function chainFree(items: readonly Item[]): Unit[] {
  const out: Unit[] = [];
  /** By path: the index in `out` of its latest change, and of the latest change at or under it. */
  const at = new Map<string, number>();
  const under = new Map<string, number>();
  let from = 0; // no joining before this index (a declared inverse)
  for (const item of items) {
    if (!('changes' in item)) {
      out.push({ undo: item.undo, redo: item.redo });
      from = out.length;
      continue;
    }
    for (const c of item.changes) {
      const keys = prefixKeys(c.path);
      const key = keys[keys.length - 1];
      const j = at.get(key) ?? -1;
      // Joined only if nothing since changed a path above it or below it (`under` of its own key
      // counts changes at it too, so it is j itself when only the same path changed since).
      const clear = j >= from && (under.get(key) ?? -1) === j && keys.every((k, i) => i === keys.length - 1 || (at.get(k) ?? -1) < j);
      const prev = out[j] as Change | undefined;
      if (clear && prev && sameJson(prev.after, c.before)) {
        out[j] = { path: c.path, before: prev.before, after: c.after, ...(c.lens ? { lens: c.lens } : {}) };
        continue;
      }
      out.push(c);
      at.set(key, out.length - 1);
      for (const k of keys) under.set(k, out.length - 1);
    }
  }
  return out;
}

/** The keys of each prefix of `path` (["a"], ["a", 1], ...), the path's own last. */
function prefixKeys(path: readonly (string | number)[]): string[] {
  const keys: string[] = [];
  let k = '';
  for (let i = 0; i < path.length; i++) {
    k = i === 0 ? `${typeof path[0]}:${path[0]}` : `${k}\u0000${typeof path[i]}:${path[i]}`;
    keys.push(k);
  }
  return keys;
}

/**
 * Typing: an op that writes exactly the paths the previous item wrote, starting from the values
 * it left, extends that item (its before stays, its after becomes the new one) rather than adding
 * one, so an undo of 100 keystrokes carries one value per path, not 100.
 */
function mergeTyping(items: Item[], item: Item): boolean {
  const last = items[items.length - 1];
  if (!last || !('changes' in last) || !('changes' in item) || last.changes.length !== item.changes.length) return false;
  for (let i = 0; i < item.changes.length; i++) {
    const a = last.changes[i];
    const b = item.changes[i];
    if (a.after !== b.before || a.path.length !== b.path.length || a.path.some((k, j) => k !== b.path[j])) return false;
  }
  last.changes = last.changes.map((c, i) => ({ path: c.path, before: c.before, after: item.changes[i].after }));
  last.last = item.last;
  last.left += item.left;
  return true;
}

/** What a room's undo needs of its room (ClientRoom). */
export interface UndoRoom<H> {
  readonly engine: { submittedWaiting(): boolean; getState(view: 'submitted'): unknown; nextSeq(): number };
  /** Submit an op as the room does, past its undo bookkeeping. */
  submit(name: string, args: unknown): H;
  warn(message: string): void;
}

/**
 * A room's undo: its stacks, the submits that go through them, and the listeners of its
 * status (ClientRoom's submit, undo, redo and onUndoChange). Apart from the room so that a room
 * without the undo feature leaves it out of its bundle (room-features.ts).
 */
export class RoomUndo<S, H = unknown> extends UndoStack<S> {
  readonly #inverses: Machine<S, any, any>['inverses'];
  readonly #room: UndoRoom<H>;
  readonly #listeners = new Set<(status: UndoStatus) => void>();
  #said: UndoStatus = { canUndo: false, canRedo: false };

  constructor(machine: Machine<S, any, any>, opts: UndoOptions, now: () => number, room: UndoRoom<H>) {
    super(machine, opts, now);
    this.#inverses = machine.inverses;
    this.#room = room;
  }

  /** Submit op `name` through the room as part of a step (ClientRoom.submit). */
  submit(name: string, args: unknown): H {
    const engine = this.#room.engine;
    // Ops run in runs (ViewEngine.onOwnRun): those of another step, and the ops before one with a
    // declared inverse (computed from the state just before it), run first, so a run is one
    // step's. That runs them before their send; it only happens when steps meet in one turn.
    const inverse = this.#inverses?.[name] !== undefined;
    const joins = this.joins();
    if ((inverse || !joins) && engine.submittedWaiting()) engine.getState('submitted');
    const seq = engine.nextSeq();
    this.submitted(seq, joins);
    let h: H;
    try {
      h = this.#room.submit(name, args);
    } catch (e) {
      this.abandon(seq);
      throw e;
    }
    if (inverse) engine.getState('submitted');
    this.changed();
    return h;
  }

  /** Submit the undo op of the last step (or, `redo`, of the last undone one); undefined if none. */
  take(redo: boolean): H | undefined {
    const engine = this.#room.engine;
    // Our ops run now, so every step holds what it changed (and the undo runs in a run of its own).
    if (engine.submittedWaiting()) engine.getState('submitted');
    const args = redo ? this.takeRedo() : this.takeUndo();
    if (args === undefined) return undefined;
    const h = this.#room.submit(UNDO_OP, args);
    this.changed();
    return h;
  }

  listen(listener: (status: UndoStatus) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Tell the listeners if canUndo or canRedo changed. */
  changed(): void {
    if (this.canUndo() === this.#said.canUndo && this.canRedo() === this.#said.canRedo) return;
    const now = this.status();
    this.#said = now;
    for (const fn of [...this.#listeners]) {
      try {
        fn(now);
      } catch (e) {
        this.#room.warn(`an undo listener threw: ${errorMessage(e)}`);
      }
    }
  }

  close(): void {
    this.#listeners.clear();
  }
}
