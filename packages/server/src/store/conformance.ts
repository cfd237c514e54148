/**
 * The room store conformance suite: what every `RoomStore` must do, as named cases. A store's
 * author runs it from a test file with a factory that gives a store over empty storage:
 *
 *   import { test } from 'node:test';
 *   import { runRoomStoreTests } from '@hercules/server/store-conformance';
 *   runRoomStoreTests('MyStore', async () => ({ store: new MyStore(...), reopen: ..., teardown: ... }), test);
 *
 * `test` is any `(name, fn) => …` that runs an async function as a test: node:test's `test`,
 * vitest's or mocha's `it`. Or take the cases (`roomStoreCases`) and run them any other way:
 * each is a name and a `run()` that rejects on failure (node:assert errors).
 *
 * Cases that need something a store may not offer are skipped without it: `reopen` (the data
 * survives close), `breakNextAppend` (a failure injected part-way through a write).
 */
import assert from 'node:assert/strict';
import type { ClientRecord, LogEntry } from '@hercules/core';
import { compareRoomNames, type HistoryRetention, type LoadedRoom, type RoomAppend, type RoomInit, type RoomStore } from './room-store.ts';
import { MAX_CHECKPOINT_DIGESTS, stateDigest } from './state-digest.ts';

export interface StoreUnderTest {
  /** The store to test, over empty storage of its own. */
  store: RoomStore;
  /**
   * A new store over the same storage as the last one, which the case has closed: a restart.
   * Omit for a store that keeps nothing across close; the cases that restart are then skipped.
   */
  reopen?: () => Promise<RoomStore> | RoomStore;
  /**
   * Make `store`'s next append to `room` fail part-way through its write: after some of it has
   * been written, before it is complete (a trigger that raises, a killed connection, a fault
   * hook). Omit if the store cannot; the cases that need it are then skipped.
   */
  breakNextAppend?: (store: RoomStore, room: string) => Promise<void> | void;
  /** Remove what the case left behind (the suite closes the stores first). */
  teardown?: () => Promise<void> | void;
}

/**
 * What a case asks of the store it gets: its history retention and its clock (the store's `now`,
 * for entries' commit times). A factory passes them to the store it makes; the history cases need
 * it to (a store with `history` must honour the retention it is configured with).
 */
export interface StoreSetup {
  retention?: HistoryRetention;
  now?: () => number;
}

export type StoreFactory = (setup?: StoreSetup) => Promise<StoreUnderTest> | StoreUnderTest;

/** A case's outcome: nothing (it passed), or why it was skipped. It rejects on failure. */
// biome-ignore lint/suspicious/noConfusingVoidType: a case written as an async function with no return value passes; `undefined` would refuse it at compile time
export type CaseResult = void | { skipped: string };

export interface ConformanceCase {
  readonly name: string;
  run(): Promise<CaseResult>;
}

/** What a case's body gets: the store (the current one, after a restart) and the hooks. */
interface Ctx {
  store: RoomStore;
  /** Close the store and open a new one over the same storage; undefined if the store cannot. */
  restart?: () => Promise<RoomStore>;
  breakNextAppend?: (room: string) => Promise<void> | void;
}

type Body = (c: Ctx) => Promise<CaseResult>;

// ------------------------------------------------------------------ fixtures

const INIT: RoomInit = { machine: 'conformance', version: 3, initial: { n: 0, items: [] } };

/** A log entry at `pos`; `tag` varies its content (two writers write different entries at one position). */
function entry(pos: number, tag = '', extra: Partial<LogEntry> = {}): LogEntry {
  const client = `c${pos % 3}`;
  return { pos, client, seq: pos, name: 'add', args: { item: `item ${pos}${tag}` }, author: client, ...extra };
}

function entries(from: number, to: number, tag = ''): LogEntry[] {
  return Array.from({ length: to - from + 1 }, (_, i) => entry(from + i, tag));
}

/** The machine's state after `pos` entries of the fixture log: what a checkpoint at `pos` holds. */
function stateAt(pos: number): { n: number; items: string[] } {
  return { n: pos, items: Array.from({ length: pos }, (_, i) => `item ${i + 1}`) };
}

async function rejectsWith(p: Promise<unknown>, code: string | string[], what: string): Promise<Error & { code?: string }> {
  const codes = Array.isArray(code) ? code : [code];
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err !== undefined, `${what}: expected it to fail with ${codes.join(' or ')}, but it succeeded`);
  assert.ok(err instanceof Error, `${what}: expected an Error, got ${String(err)}`);
  const c = (err as { code?: unknown }).code;
  assert.ok(typeof c === 'string' && codes.includes(c), `${what}: expected code ${codes.join(' or ')}, got ${String(c)} (${err.message})`);
  assert.ok(err.message.length > 0, `${what}: the error must say what went wrong`);
  return err as Error & { code?: string };
}

/**
 * The same promises, each with a handler attached at once: a pipelined append may reject before
 * the case awaits it, and an unhandled rejection would fail the run.
 */
function settle<T>(ps: Promise<T>[]): Promise<T>[] {
  for (const p of ps) p.catch(() => {});
  return ps;
}

async function load(store: RoomStore, room: string): Promise<LoadedRoom> {
  const r = await store.open(room);
  assert.ok(r, `room ${room} should exist`);
  return r;
}

/** What a room holds, independent of where a store put its checkpoint: the log from 1 to the head as the fixture defines it. */
function assertRoomHolds(
  r: LoadedRoom,
  log: readonly LogEntry[],
  what: string,
  initial: unknown = INIT.initial,
  stateOf: (pos: number) => unknown = stateAt,
): void {
  const c = r.durable.checkpoint.pos;
  assert.ok(Number.isSafeInteger(c) && c >= 0 && c <= log.length, `${what}: checkpoint position ${c} must be within the log (0..${log.length})`);
  assert.deepEqual(r.durable.checkpoint.state, c === 0 ? initial : stateOf(c), `${what}: the checkpoint at ${c} must hold the state at ${c}`);
  assert.deepEqual(r.durable.suffix, log.slice(c), `${what}: checkpoint ${c} plus the suffix must be the whole log 1..${log.length}`);
}

// ------------------------------------------------------------------ the cases

const cases: [name: string, body: Body, setup?: StoreSetup][] = [];
const def = (name: string, body: Body, setup?: StoreSetup) => cases.push([name, body, setup]);

def('a room never created does not open without init, and is not listed', async ({ store }) => {
  assert.equal(await store.open('never'), undefined);
  assert.deepEqual(await store.rooms(), []);
});

