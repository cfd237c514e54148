/**
 * The IndexedDB store writes a room's client row from its copy of what it last committed (the
 * store is one tab's alone), without reading it first, and commits at once: the write then waits
 * for the page's main thread once, for its completion. Its copy must never hold what a write
 * that failed would have written (a tab's mark above the ops written would make the next leader
 * skip a request, DUR-HANDOVER), and two writes in flight must not lose each other's marks.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IDBFactory, IDBKeyRange, IDBObjectStore as FakeStore } from 'fake-indexeddb';
import { indexedDbStorage } from '../src/index.ts';

const op = (seq: number) => ({ client: 'c1', seq, name: 'say', args: { text: `m${seq}` } });
const tag = (seq: number, tab: string, req: number) => ({ seq, tab, req });

/** Counts the reads of the client row in readwrite transactions while `fn` runs. */
async function rowReads(fn: () => Promise<unknown>): Promise<number> {
  const get = FakeStore.prototype.get;
  let n = 0;
  FakeStore.prototype.get = function (this: IDBObjectStore, key: IDBValidKey | IDBKeyRange) {
    if (this.name === 'client' && this.transaction.mode === 'readwrite') n++;
    return get.call(this, key);
  };
  try {
    await fn();
  } finally {
    FakeStore.prototype.get = get;
  }
  return n;
}

test('after its first append, the store writes the client row without reading it, and the row is right', async () => {
  const factory = new IDBFactory();
  const s = indexedDbStorage('r', { indexedDB: factory, IDBKeyRange });
  await s.init('room', 'c1');
  assert.equal(await rowReads(() => s.append('room', [op(1)], [tag(1, 'a', 1)])), 1, 'the first append reads the row');
  assert.equal(await rowReads(() => s.append('room', [op(2)], [tag(2, 'a', 2)])), 0, 'a later one does not');
  assert.equal(await rowReads(() => s.reserve!('room', 9)), 0);
  // Two in flight at once: the second reads the row in its transaction (IndexedDB runs it after the first).
  await Promise.all([s.append('room', [op(3)], [tag(3, 'b', 1)]), s.append('room', [op(4)], [tag(4, 'a', 3)])]);
  await s.close();
  const again = indexedDbStorage('r', { indexedDB: factory, IDBKeyRange });
  const got = (await again.load('room'))!;
  assert.equal(got.lastSeq, 4);
  assert.equal(got.reservedSeq, 9);
  assert.deepEqual(got.marks, { a: 3, b: 1 });
  assert.deepEqual(
    got.durable.map((o) => o.seq),
    [1, 2, 3, 4],
  );
  await again.close();
});

test("a failed write's row is not kept: the next write has neither its mark nor its last seq", async () => {
  const factory = new IDBFactory();
  const s = indexedDbStorage('f', { indexedDB: factory, IDBKeyRange });
  await s.init('room', 'c1');
  await s.append('room', [op(1)], [tag(1, 'a', 1)]);
  const put = FakeStore.prototype.put;
  FakeStore.prototype.put = function (this: IDBObjectStore, value: any, key?: IDBValidKey) {
    const r = put.call(this, value, key);
    if (this.name === 'client' && value.lastSeq === 2) this.transaction.abort(); // the write of op 2 fails, as a quota error would abort it
    return r;
  };
  try {
    await assert.rejects(s.append('room', [op(2)], [tag(2, 'a', 2)]), { code: 'storage-failed' });
  } finally {
    FakeStore.prototype.put = put;
  }
  await s.append('room', [op(3)], [tag(3, 'b', 1)]);
  await s.close();
  const again = indexedDbStorage('f', { indexedDB: factory, IDBKeyRange });
  const got = (await again.load('room'))!;
  assert.deepEqual(got.marks, { a: 1, b: 1 }, "tab a's request 2 was never written");
  assert.deepEqual(
    got.durable.map((o) => o.seq),
    [1, 3],
  );
  await again.close();
});
