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

/**
 * One action of an undo op. A restore: if the value at `path` is `from` (absent: no such key), make
 * it `to` (absent: delete the key), else leave it. Or a machine's declared inverse: run op `op`
 * with `args` (MachineSpec.inverses).
 */
export type UndoAction =
  | { readonly path: readonly string[]; readonly from?: unknown; readonly to?: unknown }
  | { readonly op: string; readonly args?: unknown };

/** The arguments of an UNDO_OP. `of`: the seq of the first op of the step it takes back (or redoes). */
export interface UndoArgs {
  readonly do: readonly UndoAction[];
  readonly of: number;
  readonly redo?: true;
}

/** What one of our ops changed: a path, its value before and after (undefined: absent). */
export interface Change {
  readonly path: readonly string[];
  readonly before: unknown;
  readonly after: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * What changed from `before` to `after`, as paths of object keys. Snapshots share untouched
 * subtrees, so a subtree whose reference did not change is skipped without a look inside: the
 * walk costs the keys of the containers the op copied. Arrays and other values are compared
 * whole (an index is not a stable name for an element while others insert and delete), so a
 * change inside an array is recorded as the array before and after. Returns false if the root
 * itself is not an object (nothing can be restored into it).
 */
export function diffState(before: unknown, after: unknown, out: Change[], path: string[] = []): boolean {
  if (before === after) return true;
  if (!isObject(before) || !isObject(after)) {
    if (path.length === 0) return false;
    out.push({ path: [...path], before, after });
    return true;
  }
  for (const k in after) {
    const b = before[k];
    const a = after[k];
    if (a === b && (b !== undefined || Object.hasOwn(before, k))) continue;
    path.push(k);
    diffState(Object.hasOwn(before, k) ? b : undefined, a, out, path);
    path.pop();
  }
  for (const k in before) {
    if (Object.hasOwn(after, k)) continue;
    out.push({ path: [...path, k], before: before[k], after: undefined });
  }
  return true;
}

/**
 * What ops changed from `before` to `after`, from the paths their application wrote (Mutative's
 * patches, made anyway to freeze the result): as diffState would find, without walking the keys
 * of a large container the ops copied (1,000 keys: 106 -> 220 µs per submit by walking; issue 39,
 * docs/benchmarks.md "Undo"). A path is cut where it enters an array (compared whole); a path
 * under another is dropped; a path whose value did not change (written, then restored) too.
 * Undefined if the root is not an object.
 */
export function changesFromPatches(before: unknown, after: unknown, patches: readonly { readonly path: readonly (string | number)[] }[]): Change[] | undefined {
  if (!isObject(before) || !isObject(after)) return before === after ? [] : undefined;
  const out: Change[] = [];
  if (patches.length === 1) {
    // The common case (one op writing one path): no sorting, no set.
    const path = cutPath(before, after, patches[0].path);
    if (path) addChange(out, before, after, path);
    return out;
  }
  const cut: (readonly string[])[] = [];
  for (const p of patches) {
    const path = cutPath(before, after, p.path);
    if (path) cut.push(path);
  }
  cut.sort((x, y) => x.length - y.length);
  const seen = new Set<string>();
  for (const path of cut) {
    let key = '';
    let under = false;
    for (let i = 0; i < path.length && !under; i++) {
      key = i === 0 ? path[0] : `${key}\u0000${path[i]}`;
      under = i < path.length - 1 && seen.has(key);
    }
    if (under || seen.has(key)) continue;
    seen.add(key);
    addChange(out, before, after, path);
  }
  return out;
}

/** `path` up to where it enters an array or leaves the objects (undefined: nothing left). */
function cutPath(before: unknown, after: unknown, path: readonly (string | number)[]): string[] | undefined {
  let o: unknown = after;
  let b: unknown = before;
  let i = 0;
  for (; i < path.length; i++) {
    if ((!isObject(o) && !isObject(b)) || Array.isArray(o) || Array.isArray(b)) break;
    const k = String(path[i]);
    o = isObject(o) && Object.hasOwn(o, k) ? o[k] : undefined;
    b = isObject(b) && Object.hasOwn(b, k) ? b[k] : undefined;
  }
  if (i === 0) return undefined;
  const out = new Array<string>(i);
  for (let j = 0; j < i; j++) out[j] = String(path[j]);
  return out;
}

function addChange(out: Change[], before: unknown, after: unknown, path: readonly string[]): void {
  const b = valueAt(before, path);
  const a = valueAt(after, path);
  if (a !== b) out.push({ path, before: b, after: a });
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let o = root;
  for (const k of path) o = isObject(o) && Object.hasOwn(o, k) ? o[k] : undefined;
  return o;
}

/** The actions that take back `changes` (newest first), or redo them (oldest first). */
export function restoreActions(changes: readonly Change[], redo: boolean): UndoAction[] {
  const out: UndoAction[] = [];
  const n = changes.length;
  for (let i = 0; i < n; i++) {
    const c = changes[redo ? i : n - 1 - i];
    const from = redo ? c.before : c.after;
    const to = redo ? c.after : c.before;
    out.push({ path: c.path, ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) });
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
    if (!Array.isArray(path) || path.length === 0 || path.length > MAX_PATH || !path.every((k) => typeof k === 'string'))
      return `${UNDO_OP}: do[${i}].path must be 1-${MAX_PATH} object keys (strings)`;
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
    if ('op' in a) {
      runOp(a.op, a.args);
      continue;
    }
    let o: unknown = draft;
    const last = a.path.length - 1;
    for (let i = 0; i < last && isObject(o); i++) o = Object.hasOwn(o, a.path[i]) ? o[a.path[i]] : undefined;
    if (!isObject(o)) continue;
    const key = a.path[last];
    const here = Object.hasOwn(o, key);
    const wasFrom = 'from' in a ? here && sameJson(o[key], a.from) : !here;
    if (!wasFrom) continue;
    if ('to' in a) o[key] = a.to;
    else delete o[key];
  }
}

/** The reason a reserved name may not be a machine's op. */
export function reservedOpName(name: string): HerculesError | undefined {
  return name.startsWith('~') ? new HerculesError('bad-machine', `op "${name}": names starting with ~ are the engine's own (${UNDO_OP})`) : undefined;
}