def('open with init creates the room: its metadata, rev 0, the initial state as checkpoint 0, no log, no clients', async ({ store }) => {
  const r = await store.open('r', INIT);
  assert.equal(r.fresh, true);
  assert.equal(r.meta.machine, 'conformance');
  assert.equal(r.meta.version, 3);
  assert.ok(Number.isSafeInteger(r.meta.created) && r.meta.created >= 0, `created must be a time in ms, got ${r.meta.created}`);
  assert.equal(r.rev, 0);
  assert.deepEqual(r.durable, { checkpoint: { pos: 0, state: INIT.initial }, suffix: [], clients: {}, stable: 0 });
  const again = await store.open('r', INIT);
  assert.equal(again.fresh, false, 'the second open finds the room');
  assert.deepEqual({ ...again, fresh: true }, r);
  assert.deepEqual(await store.rooms(), ['r']);
});

def('a room that exists opens as it is, whatever init says', async ({ store }) => {
  const r = await store.open('r', INIT);
  const other = await store.open('r', { machine: 'other', version: 9, initial: { other: true } });
  assert.equal(other.fresh, false);
  assert.deepEqual(other.meta, r.meta);
  assert.deepEqual(other.durable.checkpoint.state, INIT.initial);
});

def('of opens with init racing for one room, exactly one creates it', async ({ store }) => {
  const opened = await Promise.all(Array.from({ length: 5 }, (_, i) => store.open('r', { machine: `m${i}`, version: i + 1, initial: { by: i } })));
  const creators = opened.filter((r) => r.fresh);
  assert.equal(creators.length, 1, 'exactly one open creates the room');
  for (const r of opened) assert.deepEqual(r.meta, creators[0].meta, 'every open sees the one room created');
});

def('appended entries, client records and a checkpoint load back as written', async ({ store }) => {
  await store.open('r', INIT);
  const log = [...entries(1, 3), entry(4, '', { error: 'the item is empty' }), ...entries(5, 6)];
  const clients: Record<string, ClientRecord> = {
    c0: { highWater: 6, visibleSeq: 3, owner: 'user-0', digest: 123456789 },
    c1: { highWater: 4, visibleSeq: 1, rejected: [{ seq: 4, pos: 4, error: 'the item is empty' }] },
  };
  assert.deepEqual(await store.append('r', { after: 0, entries: log.slice(0, 4), clients: { c1: clients.c1 } }), { rev: 1, head: 4 });
  assert.deepEqual(await store.append('r', { after: 1, entries: log.slice(4), clients: { c0: clients.c0 }, checkpoint: { pos: 2, state: stateAt(2) } }), {
    rev: 2,
    head: 6,
  });
  const r = await load(store, 'r');
  assert.equal(r.rev, 2);
  assert.equal(r.fresh, false);
  assert.deepEqual(r.durable.clients, clients);
  assert.equal(r.durable.stable, 2);
  assertRoomHolds(r, log, 'after two appends');
});

def('what was appended survives close and a new store over the same storage', async (c) => {
  if (!c.restart) return { skipped: 'the store does not persist across close (no reopen)' };
  const created = await c.store.open('r', INIT);
  await c.store.open('s', { machine: 'other', version: 1, initial: 'plain string state' });
  const log = entries(1, 9);
  await c.store.append('r', {
    after: 0,
    entries: log.slice(0, 5),
    clients: { c1: { highWater: 5, visibleSeq: 2 } },
    checkpoint: { pos: 3, state: stateAt(3) },
  });
  await c.store.append('r', { after: 1, entries: log.slice(5), clients: { c2: { highWater: 1, visibleSeq: 1, owner: 'u' } } });
  await c.store.append('s', { after: 0, clients: { lone: { highWater: 0, visibleSeq: 0 } } });
  const store = await c.restart();
  const r = await load(store, 'r');
  assert.deepEqual(r.meta, created.meta);
  assert.equal(r.rev, 2);
  assert.equal(r.durable.stable, 3);
  assert.deepEqual(r.durable.clients, { c1: { highWater: 5, visibleSeq: 2 }, c2: { highWater: 1, visibleSeq: 1, owner: 'u' } });
  assertRoomHolds(r, log, 'after a restart');
  const s = await load(store, 's');
  assert.deepEqual(
    [s.meta.machine, s.meta.version, s.rev, s.durable.checkpoint.state, s.durable.clients],
    ['other', 1, 1, 'plain string state', { lone: { highWater: 0, visibleSeq: 0 } }],
  );
  assert.deepEqual((await store.rooms()).sort(), ['r', 's']);
  // And it goes on from the rev it loaded.
  assert.deepEqual(await store.append('r', { after: 2, entries: [entry(10)] }), { rev: 3, head: 10 });
});

def('append answers the new rev (after + 1) and head, and open agrees', async ({ store }) => {
  await store.open('r', INIT);
  let head = 0;
  for (let rev = 0; rev < 6; rev++) {
    const n = rev % 3; // 0, 1 or 2 entries: the rev counts appends, the head counts entries
    const a = await store.append('r', { after: rev, entries: entries(head + 1, head + n) });
    head += n;
    assert.deepEqual(a, { rev: rev + 1, head });
    const r = await load(store, 'r');
    assert.equal(r.rev, rev + 1);
    assert.equal(r.durable.checkpoint.pos + r.durable.suffix.length, head);
  }
});

def('an append with nothing in it still moves the rev', async ({ store }) => {
  await store.open('r', INIT);
  assert.deepEqual(await store.append('r', { after: 0 }), { rev: 1, head: 0 });
  assert.equal((await load(store, 'r')).rev, 1);
});

def('an append naming a rev the room is not at is fenced, and writes nothing', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 2), clients: { c1: { highWater: 1, visibleSeq: 0 } } });
  await store.append('r', { after: 1, entries: entries(3, 3) });
  const before = await load(store, 'r');
  for (const after of [0, 1, 3, 100]) {
    const e = await rejectsWith(
      store.append('r', { after, entries: [entry(4)], clients: { c1: { highWater: 99, visibleSeq: 99 } }, checkpoint: { pos: 3, state: stateAt(3) } }),
      'fenced',
      `append after rev ${after} to a room at rev 2`,
    );
    assert.match(e.message, /rev/, 'the message names the revs');
  }
  assert.deepEqual(await load(store, 'r'), before, 'nothing of a fenced append is written');
  await rejectsWith(store.append('missing', { after: 0, entries: [entry(1)] }), 'fenced', 'append to a room never created');
  assert.equal(await store.open('missing'), undefined, 'a fenced append creates no room');
});

