/**
 * State machines: the app's shared state as an initial value plus named, deterministic
 * read-write operations. One module defines the machine; client and server both import it.
 *
 * Ops mutate a draft (draft.ts) and return nothing. Each application produces a new frozen
 * snapshot that shares every untouched subtree with its predecessor, so keeping several views
 * and rebasing costs in proportion to what the ops touch, not to the size of the state.
 */
import { produce as produceDraft, type Patch } from './draft.ts';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { runningOp, watchOps } from './determinism-guard.ts';
import { HerculesError, errorMessage } from './errors.ts';
import { findNonJson } from './args.ts';
import { UNDO_OP, applyUndo, reservedOpName, undoArgsProblem, type UndoArgs } from './undo.ts';

/** What an op may know besides its state and arguments. Nothing here is non-deterministic. */
export interface OpContext {
  /** The authenticated author the server stamped on the op (on the submitter: its own author). */
  readonly author: string;
  /** The id of the client that submitted the op. */
  readonly client: string;
  /** The submitting client's sequence number for this op (1, 2, 3, ...). */
  readonly seq: number;
  /**
   * 1-based position of the op in the log of the view being computed. In the Authoritative and
   * older views this is the op's global position; in the speculative views it is the position
   * the op would take if no remote op arrived first.
   */
  readonly position: number;
}

/** JSON data: the only kind of value allowed in state and in op arguments. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// The state type is a parameter; ops receive it as a mutable draft.
export type OpFn<S> = (state: S, args: any, ctx: OpContext) => void;

/** What a translated op becomes: an op of the newer version, or a refusal with its reason. */
export type OpTranslation = { readonly name: string; readonly args: unknown } | { readonly refuse: string };

/**
 * How a version comes from the previous one (docs/migrations.md). Runs on the server and on every
 * client, so both functions must be deterministic, like ops.
 */
export interface MigrateFrom<S, PS = any> {
  /** The previous version's machine (same name, lower version); it may have its own migrateFrom. */
  machine: Machine<PS, any, any>;
  /** The state of the previous version as a state of this one. Pure; JSON data in and out. */
  state: (prev: PS) => S;
  /**
   * An op written against the previous version as an op of this one, or `{ refuse: reason }`.
   * Default: the op unchanged (refused as unknown if this version has no op of its name). A throw
   * refuses it with the error's message.
   */
  op?: (op: { readonly name: string; readonly args: any }) => OpTranslation;
}

export interface MachineSpec<S, Ops extends Record<string, OpFn<S>>, P = unknown, PS = any> {
  /** A stable name; client and server refuse to talk if it differs. */
  name: string;
  /**
   * Bump when the state or the ops change meaning, and say how to come from the previous version
   * in `migrateFrom`. A server serves the newest version it has; a client on another version is
   * refused (client-too-old, server-too-old).
   */
  version: number;
  /** How this version comes from the previous one (docs/migrations.md): absent for a first version. */
  migrateFrom?: MigrateFrom<NoInfer<S>, PS>;
  /** The state before any op. Must be JSON data. */
  initial: S;
  ops: Ops;
  /**
   * Optional argument schemas, per op, from any Standard Schema validator (Valibot, Zod,
   * ArkType, TypeBox...). The server refuses an op whose arguments fail its schema before
   * ordering it; the client throws at the stub call. Schemas must be synchronous and must only
   * check: the op receives the arguments as sent, never a transformed copy.
   */
  schemas?: NoInfer<{ [K in keyof Ops]?: StandardSchemaV1<any, OpArgs<Ops[K]>> }>;
  /**
   * Optional schema of each connection's presence value (room.presence), from any synchronous
   * Standard Schema validator: `room.presence.set` throws on a value that fails it, the server
   * refuses one (an error frame, not fatal), and the room's presence API is typed by it.
   */
  presence?: StandardSchemaV1<any, P>;
  /**
   * Optional inverses, per op, for room.undo() (docs/undo.md): where restoring the values an op
   * wrote would be wrong (a counter others also move), the op that takes it back, computed on
   * the client from the op's arguments and the state just before it ran. Redo runs the op again.
   */
  inverses?: NoInfer<{ [K in keyof Ops]?: (args: OpArgs<Ops[K]>, before: S) => OpCall }>;
}

