/**
 * The room store conformance suite (@hercules/server/store-conformance) against both stores,
 * and against stores broken on purpose, to show the suite catches what it is meant to.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type Database from 'better-sqlite3';
import { roomStoreCases, runRoomStoreTests, type StoreFactory } from '@hercules/server/store-conformance';
import {
  MemoryDisk,
  MemoryStore,
  SqliteStore,
  StorageError,
  type Appended,
  type LoadedRoom,
  type RoomAppend,
  type RoomExport,
  type RoomInit,
  type RoomStore,
} from '../src/index.ts';
import { tempDir } from './helpers.ts';

/**
 * Fail the next append to `room` part-way through: a trigger raises on the store's last
 * statement of an append (the rev moving), after its log chunk, client records and checkpoint
 * were written inside the transaction.
 */
function breakNextSqliteAppend(db: Database.Database, room: string): void {
  let armed = true;
  db.function('hercules_test_fault', (r: unknown) => {
    if (armed && r === room) {
      armed = false;
      throw new Error(`injected fault in the write of room ${room}`);
    }
    return 0;
  });
  db.exec('CREATE TEMP TRIGGER IF NOT EXISTS hercules_test_fault BEFORE UPDATE OF rev ON rooms BEGIN SELECT hercules_test_fault(NEW.room); END');
}

const sqlite =
  (base: { checkpointEvery?: number }): StoreFactory =>
  (setup) => {
    const { dir, cleanup } = tempDir('conformance');
    const opts = { ...base, ...setup };
    return {
      store: new SqliteStore(dir, opts),
      reopen: () => new SqliteStore(dir, opts),
      breakNextAppend: (store, room) => breakNextSqliteAppend((store as SqliteStore).db, room),
      teardown: cleanup,
    };
  };

const memory: StoreFactory = (setup) => {
  const disk = new MemoryDisk();
  return {
    store: new MemoryStore({ disk, ...setup }),
    reopen: () => new MemoryStore({ disk, ...setup }),
    breakNextAppend: (store, room) => (store as MemoryStore).failAppend({ room, stage: 'during' }),
  };
};

runRoomStoreTests('SqliteStore', sqlite({}), test);
// Every checkpoint written as it comes: the paths that prune the log and skip the covered part of a chunk.
runRoomStoreTests('SqliteStore (checkpointEvery 1)', sqlite({ checkpointEvery: 1 }), test);
runRoomStoreTests('MemoryStore', memory, test);

// ------------------------------------------------------------------ the suite catches broken stores

/** Delegates to a MemoryStore, except what a subclass breaks. */
class Delegating implements RoomStore {
  readonly inner: MemoryStore;
  constructor(disk: MemoryDisk) {
    this.inner = new MemoryStore({ disk });
  }
  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  open(room: string, init?: RoomInit): Promise<LoadedRoom | undefined> {
    return init ? this.inner.open(room, init) : this.inner.open(room);
  }
  append(room: string, w: RoomAppend): Promise<Appended> {
    return this.inner.append(room, w);
  }
  release(room: string) {
    return this.inner.release(room);
  }
  rooms() {
    return this.inner.rooms();
  }
  close() {
    return this.inner.close();
  }
}

/** Ignores the fence: every append is written after whatever the room holds. */
class IgnoresFence extends Delegating {
  override append(room: string, w: RoomAppend): Promise<Appended> {
    return this.inner.append(room, { ...w, after: this.inner.disk.rooms.get(room)?.rev ?? w.after });
  }
}

/** Not atomic: a write that fails part-way has already written its entries. */
class TearsWrites extends Delegating {
  breakNext = new Set<string>();
  override async append(room: string, w: RoomAppend): Promise<Appended> {
    if (!this.breakNext.delete(room)) return this.inner.append(room, w);
    await this.inner.append(room, { after: w.after, entries: w.entries });
    throw new StorageError(`room ${room}: failed after writing the entries`);
  }
}

async function failures(factory: StoreFactory): Promise<Map<string, string>> {
  const failed = new Map<string, string>();
  for (const c of roomStoreCases(factory)) {
    try {
      await c.run();
    } catch (e) {
      failed.set(c.name, (e as Error).message);
    }
  }
  return failed;
}

/** Every case that checks the fence; each must fail against a store that ignores it. */
const FENCE_CASES = [
  'an append naming a rev the room is not at is fenced, and writes nothing',
  'two writers at one rev: exactly one append succeeds, and the room holds exactly its writes',
  'two writers at one rev appending no entries (client claims): exactly one succeeds',
  'a writer that lost stays fenced until it reloads, then writes from the rev it loaded',
  'when an append of a pipeline fails, every later one fails too and writes nothing',
  'a retried append whose first attempt landed is fenced, and its entries are stored once',
  'entries must follow the head at consecutive positions, a checkpoint must not pass the head: otherwise bad-argument, and nothing is written',
  'appends of different rooms are independent: each has its own rev and head',
  'a failed append of one room does not fail the appends of other rooms made in the same turn',
];