def('two writers at one rev: exactly one append succeeds, and the room holds exactly its writes', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 2) });
  // Eight writers loaded the room at rev 1 and each appends its own entries at 3..5.
  const writes: RoomAppend[] = Array.from({ length: 8 }, (_, w) => ({
    after: 1,
    entries: entries(3, 5, ` by writer ${w}`),
    clients: { c0: { highWater: w, visibleSeq: w }, [`w${w}`]: { highWater: 1, visibleSeq: 0 } },
  }));
  const settled = await Promise.allSettled(writes.map((w) => store.append('r', w)));
  const won = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [i] : []));
  assert.equal(won.length, 1, `exactly one writer wins, not ${won.length}`);
  for (const s of settled)
    if (s.status === 'rejected') assert.equal((s.reason as { code?: string }).code, 'fenced', `a losing writer is fenced: ${String(s.reason)}`);
  const r = await load(store, 'r');
  assert.equal(r.rev, 2);
  assertRoomHolds(r, [...entries(1, 2), ...entries(3, 5, ` by writer ${won[0]}`)], 'after the race');
  assert.deepEqual(r.durable.clients, writes[won[0]].clients, "only the winner's client records are written");
});

def('two writers at one rev appending no entries (client claims): exactly one succeeds', async ({ store }) => {
  await store.open('r', INIT);
  // Claims of one client id by two users, each persisted before its welcome: the log position
  // does not move, so only the rev can tell the second from the first.
  const settled = await Promise.allSettled(
    ['alice', 'bob'].map((user) => store.append('r', { after: 0, clients: { c1: { highWater: 0, visibleSeq: 0, owner: user } } })),
  );
  const won = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [i] : []));
  assert.equal(won.length, 1, `exactly one claim wins, not ${won.length}`);
  const loser = settled.find((s) => s.status === 'rejected') as PromiseRejectedResult;
  assert.equal((loser.reason as { code?: string }).code, 'fenced');
  assert.equal((await load(store, 'r')).durable.clients.c1.owner, ['alice', 'bob'][won[0]]);
});

def('a writer that lost stays fenced until it reloads, then writes from the rev it loaded', async ({ store }) => {
  await store.open('r', INIT);
  const a = await load(store, 'r'),
    b = await load(store, 'r');
  await store.append('r', { after: a.rev, entries: entries(1, 1, ' by a') });
  await rejectsWith(store.append('r', { after: b.rev, entries: entries(1, 1, ' by b') }), 'fenced', 'the second writer');
  await rejectsWith(store.append('r', { after: b.rev, entries: entries(1, 1, ' by b') }), 'fenced', 'the second writer, again');
  const b2 = await load(store, 'r');
  assert.deepEqual(await store.append('r', { after: b2.rev, entries: entries(2, 2, ' by b') }), { rev: 2, head: 2 });
  assertRoomHolds(await load(store, 'r'), [entry(1, ' by a'), entry(2, ' by b')], 'after the reload');
});

def('appends of one room issued without waiting all land, in call order', async ({ store }) => {
  await store.open('r', INIT);
  const n = 20;
  const pending = settle(
    Array.from({ length: n }, (_, i) =>
      store.append('r', { after: i, entries: entries(2 * i + 1, 2 * i + 2), clients: { c0: { highWater: i, visibleSeq: 0 } } }),
    ),
  );
  const done = await Promise.all(pending);
  assert.deepEqual(
    done,
    Array.from({ length: n }, (_, i) => ({ rev: i + 1, head: 2 * i + 2 })),
  );
  const r = await load(store, 'r');
  assertRoomHolds(r, entries(1, 2 * n), 'after the pipeline');
  assert.deepEqual(r.durable.clients, { c0: { highWater: n - 1, visibleSeq: 0 } }, 'the last record written wins');
});

def('when an append of a pipeline fails, every later one fails too and writes nothing', async ({ store }) => {
  await store.open('r', INIT);
  const [first, second, third] = settle([
    store.append('r', { after: 0, entries: entries(1, 2) }),
    // A value JSON cannot hold (a BigInt): it fails, so the room never reaches rev 2.
    store.append('r', { after: 1, entries: [entry(3, '', { args: { n: 1n } })] }),
    // Its rev is never reached: fenced (before its entries, which do not follow the head either, are looked at).
    store.append('r', { after: 2, entries: entries(4, 4), clients: { c1: { highWater: 4, visibleSeq: 0 } } }),
  ]);
  assert.deepEqual(await first, { rev: 1, head: 2 });
  await rejectsWith(second, ['storage-failed', 'bad-argument'], 'the append with a BigInt');
  await rejectsWith(third, 'fenced', 'the append after the failed one');
  const r = await load(store, 'r');
  assert.equal(r.rev, 1);
  assertRoomHolds(r, entries(1, 2), 'after the broken pipeline');
  assert.deepEqual(r.durable.clients, {});
});

def('a retried append whose first attempt landed is fenced, and its entries are stored once', async ({ store }) => {
  await store.open('r', INIT);
  const w: RoomAppend = { after: 0, entries: entries(1, 3), clients: { c1: { highWater: 3, visibleSeq: 0 } } };
  await store.append('r', w);
  await rejectsWith(store.append('r', w), 'fenced', 'the retry');
  const r = await load(store, 'r');
  assert.equal(r.rev, 1);
  assertRoomHolds(r, entries(1, 3), 'after the retry');
});

def(
  'entries must follow the head at consecutive positions, a checkpoint must not pass the head: otherwise bad-argument, and nothing is written',
  async ({ store }) => {
    await store.open('r', INIT);
    await store.append('r', { after: 0, entries: entries(1, 3) });
    const before = await load(store, 'r');
    const bad: [string, RoomAppend][] = [
      ['a gap inside', { after: 1, entries: [entry(4), entry(6)] }],
      ['disorder', { after: 1, entries: [entry(5), entry(4)] }],
      ['a gap after the head', { after: 1, entries: entries(5, 6) }],
      ['an overlap with the log', { after: 1, entries: entries(3, 4) }],
      ['a checkpoint past the head', { after: 1, entries: [entry(4)], checkpoint: { pos: 5, state: stateAt(5) } }],
      ['a negative rev', { after: -1, entries: [entry(4)] }],
      ['a fractional rev', { after: 0.5, entries: [entry(4)] }],
      ['position 0', { after: 1, entries: [entry(0)] }],
    ];
    for (const [what, w] of bad) await rejectsWith(store.append('r', w), 'bad-argument', what);
    await rejectsWith(store.append('', { after: 0 }), 'bad-argument', 'an empty room name');
    assert.deepEqual(await load(store, 'r'), before, 'nothing of a refused append is written');
    assert.deepEqual(await store.append('r', { after: 1, entries: [entry(4)] }), { rev: 2, head: 4 }, 'the room goes on');
  },
);

