/** Test helpers: keyedMap states made by ops, as the engine makes them (frozen, sharing what did not change), and the check of a store keeping its base in parts. */
import assert from 'node:assert/strict';
import { applyOp, defineMachine, keyedMap, type StateOf } from '@hercules/core';
import type { ClientStorage } from '../src/index.ts';

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

/** What the base-in-parts check needs of a store kind. */
export interface PartsProbe {
  open(name: string): ClientStorage;
  /** Counting of write steps and part rows from 0 again, with no planted fault. */
  reset(): void;
  steps(): number;
  partPuts(): number;
  /** Plant a fault at write step `n` of the next writes (0: none). */
  failAt(n: number): void;
  /** How saveBase refuses when a planted fault hits it. */
  fault: RegExp | ((e: Error) => boolean);
}

const op = (seq: number) => ({ client: 'c1', seq, name: 'say', args: { text: `m${seq}` }, digest: 1000 + seq });

/**
 * A store keeping its base in parts (core's base-parts.ts): a save after a change of 3 keys of a
 * 3,000-key keyedMap writes only the trie nodes on their paths, the base reads back after a
 * restart, and a fault at each write step of a save leaves the base before it and every op it
 * did not hold, after which the next save is whole. SQLite's and IndexedDB's tests run it.
 */
export async function checkBaseInParts(p: PartsProbe): Promise<void> {
  const { initial, run } = keyedStates();
  let s1 = initial;
  for (let i = 0; i < 3000; i++) s1 = run(s1, `k${i}`, i);
  const s2 = run(run(run(s1, 'k5', -5), 'fresh', 7), 'k2999', -1);
  /** A store holding ops 1..3 and a base of s1 holding op 1. */
  const fresh = async (name: string) => {
    const s = p.open(name);
    await s.init('room', 'c1');
    await s.append('room', [op(1), op(2), op(3)]);
    await s.saveBase('room', { pos: 10, state: s1, ownSeq: 1 });
    return s;
  };
  const s = await fresh('parts');
  assert.deepEqual((await s.load('room'))!.base!.state, s1, 'a base read back from its parts');
  p.reset();
  await s.saveBase('room', { pos: 20, state: s2, ownSeq: 2 });
  const steps = p.steps();
  const puts = p.partPuts();
  assert.ok(puts >= 2 && puts <= 12, `only the trie nodes on the changed paths are written: ${puts} rows (the map has ${s1.cells.size} keys)`);
  const got = (await s.load('room'))!;
  assert.deepEqual(got.base, { pos: 20, state: s2, ownSeq: 2 });
  assert.deepEqual(
    got.durable.map((o) => o.seq),
    [3],
  );
  await s.close();
  const reopened = p.open('parts');
  assert.deepEqual((await reopened.load('room'))!.base!.state, s2, 'and after a restart');
  const s3 = run(s2, 'k1', 1);
  await reopened.saveBase('room', { pos: 30, state: s3, ownSeq: 2 }); // a new store writes its first base whole
  assert.deepEqual((await reopened.load('room'))!.base!.state, s3);
  await reopened.close();
  for (let n = 1; n <= steps; n++) {
    const f = await fresh(`fault-${n}`);
    p.reset();
    p.failAt(n);
    await assert.rejects(f.saveBase('room', { pos: 20, state: s2, ownSeq: 2 }), p.fault, `step ${n} of ${steps} fails the save`);
    p.failAt(0);
    const after = (await f.load('room'))!;
    assert.deepEqual(after.base, { pos: 10, state: s1, ownSeq: 1 }, `a fault at write step ${n} of ${steps} leaves the base before it`);
    assert.deepEqual(
      after.durable.map((o) => o.seq),
      [2, 3],
      `and every op it did not hold (step ${n})`,
    );
    await f.saveBase('room', { pos: 20, state: s2, ownSeq: 2 });
    assert.deepEqual((await f.load('room'))!.base!.state, s2, `the next save after the fault at step ${n} is whole`);
    await f.close();
  }
}
