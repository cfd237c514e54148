/**
 * Copy-on-write drafts of JSON states: what an op mutates. An op writes through a Proxy; the
 * first write to a container copies it (shallowly), and its parents up to the root; finishing
 * the draft freezes the copies and what the op assigned, and shares every untouched subtree with
 * the base. Written for the states a machine holds (plain objects and arrays of JSON data), in
 * place of Mutative (issue 41 item 5: Mutative was 24.5 KB of the 105 KB minified browser bundle,
 * 8.0 of its 35.3 KiB gzipped; this file is about 4 KB minified). Equivalence with Mutative on
 * random states and programs, and speed beside it, are checked in test/draft.test.ts and
 * bench/src/draft.bench.ts (docs/benchmarks.md "Browser bundle size").
 *
 * Where it differs from Mutative: a frozen object read through a draft (a snapshot's part that
 * an op moved, e.g. with `current`) is drafted wherever it is found, where Mutative throws when
 * it is written (an op that Mutative refused now runs). Array methods that move elements (splice,
 * shift, sort...) run on the copy without a proxy trap per element, as Mutative's own do.
 */

const STATE: unique symbol = Symbol('hercules.draft');
const hasOwn = Object.hasOwn;
const isFrozen = Object.isFrozen;

interface Scope {
  readonly revokes: (() => void)[];
  /** Freeze the copies and new values when finishing (else the caller walks the result). */
  readonly freeze: boolean;
}

interface DraftState {
  readonly base: any;
  readonly array: boolean;
  readonly parent: DraftState | undefined;
  readonly scope: Scope;
  proxy: any;
  copy: any;
  modified: boolean;
  /** Keys the op set or deleted (array indices as numbers). */
  assigned: Set<string | number> | undefined;
  /** Keys at which a child draft was put into the copy. */
  kids: (string | number)[] | undefined;
  /** An array method moved elements: every index is looked at when finishing. */
  moved: boolean;
  done: boolean;
  final: any;
}

/** Whether `value` is a draft (inside an op, a part of its state). */
export function isDraft(value: unknown): boolean {
  return value !== null && typeof value === 'object' && (value as { [STATE]?: DraftState })[STATE] !== undefined;
}

const stateOf = (v: unknown): DraftState | undefined => (v !== null && typeof v === 'object' ? (v as { [STATE]?: DraftState })[STATE] : undefined);