def('a value the store cannot hold fails its append alone, and nothing of it is written', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 1) });
  const before = await load(store, 'r');
  let deep: unknown = 'bottom';
  for (let i = 0; i < 20_000; i++) deep = [deep];
  const unstorable: [string, RoomAppend][] = [
    ['a BigInt in an entry', { after: 1, entries: [entry(2, '', { args: { n: 2n } })], clients: { c1: { highWater: 2, visibleSeq: 0 } } }],
    ['nesting deeper than the stack', { after: 1, entries: [entry(2, '', { args: deep })] }],
    ['a BigInt in a client record', { after: 1, entries: [entry(2)], clients: { c1: { highWater: 2n as unknown as number, visibleSeq: 0 } } }],
  ];
  for (const [what, w] of unstorable) await rejectsWith(store.append('r', w), ['storage-failed', 'bad-argument'], what);
  assert.deepEqual(await load(store, 'r'), before);
  assert.deepEqual(await store.append('r', { after: 1, entries: entries(2, 2) }), { rev: 2, head: 2 }, 'the same rev is still free');
});

def('a failed append leaves nothing half-written: not its entries, records or checkpoint', async (c) => {
  if (!c.breakNextAppend) return { skipped: 'the store offers no way to fail a write part-way (no breakNextAppend)' };
  await c.store.open('r', INIT);
  await c.store.append('r', { after: 0, entries: entries(1, 4), clients: { c1: { highWater: 1, visibleSeq: 0 } } });
  const before = await load(c.store, 'r');
  const w: RoomAppend = {
    after: 1,
    entries: entries(5, 8),
    clients: { c1: { highWater: 8, visibleSeq: 4 }, c2: { highWater: 1, visibleSeq: 1 } },
    checkpoint: { pos: 6, state: stateAt(6) },
  };
  await c.breakNextAppend('r');
  await rejectsWith(c.store.append('r', w), ['storage-failed', 'internal'], 'the broken append');
  assert.deepEqual(await load(c.store, 'r'), before, 'nothing of the broken append is visible');
  let store = c.store;
  if (c.restart) {
    store = await c.restart();
    const after = await load(store, 'r');
    assert.equal(after.rev, 1);
    assert.deepEqual(after.durable.clients, before.durable.clients);
    assertRoomHolds(after, entries(1, 4), 'after a restart');
  }
  // Nothing of it was written, so the same append can be made again.
  assert.deepEqual(await store.append('r', w), { rev: 2, head: 8 });
  const r = await load(store, 'r');
  assert.deepEqual(r.durable.clients, w.clients);
  assertRoomHolds(r, entries(1, 8), 'after the append was made again');
});

def('appends of different rooms are independent: each has its own rev and head', async ({ store }) => {
  await store.open('a', INIT);
  await store.open('b', INIT);
  const [a, b] = await Promise.all([store.append('a', { after: 0, entries: entries(1, 3) }), store.append('b', { after: 0, entries: entries(1, 1) })]);
  assert.deepEqual(
    [a, b],
    [
      { rev: 1, head: 3 },
      { rev: 1, head: 1 },
    ],
  );
  await rejectsWith(store.append('a', { after: 0, entries: entries(4, 4) }), 'fenced', 'a stale append to a');
  assert.deepEqual(await store.append('b', { after: 1, entries: entries(2, 2) }), { rev: 2, head: 2 }, 'b is not fenced by a');
  assertRoomHolds(await load(store, 'a'), entries(1, 3), 'room a');
  assertRoomHolds(await load(store, 'b'), entries(1, 2), 'room b');
});

def('a failed append of one room does not fail the appends of other rooms made in the same turn', async (c) => {
  const { store } = c;
  for (const r of ['fenced', 'unstorable', 'broken', 'good1', 'good2']) await store.open(r, INIT);
  if (c.breakNextAppend) await c.breakNextAppend('broken');
  const results = await Promise.allSettled([
    store.append('good1', { after: 0, entries: entries(1, 2) }),
    store.append('fenced', { after: 5, entries: entries(1, 2) }),
    store.append('unstorable', { after: 0, entries: [entry(1, '', { args: 1n })] }),
    store.append('broken', { after: 0, entries: entries(1, 2) }),
    store.append('good2', { after: 0, entries: entries(1, 3), clients: { c1: { highWater: 1, visibleSeq: 0 } } }),
  ]);
  assert.equal(results[0].status, 'fulfilled', `good1: ${String((results[0] as PromiseRejectedResult).reason)}`);
  assert.equal(results[4].status, 'fulfilled', `good2: ${String((results[4] as PromiseRejectedResult).reason)}`);
  assert.equal(results[1].status, 'rejected');
  assert.equal(results[2].status, 'rejected');
  if (c.breakNextAppend) assert.equal(results[3].status, 'rejected');
  assertRoomHolds(await load(store, 'good1'), entries(1, 2), 'good1');
  assertRoomHolds(await load(store, 'good2'), entries(1, 3), 'good2');
  for (const r of ['fenced', 'unstorable', ...(c.breakNextAppend ? ['broken'] : [])]) {
    const failed = await load(store, r);
    assert.equal(failed.rev, 0, `${r} is unchanged`);
    assertRoomHolds(failed, [], `${r} holds nothing`);
  }
});

def('checkpoint plus suffix is the whole log, whatever checkpoints were taken, before and after release and restart', async (c) => {
  let { store } = c;
  await store.open('r', INIT);
  const log: LogEntry[] = [];
  let rev = 0,
    stable = 0;
  // Appends of 1..7 entries; checkpoints at the head, inside the last append, inside an older one, or none.
  const plan: [n: number, cp: ((head: number, prevHead: number) => number) | undefined][] = [
    [3, undefined],
    [5, (h) => h],
    [1, undefined],
    [7, (_h, p) => p + 2],
    [2, (_h, p) => p - 3],
    [4, undefined],
    [6, (h) => h - 1],
    [1, (h) => h],
    [3, undefined],
  ];
  for (const [n, cp] of plan) {
    const prev = log.length;
    const add = entries(prev + 1, prev + n);
    log.push(...add);
    const pos = cp?.(log.length, prev);
    if (pos !== undefined) stable = Math.max(stable, pos);
    await store.append('r', { after: rev++, entries: add, ...(pos !== undefined ? { checkpoint: { pos, state: stateAt(pos) } } : {}) });
    const r = await load(store, 'r');
    assertRoomHolds(r, log, `after ${rev} appends`);
    assert.equal(r.durable.stable, stable, 'stable is the highest checkpoint position appended');
  }
  await store.release('r');
  assertRoomHolds(await load(store, 'r'), log, 'after release');
  if (c.restart) {
    store = await c.restart();
    const r = await load(store, 'r');
    assertRoomHolds(r, log, 'after a restart');
    assert.equal(r.durable.stable, stable);
  }
});

