/**
 * History on the server (issue 39, item 2; docs/history.md): `stateAt` of every retained position
 * equals the state a replay of the whole log reaches there (HIST-REPLAY), over random logs,
 * random checkpoint points, releases and retentions, on the memory and SQLite stores; retention
 * is honoured by the checkpoints (HIST-RETAIN).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { applyOp, defineMachine, HerculesError, type LogEntry, type Machine } from '@hercules/core';
import { MemoryStore, SqliteStore, type RoomStore } from '../src/index.ts';
import { logPage, replayFrom, stateAt } from '../src/history.ts';
import { tempDir } from './helpers.ts';

const hist = defineMachine({
  name: 'hist',
  version: 1,
  initial: { n: 0, notes: [] as string[] },
  ops: {
    note(s, a: { text: string }, ctx) {
      s.notes.push(`${ctx.author}/${ctx.client}@${ctx.position}: ${a.text}`);
    },
    bump(s, a: { by: number }) {
      if (s.n + a.by > 12) throw new Error('too high');
      s.n += a.by;
    },
  },
});
const machines = new Map<string, Machine<any, any>>([['hist', hist]]);
type S = typeof hist.initial;

/** One generated op: a note or a bump, by one of three users. */
const opArb = fc.oneof(
  fc.record({
    name: fc.constant('note'),
    args: fc.record({ text: fc.string({ maxLength: 4 }) }, { noNullPrototype: true }),
    user: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({
    name: fc.constant('bump'),
    args: fc.record({ by: fc.integer({ min: 1, max: 5 }) }, { noNullPrototype: true }),
    user: fc.integer({ min: 0, max: 2 }),
  }),
);

/** A write: some ops, then maybe a checkpoint at the new head, then maybe a release (which writes a deferred checkpoint). */
const writeArb = fc.record({ ops: fc.array(opArb, { minLength: 1, maxLength: 6 }), checkpoint: fc.boolean(), release: fc.boolean() });

/** The log as the room engine would write it (an op that threw is in it with its error), and the state after every position. */
function logOf(ops: { name: string; args: unknown; user: number }[]): { log: LogEntry[]; states: S[] } {
  const log: LogEntry[] = [];
  const states: S[] = [hist.initial];
  let s = hist.initial;
  ops.forEach((o, i) => {
    const e: LogEntry = { pos: i + 1, client: `c${o.user}`, seq: i + 1, name: o.name, args: o.args, author: `user${o.user}` };
    const r = applyOp(hist, s, e, e.pos);
    log.push(r.error === undefined ? e : { ...e, error: r.error });
    s = r.state;
    states.push(s);
  });
  return { log, states };
}

/** Write the generated log to `store` as a room host would, checkpoints with the true state. */
async function writeRoom(store: RoomStore, writes: { ops: unknown[]; checkpoint: boolean; release: boolean }[], log: LogEntry[], states: S[]): Promise<void> {
  let rev = (await store.open('r', { machine: 'hist', version: 1, initial: hist.initial })).rev;
  let head = 0;
  for (const w of writes) {
    const entries = log.slice(head, head + w.ops.length);
    head += w.ops.length;
    rev = (await store.append('r', { after: rev, entries, ...(w.checkpoint ? { checkpoint: { pos: head, state: states[head] } } : {}) })).rev;
    if (w.release) {
      await store.release('r');
      rev = (await store.open('r'))!.rev;
    }
  }
  await store.release('r');
}

const stores: [string, (ops: number) => { store: RoomStore; cleanup?: () => void }][] = [
  ['MemoryStore', (ops) => ({ store: new MemoryStore({ retention: { ops } }) })],
  [
    'SqliteStore',
    (ops) => {
      const dir = tempDir('history');
      return { store: new SqliteStore(dir.dir, { checkpointEvery: 1, retention: { ops } }), cleanup: dir.cleanup };
    },
  ],
];

for (const [name, make] of stores) {
  // spec: HIST-REPLAY, HIST-RETAIN
  test(`${name}: stateAt of every retained position equals a replay of the log from the start; older positions are not-retained`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(writeArb, { minLength: 1, maxLength: 12 }), fc.integer({ min: 0, max: 30 }), async (writes, ops) => {
        const { log, states } = logOf(writes.flatMap((w) => w.ops));
        const { store, cleanup } = make(ops);
        try {
          await writeRoom(store, writes, log, states);
          const head = log.length;
          const page = await logPage(store, 'r', { to: head });
          // Retention: at least the last `ops` ops are kept (checkpoints written at or before the head).
          assert.ok(page.start <= Math.max(0, head - ops), `history starts at ${page.start}, so the last ${ops} of ${head} are kept`);
          assert.equal(page.head, head);
          assert.deepEqual(
            page.entries.map(({ time, ...e }) => e),
            log.slice(page.start),
            'the retained log, each entry as written (author, client, op, args, error)',
          );
          for (let p = page.start; p <= head; p++) {
            assert.deepEqual(await stateAt(store, machines, 'r', p), states[p], `the state at ${p}`);
            // The same as a replay from the start of retention.
            assert.deepEqual(replayFrom(hist, { pos: page.start, state: states[page.start] }, log.slice(page.start, p)), states[p]);
          }
          if (page.start > 0) {
            await assert.rejects(stateAt(store, machines, 'r', page.start - 1), (e) => e instanceof HerculesError && e.code === 'not-retained');
            await assert.rejects(logPage(store, 'r', { from: page.start }), (e) => e instanceof HerculesError && e.code === 'not-retained');
          }
          await assert.rejects(stateAt(store, machines, 'r', head + 1), (e) => e instanceof HerculesError && e.code === 'bad-argument');
        } finally {
          await store.close();
          cleanup?.();
        }
      }),
      { numRuns: 60 },
    );
  });
}

