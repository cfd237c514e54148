/**
 * Undo as an ordered op (docs/undo.md, spec UNDO-*). A client records what each of its ops
 * changed (diffState); an undo step becomes one built-in op, UNDO_OP, whose actions say, per path,
 * "if the value here is still what this client wrote, put back what was there before". It is
 * ordered, checked and applied like any op, so every replica computes the same result, and a
 * path someone else wrote since is left as they wrote it.
 */
import { HerculesError } from './errors.ts';

/** The name of the built-in undo/redo op. `~` names are reserved: no machine op may take one. */
export const UNDO_OP = '~undo';

/** A path into the state: object keys (strings) and, inside arrays, indices (numbers). */
export type StatePath = readonly (string | number)[];

/**
 * One action of an undo op. A restore: if the value at `path` is `from` (absent: no such key), make
 * it `to` (absent: delete the key), else leave it; `n` holds the length of each array the path
 * passes through, which must still be the same (an insert or a delete moved the elements: leave
 * it). Or a machine's declared inverse: run op `op` with `args` (MachineSpec.inverses).
 */
export type UndoAction =
  | { readonly path: StatePath; readonly from?: unknown; readonly to?: unknown; readonly n?: readonly number[] }
  | { readonly op: string; readonly args?: unknown };

/** The arguments of an UNDO_OP. `of`: the seq of the first op of the step it takes back (or redoes). */
export interface UndoArgs {
  readonly do: readonly UndoAction[];
  readonly of: number;
  readonly redo?: true;
}

/**
 * What one of our ops changed: a path, its value before and after (undefined: absent), and the
 * lengths of the arrays on the path (`lens`, when it passes through any).
 */
