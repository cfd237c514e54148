/**
 * Ops must be deterministic functions of (state, args, ctx): every replica and the server run
 * them and must reach the same state. An op that reads the clock or a random number does not,
 * and its replicas diverge with no error anywhere. While an op runs, Date.now(), new Date() and
 * Math.random() are watched: each still answers as usual, and the first call from each op of a
 * machine is reported once (console.warn), naming the op and what to do instead. The watch is
 * installed once per run of ops (about 0.2 µs) and each op only names itself (two assignments):
 * bench/src/determinism-guard.bench.ts, figures in docs/benchmarks.md.
 */

declare const console: { warn(...args: unknown[]): void };

const RealDate = Date;
const realNow = Date.now;
const realRandom = Math.random;
const warned = new Set<string>();
let runningMachine: string | undefined;
let runningName = '';
let depth = 0;

function report(what: string): void {
  if (runningMachine === undefined) return;
  const key = `${runningMachine}\u0000${runningName}\u0000${what}`;
  if (warned.has(key)) return;
  warned.add(key);
  console.warn(
    `hercules: op "${runningName}" of machine "${runningMachine}" called ${what}: ops must be deterministic (every replica runs them), so replicas diverge: read it before submitting and pass it in the op's args.`,
  );
}

/** `new Date()` and `Date()` without arguments read the clock; with arguments they do not. */
const WatchedDate: DateConstructor = new Proxy(RealDate, {
  construct(target, args, newTarget): object {
    if (args.length === 0) report('new Date()');
    return Reflect.construct(target, args, newTarget === WatchedDate ? target : newTarget);
  },
  apply(target, thisArg, args): string {
    report('Date()');
    return Reflect.apply(target, thisArg, args);
  },
});

function watchedNow(): number {
  report('Date.now()');
  return realNow.call(RealDate);
}

function watchedRandom(): number {
  report('Math.random()');
  return realRandom();
}

/** Names the op about to run inside `watchOps`: the one a report blames. */
export function runningOp(machine: string, op: string): void {
  runningMachine = machine;
  runningName = op;
}

/**
 * Runs `fn`, which runs ops (naming each with runningOp first), with the clock and Math.random
 * watched. Installing the watch costs about 0.2 µs, so it is done once per run of ops (a rebase
 * applies many in one draft), not per op. Reentrant.
 */
export function watchOps<T>(fn: () => T): T {
  const outerMachine = runningMachine;
  const outerName = runningName;
  if (depth++ === 0) {
    RealDate.now = watchedNow;
    Math.random = watchedRandom;
    (globalThis as { Date: DateConstructor }).Date = WatchedDate;
  }
  try {
    return fn();
  } finally {
    runningMachine = outerMachine;
    runningName = outerName;
    if (--depth === 0) {
      RealDate.now = realNow;
      Math.random = realRandom;
      (globalThis as { Date: DateConstructor }).Date = RealDate;
    }
  }
}