def('a checkpoint never goes back, nor the stable position', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 12), checkpoint: { pos: 10, state: stateAt(10) } });
  await store.append('r', { after: 1, entries: entries(13, 14), checkpoint: { pos: 4, state: stateAt(4) } });
  await store.release('r');
  const r = await load(store, 'r');
  assert.equal(r.durable.stable, 10);
  assertRoomHolds(r, entries(1, 14), 'after an older checkpoint');
});

def('each write of a client record replaces it whole; the records of other clients stay', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', {
    after: 0,
    clients: { c1: { highWater: 1, visibleSeq: 0, rejected: [{ seq: 1, pos: 1, error: 'no' }], owner: 'u1' }, c2: { highWater: 7, visibleSeq: 7 } },
  });
  await store.append('r', { after: 1, clients: { c1: { highWater: 2, visibleSeq: 1 } } });
  assert.deepEqual((await load(store, 'r')).durable.clients, { c1: { highWater: 2, visibleSeq: 1 }, c2: { highWater: 7, visibleSeq: 7 } });
});

def('large values: a 1 MiB entry, 5,000 entries in one append, a 4 MiB checkpoint', async (c) => {
  let { store } = c;
  await store.open('r', INIT);
  const big = entry(1, '', { args: { text: 'x'.repeat(1 << 20) } });
  const many = entries(2, 5001);
  const state = { blob: 'é'.repeat(2 << 20), list: Array.from({ length: 1000 }, (_, i) => ({ i, s: `row ${i}` })) };
  await store.append('r', { after: 0, entries: [big] });
  await store.append('r', { after: 1, entries: many, checkpoint: { pos: 3000, state } });
  await store.release('r');
  const check = async (s: RoomStore, what: string) => {
    const r = await load(s, 'r');
    assertRoomHolds(r, [big, ...many], what, INIT.initial, (pos) => (pos === 3000 ? state : stateAt(pos)));
  };
  await check(store, 'after release');
  if (c.restart) {
    store = await c.restart();
    await check(store, 'after a restart');
  }
});

def('room names and values are opaque: punctuation, case, Unicode normal forms and emoji stay distinct and intact', async (c) => {
  let { store } = c;
  const names = [
    'a.b',
    'a_b',
    'a%b',
    'a*b',
    'a>b',
    'a/b',
    'a b',
    "a'b",
    'a"b',
    'a\\b',
    'A.B',
    'caf\u00e9',
    'cafe\u0301',
    '🦄',
    '日本語の部屋',
    'x'.repeat(128),
    '-',
    '.',
    '..',
  ];
  const text = (i: number) => `row ${i}: ${names[i]} — 🦄 \u0000 \u2028 עברית e\u0301 "quoted" \\ ${'ß'.repeat(i)}`;
  for (let i = 0; i < names.length; i++) {
    await store.open(names[i], { ...INIT, initial: { name: names[i] } });
    await store.append(names[i], {
      after: 0,
      entries: [entry(1, '', { args: { text: text(i) }, client: `клиент-${i}`, author: `✍️${i}` })],
      clients: { [`клиент-${i}`]: { highWater: 1, visibleSeq: 0, owner: names[i] } },
    });
  }
  const check = async (s: RoomStore, what: string) => {
    assert.deepEqual((await s.rooms()).sort(), [...names].sort(), `${what}: every room listed once`);
    for (let i = 0; i < names.length; i++) {
      const r = await load(s, names[i]);
      assert.deepEqual(r.durable.checkpoint.state, { name: names[i] }, `${what}: room ${JSON.stringify(names[i])} is its own`);
      assert.deepEqual(r.durable.suffix, [entry(1, '', { args: { text: text(i) }, client: `клиент-${i}`, author: `✍️${i}` })]);
      assert.deepEqual(r.durable.clients, { [`клиент-${i}`]: { highWater: 1, visibleSeq: 0, owner: names[i] } });
    }
  };
  await check(store, 'before a restart');
  if (c.restart) {
    store = await c.restart();
    await check(store, 'after a restart');
  }
});

def("what append was given and what open returned are the caller's: changing them changes nothing stored", async ({ store }) => {
  const opened = await store.open('r', INIT);
  const w = { after: 0, entries: entries(1, 2), clients: { c1: { highWater: 2, visibleSeq: 0 } }, checkpoint: { pos: 1, state: stateAt(1) } };
  const p = store.append('r', w);
  // Changed before the append settles: the store took what it writes when called (all but the
  // checkpoint's state, which the contract lets a store keep by reference until it writes it).
  (w.entries[0].args as { item: string }).item = 'changed';
  // The entry after the checkpoint too: a store that keeps it by reference for its next
  // checkpoint's suffix (the cluster store's release writes one) would store the change.
  (w.entries[1].args as { item: string }).item = 'changed';
  w.entries.push(entry(3));
  w.clients.c1.highWater = 99;
  w.checkpoint.pos = 2;
  (opened.durable.checkpoint.state as { items: string[] }).items.push('changed');
  await p;
  await store.release('r');
  const r = await load(store, 'r');
  assert.deepEqual(r.durable.clients, { c1: { highWater: 2, visibleSeq: 0 } });
  assert.equal(r.durable.stable, 1);
  assertRoomHolds(r, entries(1, 2), 'after the caller changed its objects');
  r.durable.suffix.length = 0;
  r.durable.clients.c1.visibleSeq = 42;
  assertRoomHolds(await load(store, 'r'), entries(1, 2), 'after the caller changed a loaded room');
});

def('release keeps the room: it loads the same log, and appends go on from the rev', async ({ store }) => {
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 5), clients: { c1: { highWater: 5, visibleSeq: 5 } }, checkpoint: { pos: 4, state: stateAt(4) } });
  await store.release('r');
  await store.release('r');
  const r = await load(store, 'r');
  assert.equal(r.rev, 1);
  assert.deepEqual(r.durable.clients, { c1: { highWater: 5, visibleSeq: 5 } });
  assertRoomHolds(r, entries(1, 5), 'after release');
  assert.deepEqual(await store.append('r', { after: 1, entries: entries(6, 6) }), { rev: 2, head: 6 });
});