export interface Change {
  readonly path: StatePath;
  readonly before: unknown;
  readonly after: unknown;
  readonly lens?: readonly number[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** Two arrays whose elements can be compared one by one: same length (an edit in place). */
const sameLengthArrays = (a: unknown, b: unknown): a is unknown[] => Array.isArray(a) && Array.isArray(b) && a.length === b.length;

function change(path: StatePath, before: unknown, after: unknown, lens: readonly number[]): Change {
  return lens.length > 0 ? { path: [...path], before, after, lens: [...lens] } : { path: [...path], before, after };
}

/**
 * What changed from `before` to `after`, as paths. Snapshots share untouched subtrees, so a
 * subtree whose reference did not change is skipped without a look inside: the walk costs the
 * keys of the containers the ops copied. An array is entered only if its length did not change
 * (elements edited in place); one that grew or shrank is recorded whole, before and after, since
 * an index is no stable name for an element while others insert and delete. Returns false if
 * the root itself is not an object (nothing can be restored into it).
 */
export function diffState(before: unknown, after: unknown, out: Change[], path: (string | number)[] = [], lens: number[] = []): boolean {
  if (before === after) return true;
  if (isObject(before) && isObject(after)) {
    for (const k in after) {
      const b = before[k];
      const a = after[k];
      if (a === b && (b !== undefined || Object.hasOwn(before, k))) continue;
      path.push(k);
      diffState(Object.hasOwn(before, k) ? b : undefined, a, out, path, lens);
      path.pop();
    }
    for (const k in before) {
      if (Object.hasOwn(after, k)) continue;
      path.push(k);
      out.push(change(path, before[k], undefined, lens));
      path.pop();
    }
    return true;
  }
  if (path.length === 0) return false;
  if (sameLengthArrays(before, after)) {
    lens.push(before.length);
    for (let i = 0; i < before.length; i++) {
      if (before[i] === (after as unknown[])[i]) continue;
      path.push(i);
      diffState(before[i], (after as unknown[])[i], out, path, lens);
      path.pop();
    }
    lens.pop();
    return true;
  }
  out.push(change(path, before, after, lens));
  return true;
}

/**
 * What ops changed from `before` to `after`, from the paths their application wrote (the draft's
 * paths, draft.ts): as diffState would find, without walking the keys
 * of a large container the ops copied (1,000 keys: 106 -> 220 µs per submit by walking; issue 39,
 * docs/benchmarks.md "Undo"). A path is cut where diffState would stop (a value that is not a
 * container on both sides, an array whose length changed); a path under another is dropped; a
 * path whose value did not change (written, then restored) too. Undefined if the root is not
 * an object.
 */
export function changesFromPatches(before: unknown, after: unknown, patches: readonly { readonly path: StatePath }[]): Change[] | undefined {
  if (!isObject(before) || !isObject(after)) return before === after ? [] : undefined;
  const out: Change[] = [];
  if (patches.length === 1) {
    // The common case (one op writing one path): no sorting, no set.
    const c = cutPath(before, after, patches[0].path);
    if (c && c.after !== c.before) out.push(c);
    return out;
  }
  const cut: Change[] = [];
  for (const p of patches) {
    const c = cutPath(before, after, p.path);
    if (c) cut.push(c);
  }
  cut.sort((x, y) => x.path.length - y.path.length);
  const seen = new Set<string>();
  for (const c of cut) {
    let key = '';
    let under = false;
    for (let i = 0; i < c.path.length && !under; i++) {
      key = i === 0 ? String(c.path[0]) : `${key}\u0000${c.path[i]}`;
      under = i < c.path.length - 1 && seen.has(key);
    }
    if (under || seen.has(key)) continue;
    seen.add(key);
    if (c.after !== c.before) out.push(c);
  }
  return out;
}

/**
 * `path` up to where diffState would stop, with the values there before and after and the
 * lengths of the arrays it enters (one walk: reading them again cost 0.3 µs a submit).
 */
function cutPath(before: unknown, after: unknown, path: StatePath): Change | undefined {
  let o: unknown = after;
  let b: unknown = before;
  const out: (string | number)[] = [];
  let lens: number[] | undefined;
  for (let i = 0; i < path.length; i++) {
    if (isObject(o) && isObject(b)) {
      const k = typeof path[i] === 'string' ? (path[i] as string) : String(path[i]);
      out.push(k);
      o = Object.hasOwn(o, k) ? o[k] : undefined;
      b = Object.hasOwn(b, k) ? b[k] : undefined;
    } else if (sameLengthArrays(o, b) && Number.isInteger(path[i]) && (path[i] as number) < o.length) {
      const k = path[i] as number;
      (lens ??= []).push(o.length);
      out.push(k);
      o = o[k];
      b = (b as unknown[])[k];
    } else break;
  }
  if (out.length === 0) return undefined;
  return lens ? { path: out, before: b, after: o, lens } : { path: out, before: b, after: o };
}

/** The actions that take back `changes` (newest first), or redo them (oldest first). */
export function restoreActions(changes: readonly Change[], redo: boolean): UndoAction[] {
  const out: UndoAction[] = [];
  const n = changes.length;
  for (let i = 0; i < n; i++) {
    const c = changes[redo ? i : n - 1 - i];
    const from = redo ? c.before : c.after;
    const to = redo ? c.after : c.before;
    out.push({ path: c.path, ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}), ...(c.lens ? { n: c.lens } : {}) });
  }
  return out;
}

/** Deep equality of JSON data (state values and op arguments are JSON data). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

const MAX_PATH = 64;
const isIndex = (k: unknown): k is number => Number.isSafeInteger(k) && (k as number) >= 0;

/**
 * Why `args` are not an UNDO_OP's arguments, or undefined. `checkOp` judges a declared inverse
 * (a known op with valid arguments). Shared by the server's refusal and the client's submit.
 */
