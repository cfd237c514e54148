import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { IDBFactory, IDBKeyRange } from 'fake-indexeddb';
import { HerculesError } from '@hercules/core';
import { memoryStorage, indexedDbStorage, connect, type ClientStorage } from '../src/index.ts';
import { copyChanged } from '../src/storage.ts';
import { sqliteStorage } from '@hercules/client-sqlite';
import Database from 'better-sqlite3';
import { createServer } from '@hercules/server';
import { tempDir, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { fakeLocks } from './fake-locks.ts';
import { checkBaseInParts, keyedStates } from './keyed-states.ts';

const op = (seq: number) => ({ client: 'c1', seq, name: 'say', args: { text: `m${seq}` }, digest: 1000 + seq });
const { dir, cleanup } = tempDir('storage');
process.on('exit', cleanup);

const kinds: [string, () => ClientStorage, boolean][] = [
  ['memory', () => memoryStorage(), false],
  ['sqlite', () => sqliteStorage(join(dir, 'c.sqlite')), true],
  [
    'indexeddb',
    (() => {
      const f = new IDBFactory();
      return () => indexedDbStorage('t', { indexedDB: f, IDBKeyRange });
    })(),
    true,
  ],
];

for (const [kind, make, persistent] of kinds) {
  // spec: DUR-SURVIVES-RESTART
  test(`${kind} storage keeps the client id, lastSeq and its digest, durable ops in order, and a base that prunes exactly the ops inside it`, async () => {
    const s = make();
    assert.equal(await s.load('room'), undefined);
    await s.init('room', 'c1');
    await Promise.all([s.append('room', [op(1), op(2)]), s.append('room', [op(3)])]); // one group commit
    await s.append('other', [{ ...op(1), client: 'c9' }]).catch(() => {}); // another room (not initialised)
    await s.saveBase('room', { pos: 7, state: { messages: [{ id: 'x', author: 'a', text: 'hi' }] }, ownSeq: 1 });
    const got = await s.load('room');
    assert.equal(got!.clientId, 'c1');
    assert.equal(got!.lastSeq, 3);
    assert.equal(got!.lastDigest, 1003, 'the digest of the op at lastSeq');
    assert.deepEqual(
      got!.durable.map((o) => o.seq),
      [2, 3],
      'the op inside the base left with it; the others stay',
    );
    assert.deepEqual(got!.durable[0].args, { text: 'm2' });
    assert.deepEqual(got!.base, { pos: 7, state: { messages: [{ id: 'x', author: 'a', text: 'hi' }] }, ownSeq: 1 });
    await s.saveBase('room', { pos: 5, state: { stale: true }, ownSeq: 3 });
    const after = (await s.load('room'))!;
    assert.equal(after.base!.pos, 7, 'an older base never replaces a newer one');
    assert.deepEqual(
      after.durable.map((o) => o.seq),
      [2, 3],
      '...nor deletes ops, since it was not kept',
    );
    await s.init('room', 'someone-else');
    assert.equal((await s.load('room'))!.clientId, 'c1', 'init never changes an existing id');
    await s.close();
    if (persistent) {
      const again = make();
      const r = await again.load('room');
      assert.deepEqual([r!.clientId, r!.lastSeq, r!.durable.map((o) => o.seq)], ['c1', 3, [2, 3]], 'survives reopening');
      await again.close();
    }
  });

  // spec: DUR-BEFORE-SEND
  test(`${kind} storage keeps the last seq reservation, in order with the appends, apart from the ops`, async () => {
    const s = make();
    assert.ok(s.reserve, 'the stores this package ships reserve seqs');
    await s.init('res', 'c1');
    assert.equal((await s.load('res'))!.reservedSeq, undefined, 'none until one is made');
    // Reservations and an append in one group commit: the last reservation wins.
    await Promise.all([s.reserve('res', 500), s.append('res', [op(1)]), s.reserve('res', 1000)]);
    const got = (await s.load('res'))!;
    assert.equal(got.reservedSeq, 1000);
    assert.equal(got.lastSeq, 1, 'a reservation is not an op: lastSeq is the last persisted op');
    assert.deepEqual(
      got.durable.map((o) => o.seq),
      [1],
    );
    await s.close();
    if (persistent) {
      const again = make();
      assert.equal((await again.load('res'))!.reservedSeq, 1000, 'survives reopening');
      await again.reserve!('res', 1);
      assert.equal((await again.load('res'))!.reservedSeq, 1, 'given back on a clean close');
      await again.close();
    }
  });
}

// spec: DUR-BEFORE-SEND, LOG-EXACTLY-ONCE
for (const reserving of [false, true]) {
  const how = reserving ? 'with seq reservations, ops go out and are ordered meanwhile' : 'ops stay Submitted and unsent';
  test(`a failing client store: a clear error; ${how}; then they become durable and arrive exactly once`, async (t) => {
    const srv = await createServer({ port: 0, dataDir: join(dir, `srv-flaky-${reserving}`), machines: [chat], log: 'silent' });
    t.after(() => srv.close());
    const inner = memoryStorage();
    // Fails three times, and (with reservations) for as long as the test says.
    let failures = 0;
    let failing = true;
    const flaky: ClientStorage = {
      load: (r) => inner.load(r),
      init: (r, c) => inner.init(r, c),
      saveBase: (r, b) => inner.saveBase(r, b),
      close: () => inner.close(),
      ...(reserving ? { reserve: (r: string, seq: number) => inner.reserve!(r, seq) } : {}),
      durability: 'memory',
      async append(room, ops) {
        if (failures < 3 || (reserving && failing)) {
          failures++;
          throw new Error('ENOSPC: no space left on device');
        }
        return inner.append(room, ops);
      },
    };
    const errors: string[] = [];
    const r = await connect({ url: srv.url, room: 'flaky', machine: chat, storage: flaky, sendAhead: reserving, onError: (e) => errors.push(e.message) });
    t.after(() => r.close());
    const h1 = r.ops.say({ text: 'one' });
    const h2 = r.ops.say({ text: 'two' });
    if (reserving) {
      // The reservation was stored: the ops need no local write to be ordered (durable on the server).
      await Promise.all([h1.authoritative, h2.authoritative]);
      assert.ok(failures > 0, 'ordered while the local writes fail');
      assert.equal((await inner.load(`${chat.name}/flaky`))!.durable.length, 0, 'nothing of them persisted here yet');
      failing = false;
    } else {
      await new Promise((res) => setTimeout(res, 20));
      assert.equal(h1.stage, 'submitted', 'not durable while the store fails');
    }
    assert.match(errors[0], /ENOSPC/);
    await Promise.all([h1.visible, h2.visible]);
    await r.flushed();
    assert.deepEqual(
      (await inner.load(`${chat.name}/flaky`))!.durable.map((o) => o.seq),
      [1, 2],
      'and persisted here once a write succeeds',
    );
    assert.deepEqual(
      r.getState('visible').messages.map((m) => m.text),
      ['one', 'two'],
    );
    assert.ok(failures >= 3);
    assert.equal(errors.length, 1, `one report for the run of failed writes: ${errors.join(' | ')}`);
    await r.close();
  });
}

// spec: DUR-BEFORE-SEND, LOG-EXACTLY-ONCE
test('a full client disk: one report for the whole run of failures, however many ops, and every op arrives once there is space again', async (t) => {
  const srv = await createServer({ port: 0, dataDir: join(dir, 'srv-full'), machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  const inner = memoryStorage();
  let full = false;
  let failed = 0;
  const noSpace = () => {
    failed++;
    return Promise.reject(new Error('ENOSPC: no space left on device'));
  };
  const disk: ClientStorage = {
    load: (r) => inner.load(r),
    init: (r, c) => inner.init(r, c),
    close: () => inner.close(),
    durability: 'memory',
    append: (r, ops) => (full ? noSpace() : inner.append(r, ops)),
    reserve: (r, seq) => (full ? noSpace() : inner.reserve!(r, seq)),
    saveBase: (r, b) => (full ? noSpace() : inner.saveBase(r, b)),
  };
  const errors: Error[] = [];
  const r = await connect({ url: srv.url, room: 'full', machine: chat, storage: disk, onError: (e) => errors.push(e) });
  t.after(() => r.close());
  await r.whenOnline({ timeoutMs: 10_000 });
  full = true;
  // 1,000 ops in 100 turns: past half of the first block (1,000 seqs, reserved before the disk
  // filled), every op needs the next reservation, which the old driver asked for again, and
  // reported failing, on each of them.
  const handles = [];
  for (let turn = 0; turn < 100; turn++) {
    for (let i = 0; i < 10; i++) handles.push(r.ops.say({ text: `m${turn * 10 + i}` }));
    await new Promise((res) => setTimeout(res, 2));
  }
  await until(() => failed >= 4, 10_000, 'the store to fail a few retries');
  assert.equal(errors.length, 1, `one report: ${errors.length} (${errors[1]?.message})`);
  assert.ok(errors[0] instanceof HerculesError && errors[0].code === 'storage-failed' && /ENOSPC/.test(errors[0].message), errors[0].message);
  full = false;
  // The retries back off to at most 5 s.
  await Promise.all(handles.map((h) => h.durable));
  await Promise.all(handles.map((h) => h.visible));
  assert.equal(r.getState('authoritative').messages.length, 1000, 'each op once');
  assert.equal(errors.length, 1, 'nothing more to report');
});

// spec: DUR-SURVIVES-RESTART, LOG-EXACTLY-ONCE
test('IndexedDB: a restarted client shows its durable ops offline and delivers them once', async (t) => {
  const srv = await createServer({ port: 0, dataDir: join(dir, 'srv-idb'), machines: [chat], log: 'silent' });
  t.after(() => srv.close());
  const factory = new IDBFactory();
  const off = await connect({
    url: 'ws://127.0.0.1:1',
    room: 'idb',
    machine: chat,
    storage: indexedDbStorage('app', { indexedDB: factory, IDBKeyRange }),
    backoff: { minMs: 5000, maxMs: 5000 },
  });
  await off.ops.say({ text: 'queued offline' }).durable;
  await off.close();
  const on = await connect({ url: srv.url, room: 'idb', machine: chat, storage: indexedDbStorage('app', { indexedDB: factory, IDBKeyRange }) });
  assert.deepEqual(
    on.getState('durable').messages.map((m) => m.text),
    ['queued offline'],
  );
  await Promise.all(on.pending().map((h) => h.visible));
  const h = on.ops.say({ text: 'online' });
  await h.visible;
  assert.deepEqual(
    on.getState('visible').messages.map((m) => m.text),
    ['queued offline', 'online'],
  );
  await on.close();
});

// spec: DUR-ONE-WRITER
test('a sqlite store belongs to one process at a time: a second opener gets a clear error, the lock dies with its holder', async () => {
  const file = join(dir, 'locked.sqlite');
  const first = sqliteStorage(file);
  await first.init('room', 'c1');
  await first.append('room', [op(1)]);
  assert.throws(
    () => sqliteStorage(file),
    (e: Error & { code?: string }) => e.code === 'store-in-use' && /in use by another process/.test(e.message),
    'same process, second handle',
  );
  // Another process, as when an app is started twice with one store.
  const { spawnSync, spawn } = await import('node:child_process');
  const url = new URL('../../client-sqlite/src/sqlite-storage.ts', import.meta.url).href;
  const probe = `import { sqliteStorage } from ${JSON.stringify(url)}; try { sqliteStorage(${JSON.stringify(file)}); console.log('opened'); } catch (e) { console.log(e.message); }`;
  const other = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', probe], { encoding: 'utf8' });
  assert.match(other.stdout, /in use by another process/, `other process: ${other.stdout}${other.stderr}`);
  await first.close();
  // A holder killed with SIGKILL leaves no stale lock, and what it made durable is there.
  const hold = `import { sqliteStorage } from ${JSON.stringify(url)}; const s = sqliteStorage(${JSON.stringify(file)}); await s.append('room', [${JSON.stringify(op(2))}]); console.log('holding'); setInterval(() => {}, 1000);`;
  const holder = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', hold], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((res, rej) => {
    holder.stdout!.on('data', (d) => {
      if (String(d).includes('holding')) res();
    });
    holder.on('exit', () => rej(new Error('holder exited early')));
  });
  assert.throws(() => sqliteStorage(file), /in use by another process/, 'held by a live process');
  holder.kill('SIGKILL');
  await new Promise((res) => holder.once('exit', res));
  const after = sqliteStorage(file);
  assert.deepEqual(
    (await after.load('room'))!.durable.map((o) => o.seq),
    [1, 2],
  );
  await after.close();
});

// spec: DUR-ONE-WRITER
test('an IndexedDB store belongs to one tab at a time: a second opener gets store-in-use; closing the first frees it', async () => {
  const factory = new IDBFactory();
  const locks = fakeLocks();
  const env = { indexedDB: factory, IDBKeyRange, locks };
  const first = indexedDbStorage('tabs', env);
  await first.init('room', 'c1');
  await first.append('room', [op(1)]);
  assert.ok(locks.held.has('hercules-store:tabs'));
  const second = indexedDbStorage('tabs', env);
  await assert.rejects(second.load('room'), (e: Error & { code?: string }) => e.code === 'store-in-use' && /open in another tab/.test(e.message));
  await assert.rejects(second.append('room', [op(2)]), /open in another tab/, 'nothing written through a store that is not ours');
  await second.close(); // closing a store that never opened is fine
  const other = indexedDbStorage('other-name', env);
  assert.equal(await other.load('room'), undefined, 'another store name is another store');
  await other.close();
  // A reload: the new page asks while the old one still holds the lock, which it lets go soon.
  const reloaded = indexedDbStorage('tabs', env);
  const loading = reloaded.load('room');
  await new Promise((r) => setTimeout(r, 100));
  await first.close();
  assert.deepEqual(
    (await loading)!.durable.map((o) => o.seq),
    [1],
    'the waiting opener got the store once it was free',
  );
  await reloaded.close();
  assert.equal(locks.held.size, 0, 'close releases the lock');
  const third = indexedDbStorage('tabs', env);
  assert.deepEqual(
    (await third.load('room'))!.durable.map((o) => o.seq),
    [1],
  );
  await third.close();
  // Closed while still waiting for the lock: it does not keep the lock once it gets it.
  const blocker = indexedDbStorage('tabs', env);
  await blocker.load('room');
  const waiter = indexedDbStorage('tabs', env);
  const waited = waiter.load('room');
  await waiter.close();
  await blocker.close();
  await assert.rejects(waited, /closed while waiting/);
  assert.equal(locks.held.size, 0, 'nobody holds the lock');
  // connect() surfaces it: a clear error before anything is sent.
  const holder = indexedDbStorage('tabs', env);
  await holder.load('room');
  await assert.rejects(connect({ url: 'ws://127.0.0.1:1', room: 'room', machine: chat, storage: indexedDbStorage('tabs', env) }), /open in another tab/);
  await holder.close();
});

test('memory storage holds a frozen snapshot as it is, and copies only what changed of any other state: a 10k-key keyedMap shares every untouched leaf with the held copy', async () => {
  const { initial, run } = keyedStates();
  let state = initial;
  for (let i = 0; i < 10_000; i++) state = run(state, `k${i}`, i);
  const s = memoryStorage();
  await s.init('room', 'c');
  await s.saveBase('room', { pos: 1, state, ownSeq: 0 });
  const next = run(run(state, 'k7', -7), 'new', 1);
  assert.ok(Object.isFrozen(next), "an engine's snapshot is frozen: the store holds it as it is");
  await s.saveBase('room', { pos: 2, state: next, ownSeq: 0 });
  const got = (await s.load('room'))!.base!.state;
  assert.deepEqual(got, structuredClone(next), 'the held base is the saved state');
  // A state that is not frozen is copied (what changed since the last save): changing it after
  // the save does not change the base.
  const loose = structuredClone(next) as typeof next & { extra?: number };
  await s.saveBase('room', { pos: 3, state: loose, ownSeq: 0 });
  const looser = { ...loose, extra: 1 };
  await s.saveBase('room', { pos: 4, state: looser, ownSeq: 0 });
  looser.extra = 2;
  assert.equal(((await s.load('room'))!.base!.state as { extra?: number }).extra, 1, 'an unfrozen state is held as a copy');
  // The held copies themselves (load clones): compare copyChanged's output with its input.
  const first = structuredClone(state);
  const copy = copyChanged(state, first, next) as typeof next;
  assert.deepEqual(copy, structuredClone(next));
  const leaves = (node: unknown, out: unknown[]): unknown[] => {
    if (Array.isArray(node)) for (const c of node.slice(1)) leaves(c, out);
    else if (node !== null) out.push(node);
    return out;
  };
  const before = new Set(leaves(first.cells.tree, []));
  const after = leaves(copy.cells.tree, []);
  const fresh = after.filter((l) => !before.has(l)).length;
  assert.ok(after.length > 100, `a trie of many leaves: ${after.length}`);
  assert.ok(fresh >= 1 && fresh <= 2, `only the leaves written are new copies: ${fresh} of ${after.length}`);
  const sourceLeaves = new Set(leaves(next.cells.tree, []));
  assert.ok(
    after.every((l) => !sourceLeaves.has(l)),
    'no container of the copy is one of the snapshot',
  );
  assert.equal(copyChanged(state, first, state), first, 'nothing changed: the held copy itself');
});

/** Counts (and, with `failAt`, fails) the statement runs of the sqlite driver: the store's write steps. */
function statementRuns() {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as { run: (...a: unknown[]) => unknown };
  probe.close();
  const real = proto.run;
  const meter = { count: 0, failAt: 0, sql: [] as string[] };
  proto.run = function (this: { source: string }, ...a: unknown[]) {
    meter.count++;
    meter.sql.push(this.source);
    if (meter.count === meter.failAt) throw new Error(`planted fault at write step ${meter.count}: ${this.source}`);
    return real.apply(this, a);
  };
  return { meter, restore: () => void (proto.run = real) };
}

test('sqlite storage writes what changed of a keyedMap base, not the whole state; a fault at any write step of a save leaves the base before it whole', async (t) => {
  const runs = statementRuns();
  t.after(runs.restore);
  await checkBaseInParts({
    open: (name) => sqliteStorage(join(dir, `${name}.sqlite`)),
    reset: () => Object.assign(runs.meter, { count: 0, failAt: 0, sql: [] }),
    steps: () => runs.meter.count,
    partPuts: () => runs.meter.sql.filter((q) => q.startsWith('INSERT OR REPLACE INTO base_part')).length,
    failAt: (n) => void (runs.meter.failAt = n),
    fault: /planted fault/,
  });
});