test('the conformance suite fails a store that ignores the fence, in every case that checks the fence and no other', async () => {
  const names = roomStoreCases(memory).map((c) => c.name);
  for (const n of FENCE_CASES) assert.ok(names.includes(n), `the suite has the case "${n}"`);
  const disk = () => new MemoryDisk();
  const failed = await failures(() => {
    const d = disk();
    return { store: new IgnoresFence(d), reopen: () => new IgnoresFence(d), breakNextAppend: (s, room) => (s as IgnoresFence).inner.failAppend({ room }) };
  });
  assert.deepEqual([...failed.keys()].sort(), [...FENCE_CASES].sort(), [...failed].map(([n, m]) => `${n}: ${m}`).join('\n'));
  // The control: the same store, not broken, passes every case.
  assert.deepEqual([...(await failures(memory)).keys()], []);
});

test('the conformance suite fails a store whose failed writes are half-written', async () => {
  const failed = await failures(() => {
    const d = new MemoryDisk();
    return {
      store: new TearsWrites(d),
      reopen: () => new TearsWrites(d),
      breakNextAppend: (s, room) => {
        (s as TearsWrites).breakNext.add(room);
      },
    };
  });
  assert.ok(failed.has('a failed append leaves nothing half-written: not its entries, records or checkpoint'), [...failed.keys()].join('\n'));
  assert.match(failed.get('a failed append leaves nothing half-written: not its entries, records or checkpoint')!, /nothing of the broken append is visible/);
  assert.ok(failed.has('a failed append of one room does not fail the appends of other rooms made in the same turn'));
  assert.equal(failed.size, 2, [...failed.keys()].join('\n'));
});

const DIGEST_CASE =
  'checkpoint digests (with exportRoom): each checkpoint given has the digest of its state recorded, within the log kept and bounded; a restart and an import keep them';

/** Exports and imports, but records no checkpoint digests (as a store written before them). */
class NoDigests extends Delegating {
  async exportRoom(room: string): Promise<RoomExport | undefined> {
    const ex = await this.inner.exportRoom(room);
    if (ex) delete ex.digests;
    return ex;
  }
  importRoom(room: string, data: RoomExport) {
    return this.inner.importRoom(room, data);
  }
}

/** Records each checkpoint's digest at the position before it: the digest of another state. */
class MisplacedDigests extends NoDigests {
  override async exportRoom(room: string): Promise<RoomExport | undefined> {
    const ex = await this.inner.exportRoom(room);
    if (ex?.digests) ex.digests = ex.digests.map((d) => ({ pos: Math.max(0, d.pos - 1), digest: d.digest }));
    return ex;
  }
}

test('the conformance suite fails a store that records no checkpoint digests, or records them at the wrong position, in the digest case and no other', async () => {
  for (const [Store, why] of [
    [NoDigests, /the export must carry the checkpoint digests/],
    [MisplacedDigests, /has its digest recorded|is of the state at/],
  ] as const) {
    const failed = await failures(() => {
      const d = new MemoryDisk();
      return { store: new Store(d), reopen: () => new Store(d) };
    });
    assert.deepEqual([...failed.keys()], [DIGEST_CASE], Store.name);
    assert.match(failed.get(DIGEST_CASE)!, why, Store.name);
  }
});

test('runRoomStoreTests registers one test per case with any (name, fn) runner, and reports skips', async () => {
  const registered: [string, (t?: unknown) => Promise<void>][] = [];
  // A store that does not persist and cannot fail part-way: the cases that need that are skipped.
  runRoomStoreTests(
    'bare',
    (setup) => ({ store: new MemoryStore(setup) }),
    (name, fn) => registered.push([name, fn]),
  );
  assert.equal(registered.length, roomStoreCases(memory).length);
  assert.ok(registered.every(([n]) => n.startsWith('bare: ')));
  const skipped: string[] = [];
  for (const [name, fn] of registered) await fn({ skip: () => skipped.push(name) });
  assert.deepEqual(skipped, [
    'bare: what was appended survives close and a new store over the same storage',
    'bare: a failed append leaves nothing half-written: not its entries, records or checkpoint',
  ]);
});

test('the conformance suite fails a store that ignores the retention it is configured with, in the history cases and no other', async () => {
  // Made with the default retention (the last 10,000 ops) whatever the case asks, and the real clock.
  const failed = await failures(() => {
    const disk = new MemoryDisk();
    return { store: new MemoryStore({ disk }), reopen: () => new MemoryStore({ disk }) };
  });
  assert.deepEqual(
    [...failed.keys()].sort(),
    [
      'history: checkpoints keep the last `ops` ops (and a state to rebuild them from), and prune what is older',
      'history: checkpoints keep the ops of the last `days` days, with the time each was committed, and prune what is older',
      'history: ops 0 keeps nothing behind the checkpoint',
    ],
    [...failed].map(([n, m]) => `${n}: ${m}`).join('\n'),
  );
  assert.match(failed.get('history: ops 0 keeps nothing behind the checkpoint')!, /history starts at the checkpoint/);
});
