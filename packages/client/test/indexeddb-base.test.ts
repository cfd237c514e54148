/**
 * The IndexedDB store keeps a room's base in a store of its own (database version 2), so an
 * append rewrites only the small client row, not the whole base state; a version-1 database
 * (base inside the client row) still loads, and its base moves out at the next saveBase.
 * Version 3 keeps a base's top-level keyedMaps in parts (core's base-parts.ts), so a save
 * writes the trie nodes that changed; a version-2 database (the base whole) still loads.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IDBFactory, IDBKeyRange, IDBObjectStore } from 'fake-indexeddb';
import { keyedMap } from '@hercules/core';
import { indexedDbStorage } from '../src/index.ts';
import { checkBaseInParts, keyedStates } from './keyed-states.ts';

const op = (seq: number) => ({ client: 'c1', seq, name: 'say', args: { text: `m${seq}` } });
const big = { items: Array.from({ length: 1000 }, (_, i) => ({ id: i, text: `item ${i}` })) };

/** The raw rows of a database, read with a plain IndexedDB connection. */
async function rows(factory: IDBFactory, name: string, store: string): Promise<any[]> {
  const db = await new Promise<IDBDatabase>((res, rej) => {
    const r = factory.open(name);
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(r.error);
  });
  try {
    if (!db.objectStoreNames.contains(store)) return [];
    return await new Promise((res, rej) => {
      const r = db.transaction([store], 'readonly').objectStore(store).getAll();
      r.onsuccess = () => res(r.result);
      r.onerror = () => rej(r.error);
    });
  } finally {
    db.close();
  }
}

test('an append after a base rewrites the client row without the base; load gives the base back', async () => {
  const factory = new IDBFactory();
  const s = indexedDbStorage('b', { indexedDB: factory, IDBKeyRange });
  await s.init('room', 'c1');
  await s.append('room', [op(1), op(2)]);
  await s.saveBase('room', { pos: 5, state: big, ownSeq: 1 });
  await s.append('room', [op(3)]);
  await s.close();
  const [client] = await rows(factory, 'b', 'client');
  assert.equal(client.lastSeq, 3);
  assert.equal(client.base, undefined, 'the client row holds no base');
  assert.equal((await rows(factory, 'b', 'base'))[0].pos, 5);
  const again = indexedDbStorage('b', { indexedDB: factory, IDBKeyRange });
  const got = (await again.load('room'))!;
  assert.deepEqual(got.base, { pos: 5, state: big, ownSeq: 1 });
  assert.deepEqual(
    got.durable.map((o) => o.seq),
    [2, 3],
  );
  await again.close();
});

test('a version-1 database (the base in the client row) loads, and its base moves out at the next saveBase', async () => {
  const factory = new IDBFactory();
  await new Promise<void>((res, rej) => {
    const r = factory.open('old', 1);
    r.onupgradeneeded = () => {
      const db = r.result;
      db.createObjectStore('client', { keyPath: 'room' });
      db.createObjectStore('ops', { keyPath: ['room', 'seq'] });
      const t = r.transaction!;
      t.objectStore('client').put({ room: 'room', clientId: 'c-old', lastSeq: 2, base: { pos: 4, state: { n: 1 }, ownSeq: 1 } });
      t.objectStore('ops').put({ room: 'room', seq: 2, op: op(2) });
    };
    r.onsuccess = () => {
      r.result.close();
      res();
    };
    r.onerror = () => rej(r.error);
  });
  const s = indexedDbStorage('old', { indexedDB: factory, IDBKeyRange });
  const got = (await s.load('room'))!;
  assert.equal(got.clientId, 'c-old');
  assert.deepEqual(got.base, { pos: 4, state: { n: 1 }, ownSeq: 1 });
  await s.saveBase('room', { pos: 3, state: { stale: true }, ownSeq: 1 });
  assert.equal((await s.load('room'))!.base!.pos, 4, 'an older base never replaces the one version 1 held');
  await s.saveBase('room', { pos: 9, state: { n: 2 }, ownSeq: 2 });
  await s.close();
  const [client] = await rows(factory, 'old', 'client');
  assert.equal(client.base, undefined, 'the version-1 base left the client row');
  assert.deepEqual((await rows(factory, 'old', 'base'))[0], { room: 'room', pos: 9, state: { n: 2 }, ownSeq: 2, parts: 1 });
  assert.deepEqual(await rows(factory, 'old', 'ops'), [], 'the ops inside the base went with it');
});

