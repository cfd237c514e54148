/**
 * Hostile values: what a peer or a file may put where the protocol expects JSON data. The
 * protocol fuzzer sends them as op arguments and inside frames (fuzz.ts); the import fuzzer
 * puts them into room files (import-fuzz.ts). Every kind of value outside the argument domain
 * (args.ts) is here: -0, NaN, ±Infinity, Dates, bytes, undefined, lone surrogates, `__proto__`
 * keys, nesting past 256 and past 500; and values inside it, so that both verdicts are reached.
 */
import type { Rng } from './rng.ts';

/** Arrays nested `n` deep around a digit (deeper than the argument domain allows past 256). */
export function nestedValue(rng: Rng, n: number): unknown {
  let v: unknown = rng.int(0, 9);
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

/** One hostile value; `depth` is how deep inside another it sits (containers get rarer below 2). */
export function hostileValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(0, depth > 2 ? 5 : 8)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -0, -1, 1, 2 ** 31, 2 ** 53, -(2 ** 53), 1.5, -1.5e-300, NaN, Infinity, -Infinity, rng.int(0, 100000)]);
    case 3:
      return rng.pick(['', 'hello', 'ops', 'ack', 'add', 'note', 'x'.repeat(rng.int(0, 300)), '\u0000', '__proto__', 'constructor', 'a\uD800', '\uDC00z']);
    case 4:
      return rng.pick([rng.int(-5, 5), new Date(rng.int(0, 1e12)), Uint8Array.from([rng.int(0, 255), 7])]);
    case 5:
      return rng.chance(0.8) ? undefined : nestedValue(rng, rng.pick([100, 300, 600]));
    case 6:
      return Array.from({ length: rng.int(0, 6) }, () => hostileValue(rng, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      // defineProperty: a "__proto__" key is sent as a key, not taken as this object's prototype.
      for (let i = rng.int(0, 5); i > 0; i--)
        Object.defineProperty(o, rng.pick(['t', 'v', 'ops', 'seq', 'name', 'args', 'k', 'pos', 'client', 'machine', 'have', '__proto__', 'text']), {
          value: hostileValue(rng, depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      return o;
    }
  }
}