/** An op by name with its arguments: what a declared inverse returns (checked when it runs). */
export interface OpCall {
  readonly name: string;
  readonly args?: unknown;
}

export interface Machine<S = any, Ops extends Record<string, OpFn<S>> = Record<string, OpFn<S>>, P = any> {
  readonly name: string;
  readonly version: number;
  /** How this version comes from the previous one (MachineSpec.migrateFrom), if it does. */
  readonly migrateFrom?: MigrateFrom<S>;
  /** Deep-frozen initial state. */
  readonly initial: S;
  readonly ops: Ops;
  readonly opNames: ReadonlySet<string>;
  /**
   * Check an op's arguments against its schema. Returns why they are invalid, or undefined if
   * they are valid or the op declares no schema. Never throws.
   */
  validate(name: string, args: unknown): string | undefined;
  /** The presence schema (MachineSpec.presence), if any. */
  readonly presence?: StandardSchemaV1<any, P>;
  /** Check a presence value against the presence schema: why it is invalid, or undefined. Never throws. */
  validatePresence(value: unknown): string | undefined;
  /** The declared inverses (MachineSpec.inverses), if any. */
  readonly inverses?: Readonly<Record<string, ((args: any, before: any) => { readonly name: string; readonly args?: unknown }) | undefined>>;
}

/** Whether `name` is an op `machine` runs: one of its own, or the built-in UNDO_OP. */
export function hasOp(machine: Machine<any, any, any>, name: string): boolean {
  return name === UNDO_OP || machine.opNames.has(name);
}

/** The argument type of an op, or `undefined` for an op without arguments. */
export type OpArgs<F> = F extends (state: any, ...rest: infer R) => void ? (R extends [] ? undefined : R extends [infer A, ...any[]] ? A : undefined) : never;

export type StateOf<M> = M extends Machine<infer S, any> ? S : never;
export type OpsOf<M> = M extends Machine<any, infer O> ? O : never;
/** The presence value type of a machine: its presence schema's output, else unknown. */
export type PresenceOf<M> = M extends Machine<any, any, infer P> ? P : unknown;

/**
 * Define a state machine. Throws a `HerculesError('bad-machine')` that names the offending part
 * if the definition cannot work (no name, non-JSON initial state, an op that is not a function).
 */
