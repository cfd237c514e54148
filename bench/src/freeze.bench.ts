/**
 * How snapshots are frozen: Mutative's auto-freeze (what `applyOp` did before) beside the
 * engine's `applyOp` now (production: freeze what the op's patches name; development: walk the
 * new containers), on the same op and state, interleaved.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/freeze.bench.ts
 *   node -C @hercules/source --import tsx bench/src/freeze.bench.ts        (development walk)
 *
 * Median of 9 interleaved repetitions, µs per op; prints a table, writes nothing.
 */
import { create } from 'mutative';
import { applyOp, deepFreeze, defineMachine, type Machine } from '@hercules/core';
import { byteArray } from '../../apps/machines.ts';
import { itemId, keyedMachine, keyedState, listMachine, listState } from './fixtures.ts';
import { consume, fmt, interleaved, stats } from './harness.ts';

const AUTO_FREEZE = { enableAutoFreeze: true } as const;

interface Case {
  title: string;
  machine: Machine<any>;
  op: string;
  args: (i: number) => unknown;
  n: number;
}
const keyed = (items: number, n: number): Case => {
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  return {
    title: `one field of one item, ${items.toLocaleString('en')}-key map`,
    machine: keyedMachine(keyedState(items)),
    op: 'setQty',
    args: (i) => ({ id: ids[(i * 7919) % items], qty: i & 1023 }),
    n,
  };
};
const nested = defineMachine({
  name: 'bench-nested',
  version: 1,
  initial: { doc: { title: 't', blocks: Array.from({ length: 50 }, (_, i) => ({ id: i, text: 'x'.repeat(20), marks: [0, 1, 2] })) } },
  ops: {
    edit(s, a: { i: number; text: string }) {
      s.doc.blocks[a.i].text = a.text;
      s.doc.blocks[a.i].marks.push(a.i);
    },
  },
});
const CASES: Case[] = [
  keyed(1_000, 2_000),
  keyed(10_000, 100),
  {
    title: 'one field of one item, 1,000-item array',
    machine: listMachine(listState(1_000)),
    op: 'setQty',
    args: (i) => ({ index: (i * 7919) % 1_000, qty: i & 1023 }),
    n: 2_000,
  },
  { title: 'a text and a mark in a 50-block document', machine: nested, op: 'edit', args: (i) => ({ i: i % 50, text: `t${i}` }), n: 2_000 },
  {
    title: 'byte-array op (500 increments, copy once)',
    machine: byteArray as Machine<any>,
    op: 'increment',
    args: (i) => ({ offset: (i * 7919) % 100_000, count: 500 }),
    n: 200,
  },
];

console.log(`NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}, Node ${process.version}; median of 9 interleaved repetitions, µs per op`);
const rows: Record<string, Record<string, string>> = {};
for (const c of CASES) {
  const s0 = deepFreeze(c.machine.initial);
  const inv = (i: number) => ({ client: 'c', seq: i + 1, name: c.op, args: deepFreeze(c.args(i)), author: 'a' });
  const invs = Array.from({ length: c.n }, (_, i) => inv(i));
  const fn = c.machine.ops[c.op] as (s: unknown, a: unknown, ctx: unknown) => void;
  const res = interleaved(
    {
      'auto-freeze (before)': () => {
        for (const o of invs) consume(create(s0 as object, (d) => fn(d, o.args, { author: o.author, client: o.client, seq: o.seq, position: 1 }), AUTO_FREEZE));
      },
      'applyOp (now)': () => {
        for (const o of invs) consume(applyOp(c.machine, s0, o, 1).state);
      },
    },
    9,
    2,
  );
  const before = (stats(res['auto-freeze (before)']).median * 1000) / c.n;
  const now = (stats(res['applyOp (now)']).median * 1000) / c.n;
  rows[c.title] = { 'auto-freeze (before)': fmt(before), 'applyOp (now)': fmt(now), 'now ÷ before': fmt(now / before) };
}
console.table(rows);
