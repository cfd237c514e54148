/** MemoryStore's own parts: injected faults and restarts over a MemoryDisk (the contract itself: store-conformance.test.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '@hercules/core';
import { MemoryDisk, MemoryStore } from '../src/index.ts';

const entry = (pos: number): LogEntry => ({ pos, client: 'c1', seq: pos, name: 'say', args: { text: `m${pos}` }, author: 'c1' });
const INIT = { machine: 'chat', version: 1, initial: { messages: [] } };

test('an injected fault before or during an append writes nothing; after, the append is written but reported failed', async () => {
  const store = new MemoryStore();
  await store.open('r', INIT);
  store.failAppend({ room: 'r', stage: 'before' });
  await assert.rejects(store.append('r', { after: 0, entries: [entry(1)] }), {
    code: 'storage-failed',
    message: /before the write.*nothing of the append was written/,
  });
  store.failAppend({ room: 'r', stage: 'during' });
  await assert.rejects(store.append('r', { after: 0, entries: [entry(1)], clients: { c1: { highWater: 1, visibleSeq: 0 } } }), {
    code: 'storage-failed',
    message: /part-way/,
  });
  assert.deepEqual((await store.open('r'))!.rev, 0);
  // A lost acknowledgement: the writer is told it failed, and finds it landed when it reloads.
  store.failAppend({ room: 'r', stage: 'after' });
  await assert.rejects(store.append('r', { after: 0, entries: [entry(1)] }), { code: 'storage-failed', message: /written but is reported failed/ });
  const r = (await store.open('r'))!;
  assert.deepEqual([r.rev, r.durable.suffix], [1, [entry(1)]]);
  await assert.rejects(store.append('r', { after: 0, entries: [entry(1)] }), { code: 'fenced' }, 'its retry is fenced, not written twice');
});

test('a fault strikes the append it names: after skip appends of its room, once; other rooms are not counted', async () => {
  const store = new MemoryStore();
  for (const room of ['a', 'b']) await store.open(room, INIT);
  store.failAppend({ room: 'a', skip: 2 });
  const outcome: string[] = [];
  for (let i = 0; i < 4; i++) {
    for (const room of ['a', 'b']) {
      const rev = (await store.open(room))!.rev;
      outcome.push(
        await store.append(room, { after: rev, entries: [entry(rev + 1)] }).then(
          () => `${room}${i} ok`,
          () => `${room}${i} failed`,
        ),
      );
    }
  }
  assert.deepEqual(outcome, ['a0 ok', 'b0 ok', 'a1 ok', 'b1 ok', 'a2 failed', 'b2 ok', 'a3 ok', 'b3 ok']);
  assert.throws(() => store.failAppend({ skip: -1 }), { code: 'bad-argument' });
});

test('a new MemoryStore over the same disk is a restart: what was appended is there, the faults and the closed store are not', async () => {
  const disk = new MemoryDisk();
  const first = new MemoryStore({ disk, now: () => 42 });
  await first.open('r', INIT);
  await first.append('r', { after: 0, entries: [entry(1), entry(2)], checkpoint: { pos: 1, state: { messages: ['m1'] } } });
  first.failAppend();
  await first.close();
  const second = new MemoryStore({ disk });
  const r = (await second.open('r'))!;
  assert.deepEqual(r, {
    meta: { machine: 'chat', version: 1, created: 42 },
    durable: { checkpoint: { pos: 1, state: { messages: ['m1'] } }, suffix: [entry(2)], clients: {}, stable: 1 },
    rev: 1,
    fresh: false,
  });
  assert.deepEqual(await second.append('r', { after: 1, entries: [entry(3)] }), { rev: 2, head: 3 });
});