function isPlain(v: object): boolean {
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function shallowCopy(base: any): any {
  // Array.from: V8 copies a frozen array with slice 50x slower (bench/src/copy-op.bench.ts).
  if (Array.isArray(base)) return Array.from(base);
  const proto = Object.getPrototypeOf(base);
  if (proto !== Object.prototype) return Object.assign(Object.create(proto), base);
  const keys = Object.keys(base);
  if (keys.length <= 128) return { ...base };
  // A large object copied key by key into an object put in dictionary mode first (a key added
  // and deleted): a spread of 5,618 keys cost 1.5x as much (bench/src/draft.bench.ts).
  const copy: any = {};
  copy.a = 1;
  delete copy.a;
  for (const k of keys) {
    if (k === '__proto__') Object.defineProperty(copy, k, { value: base[k], writable: true, enumerable: true, configurable: true });
    else copy[k] = base[k];
  }
  return copy;
}

function ensureCopy(s: DraftState): any {
  if (s.copy === undefined) s.copy = shallowCopy(s.base);
  return s.copy;
}

/** `s` and its parents up to the root are changed. */
function touch(s: DraftState): void {
  ensureCopy(s);
  for (let p: DraftState | undefined = s; p && !p.modified; p = p.parent) {
    p.modified = true;
    ensureCopy(p);
  }
}

function assign(s: DraftState, key: string | number): void {
  (s.assigned ??= new Set()).add(s.array && typeof key === 'string' && key !== 'length' ? Number(key) : key);
}

function newDraft(base: object, parent: DraftState | undefined, scope: Scope): DraftState {
  const array = Array.isArray(base);
  const s: DraftState = {
    base,
    array,
    parent,
    scope,
    proxy: undefined,
    copy: undefined,
    modified: false,
    assigned: undefined,
    kids: undefined,
    moved: false,
    done: false,
    final: undefined,
  };
  const { proxy, revoke } = array ? Proxy.revocable([s] as never, arrayTraps) : Proxy.revocable(s as never, objectTraps);
  s.proxy = proxy;
  scope.revokes.push(revoke);
  return s;
}

const isIndexKey = (k: string): boolean => String(Number(k) >>> 0) === k && k !== '4294967295';

/** Array methods that write: run on the copy itself, one call instead of a trap per element. */
const WRITERS = new Set(['push', 'pop', 'shift', 'unshift', 'splice', 'sort', 'reverse', 'fill', 'copyWithin']);

function writer(s: DraftState, name: string): (...args: unknown[]) => unknown {
  return (...args) => {
    const copy = ensureCopy(s) as unknown[];
    const from = copy.length;
    // A call that changes nothing leaves the array unchanged, not a copy equal to it (as Mutative).
    const was = s.modified || name === 'push' || name === 'unshift' ? undefined : Array.from(copy);
    const out = (Array.prototype as unknown as Record<string, (...a: unknown[]) => unknown>)[name].apply(copy, args);
    if (was === undefined || was.length !== copy.length || was.some((v, i) => v !== copy[i])) {
      touch(s);
      if (name === 'push') for (let i = from; i < copy.length; i++) assign(s, i);
      else s.moved = true;
    }
    // What pop, shift and splice remove is handed out as a draft, as a read would be: an op may
    // change it and put it back elsewhere.
    if (name === 'pop' || name === 'shift') return draftOf(s, out);
    if (name === 'splice') return (out as unknown[]).map((v) => draftOf(s, v));
    return name === 'push' || name === 'unshift' ? out : out === copy ? s.proxy : out;
  };
}

function draftOf(s: DraftState, v: unknown): unknown {
  return v !== null && typeof v === 'object' && stateOf(v) === undefined && isFrozen(v) && isPlain(v) ? newDraft(v, s, s.scope).proxy : v;
}

function get(s: DraftState, key: string | symbol): unknown {
  if (key === STATE) return s;
  const src = s.copy ?? s.base;
  if (!hasOwn(src, key)) {
    if (s.array && typeof key === 'string' && WRITERS.has(key)) return writer(s, key);
    return src[key];
  }
  const v = src[key];
  if (v === null || typeof v !== 'object' || stateOf(v) !== undefined) return v;
  // A value the op assigned (not frozen) is its own to change in place; a snapshot's is drafted.
  if (!(isFrozen(v) || v === s.base[key]) || !isPlain(v)) return v;
  const child = newDraft(v, s, s.scope);
  ensureCopy(s)[key] = child.proxy;
  (s.kids ??= []).push(s.array ? Number(key) : (key as string));
  return child.proxy;
}

function set(s: DraftState, key: string | symbol, value: unknown): boolean {
  if (typeof key === 'symbol' || (s.array && key !== 'length' && !isIndexKey(key))) throw new TypeError('A draft array takes only indices and its length');
  const src = s.copy ?? s.base;
  const own = hasOwn(src, key);
  if (!own && key === '__proto__') throw new TypeError('A draft has no settable prototype');
  if (Object.is(src[key], value) && (own || value !== undefined)) return true;
  touch(s);
  s.copy[key] = value;
  assign(s, key);
  return true;
}

function deleteProperty(s: DraftState, key: string | symbol): boolean {
  if (s.array) return set(s, key, undefined);
  if (typeof key === 'symbol') throw new TypeError('A draft has no symbol keys');
  if (!hasOwn(s.copy ?? s.base, key)) return true;
  touch(s);
  delete s.copy[key];
  assign(s, key);
  return true;
}

function descriptor(s: DraftState, key: string | symbol): PropertyDescriptor | undefined {
  const src = s.copy ?? s.base;
  const d = Reflect.getOwnPropertyDescriptor(src, key);
  // An array target's own length is not configurable, and a proxy may not say otherwise.
  return d && { writable: true, configurable: !s.array || key !== 'length', enumerable: d.enumerable, value: d.value };
}

const refuse = (): never => {
  throw new TypeError('A draft takes no property definitions and no prototype');
};

function traps(of: (t: any) => DraftState): ProxyHandler<any> {
  return {
    get: (t, k) => get(of(t), k),
    set: (t, k, v) => set(of(t), k, v),
    deleteProperty: (t, k) => deleteProperty(of(t), k),
    has: (t, k) => k in (of(t).copy ?? of(t).base),
    ownKeys: (t) => Reflect.ownKeys(of(t).copy ?? of(t).base),
    getOwnPropertyDescriptor: (t, k) => descriptor(of(t), k),
    getPrototypeOf: (t) => Object.getPrototypeOf(of(t).base),
    defineProperty: refuse,
    setPrototypeOf: refuse,
  };
}
const objectTraps = traps((t) => t);
const arrayTraps = traps((t) => t[0]);

// ---------------------------------------------------------------- finishing

/** A path an op wrote: keys, and indices (numbers) inside arrays. */
export interface Patch {
  readonly path: readonly (string | number)[];
}
type Paths = Patch[] | undefined;

/** The draft's value once the op is done: its base if unchanged, else its copy, frozen. */
function finish(s: DraftState, path: (string | number)[], paths: Paths): unknown {
  if (s.done) {
    // Met again (an op put it in a second place): that place changed as a whole.
    if (paths && s.modified) paths.push({ path: [...path] });
    return s.final;
  }
  s.done = true;
  if (!s.modified) return (s.final = s.base);
  const copy = s.copy;
  s.final = copy;
  if (s.array && s.moved) {
    for (let i = 0; i < copy.length; i++) settle(copy, i, path, paths, s.scope.freeze);
    if (paths) {
      const base = s.base as unknown[];
      for (let i = 0; i < copy.length; i++) if (copy[i] !== base[i]) paths.push({ path: [...path, i] });
      if (copy.length < base.length) paths.push({ path: [...path, 'length'] });
    }
  } else {
    // Children first: a child's own paths name its place under its parent.
    if (s.kids) for (const k of s.kids) settle(copy, k, path, paths, s.scope.freeze);
    if (s.assigned)
      for (const k of s.assigned) {
        settle(copy, k, undefined, undefined, s.scope.freeze);
        if (paths) paths.push({ path: [...path, k] });
      }
  }
  if (s.scope.freeze) Object.freeze(copy);
  return copy;
}

/** Replace a draft at `copy[key]` by its final value; freeze a value the op assigned. */
function settle(copy: any, key: string | number, path: (string | number)[] | undefined, paths: Paths, freeze: boolean): void {
  const v = copy[key];
  if (v === null || typeof v !== 'object') return;
  const s = stateOf(v);
  if (s) {
    if (path) path.push(key);
    copy[key] = finish(s, path ?? [], path ? paths : undefined);
    if (path) path.pop();
  } else if (!isFrozen(v)) settleNew(v, freeze);
}

/**
 * A new value of the op's: drafts in it replaced by their final values, then frozen, deeply.
 * A loop over a stack, not a recursion: an op may build a value thousands of levels deep (the
 * admin API's test builds 3,000), which a recursion of two frames a level overflowed. Each
 * container is frozen before its children are visited, so a value that holds itself ends; with
 * `freeze` off, `seen` does that instead.
 */
function settleNew(root: any, freeze: boolean): void {
  const stack = [root];
  const seen = freeze ? undefined : new Set<object>([root]);
  while (stack.length > 0) {
    const v = stack.pop();
    for (const k of Object.keys(v)) {
      const c = v[k];
      if (c === null || typeof c !== 'object') continue;
      const s = stateOf(c);
      if (s) v[k] = finish(s, [], undefined);
      else if (!isFrozen(c) && !seen?.has(c)) {
        seen?.add(c);
        stack.push(c);
      }
    }
    if (freeze) Object.freeze(v);
  }
}

/**
 * Run `recipe` on a draft of `base`: the result shares what was not written and is frozen.
 * `paths`, when given, receives the paths the op wrote (each a container's key it set or
 * deleted, or the container itself where it was put in a second place); a path may name a
 * value that ended up equal to the base's. `freeze` false leaves freezing to the caller.
 */
export function produce<S>(base: S, recipe: (draft: S) => void, paths?: Patch[], freeze = true): S {
  if (base === null || typeof base !== 'object') {
    recipe(base);
    return base;
  }
  const scope: Scope = { revokes: [], freeze };
  const root = newDraft(base, undefined, scope);
  try {
    recipe(root.proxy);
    return finish(root, [], paths) as S;
  } finally {
    for (const revoke of scope.revokes) revoke();
  }
}

/**
 * The present value of a part of an op's draft, as plain data without proxies. Every read and
 * write through a draft costs a proxy trap; an op that touches hundreds of elements runs far
 * faster by reading the part once with `current`, computing a new value on a plain copy, and
 * assigning it back frozen, in one write:
 *
 *   const row = Array.from(current(state.rows[i])); row[j] += 1; state.rows[i] = Object.freeze(row);
 *
 * Do not mutate what it returns (it may be the frozen snapshot itself); copy it first, with
 * `Array.from` or a spread rather than `slice` (V8 copies frozen arrays slowly with `slice`:
 * 62 µs against 1.2 µs for 1,000 numbers). Freezing the new value yourself spares the engine a
 * deep-freeze walk over it. Figures: bench/src/copy-op.bench.ts. Outside an op it returns its
 * argument.
 */
export function current<T>(value: T): T {
  const s = stateOf(value);
  return s ? (currentOf(s) as T) : value;
}

function currentOf(s: DraftState): unknown {
  return s.modified ? plainCopy(s.copy) : s.base;
}

function plainCopy(c: any): any {
  const out = shallowCopy(c);
  for (const k of Object.keys(out)) {
    const v = out[k];
    if (v === null || typeof v !== 'object') continue;
    const s = stateOf(v);
    if (s) out[k] = currentOf(s);
    else if (!isFrozen(v)) out[k] = plainCopy(v);
  }
  return out;
}