export function defineMachine<S, const Ops extends Record<string, OpFn<S>>, P = unknown, PS = any>(spec: MachineSpec<S, Ops, P, PS>): Machine<S, Ops, P> {
  if (spec === null || typeof spec !== 'object') {
    throw new HerculesError('bad-machine', 'defineMachine needs an object { name, version, initial, ops }');
  }
  if (typeof spec.name !== 'string' || spec.name.length === 0) {
    throw new HerculesError('bad-machine', 'defineMachine: `name` must be a non-empty string');
  }
  if (!Number.isInteger(spec.version) || spec.version < 0) {
    throw new HerculesError('bad-machine', `defineMachine(${spec.name}): \`version\` must be a non-negative integer`);
  }
  if (spec.ops === null || typeof spec.ops !== 'object') {
    throw new HerculesError('bad-machine', `defineMachine(${spec.name}): \`ops\` must be an object of functions`);
  }
  for (const [k, fn] of Object.entries(spec.ops)) {
    const reserved = reservedOpName(k);
    if (reserved) throw reserved;
    if (typeof fn !== 'function') {
      throw new HerculesError('bad-machine', `defineMachine(${spec.name}): op "${k}" is not a function`);
    }
  }
  const problem = findNonJson(spec.initial, 'initial');
  if (problem)
    throw new HerculesError(
      'bad-machine',
      `defineMachine(${spec.name}): ${problem}; state must be JSON data (objects, arrays, strings, finite numbers, booleans, null)`,
    );
  const schemas = new Map<string, StandardSchemaV1>();
  for (const [k, sch] of Object.entries((spec.schemas ?? {}) as Record<string, unknown>)) {
    if (sch === undefined) continue;
    if (!Object.hasOwn(spec.ops, k)) {
      throw new HerculesError('bad-machine', `defineMachine(${spec.name}): schemas.${k} names no op; ops are ${Object.keys(spec.ops).join(', ')}`);
    }
    const std = (sch as Partial<StandardSchemaV1> | null)?.['~standard'];
    if (!std || typeof std.validate !== 'function') {
      throw new HerculesError(
        'bad-machine',
        `defineMachine(${spec.name}): schemas.${k} is not a Standard Schema (no ~standard.validate); use Valibot, Zod, ArkType or another Standard Schema validator`,
      );
    }
    schemas.set(k, sch as StandardSchemaV1);
  }
  const presence = spec.presence;
  if (presence !== undefined && typeof (presence as Partial<StandardSchemaV1> | null)?.['~standard']?.validate !== 'function') {
    throw new HerculesError(
      'bad-machine',
      `defineMachine(${spec.name}): presence is not a Standard Schema (no ~standard.validate); use Valibot, Zod, ArkType or another Standard Schema validator`,
    );
  }
  const mf = spec.migrateFrom;
  if (mf !== undefined) {
    const prev = mf?.machine as Partial<Machine> | undefined;
    if (mf === null || typeof mf !== 'object' || !prev || !(prev.opNames instanceof Set))
      throw new HerculesError('bad-machine', `defineMachine(${spec.name}): migrateFrom.machine must be the previous version's machine (from defineMachine)`);
    if (prev.name !== spec.name || !(prev.version! < spec.version))
      throw new HerculesError(
        'bad-machine',
        `defineMachine(${spec.name}@${spec.version}): migrateFrom.machine is ${prev.name}@${prev.version}; it must be the same machine name at a lower version`,
      );
    if (typeof mf.state !== 'function')
      throw new HerculesError('bad-machine', `defineMachine(${spec.name}@${spec.version}): migrateFrom.state must be a function (previous state) => state`);
    if (mf.op !== undefined && typeof mf.op !== 'function')
      throw new HerculesError(
        'bad-machine',
        `defineMachine(${spec.name}@${spec.version}): migrateFrom.op must be a function ({ name, args }) => { name, args } | { refuse }`,
      );
  }
  for (const [k, inv] of Object.entries((spec.inverses ?? {}) as Record<string, unknown>)) {
    if (inv !== undefined && (!Object.hasOwn(spec.ops, k) || typeof inv !== 'function'))
      throw new HerculesError('bad-machine', `defineMachine(${spec.name}): inverses.${k} must be a function (args, stateBefore) => { name, args } of an op`);
  }
  const name = spec.name;
  const validate = (op: string, args: unknown): string | undefined => {
    if (op === UNDO_OP) return undoArgsProblem(args, (n, a) => (spec.ops && Object.hasOwn(spec.ops, n) ? validate(n, a) : `unknown op "${n.slice(0, 64)}"`));
    const sch = schemas.get(op);
    return sch ? checkSchema(sch, `arguments for ${op}`, `the schema for ${op}`, args) : undefined;
  };
  return {
    name,
    version: spec.version,
    ...(mf !== undefined ? { migrateFrom: mf as MigrateFrom<S> } : {}),
    initial: deepFreeze(structuredClone(spec.initial)),
    ops: spec.ops,
    opNames: new Set(Object.keys(spec.ops)),
    validate,
    ...(spec.inverses !== undefined ? { inverses: spec.inverses as Machine<S>['inverses'] } : {}),
    ...(presence !== undefined ? { presence } : {}),
    validatePresence: (value) => (presence ? checkSchema(presence, 'presence', 'the presence schema', value) : undefined),
  };
}

/** `what`: "arguments for move", "presence"; `schema`: how to name the schema in a message. */
function checkSchema(sch: StandardSchemaV1, what: string, schema: string, args: unknown): string | undefined {
  let r: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>;
  try {
    r = sch['~standard'].validate(args);
  } catch (e) {
    return `invalid ${what}: the schema threw (${errorMessage(e)})`;
  }
  if (r instanceof Promise) {
    r.catch(() => {}); // we will not wait for it; do not leave an unhandled rejection behind
    return `${schema} is asynchronous; schemas must validate synchronously`;
  }
  if (!r.issues) return undefined;
  const shown = r.issues.slice(0, 3).map((i) => {
    const path = (i.path ?? []).map((p) => String(typeof p === 'object' ? p.key : p)).join('.');
    return path && !i.message.startsWith(path) ? `${path}: ${i.message}` : i.message;
  });
  const more = r.issues.length > 3 ? ` (and ${r.issues.length - 3} more)` : '';
  return `invalid ${what}: ${shown.join('; ')}${more}`;
}