def('peek (optional) reads the meta and the log after a position, and leaves the writer as it was', async ({ store }) => {
  if (!store.peek) return { skipped: 'this store has no peek (optional: no webhooks, the backend API needs machines named)' };
  assert.equal(await store.peek('none', 0, 10), undefined);
  await store.open('r', INIT);
  await store.append('r', { after: 0, entries: entries(1, 5) });
  const p = await store.peek('r', 2, 2);
  assert.deepEqual(p?.meta.machine, INIT.machine);
  assert.equal(p?.meta.version, INIT.version);
  assert.equal(p?.from, 3);
  assert.deepEqual(p?.entries, entries(3, 4));
  assert.deepEqual((await store.peek('r', 5, 10))?.entries, [], 'nothing after the head');
  // The writer's fence is untouched: its next append follows the rev it had.
  assert.deepEqual(await store.append('r', { after: 1, entries: entries(6, 6), checkpoint: { pos: 4, state: stateAt(4) } }), { rev: 2, head: 6 });
  const all = await store.peek('r', 0, 100);
  assert.ok(all && all.from >= 1 && all.from <= 5, `entries from at most the checkpoint + 1, got ${all?.from}`);
  assert.deepEqual(
    all.entries.map((e) => e.pos),
    Array.from({ length: 6 - all.from + 1 }, (_, i) => all.from + i),
    'consecutive, up to the head',
  );
  assertRoomHolds(await load(store, 'r'), entries(1, 6), 'after the peeks');
});

def(
  'checkpoint digests (with exportRoom): each checkpoint given has the digest of its state recorded, within the log kept and bounded; a restart and an import keep them',
  async ({ store, restart }) => {
    if (!store.exportRoom || !store.importRoom) return { skipped: 'this store has no export or import (optional)' };
    await store.open('r', INIT);
    await store.append('r', { after: 0, entries: entries(1, 3), checkpoint: { pos: 2, state: stateAt(2) } });
    await store.append('r', { after: 1, entries: entries(4, 5), checkpoint: { pos: 4, state: stateAt(4) } });
    const digestsOf = async (s: RoomStore, room: string) => {
      const ex = await s.exportRoom!(room);
      assert.ok(ex?.digests, `room ${room}: the export must carry the checkpoint digests`);
      return { ex, digests: ex.digests };
    };
    const { ex, digests } = await digestsOf(store, 'r');
    const positions = digests.map((d) => d.pos);
    assert.ok(positions.includes(4), `the newest checkpoint given (4) has its digest recorded, got positions ${positions.join(', ')}`);
    assert.ok(
      positions.includes(ex.durable.checkpoint.pos),
      `the exported checkpoint (${ex.durable.checkpoint.pos}) has its digest, got ${positions.join(', ')}`,
    );
    for (const [i, d] of digests.entries()) {
      assert.equal(d.digest, stateDigest(d.pos === 0 ? INIT.initial : stateAt(d.pos)), `the digest at ${d.pos} is of the state at ${d.pos}`);
      assert.ok(d.pos <= 5 && (i === 0 || d.pos > digests[i - 1].pos), `positions increase, within the log: ${positions.join(', ')}`);
    }
    // Bounded: MAX_CHECKPOINT_DIGESTS + 20 checkpoints more (one append each, in flight together).
    const more = MAX_CHECKPOINT_DIGESTS + 20;
    await Promise.all(
      settle(
        Array.from({ length: more }, (_, i) => store.append('r', { after: 2 + i, entries: [entry(6 + i)], checkpoint: { pos: 6 + i, state: stateAt(6 + i) } })),
      ),
    );
    const head = 5 + more;
    let after = (await digestsOf(store, 'r')).digests;
    assert.ok(after.length <= MAX_CHECKPOINT_DIGESTS, `at most ${MAX_CHECKPOINT_DIGESTS} digests kept, got ${after.length}`);
    assert.deepEqual(after[after.length - 1], { pos: head, digest: stateDigest(stateAt(head)) }, 'the newest is kept');
    let current = store;
    if (restart) {
      // Closing may write the newest checkpoint and drop the log (and digests) before it.
      current = await restart();
      const reopened = await digestsOf(current, 'r');
      const cp = reopened.ex.durable.checkpoint.pos;
      assert.deepEqual(
        reopened.digests,
        after.filter((d) => d.pos >= cp),
        'a restart keeps those within the log',
      );
      after = reopened.digests;
    }
    const full = await current.exportRoom!('r');
    assert.ok(full);
    await current.importRoom!('copy', full);
    const kept = after.filter((d) => d.pos >= full.durable.checkpoint.pos);
    assert.deepEqual((await digestsOf(current, 'copy')).digests, kept, 'an import keeps those within its log');
  },
);

def(
  'exportRoom, importRoom and deleteRoom (optional): a room exported and imported under another name loads the same; delete removes it',
  async ({ store }) => {
    if (!store.exportRoom || !store.importRoom || !store.deleteRoom) return { skipped: 'this store has no export, import or delete (optional)' };
    assert.equal(await store.exportRoom('none'), undefined);
    await store.open('r', INIT);
    await store.append('r', { after: 0, entries: entries(1, 5), clients: { c1: { highWater: 5, visibleSeq: 4 } }, checkpoint: { pos: 2, state: stateAt(2) } });
    const ex = await store.exportRoom('r');
    assert.ok(ex);
    assert.deepEqual(ex.meta, { machine: INIT.machine, version: INIT.version });
    await store.importRoom('copy', ex);
    const copy = await load(store, 'copy');
    assertRoomHolds(copy, entries(1, 5), 'the imported room');
    assert.deepEqual(copy.durable.clients, { c1: { highWater: 5, visibleSeq: 4 } });
    assert.deepEqual(copy.meta.machine, INIT.machine);
    assert.deepEqual(
      await store.append('copy', { after: copy.rev, entries: entries(6, 6) }),
      { rev: copy.rev + 1, head: 6 },
      'the imported room takes appends',
    );
    await rejectsWith(store.importRoom('r', ex), 'bad-argument', 'import over an existing room');
    const gap = { ...ex, durable: { ...ex.durable, suffix: [ex.durable.suffix[1]] } };
    await rejectsWith(store.importRoom('gappy', gap), 'bad-argument', 'import of a log with a gap');
    assert.equal(await store.open('gappy'), undefined, 'nothing of a refused import is written');
    await store.release('r');
    assert.equal(await store.deleteRoom('r'), true);
    assert.equal(await store.deleteRoom('r'), false);
    assert.equal(await store.open('r'), undefined);
    assert.deepEqual((await store.rooms()).sort(), ['copy']);
    await store.open('r', INIT);
    assertRoomHolds(await load(store, 'r'), [], 'a room created again under a deleted name starts empty');
  },
);

def('rooms lists every room created, once', async ({ store }) => {
  for (const r of ['one', 'two', 'three']) await store.open(r, INIT);
  await store.open('one', INIT);
  await store.open('not created');
  assert.deepEqual((await store.rooms()).sort(), ['one', 'three', 'two']);
});

