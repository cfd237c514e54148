/**
 * The flight recorder (issue 39, item 4): a room exported from a real server replays clean; a
 * planted nondeterministic machine and a tampered export are reported at the first position
 * that differs; an export without digests still replays (checking outcomes only); a file that
 * is not a room export is refused with a code of the closed vocabulary.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError } from '@hercules/core';
import { until, tempDir } from './helpers.ts';
import { createServer } from '../src/server.ts';
import type { RoomFile } from '../src/backend-api.ts';
import { replayRoom } from '../src/replay.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { stateDigest } from '../src/store/state-digest.ts';
import { flaky, tally } from './fixtures/replay-machines.ts';

/**
 * A server over SQLite that writes a checkpoint append every op (checkpointEvery 1) while the
 * store writes the state itself rarely: the log stays, and the store records a digest per checkpoint.
 */
async function server() {
  const dir = tempDir('replay');
  const store = new SqliteStore(dir.dir, { checkpointEvery: 1_000_000 });
  const srv = await createServer({ port: 0, store, machines: [tally, flaky], log: 'silent', checkpointEvery: 1 });
  return {
    srv,
    close: async () => {
      await srv.close();
      dir.cleanup();
    },
  };
}

type Srv = Awaited<ReturnType<typeof server>>['srv'];

/** Submit, then wait until the store recorded the checkpoint digest at that position. */
async function submitAndRecord(srv: Srv, room: string, machine: string, op: string, args: unknown, author: string): Promise<number> {
  const { position } = await srv.room(room, machine).submit(op, args, { author });
  await until(async () => (await srv.room(room).export()).digests?.some((d) => d.pos === position), 10_000, `the digest at ${position}`);
  return position;
}

async function tallyExport(): Promise<RoomFile> {
  const { srv, close } = await server();
  try {
    for (let i = 1; i <= 6; i++) await submitAndRecord(srv, 'r', 'tally', 'add', { by: i, note: `n${i}` }, i % 2 ? 'ada' : 'bob');
    await srv.room('r', 'tally').submit('add', { by: -1 }, { author: 'eve' }); // throws: stored with its error
    return await srv.room('r').export();
  } finally {
    await close();
  }
}

