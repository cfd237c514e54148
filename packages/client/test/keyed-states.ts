/** A test helper: keyedMap states made by ops, as the engine makes them (frozen, sharing what did not change). */
import assert from 'node:assert/strict';
import { applyOp, defineMachine, keyedMap, type StateOf } from '@hercules/core';

/** States of a machine with a keyedMap beside plain keys, and `set` run on them as the engine runs ops. */
export function keyedStates() {
  const m = defineMachine({
    name: 'kv',
    version: 1,
    initial: { cells: keyedMap.empty<number>(), title: 't' },
    ops: {
      set(s, a: { key: string; value: number }) {
        keyedMap.set(s.cells, a.key, a.value);
        s.title = `t${a.value}`;
      },
    },
  });
  let pos = 0;
  const run = (state: StateOf<typeof m>, key: string, value: number) => {
    const r = applyOp(m, state, { client: 'c', seq: ++pos, name: 'set', args: { key, value }, author: 'c' }, pos);
    assert.equal(r.error, undefined);
    return r.state;
  };
  return { initial: m.initial, run };
}