export function undoArgsProblem(args: unknown, checkOp: (name: string, args: unknown) => string | undefined): string | undefined {
  if (!isObject(args) || !Array.isArray(args.do) || !Number.isSafeInteger(args.of))
    return `${UNDO_OP} takes { do: actions[], of: seq, redo?: true }; it is the client library's own op (room.undo, room.redo)`;
  if (args.redo !== undefined && args.redo !== true) return `${UNDO_OP}: redo must be true or absent`;
  for (let i = 0; i < args.do.length; i++) {
    const a = args.do[i] as unknown;
    if (!isObject(a)) return `${UNDO_OP}: do[${i}] is not an object`;
    if (typeof a.op === 'string') {
      if (a.op === UNDO_OP) return `${UNDO_OP}: do[${i}] may not nest ${UNDO_OP}`;
      const p = checkOp(a.op, a.args);
      if (p !== undefined) return `${UNDO_OP}: do[${i}]: ${p}`;
      continue;
    }
    const path = a.path;
    if (!Array.isArray(path) || path.length === 0 || path.length > MAX_PATH || !path.every((k) => typeof k === 'string' || isIndex(k)))
      return `${UNDO_OP}: do[${i}].path must be 1-${MAX_PATH} object keys (strings) and array indices`;
    if (a.n !== undefined && (!Array.isArray(a.n) || a.n.length > MAX_PATH || !a.n.every(isIndex)))
      return `${UNDO_OP}: do[${i}].n must be the lengths of the arrays on the path`;
  }
  return undefined;
}

/**
 * Apply an UNDO_OP's actions to a draft (args already validated). A restore whose path no longer
 * leads through objects, or whose value is no longer `from`, does nothing (UNDO-OWN). `runOp`
 * runs a declared inverse on the draft; it throws as the op would.
 */
export function applyUndo(draft: unknown, args: UndoArgs, runOp: (name: string, args: unknown) => void): void {
  for (const a of args.do) {
    if ('op' in a) runOp(a.op, a.args);
    else restore(draft, a);
  }
}

/** One restore (UndoAction): only where the path still leads where it did and holds `from`. */
function restore(draft: unknown, a: { readonly path: StatePath; readonly from?: unknown; readonly to?: unknown; readonly n?: readonly number[] }): void {
  const n = a.n ?? [];
  let arrays = 0;
  /** The container's child at `key`, or undefined where the path no longer leads (moved elements). */
  const enter = (o: unknown, key: string | number): { ok: boolean; here: boolean; value?: unknown } => {
    if (isObject(o) && typeof key === 'string') return Object.hasOwn(o, key) ? { ok: true, here: true, value: o[key] } : { ok: true, here: false };
    if (Array.isArray(o) && typeof key === 'number' && o.length === n[arrays++] && key < o.length) return { ok: true, here: true, value: o[key] };
    return { ok: false, here: false };
  };
  let o: unknown = draft;
  const last = a.path.length - 1;
  for (let i = 0; i < last; i++) {
    const c = enter(o, a.path[i]);
    if (!c.ok || !c.here) return;
    o = c.value;
  }
  const key = a.path[last];
  const c = enter(o, key);
  if (!c.ok) return;
  const wasFrom = 'from' in a ? c.here && sameJson(c.value, a.from) : !c.here;
  if (!wasFrom) return;
  // A copy: the arguments are frozen, and a later op of the same draft may write inside the value
  // (a draft hands out a value assigned in it as it is, not as a draft).
  const to = 'to' in a ? thawed(a.to) : undefined;
  if (Array.isArray(o)) {
    if ('to' in a) o[key as number] = to; // (an element is never deleted: lengths do not change here)
    return;
  }
  const rec = o as Record<string, unknown>;
  if ('to' in a) rec[key as string] = to;
  else delete rec[key as string];
}

/** A mutable copy of JSON data (primitives as they are). */
function thawed(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(thawed);
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) out[k] = thawed((v as Record<string, unknown>)[k]);
  return out;
}

/** The reason a reserved name may not be a machine's op. */
export function reservedOpName(name: string): HerculesError | undefined {
  return name.startsWith('~') ? new HerculesError('bad-machine', `op "${name}": names starting with ~ are the engine's own (${UNDO_OP})`) : undefined;
}