export function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

/** An op as the state machine sees it: who, which, and with what. */
export interface OpInvocation {
  readonly client: string;
  readonly seq: number;
  readonly name: string;
  readonly args: unknown;
  readonly author: string;
  /**
   * The machine version the op was written against, when older than the machine applying it (a
   * client's op saved offline before an upgrade): it is translated (MigrateFrom.op) first.
   */
  readonly v?: number;
}

// ---------------------------------------------------------------- versions (docs/migrations.md)

/** The reserved client id of a room's own log entries (a migration); no client may use it. */
export const SYSTEM_CLIENT = '~hercules';
/** The op name of a migration entry: `{ client: SYSTEM_CLIENT, seq: to, name: MIGRATE_OP, args: { from, to } }`. */
export const MIGRATE_OP = '~migrate';

/** Whether a log entry is a room's migration entry. */
export function isMigrationEntry(e: { readonly client: string; readonly name: string }): boolean {
  return e.client === SYSTEM_CLIENT && e.name === MIGRATE_OP;
}

/** The versions `machine` knows, itself and those its migrateFrom chain reaches, newest first. */
export function machineVersions(machine: Machine<any, any, any>): Machine<any, any, any>[] {
  const out: Machine<any, any, any>[] = [];
  for (let m: Machine<any, any, any> | undefined = machine; m; m = m.migrateFrom?.machine) out.push(m);
  return out;
}

/** The machine of version `version` in `machine`'s chain, if it reaches it. */
export function machineAt(machine: Machine<any, any, any>, version: number): Machine<any, any, any> | undefined {
  return machineVersions(machine).find((m) => m.version === version);
}

/**
 * A state of version `from` as a state of `machine` (its version), along the migrateFrom chain;
 * frozen. Throws `bad-machine` if the chain does not reach `from` or a step does not give JSON data.
 */
export function migrateState<S>(machine: Machine<S, any, any>, state: unknown, from: number): S {
  if (from === machine.version) return state as S;
  const chain = machineVersions(machine);
  const i = chain.findIndex((m) => m.version === from);
  if (i < 0)
    throw new HerculesError(
      'bad-machine',
      `${machine.name}@${machine.version} cannot migrate a state of version ${from}: its migrateFrom chain reaches ${chain.map((m) => m.version).join(', ')}`,
    );
  let s = state;
  for (let k = i - 1; k >= 0; k--) {
    const m = chain[k];
    s = m.migrateFrom!.state(s);
    const problem = findNonJson(s, 'state');
    if (problem) throw new HerculesError('bad-machine', `${m.name}@${m.version} migrateFrom.state: ${problem}; it must return JSON data`);
    s = deepFreeze(s);
  }
  return s as S;
}

/**
 * An op written against version `from` as an op of `machine`, along the chain, or a refusal
 * (the translation's reason, or why it could not be translated). Never throws.
 */
export function translateOp(machine: Machine<any, any, any>, from: number, name: string, args: unknown): OpTranslation {
  // An undo names paths and ops of the state it was written against; its restores are
  // conditional on the values found (a path a migration moved is left alone): it runs as it is.
  if (from === machine.version || name === UNDO_OP) return { name, args };
  const chain = machineVersions(machine);
  const i = chain.findIndex((m) => m.version === from);
  if (i < 0) return { refuse: `written against ${machine.name}@${from}, which ${machine.name}@${machine.version} cannot translate from` };
  let op: OpTranslation = { name, args };
  for (let k = i - 1; k >= 0; k--) {
    const f = chain[k].migrateFrom!.op;
    if (!f) continue;
    try {
      const r: unknown = f(op as { name: string; args: unknown });
      if (r !== null && typeof r === 'object' && typeof (r as { refuse?: unknown }).refuse === 'string') return { refuse: (r as { refuse: string }).refuse };
      if (r === null || typeof r !== 'object' || typeof (r as { name?: unknown }).name !== 'string')
        return { refuse: `${chain[k].name}@${chain[k].version} migrateFrom.op returned neither { name, args } nor { refuse }` };
      op = { name: (r as { name: string }).name, args: (r as { args?: unknown }).args };
    } catch (e) {
      return { refuse: `translating to ${chain[k].name}@${chain[k].version} failed: ${errorMessage(e)}` };
    }
  }
  return op;
}