test('an export from a real server carries a digest per checkpoint and of its head, and replays clean', async () => {
  const file = await tallyExport();
  assert.equal(file.entries.length, 7);
  // Every op's checkpoint was awaited but the last's (its digest may or may not be in yet).
  assert.deepEqual(
    file.digests?.map((d) => d.pos).filter((p) => p < 7),
    [0, 1, 2, 3, 4, 5, 6],
  );
  assert.equal(file.digests?.[3].digest, stateDigest({ total: 6, notes: ['n1', 'n2', 'n3'] }), 'the digest is of the state at that position');
  assert.equal(file.head?.pos, 7);
  assert.ok(file.entries[6].error, 'the throwing op is stored with its error');
  const report = replayRoom(JSON.parse(JSON.stringify(file)), [tally]);
  assert.equal(report.difference, undefined, JSON.stringify(report.difference));
  assert.deepEqual(report.checked, [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(report.ops, 7);
  assert.equal(report.finalDigest, stateDigest({ total: 21, notes: ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'] }));
});

test("a tampered export is reported at the tampered op's position, with the op and its author", async () => {
  const file = await tallyExport();
  const t = structuredClone(file);
  (t.entries[3].args as { by: number }).by = 40; // position 4
  const r = replayRoom(t, [tally]);
  assert.equal(r.difference?.pos, 4);
  assert.equal(r.difference?.kind, 'state');
  assert.equal(r.difference?.lastMatch, 3);
  assert.deepEqual(r.difference?.op, { name: 'add', args: { by: 40, note: 'n4' }, client: file.entries[3].client, seq: file.entries[3].seq, author: 'bob' });
  assert.deepEqual(r.checked, [0, 1, 2, 3]);
  // The checkpoint's state itself: at position 0.
  const c = structuredClone(file);
  (c.checkpoint.state as { total: number }).total = 1;
  assert.equal(replayRoom(c, [tally]).difference?.pos, 0);
  // An op's stored outcome: the op at 7 threw, the file now says it applied.
  const o = structuredClone(file);
  const { error: _error, ...applied } = o.entries[6];
  o.entries[6] = applied;
  const ro = replayRoom(o, [tally]);
  assert.equal(ro.difference?.pos, 7);
  assert.equal(ro.difference?.kind, 'outcome');
  assert.equal(ro.difference?.expected, 'applied');
  assert.match(ro.difference?.actual ?? '', /^threw: by must be a number >= 0/);
  // A tampered digest is a difference too (the file no longer says what the state was).
  const d = structuredClone(file);
  d.digests![5].digest = '0'.repeat(64);
  assert.equal(replayRoom(d, [tally]).difference?.pos, 5);
});

test('the planted nondeterministic machine is reported at the first position where its state differs', async () => {
  const { srv, close } = await server();
  let file: RoomFile;
  try {
    for (let i = 0; i < 3; i++) await submitAndRecord(srv, 'a', 'flaky', 'tick', {}, 'ada');
    await submitAndRecord(srv, 'b', 'flaky', 'tick', {}, 'bob'); // another room moves the counter the op reads
    for (let i = 0; i < 3; i++) await submitAndRecord(srv, 'a', 'flaky', 'tick', {}, 'ada');
    file = await srv.room('a').export();
  } finally {
    await close();
  }
  // A fresh process would start the counter over: a fresh module instance does the same here.
  const fresh = (await import(`./fixtures/replay-machines.ts?fresh=${Date.now()}`)) as typeof import('./fixtures/replay-machines.ts');
  const r = replayRoom(file, [fresh.flaky]);
  assert.equal(r.difference?.pos, 4, JSON.stringify(r.difference));
  assert.equal(r.difference?.kind, 'state');
  assert.equal(r.difference?.op?.name, 'tick');
  assert.equal(r.difference?.op?.author, 'ada');
  assert.deepEqual(r.checked, [0, 1, 2, 3]);
});

test('an export from before digests replays, says it can check outcomes only, and still imports', async () => {
  const file = await tallyExport();
  const old = structuredClone(file) as Partial<RoomFile>;
  delete old.digests;
  delete old.head;
  const r = replayRoom(old, [tally]);
  assert.equal(r.hasDigests, false);
  assert.equal(r.hasHead, false);
  assert.equal(r.difference, undefined);
  assert.deepEqual(r.checked, []);
  assert.equal(r.finalDigest, stateDigest({ total: 21, notes: ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'] }));
  const { srv, close } = await server();
  try {
    await srv.importRoom('old', old as RoomFile);
    assert.deepEqual(await srv.room('old').state(), { total: 21, notes: ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'] });
    await srv.importRoom('new', file);
    const again = await srv.room('new').export();
    assert.deepEqual(again.digests, file.digests, 'an import keeps the digests it was given');
  } finally {
    await close();
  }
});

test('a file that is not a room export, or names a machine not given, is refused with a closed-vocabulary code', async () => {
  const file = await tallyExport();
  const refused = (f: unknown, code: string, why: RegExp) =>
    assert.throws(
      () => replayRoom(f, [tally]),
      (e) => e instanceof HerculesError && e.code === code && why.test(e.message),
    );
  refused(null, 'bad-argument', /not a room export/);
  refused({ ...file, format: 'x' }, 'bad-argument', /not a room export/);
  refused({ ...file, entries: file.entries.slice(1) }, 'bad-argument', /entries\[0\]\.pos must be 1/);
  refused({ ...file, digests: [{ pos: 1, digest: 'abc' }] }, 'bad-argument', /digests\[0\]\.digest must be 64 lowercase hex/);
  refused({ ...file, digests: [{ pos: 9, digest: '0'.repeat(64) }] }, 'bad-argument', /digests\[0\]\.pos/);
  refused({ ...file, head: { pos: 3, digest: '0'.repeat(64) } }, 'bad-argument', /head\.pos must be an integer from 7 to 7/);
  refused({ ...file, machine: { name: 'nope', version: 1 } }, 'machine-mismatch', /does not export/);
  refused({ ...file, machine: { name: 'tally', version: 2 } }, 'server-too-old', /newer/);
});