def('listRooms gives each stored room its machine, version (a migrated one its new version), head, checkpoint, stable, size and times', async (c) => {
  if (!c.store.listRooms) return { skipped: 'the store does not list rooms (no listRooms)' };
  const created = await c.store.open('r', INIT);
  await c.store.open('s', { machine: 'other', version: 1, initial: 'plain string state' });
  const list = async () => {
    const got = await c.store.listRooms!({ limit: 10 });
    for (const r of got) {
      for (const k of ['version', 'head', 'checkpoint', 'stable', 'bytes', 'created', 'lastActivity'] as const)
        assert.ok(Number.isSafeInteger(r[k]) && r[k] >= 0, `room ${r.name}: ${k} must be an integer >= 0, got ${r[k]}`);
      assert.ok(r.checkpoint <= r.stable && r.stable <= r.head, `room ${r.name}: checkpoint ${r.checkpoint} <= stable ${r.stable} <= head ${r.head}`);
      assert.ok(r.bytes > 0, `room ${r.name}: a stored room occupies some bytes`);
      assert.ok(r.lastActivity >= r.created, `room ${r.name}: last activity ${r.lastActivity} is not before its creation ${r.created}`);
    }
    return got;
  };
  const [r0, s0] = await list();
  assert.deepEqual(
    [r0.name, r0.machine, r0.version, r0.head, r0.checkpoint, r0.stable, r0.created],
    ['r', INIT.machine, INIT.version, 0, 0, 0, created.meta.created],
    'a new room',
  );
  assert.deepEqual([s0.name, s0.machine, s0.version, s0.head], ['s', 'other', 1, 0]);
  await c.store.append('r', { after: 0, entries: entries(1, 5), clients: { c1: { highWater: 5, visibleSeq: 2 } }, checkpoint: { pos: 2, state: stateAt(2) } });
  await c.store.release('r');
  const [r1, s1] = await list();
  assert.deepEqual([r1.version, r1.head, r1.stable], [INIT.version, 5, 2], 'after an append (and release)');
  assert.ok(r1.bytes > r0.bytes, `the room grew: ${r0.bytes} bytes, then ${r1.bytes}`);
  assert.ok(r1.lastActivity >= r0.lastActivity, 'last activity does not go back');
  assert.deepEqual(s1, s0, 'a room not written to lists as it was');
  // A checkpoint alone is housekeeping, not activity (a room writes one as it unloads).
  await new Promise((resolve) => setTimeout(resolve, 5));
  // Loaded again before each write (released, the room has no writer: a store may fence an append without a load).
  await load(c.store, 'r');
  await c.store.append('r', { after: 1, checkpoint: { pos: 4, state: stateAt(4) } });
  await c.store.release('r');
  assert.equal((await list())[0].lastActivity, r1.lastActivity, 'an append of a checkpoint alone leaves the last activity');
  // A migration: the room's own entry and the reserved client's record, whose highWater is the version it runs now.
  const migration: LogEntry = {
    pos: 6,
    client: '~hercules',
    seq: INIT.version + 1,
    name: '~migrate',
    args: { from: INIT.version, to: INIT.version + 1 },
    author: '~hercules',
  };
  await load(c.store, 'r');
  await c.store.append('r', { after: 2, entries: [migration], clients: { '~hercules': { highWater: INIT.version + 1, visibleSeq: INIT.version + 1 } } });
  await c.store.release('r');
  const [r2] = await list();
  assert.deepEqual([r2.version, r2.head], [INIT.version + 1, 6], 'a migrated room lists the version it migrated to');
  assert.equal((await load(c.store, 'r')).meta.version, INIT.version, 'its metadata keeps the version it was created under');
  await c.store.release('r');
  const before = await list();
  if (c.restart) {
    const store = await c.restart();
    assert.deepEqual(await store.listRooms!({ limit: 10 }), before, 'the same after a restart');
    await store.close();
    await rejectsWith(store.listRooms!({ limit: 10 }), 'closed', 'listRooms after close');
  }
});

def('listRooms pages through the rooms by name (code point order), each once', async ({ store }) => {
  if (!store.listRooms) return { skipped: 'the store does not list rooms (no listRooms)' };
  // Names whose code point order differs from JavaScript's UTF-16 order: U+E000 comes before U+1F600.
  const names = [...Array.from({ length: 22 }, (_, i) => `room-${String(i).padStart(2, '0')}`), 'Z', 'a', 'é', '\ue000', '😀'];
  for (const n of [...names].reverse()) await store.open(n, INIT);
  const sorted = [...names].sort(compareRoomNames);
  assert.deepEqual(sorted.slice(-2), ['\ue000', '😀'], 'the fixture orders by code point');
  const seen: string[] = [];
  const sizes: number[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.listRooms({ after, limit: 10 });
    sizes.push(page.length);
    seen.push(...page.map((r) => r.name));
    if (page.length < 10) break;
    after = page[page.length - 1].name;
  }
  assert.deepEqual(sizes, [10, 10, 7]);
  assert.deepEqual(seen, sorted, 'every room once, in order');
  assert.deepEqual(
    (await store.listRooms({ after: 'room-05', limit: 3 })).map((r) => r.name),
    ['room-06', 'room-07', 'room-08'],
    'after a name: the rooms after it',
  );
  assert.deepEqual(
    (await store.listRooms({ after: 'room-05x', limit: 1 })).map((r) => r.name),
    ['room-06'],
    'after a name that is no room',
  );
  assert.deepEqual(await store.listRooms({ after: '😀', limit: 10 }), [], 'nothing after the last');
  assert.equal((await store.listRooms({ limit: 1000 })).length, names.length);
  await rejectsWith(store.listRooms({ limit: 0 }), 'bad-argument', 'a limit of 0');
  await rejectsWith(store.listRooms({ limit: 1.5 }), 'bad-argument', 'a limit that is no integer');
});

def('close settles the appends in flight; a closed store refuses every call with closed; closing twice is harmless', async (c) => {
  await c.store.open('r', INIT);
  const inFlight = settle([c.store.append('r', { after: 0, entries: entries(1, 2) }), c.store.append('r', { after: 1, entries: entries(3, 3) })]);
  await c.store.close();
  assert.deepEqual(
    await Promise.all(inFlight),
    [
      { rev: 1, head: 2 },
      { rev: 2, head: 3 },
    ],
    'appends made before close land',
  );
  await rejectsWith(c.store.open('r'), 'closed', 'open after close');
  await rejectsWith(c.store.append('r', { after: 2, entries: [entry(4)] }), 'closed', 'append after close');
  await rejectsWith(c.store.release('r'), 'closed', 'release after close');
  await rejectsWith(c.store.rooms(), 'closed', 'rooms after close');
  await c.store.close();
  if (c.restart) {
    const store = await c.restart();
    assertRoomHolds(await load(store, 'r'), entries(1, 3), 'after a restart');
  }
});

// ------------------------------------------------------------------ history (HistoryRetention)

/** The clock of the history cases, in ms; a case moves it. */
const historyClock = { now: 0 };
const DAY = 86_400_000;

