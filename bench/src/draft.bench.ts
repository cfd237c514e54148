/**
 * draft.ts (the engine's copy-on-write drafts since issue 41 item 5) against Mutative as the
 * engine used it before: `create` with patches, then the production freezing of what the
 * patches name (the old machine.ts `freezeChanged`, kept here for the comparison). Both give
 * frozen, structurally shared results with the paths an op wrote. Same op bodies (each library
 * its own copy, see `fresh`), same frozen bases; competitors alternated in every repetition
 * (A B, A B, ...), median µs per call; ratio Mutative ÷ draft.ts (above 1: draft.ts faster).
 *
 *   NODE_ENV=production node --expose-gc --import tsx bench/src/draft.bench.ts [rounds]
 *
 * Prints a table per round; writes nothing.
 */
import { create } from 'mutative';
import { deepFreeze } from '@hercules/core';
import { produce, type Patch } from '../../packages/core/src/draft.ts';
import {
  bucketOf,
  bucketedState,
  chunkedInitial,
  flatInitial,
  fresh,
  incChunked,
  incFlat,
  itemId,
  itemsForBytes,
  keyedState,
  offsets,
  setQty,
  type BucketedState,
} from './fixtures.ts';
import { fmt, interleaved, sink, stats } from './harness.ts';

/** The old machine.ts production freezing: each container on a patch's path, and its end deeply. */
function freezeChanged(root: unknown, patches: readonly Patch[]): void {
  const frozen = new Set<object>();
  for (const { path } of patches) {
    let o = root;
    for (let i = 0; i < path.length; i++) {
      if (o === null || typeof o !== 'object') break;
      if (!frozen.has(o)) {
        Object.freeze(o);
        frozen.add(o);
      }
      o = (o as Record<string | number, unknown>)[path[i]];
    }
    deepFreeze(o);
  }
}

function viaMutative<S>(base: S, recipe: (d: S) => void): S {
  const [next, patches] = create(base as object, recipe as (d: object) => void, { enablePatches: true }) as unknown as [S, Patch[]];
  if (next !== base) freezeChanged(next, patches);
  return next;
}
const viaDraft = <S>(base: S, recipe: (d: S) => void): S => produce(base, recipe, []);

interface Chat {
  messages: { id: string; text: string }[];
}
interface Board {
  cards: { id: number; title: string; done: boolean }[];
  done: { id: number; title: string; done: boolean }[];
}

interface Case {
  name: string;
  batch: number;
  run: (lib: typeof viaDraft, i: number) => unknown;
}

function cases(): Case[] {
  const items = itemsForBytes(1_000_000);
  const keyed = deepFreeze(keyedState(items));
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  const bucketed = deepFreeze(bucketedState(items));
  const nb = Object.keys(bucketed.buckets).length;
  const flat = deepFreeze(flatInitial());
  const chunked = deepFreeze(chunkedInitial());
  const offs = offsets(1_000, 0xabc);
  const chat = deepFreeze<Chat>({ messages: Array.from({ length: 1000 }, (_, i) => ({ id: `c:${i}`, text: `message ${i}` })) });
  const board = deepFreeze<Board>({ cards: Array.from({ length: 200 }, (_, i) => ({ id: i, title: `card ${i}`, done: false })), done: [] });
  const kArgs = (i: number) => ({ id: ids[(i * 7919) % items], qty: i & 1023 });
  const bSet = (s: BucketedState, a: { id: string; qty: number }) => {
    s.buckets[bucketOf(a.id, nb)][a.id].qty = a.qty;
  };
  // One copy of each op body per library, so neither runs on the other's type feedback.
  const bodies = () => ({
    setQty: fresh(setQty),
    bSet: fresh(bSet, { bucketOf, nb }),
    incFlat: fresh(incFlat),
    incChunked: fresh(incChunked),
    say: fresh((s: Chat, a: { i: number }) => void s.messages.push({ id: `c:${a.i}`, text: 'hello' })),
    move: fresh((s: Board, a: { at: number }) => {
      const [card] = s.cards.splice(a.at % s.cards.length, 1);
      card.done = true;
      s.done.push(card);
    }),
  });
  const M = bodies();
  const D = bodies();
  const B = (lib: typeof viaDraft) => (lib === viaDraft ? D : M);
  return [
    { name: `keyed 1 MB: one map of ${items} items, set one field`, batch: 20, run: (lib, i) => lib(keyed, (d) => B(lib).setQty(d, kArgs(i))) },
    { name: `keyed 1 MB: ${nb} buckets, set one field`, batch: 200, run: (lib, i) => lib(bucketed, (d) => B(lib).bSet(d, kArgs(i))) },
    { name: 'bytes flat number[100000]: one inc op (500 writes)', batch: 10, run: (lib, i) => lib(flat, (d) => B(lib).incFlat(d, { offset: offs[i % 1000] })) },
    { name: 'bytes chunked number[100][1000]: one inc op', batch: 50, run: (lib, i) => lib(chunked, (d) => B(lib).incChunked(d, { offset: offs[i % 1000] })) },
    {
      name: 'bytes chunked: 100 inc ops in one draft (a rebase)',
      batch: 1,
      run: (lib, i) =>
        lib(chunked, (d) => {
          for (let k = 0; k < 100; k++) B(lib).incChunked(d, { offset: offs[(i * 100 + k) % 1000] });
        }),
    },
    { name: 'chat of 1,000 messages: push one', batch: 200, run: (lib, i) => lib(chat, (d) => B(lib).say(d, { i })) },
    {
      name: 'board of 200 cards: splice one out, change it, push it on another list',
      batch: 200,
      run: (lib, i) => lib(board, (d) => B(lib).move(d, { at: i })),
    },
  ];
}

const rounds = Number(process.argv[2] ?? 3);
const all = cases();
for (const c of all) {
  const a = JSON.stringify(c.run(viaMutative, 3));
  if (a !== JSON.stringify(c.run(viaDraft, 3))) throw new Error(`${c.name}: Mutative and draft.ts differ`);
}
for (let r = 1; r <= rounds; r++) {
  console.log(`\nround ${r} of ${rounds}\n\n| case | Mutative µs | draft.ts µs | Mutative ÷ draft.ts |\n|---|--:|--:|--:|`);
  let geo = 0;
  for (const c of all) {
    let i = 0;
    const batch = (lib: typeof viaDraft) => () => {
      for (let k = 0; k < c.batch; k++) sink.o = c.run(lib, i++);
    };
    // Which goes first alternates by round.
    const order = r % 2 === 1 ? { mutative: batch(viaMutative), draft: batch(viaDraft) } : { draft: batch(viaDraft), mutative: batch(viaMutative) };
    const ms = interleaved(order, 11, 2, { gcBetween: true });
    const m = stats(ms.mutative.map((x) => (x * 1000) / c.batch)).median;
    const d = stats(ms.draft.map((x) => (x * 1000) / c.batch)).median;
    geo += Math.log(m / d);
    console.log(`| ${c.name} | ${fmt(m)} | ${fmt(d)} | ${fmt(m / d)} |`);
  }
  console.log(`| geometric mean | | | ${fmt(Math.exp(geo / all.length))} |`);
}
