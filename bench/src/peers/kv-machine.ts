/**
 * The state an app writes first: one map, a key per thing. The peers' "one map" workload (issue
 * 14): each writer sets its own keys of one shared map, as in a Y.Map, without splitting it.
 */
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