/**
 * Write `rounds` rounds of 10 entries to a new room, each with a checkpoint at its last entry,
 * and release the room after each (a release writes the checkpoint a store deferred): states are
 * then written at 10, 20, … . `at(k)`: the clock during round k (1-based).
 */
async function historyRooms(store: RoomStore, room: string, rounds: number, at: (k: number) => number = () => 0): Promise<void> {
  let rev = (await store.open(room, INIT)).rev;
  for (let k = 1; k <= rounds; k++) {
    historyClock.now = at(k);
    const to = 10 * k;
    rev = (await store.append(room, { after: rev, entries: entries(to - 9, to), checkpoint: { pos: to, state: stateAt(to) } })).rev;
    await store.release(room);
    rev = (await load(store, room)).rev;
  }
}

/** What a store's history of the fixture room must read: every retained entry, and the state at every retained position. */
async function assertHistory(store: RoomStore, room: string, head: number, what: string): Promise<number> {
  const h = await store.history!(room, { from: 1, to: head + 5 });
  assert.ok(h, `${what}: the room has a history`);
  assert.equal(h.head, head, `${what}: the head`);
  const log = entries(1, head);
  assert.deepEqual(
    h.entries.map(({ time, ...e }) => e),
    log.slice(h.start),
    `${what}: the entries from start + 1 (${h.start + 1}) to the head, each as appended`,
  );
  assert.ok(
    h.entries.every((e) => typeof e.time === 'number'),
    `${what}: every entry has its commit time`,
  );
  for (let p = h.start; p <= head; p++) {
    const at = await store.history!(room, { stateAt: p });
    assert.ok(at?.base, `${what}: a state to rebuild position ${p} from`);
    assert.ok(at.base.pos >= h.start && at.base.pos <= p, `${what}: the base for ${p} is at ${at.base.pos}, within ${h.start}..${p}`);
    assert.deepEqual(at.base.state, at.base.pos === 0 ? INIT.initial : stateAt(at.base.pos), `${what}: the state kept at ${at.base.pos}`);
    assert.deepEqual(
      at.entries.map(({ time, ...e }) => e),
      log.slice(at.base.pos, p),
      `${what}: the entries from ${at.base.pos + 1} to ${p}`,
    );
  }
  for (const p of [h.start - 1, head + 1]) assert.equal((await store.history!(room, { stateAt: p }))?.base, undefined, `${what}: no state at ${p}`);
  return h.start;
}

def(
  'history: checkpoints keep the last `ops` ops (and a state to rebuild them from), and prune what is older',
  async (c) => {
    if (!c.store.history) return { skipped: 'the store keeps no history (no history method)' };
    await historyRooms(c.store, 'r', 4);
    // Checkpoints written at 10, 20, 30, 40; ops 5 cuts at 35: kept from the state at 30.
    const start = await assertHistory(c.store, 'r', 40, 'after 4 checkpoints');
    assert.ok(start <= 35, `at least the last 5 ops behind the checkpoint at 40 are kept: history starts at ${start}`);
    assert.ok(start >= 25, `at most 5 ops plus the 10 between two checkpoints are kept: history starts at ${start}`);
    assertRoomHolds(await load(c.store, 'r'), entries(1, 40), 'the room loads as before');
    if (c.restart) {
      const store = await c.restart();
      assert.equal(await assertHistory(store, 'r', 40, 'after a restart'), start, 'the history survives a restart');
    }
    assert.equal(await c.store.history('nope', { from: 1, to: 2 }), undefined, 'no history of a room that does not exist');
  },
  { retention: { ops: 5 }, now: () => historyClock.now },
);

def(
  'history: ops 0 keeps nothing behind the checkpoint',
  async (c) => {
    if (!c.store.history) return { skipped: 'the store keeps no history (no history method)' };
    await historyRooms(c.store, 'r', 3);
    assert.equal(await assertHistory(c.store, 'r', 30, 'after 3 checkpoints'), 30, 'history starts at the checkpoint');
  },
  { retention: { ops: 0 }, now: () => historyClock.now },
);

def(
  'history: checkpoints keep the ops of the last `days` days, with the time each was committed, and prune what is older',
  async (c) => {
    if (!c.store.history) return { skipped: 'the store keeps no history (no history method)' };
    const at = (k: number) => 1_000 * DAY + [0, 0, 2, 2.5, 4, 4.2][k] * DAY;
    await historyRooms(c.store, 'r', 5, at);
    // At the checkpoint at 50 (day 4.2), days 1 cuts at 30: 31..50 were committed after day 3.2.
    const h = (await c.store.history('r', { from: 1, to: 50 }))!;
    assert.ok(h.start <= 30, `the ops of the last day are kept: history starts at ${h.start}`);
    assert.ok(h.start >= 20, `at most those plus the 10 between two checkpoints: history starts at ${h.start}`);
    for (const e of h.entries) assert.equal(e.time, at(Math.ceil(e.pos / 10)), `entry ${e.pos}: the time it was committed`);
    await assertHistory(c.store, 'r', 50, 'after 5 checkpoints');
  },
  { retention: { days: 1 }, now: () => historyClock.now },
);

// ------------------------------------------------------------------ running them

/** The suite's cases against stores from `factory`, one fresh store per case. */
export function roomStoreCases(factory: StoreFactory): ConformanceCase[] {
  return cases.map(([name, body, setup]) => ({ name, run: () => runCase(factory, body, setup) }));
}

async function runCase(factory: StoreFactory, body: Body, setup: StoreSetup | undefined): Promise<CaseResult> {
  const sut = await factory(setup);
  const open = [sut.store];
  const ctx: Ctx = { store: sut.store };
  if (sut.reopen) {
    const reopen = sut.reopen;
    ctx.restart = async () => {
      await ctx.store.close();
      ctx.store = await reopen();
      open.push(ctx.store);
      return ctx.store;
    };
  }
  if (sut.breakNextAppend) {
    const brk = sut.breakNextAppend;
    ctx.breakNextAppend = (room) => brk(ctx.store, room);
  }
  try {
    return await body(ctx);
  } finally {
    for (const s of open) await s.close().catch(() => {});
    await sut.teardown?.();
  }
}

/**
 * Register the suite's cases with a test runner: `test(name, fn)` as node:test's `test` or
 * vitest's `it`. Skipped cases are marked skipped where the runner's context can (`t.skip`).
 */
export function runRoomStoreTests(title: string, factory: StoreFactory, test: (name: string, fn: (t?: any) => Promise<void>) => unknown): void {
  for (const c of roomStoreCases(factory)) {
    test(`${title}: ${c.name}`, async (t?: { skip?: (message?: string) => void }) => {
      const r = await c.run();
      if (r && 'skipped' in r) t?.skip?.(r.skipped);
    });
  }
}