/** Counts (and, with `failAt`, fails) the puts and deletes of every object store: the store's write steps. */
function idbWrites() {
  const proto = IDBObjectStore.prototype as unknown as Record<'put' | 'delete', (...a: unknown[]) => unknown>;
  const real = { put: proto.put, delete: proto.delete };
  const meter = { count: 0, failAt: 0, partPuts: 0 };
  for (const name of ['put', 'delete'] as const)
    proto[name] = function (this: IDBObjectStore, ...a: unknown[]) {
      meter.count++;
      if (name === 'put' && this.name === 'part') meter.partPuts++;
      if (meter.count === meter.failAt) throw new Error(`planted fault at write step ${meter.count}: ${name} in ${this.name}`);
      return real[name].apply(this, a);
    };
  const reset = () => Object.assign(meter, { count: 0, failAt: 0, partPuts: 0 });
  return { meter, reset, restore: () => Object.assign(proto, real) };
}

test('a keyedMap base: a save writes the trie nodes that changed, not the whole state; a fault at any write step of a save leaves the base before it whole', async (t) => {
  const factory = new IDBFactory();
  const writes = idbWrites();
  t.after(writes.restore);
  await checkBaseInParts({
    open: (name) => indexedDbStorage(name, { indexedDB: factory, IDBKeyRange }),
    reset: writes.reset,
    steps: () => writes.meter.count,
    partPuts: () => writes.meter.partPuts,
    failAt: (n) => void (writes.meter.failAt = n),
    // A throw in a request callback aborts the transaction (IndexedDB: "fire a success event").
    fault: (e: Error) => e.name === 'AbortError',
  });
});

test('a version-2 database (the base whole in the base store) loads, and the next saveBase keeps it in parts', async () => {
  const factory = new IDBFactory();
  const { initial, run } = keyedStates();
  let held = initial;
  for (let i = 0; i < 200; i++) held = run(held, `k${i}`, i);
  await new Promise<void>((res, rej) => {
    const r = factory.open('v2', 2);
    r.onupgradeneeded = () => {
      const db = r.result;
      db.createObjectStore('client', { keyPath: 'room' });
      db.createObjectStore('ops', { keyPath: ['room', 'seq'] });
      db.createObjectStore('base', { keyPath: 'room' });
      const t = r.transaction!;
      t.objectStore('client').put({ room: 'room', clientId: 'c-v2', lastSeq: 3 });
      t.objectStore('base').put({ room: 'room', pos: 4, state: held, ownSeq: 1 });
      t.objectStore('ops').put({ room: 'room', seq: 2, op: op(2) });
      t.objectStore('ops').put({ room: 'room', seq: 3, op: op(3) });
    };
    r.onsuccess = () => {
      r.result.close();
      res();
    };
    r.onerror = () => rej(r.error);
  });
  const s = indexedDbStorage('v2', { indexedDB: factory, IDBKeyRange });
  const got = (await s.load('room'))!;
  assert.equal(got.clientId, 'c-v2');
  assert.deepEqual(got.base, { pos: 4, state: held, ownSeq: 1 });
  const next = run(held, 'k7', -7);
  await s.saveBase('room', { pos: 9, state: next, ownSeq: 2 });
  assert.deepEqual((await s.load('room'))!.base, { pos: 9, state: next, ownSeq: 2 });
  await s.close();
  const [base] = await rows(factory, 'v2', 'base');
  assert.equal(base.parts, 1);
  assert.deepEqual(base.state.cells, { $keyedMap: 1, size: 200, tree: null }, 'the map is in the part rows');
  assert.ok((await rows(factory, 'v2', 'part')).length > 1);
  assert.deepEqual(
    (await rows(factory, 'v2', 'ops')).map((o) => o.seq),
    [3],
  );
  const again = indexedDbStorage('v2', { indexedDB: factory, IDBKeyRange });
  const cells = ((await again.load('room'))!.base!.state as typeof next).cells;
  assert.equal(keyedMap.get(cells, 'k7'), -7, 'the part rows read back after a restart');
  await again.close();
});
