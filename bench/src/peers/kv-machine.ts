/**
 * The state an app writes first: one map, a key per thing. The peers' "one map" workload (issue
 * 14): each writer sets its own keys of one shared map, as in a Y.Map, without splitting it.
 */
import type * as core from '@hercules/core';
import { defineMachine, keyedMap } from '@hercules/core';

export const kvMap = defineMachine({
  name: 'kv-map',
  version: 1,
  initial: { cells: {} as Record<string, string> },
  ops: {
    set(s, a: { key: string; value: string }) {
      s.cells[a.key] = a.value;
    },
  },
});

/** The same map as a `keyedMap` (core's hash trie): a write copies one small leaf, not the map. */
export const kvKeyedMap = defineMachine({
  name: 'kv-keyed-map',
  version: 1,
  initial: { cells: keyedMap.empty<string>() },
  ops: {
    set(s, a: { key: string; value: string }) {
      keyedMap.set(s.cells, a.key, a.value);
    },
  },
});

/**
 * For the engine benchmarks: a map of `keys` keys (`k0`, `k1`, ...) set to 0, as a plain object
 * or a `keyedMap`, whose `set({ key, value })` writes one key. Built on the core module given, so
 * a benchmark can run another checkout's core beside this one's.
 */
export function prefilledKv(C: Pick<typeof core, 'defineMachine' | 'keyedMap'>, keys: number, layout: 'plain' | 'keyedMap'): core.Machine<any> {
  const cells: Record<string, number> = {};
  for (let i = 0; i < keys; i++) cells[`k${i}`] = 0;
  if (layout === 'keyedMap') {
    const km = C.keyedMap;
    return C.defineMachine({
      name: 'map',
      version: 1,
      initial: { cells: km.from(cells) },
      ops: {
        set(s, a: { key: string; value: number }) {
          km.set(s.cells, a.key, a.value);
        },
      },
    });
  }
  return C.defineMachine({
    name: 'map',
    version: 1,
    initial: { cells },
    ops: {
      set(s, a: { key: string; value: number }) {
        s.cells[a.key] = a.value;
      },
    },
  });
}