// spec: HIST-RETAIN
test('MemoryStore: a checkpoint keeps history from the newest state at or before (checkpoint - ops): exactly, when every checkpoint is written', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(writeArb, { minLength: 1, maxLength: 12 }), fc.integer({ min: 0, max: 30 }), async (writes, ops) => {
      const { log, states } = logOf(writes.flatMap((w) => w.ops));
      const store = new MemoryStore({ retention: { ops } });
      await writeRoom(store, writes, log, states);
      // The memory store writes every checkpoint it is given: at these positions.
      const cps = [0];
      let head = 0;
      for (const w of writes) {
        head += w.ops.length;
        if (w.checkpoint && head > cps[cps.length - 1]) cps.push(head);
      }
      const last = cps[cps.length - 1];
      const cut = Math.max(0, last - ops);
      const expected = cut >= last ? last : Math.max(...cps.filter((c) => c <= cut));
      assert.equal((await logPage(store, 'r', { to: 0 })).start, expected);
    }),
    { numRuns: 100 },
  );
});

test('log pages: at most LOG_PAGE_MAX entries, next names the following page; bad ranges are refused', async () => {
  const store = new MemoryStore({ retention: { ops: 5000 } });
  const ops = Array.from({ length: 2500 }, (_, i) => ({ name: 'note', args: { text: String(i) }, user: i % 3 }));
  const { log, states } = logOf(ops);
  await writeRoom(store, [{ ops, checkpoint: true, release: false }], log, states);
  const first = await logPage(store, 'r');
  assert.equal(first.entries.length, 1000);
  assert.equal(first.next, 1001);
  const third = await logPage(store, 'r', { from: 2001 });
  assert.equal(third.entries.length, 500);
  assert.equal(third.next, undefined);
  assert.deepEqual(
    (await logPage(store, 'r', { from: 10, to: 12 })).entries.map((e) => e.pos),
    [10, 11, 12],
  );
  assert.deepEqual((await logPage(store, 'r', { from: 2501 })).entries, [], 'from the head + 1: nothing yet');
  for (const bad of [{ from: 0 }, { from: -1 }, { from: 1.5 }, { to: 'x' }, { from: 5, to: 2 }])
    await assert.rejects(logPage(store, 'r', bad as never), (e) => e instanceof HerculesError && e.code === 'bad-argument', JSON.stringify(bad));
  await assert.rejects(logPage(store, 'none'), (e) => e instanceof HerculesError && e.code === 'bad-room');
  await assert.rejects(stateAt(store, machines, 'r', -1), (e) => e instanceof HerculesError && e.code === 'bad-argument');
});