/** Apply a migration entry (its args `{ from, to }`) to a state of version `from`. */
function applyMigration<S>(machine: Machine<S>, state: S, args: unknown): ApplyResult<S> {
  const a = args as { from?: unknown; to?: unknown } | null;
  if (a === null || typeof a !== 'object' || typeof a.from !== 'number' || typeof a.to !== 'number') return { state, error: 'malformed migration entry' };
  const target = machineAt(machine, a.to);
  if (!target) return { state, error: `${machine.name}@${machine.version} does not know version ${a.to}` };
  try {
    return { state: migrateState(target, state, a.from) as S };
  } catch (e) {
    return { state, error: errorMessage(e) };
  }
}

/** The name and args to run for `op` on `machine`: translated if written against an older version. */
function opToRun(machine: Machine<any, any, any>, op: OpInvocation): OpTranslation {
  return op.v === undefined || op.v === machine.version ? op : translateOp(machine, op.v, op.name, op.args);
}

export interface ApplyResult<S> {
  state: S;
  /** Set when the op threw (or is unknown): the op had no effect. */
  error?: string;
}

export type { Patch } from './draft.ts';
export { current } from './draft.ts';

// A bundler replaces `process.env.NODE_ENV` with a literal; without one, a browser has no
// `process` and gets the development walk.
declare const process: { env: { NODE_ENV?: string } };
const FREEZE_ALL = (() => {
  try {
    return process.env.NODE_ENV !== 'production';
  } catch {
    return true;
  }
})();

/**
 * Run `recipe` on a draft of `state` (draft.ts: the result shares what was not written, and its
 * copies and what the op assigned are frozen). Development builds also walk the result for any
 * object still unfrozen (a base built by hand, never frozen), so an app that mutates a snapshot
 * by mistake is caught there. `patchesOut` collects the paths the op wrote (undo bookkeeping).
 */
function produce<S>(state: S, recipe: (draft: S) => void, patchesOut?: Patch[]): S {
  const next = produceDraft(state, recipe, patchesOut, !FREEZE_ALL);
  if (FREEZE_ALL && next !== state) deepFreeze(next);
  return next;
}

/**
 * An op that can also run on a frozen snapshot without a draft (the text ops): `plain` returns
 * the next snapshot, frozen, and adds the paths it wrote to `patches` as a draft's patches would
 * name them; or undefined when it cannot (the op then runs in a draft as any other). It throws
 * what the op throws, having changed nothing.
 */
export interface PlainOp {
  plain?: (state: unknown, args: unknown, ctx: OpContext, patches?: Patch[]) => unknown;
}

/**
 * Apply one op. An op that throws has no effect: the previous snapshot is returned unchanged,
 * with the error message. The same decision is reached on every replica because ops are
 * deterministic functions of (state, args, ctx).
 */
export function applyOp<S>(machine: Machine<S>, state: S, op: OpInvocation, position: number, patchesOut?: Patch[]): ApplyResult<S> {
  if (isMigrationEntry(op)) return applyMigration(machine, state, op.args);
  const run = opToRun(machine, op);
  if ('refuse' in run) return { state, error: run.refuse };
  const fn = opFn(machine, run.name);
  if (!fn) return { state, error: `unknown op "${run.name}" for machine ${machine.name}@${machine.version}` };
  const ctx: OpContext = { author: op.author, client: op.client, seq: op.seq, position };
  try {
    runningOp(machine.name, run.name);
    const plain = (fn as PlainOp).plain;
    const done = plain === undefined ? undefined : watchOps(() => plain(state, run.args, ctx, patchesOut));
    if (done !== undefined) return { state: done as S };
    const next = watchOps(() =>
      produce(
        state,
        (draft) => {
          fn(draft, run.args, ctx);
        },
        patchesOut,
      ),
    );
    return { state: next };
  } catch (e) {
    return { state, error: errorMessage(e) };
  }
}

/**
 * Apply a run of ops starting at `firstPosition`, skipping those already known rejected.
 * Runs them in one draft, so a path touched by many ops is copied once. If an op throws, the
 * ops before it are redone in one draft, the thrower is skipped (it has no effect, and
 * `onThrow` hears of it), and the rest continue in one draft: a pending op that throws costs one
 * extra pass, not a per-op fallback on every rebase.
 */
export function applyOps<S>(
  machine: Machine<S>,
  state: S,
  ops: readonly (OpInvocation & { readonly error?: string })[],
  firstPosition: number,
  onThrow?: (index: number, error: string) => void,
  patchesOut?: Patch[],
): S {
  if (ops.length === 0) return state;
  if (ops.length > 1 && ops.some(isMigrationEntry)) {
    // A migration replaces the whole state, which no draft can: one op at a time (rare).
    let s = state;
    ops.forEach((op, i) => {
      if (op.error !== undefined) return;
      const res = applyOp(machine, s, op, firstPosition + i, patchesOut);
      if (res.error !== undefined) onThrow?.(i, res.error);
      s = res.state;
    });
    return s;
  }
  if (ops.length === 1) {
    const op = ops[0];
    if (op.error !== undefined) return state;
    const res = applyOp(machine, state, op, firstPosition, patchesOut);
    if (res.error !== undefined) onThrow?.(0, res.error);
    return res.state;
  }
  return watchOps(() => applyInDrafts(machine, state, ops, firstPosition, onThrow, patchesOut));
}

/** applyOps's general case: the ops in one draft, redone around each one that throws. */
function applyInDrafts<S>(
  machine: Machine<S>,
  state: S,
  ops: readonly (OpInvocation & { readonly error?: string })[],
  firstPosition: number,
  onThrow: ((index: number, error: string) => void) | undefined,
  patchesOut: Patch[] | undefined,
): S {
  let s = state;
  let from = 0;
  while (from < ops.length) {
    let failedAt = -1;
    let failure = '';
    const start = from;
    try {
      return produce(
        s,
        (draft) => {
          for (let i = start; i < ops.length; i++) {
            const error = runOne(machine, draft, ops[i], firstPosition + i);
            if (error !== undefined) {
              failedAt = i;
              failure = error;
              throw FALLBACK;
            }
          }
        },
        patchesOut,
      );
    } catch (e) {
      if (failedAt < 0) throw e; // not an op's doing (the draft itself): let it surface
      onThrow?.(failedAt, failure);
      if (failedAt > start) {
        const end = failedAt;
        // Deterministic ops: the prefix succeeds again exactly as before.
        s = produce(
          s,
          (draft) => {
            for (let i = start; i < end; i++) runOne(machine, draft, ops[i], firstPosition + i);
          },
          patchesOut,
        );
      }
      from = failedAt + 1;
    }
  }
  return s;
}

/** Run one op on a draft: its error if it threw or is unknown (the caller discards the draft). */
function runOne<S>(machine: Machine<S>, draft: S, op: OpInvocation & { readonly error?: string }, position: number): string | undefined {
  if (op.error !== undefined) return undefined;
  const run = opToRun(machine, op);
  if ('refuse' in run) return run.refuse;
  const fn = opFn(machine, run.name);
  if (!fn) return `unknown op "${run.name}" for machine ${machine.name}@${machine.version}`;
  try {
    runningOp(machine.name, run.name);
    fn(draft, run.args, { author: op.author, client: op.client, seq: op.seq, position });
    return undefined;
  } catch (e) {
    return errorMessage(e);
  }
}

const FALLBACK = Symbol('fallback');

/** The function that runs op `name` on a draft: the machine's, or the built-in undo. */
function opFn<S>(machine: Machine<S>, name: string): OpFn<S> | undefined {
  if (name === UNDO_OP) return (draft, args, ctx) => runUndo(machine, draft, args, ctx);
  const fn = machine.ops[name];
  return typeof fn === 'function' && Object.hasOwn(machine.ops, name) ? fn : undefined;
}

/** The built-in UNDO_OP (undo.ts): its arguments are checked again here, as every replica must. */
function runUndo<S>(machine: Machine<S>, draft: S, args: unknown, ctx: OpContext): void {
  const problem = machine.validate(UNDO_OP, args);
  if (problem !== undefined) throw new HerculesError('bad-argument', problem);
  applyUndo(draft, args as UndoArgs, (name, a) => {
    const fn = opFn(machine, name);
    if (!fn || name === UNDO_OP) throw new HerculesError('unknown-op', `unknown op "${name}" in ${UNDO_OP}: an undo names ops of its own machine`);
    fn(draft, a, ctx);
  });
}
