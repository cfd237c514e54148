/**
 * One client per browser profile and room (connectTabs, docs/tabs.md): tabs share one
 * connection and one store through a leader tab, and an op a follower tab submitted is kept
 * exactly once across a handover. IndexedDB is fake-indexeddb with fake Web Locks and Node's
 * BroadcastChannel; apps/web/test/e2e.test.ts runs the real ones in Chromium, with crashes.
 */
import { test } from 'node:test';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { IDBFactory, IDBKeyRange } from 'fake-indexeddb';
import { compactText, createText, defineMachine, textOps, TEXT_CLOCKS_PER_SEQ, type Machine, type TextAnchor, type TextInsertArgs } from '@hercules/core';
import { createServer } from '@hercules/server';
import { tempDir, until } from '@hercules/test-utils';
import { connect, connectTabs, indexedDbStorage, type ChannelLike, type ClientStorage, type ConnectedRoom, type OpHandle } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { fakeLocks } from './fake-locks.ts';
import { TextClocks } from '../src/tabs/text-clocks.ts';

const { dir, cleanup } = tempDir('tabs');
process.on('exit', cleanup);

/** A collaborative text and a cell, for text and undo through the tabs. */
const notes = defineMachine({
  name: 'tab-notes',
  version: 1,
  initial: { doc: createText(''), cell: '' },
  ops: {
    ...textOps(),
    setCell(s, a: { v: string }) {
      s.cell = String(a.v);
    },
  },
});

async function server(t: { after: (fn: () => unknown) => void }, name: string) {
  const srv = await createServer({ port: 0, dataDir: join(dir, name), machines: [chat, notes], log: 'silent' });
  t.after(() => srv.close());
  return srv;
}

const connections = async (srv: { port: number }) =>
  ((await (await fetch(`http://127.0.0.1:${srv.port}/healthz`)).json()) as { connections: number }).connections;

/** One browser profile: one IndexedDB and one lock manager for its tabs. */
function browser(storage?: (s: ClientStorage) => ClientStorage, machine: Machine<any, any> = chat) {
  const env = { indexedDB: new IDBFactory(), IDBKeyRange, locks: fakeLocks() };
  /** A tab; `mute()` drops what it posts from then on (its messages lost with it, as in a crash). */
  const tab = async (url: string) => {
    let muted = false;
    const channel = (name: string): ChannelLike => {
      const c = new BroadcastChannel(name) as unknown as ChannelLike;
      const post = c.postMessage.bind(c);
      c.postMessage = (m) => (muted ? undefined : post(m));
      return c;
    };
    const store = () => (storage ? storage(indexedDbStorage('shared', env)) : indexedDbStorage('shared', env));
    const room = await connectTabs({ url, room: 'r', machine: machine as typeof chat, locks: env.locks, channel, storage: store, onError: () => {} });
    return Object.assign(room, { mute: () => (muted = true) });
  };
  return { env, tab };
}

const texts = (r: ConnectedRoom<typeof chat>, view: 'authoritative' | 'submitted' = 'authoritative') => r.getState(view).messages.map((m) => m.text);

async function onServer(t: { after: (fn: () => unknown) => void }, url: string, n: number) {
  const fresh = await connect({ url, room: 'r', machine: chat });
  t.after(() => fresh.close());
  await fresh.whenOnline({ timeoutMs: 5000 });
  await until(() => fresh.getState('authoritative').messages.length >= n, 5000).catch(() => {});
  await new Promise((res) => setTimeout(res, 200)); // a duplicate would arrive by now
  return texts(fresh).sort();
}

// spec: DUR-HANDOVER
test('three tabs share one connection: a follower’s submit shows in its Submitted view at once, and every tab sees every view', async (t) => {
  const srv = await server(t, 'a');
  const b = browser();
  const [a, f1, f2] = [await b.tab(srv.url), await b.tab(srv.url), await b.tab(srv.url)];
  t.after(() => Promise.all([f2.close(), f1.close(), a.close()]));
  await a.whenOnline({ timeoutMs: 5000 });
  await f1.whenOnline({ timeoutMs: 5000 });
  assert.equal(await connections(srv), 1, 'one WebSocket for three tabs');
  const h = f1.ops.say({ text: 'from f1' });
  assert.deepEqual(texts(f1, 'submitted'), ['from f1'], 'in the follower’s Submitted view synchronously');
  f2.ops.say({ text: 'from f2' });
  a.ops.say({ text: 'from a' });
  await h.durable;
  await h.authoritative;
  assert.ok(h.seq > 0 && h.id === `${a.clientId}:${h.seq}`, 'one client id: the leader’s');
  for (const r of [a, f1, f2]) await until(() => r.getState('stable').messages.length === 3, 5000, 'stable everywhere');
  assert.deepEqual(texts(f2).sort(), ['from a', 'from f1', 'from f2']);
  assert.deepEqual(f1.positions(), a.positions(), 'the same positions in every tab');
  assert.equal(await connections(srv), 1);
});

/**
 * The leader made the follower's ops durable and sent them, but the follower never heard (its
 * messages were lost with it): the next leader finds the requests' tags in the store and does
 * not submit them again; a request sent during the handover is submitted once.
 */
async function handover(t: { after: (fn: () => unknown) => void }, name: string, storage?: (s: ClientStorage) => ClientStorage) {
  const srv = await server(t, name);
  const b = browser(storage);
  const leader = await b.tab(srv.url);
  const follower = await b.tab(srv.url);
  t.after(() => follower.close());
  await leader.whenOnline({ timeoutMs: 5000 });
  leader.mute();
  const sent = [follower.ops.say({ text: 'f1' }), follower.ops.say({ text: 'f2' })];
  const observer = await connect({ url: srv.url, room: 'r', machine: chat });
  t.after(() => observer.close());
  await until(() => observer.getState('authoritative').messages.length === 2, 5000, 'the server has both');
  assert.equal(sent[0]!.stage, 'submitted', 'the follower did not hear');
  const closing = leader.close();
  const during = follower.ops.say({ text: 'f3' });
  await closing;
  await until(() => follower.status() === 'online', 5000, 'the follower leads');
  await Promise.all([...sent, during].map((h) => h.durable));
  return onServer(t, srv.url, 3);
}

// spec: DUR-HANDOVER
test('handover: a follower’s ops the dead leader stored are not sent again, and one submitted meanwhile is sent once', async (t) => {
  assert.deepEqual(await handover(t, 'b'), ['f1', 'f2', 'f3']);
});

// spec: DUR-HANDOVER
test('planted bug: a next leader that cannot read the stored request tags sends the follower’s ops twice (the test above can fail)', async (t) => {
  const blind = (s: ClientStorage): ClientStorage => ({
    ...s,
    async load(room) {
      const got = await s.load(room);
      if (got) {
        delete got.marks;
        delete got.tags;
      }
      return got;
    },
  });
  assert.deepEqual(await handover(t, 'c', blind), ['f1', 'f1', 'f2', 'f2', 'f3']);
});

// spec: DUR-NOT-STRANDED
test('a store of an earlier version’s per-tab client, closed offline, is drained by the shared client’s leader under its own id', async (t) => {
  const srv = await server(t, 'd');
  const b = browser();
  const old = await connect({
    url: 'ws://127.0.0.1:1',
    room: 'r',
    machine: chat,
    storage: indexedDbStorage('hercules-old-tab', b.env),
    backoff: { minMs: 5000, maxMs: 5000 },
    recover: false,
    onError: () => {},
  });
  await old.ops.say({ text: 'typed in an old tab' }).durable;
  await old.close();
  const leader = await b.tab(srv.url);
  t.after(() => leader.close());
  await until(() => leader.getState('authoritative').messages.length === 1, 10_000, 'the old tab’s message on the server');
  assert.deepEqual(
    leader.getState('authoritative').messages.map((m) => [m.author, m.text]),
    [[old.clientId, 'typed in an old tab']],
  );
  await until(async () => !(await b.env.indexedDB.databases()).some((d) => d.name === 'hercules-old-tab'), 10_000, 'its store deleted');
});

test('a follower tab: every view and the positions as the leader’s; its presence goes through the leader; a bad one is refused', async (t) => {
  const srv = await server(t, 'e');
  const b = browser();
  const leader = await b.tab(srv.url);
  const follower = await b.tab(srv.url);
  const peer = await connect({ url: srv.url, room: 'r', machine: chat, onError: () => {} });
  t.after(() => Promise.all([peer.close(), follower.close(), leader.close()]));
  await Promise.all([leader.whenOnline({ timeoutMs: 5000 }), peer.whenOnline({ timeoutMs: 5000 })]);
  await follower.ops.say({ text: 'one' }).stable;
  await until(() => follower.positions().stable === 1 && leader.positions().stable === 1, 5000);
  for (const v of ['submitted', 'durable', 'authoritative', 'visible', 'stable'] as const) assert.deepEqual(follower.getState(v), leader.getState(v), v);
  assert.ok(Object.isFrozen(follower.getState('stable').messages), 'frozen, as a single tab’s views');
  follower.presence.set({ name: 'Ada' } as never);
  await until(() => peer.presence.others().some((p) => (p.value as { name?: string } | null)?.name === 'Ada'), 5000, 'the peer sees the follower’s presence');
  assert.deepEqual(follower.presence.get(), { name: 'Ada' });
  assert.throws(() => follower.presence.set({ name: 42 } as never), { code: 'bad-argument' });
  assert.throws(() => follower.submit('nope'), { code: 'unknown-op' });
  assert.throws(() => follower.ops.say({ text: 7 } as never), { code: 'bad-argument' });
});

const names = (r: { presence: { others(): readonly { client: string; key?: string; value: unknown }[] } }) =>
  r.presence
    .others()
    .map((p) => `${p.client}/${p.key === undefined ? '-' : 'tab'}:${(p.value as { name: string }).name}`)
    .sort();

// spec: PRESENCE-PER-KEY
test('each tab’s presence is its own: two tabs of one profile are two peers (one client id, two keys) to another client and to each other; a closed tab’s goes', async (t) => {
  const srv = await server(t, 'p');
  const b = browser();
  const leader = await b.tab(srv.url);
  const f1 = await b.tab(srv.url);
  const f2 = await b.tab(srv.url);
  const peer = await connect({ url: srv.url, room: 'r', machine: chat, onError: () => {} });
  t.after(() => Promise.all([peer.close(), f2.close(), f1.close(), leader.close()]));
  await Promise.all([leader.whenOnline({ timeoutMs: 5000 }), peer.whenOnline({ timeoutMs: 5000 })]);
  const id = leader.clientId;
  leader.presence.set({ name: 'Lea' } as never);
  f1.presence.set({ name: 'Fay' } as never);
  f2.presence.set({ name: 'Flo' } as never);
  peer.presence.set({ name: 'Pat' } as never);
  await until(() => peer.presence.others().length === 3, 5000, 'the peer sees three tabs');
  assert.deepEqual(names(peer), [`${id}/tab:Fay`, `${id}/tab:Flo`, `${id}/tab:Lea`]);
  assert.equal(new Set(peer.presence.others().map((p) => p.key)).size, 3, 'three distinct keys');
  // A client that joins now gets the three in its welcome.
  const late = await connect({ url: srv.url, room: 'r', machine: chat, onError: () => {} });
  t.after(() => late.close());
  await until(() => late.presence.others().length >= 4, 5000, 'the late client sees the three tabs and the peer');
  assert.deepEqual(names(late), [`${id}/tab:Fay`, `${id}/tab:Flo`, `${id}/tab:Lea`, `${peer.clientId}/-:Pat`].sort());
  const each = [
    [leader, ['Fay', 'Flo']],
    [f1, ['Flo', 'Lea']],
    [f2, ['Fay', 'Lea']],
  ] as const;
  for (const [tab, siblings] of each) {
    const want = [`${peer.clientId}/-:Pat`, ...siblings.map((n) => `${id}/tab:${n}`)].sort();
    await until(() => JSON.stringify(names(tab)) === JSON.stringify(want), 5000, `a tab sees the peer and its two siblings: ${names(tab)}`);
  }
  const heard: number[] = [];
  f2.presence.subscribe((o) => heard.push(o.length));
  // A tab that moves its cursor moves only its own entry.
  f1.presence.update({ name: 'Fay2' } as never);
  await until(() => names(peer).includes(`${id}/tab:Fay2`), 5000, 'the peer sees the move');
  assert.deepEqual(names(peer), [`${id}/tab:Fay2`, `${id}/tab:Flo`, `${id}/tab:Lea`]);
  // A tab closes: its entry goes for the peer and the other tabs.
  await f1.close();
  await until(() => peer.presence.others().length === 2, 5000, 'the closed tab’s entry goes');
  assert.deepEqual(names(peer), [`${id}/tab:Flo`, `${id}/tab:Lea`]);
  await until(() => names(f2).length === 2, 5000, 'and from its sibling');
  assert.ok(heard.length > 0, 'a sibling’s presence listener heard the changes');
  // A tab that crashes says nothing: the leader sees its Web Lock freed.
  f2.mute();
  await f2.close();
  await until(() => peer.presence.others().length === 1, 5000, 'the crashed tab’s entry goes');
  assert.deepEqual(names(peer), [`${id}/tab:Lea`]);
  assert.deepEqual(names(leader), [`${peer.clientId}/-:Pat`]);
});

test('text through a follower: its indexes are in its own Submitted view, the leader and a peer get the same text', async (t) => {
  const srv = await server(t, 'f');
  const b = browser(undefined, notes);
  const leader = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes>;
  const follower = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes>;
  const peer = await connect({ url: srv.url, room: 'r', machine: notes });
  t.after(() => Promise.all([peer.close(), follower.close(), leader.close()]));
  await Promise.all([leader.whenOnline({ timeoutMs: 5000 }), peer.whenOnline({ timeoutMs: 5000 })]);
  const ft = follower.text('doc');
  ft.insert(0, 'helo');
  assert.equal(ft.toString(), 'helo', 'in the follower’s Submitted view at once');
  ft.insert(3, 'l'); // an index in the follower’s view, before the leader has the first insert
  assert.equal(ft.toString(), 'hello');
  ft.delete(0, 2); // names the follower's characters by the clocks its view has, before the leader moves them
  assert.equal(ft.toString(), 'llo');
  leader.text('doc').insert(0, '> ');
  const last = ft.insert(ft.length(), '!')!;
  await last.stable;
  for (const r of [leader, follower, peer]) await until(() => r.text('doc').toString('stable').length === 6, 5000, 'stable in every room');
  for (const r of [leader, follower, peer]) assert.equal(r.text('doc').toString('stable'), '> llo!');
  assert.ok(last.seq > 0 && last.id === `${leader.clientId}:${last.seq}`, 'the shared client’s op');
});

test('TextClocks: a follower’s insert whose clock the leader’s view took moves to the next free one; its later ops that name it move with it, split where parts moved apart', () => {
  const doc = (next: number) => ({ doc: { ...createText(''), clients: ['c'], next: [next] } });
  const clocks = new TextClocks();
  const ins = (req: number, seen: number, k: number, t: string, l: TextAnchor | null, next: number) =>
    clocks.rewrite('f', { req, seen, name: 'textInsert', args: { p: 'doc', l, r: null, k, t } }, () => doc(next), 'c') as { k: number; l: TextAnchor | null };
  assert.equal(ins(1, 0, 0, 'ab', null, 0).k, 0, 'a free clock stays');
  assert.equal(ins(2, 0, 2, 'cd', ['c', 1, 1], 5).k, 5, 'taken: moved to the next free one (2-3 are now 5-6)');
  const third = ins(3, 0, 4, 'e', ['c', 3, 3], 7); // computed before the follower saw request 2 moved
  assert.deepEqual([third.k, third.l], [7, ['c', 6, 3]], 'its anchor on the moved character moves too (4 is now 7)');
  const del = clocks.rewrite(
    'f',
    {
      req: 4,
      seen: 0,
      name: 'textDelete',
      args: {
        p: 'doc',
        d: [
          ['c', 1, 4, 0],
          ['x', 2, 1, 0],
        ],
      },
    },
    () => doc(8),
    'c',
  );
  assert.deepEqual(
    (del as { d: unknown }).d,
    [
      ['c', 1, 1, 0],
      ['c', 5, 2, 0],
      ['c', 7, 1, 0],
      ['x', 2, 1, 0],
    ],
    'split at each move; another client’s range as it was',
  );
  const amid = clocks.rewrite(
    'f',
    { req: 5, seen: 1, failed: [2], name: 'textInsert', args: { p: 'doc', l: ['c', 2, 2], r: null, k: 9, t: 'g' } },
    () => doc(9),
    'c',
  );
  assert.deepEqual((amid as { l: unknown }).l, ['c', 2, 2], 'request 2 did not run in its view: its clock 2 is another character there');
  const beside = clocks.rewrite('f', { req: 6, seen: 1, name: 'textInsert', args: { p: 'doc', l: ['c', 2, 2], r: null, k: 10, t: 'h' } }, () => doc(10), 'c');
  assert.deepEqual((beside as { l: unknown }).l, ['c', 5, 2], 'request 2 ran in its view: clock 2 is its character, now 5');
  const later = ins(7, 3, 11, 'f', ['c', 3, 7], 11);
  assert.deepEqual([later.k, later.l], [11, ['c', 3, 7]], 'made after it saw requests 1-3: named as the leader names them');
  assert.deepEqual(
    clocks.rewrite('f', { req: 8, seen: 3, name: 'say', args: { text: 'x' } }, () => doc(0), 'c'),
    { text: 'x' },
    'other ops as they are',
  );
});

// spec: TEXT-ID-ONCE
test("TextClocks: below the leader room's floor (it restarted from a store that may lack inserts a dead leader sent), a follower's insert moves up to it, and its later ops with it", () => {
  /** The leader's Submitted view: its text's next clock of the shared client. */
  let next = 3;
  const clocks = new TextClocks();
  const floor = 5000;
  const ins = (req: number, k: number, t: string, l: TextAnchor | null) => {
    const doc = { doc: { ...createText(''), clients: ['c'], next: [next] } };
    const a = clocks.rewrite('f', { req, seen: 0, name: 'textInsert', args: { p: 'doc', l, r: null, k, t } }, () => doc, 'c', floor) as TextInsertArgs;
    next = a.k + t.length;
    return a;
  };
  assert.equal(ins(1, 3, 'ab', ['c', 2, 2]).k, floor, 'free in the view, below the floor: moved to it');
  const later = ins(2, 5, 'c', ['c', 4, 4]);
  assert.deepEqual([later.k, later.l], [floor + 2, ['c', floor + 1, 4]], 'its anchor on the moved "b" moves too');
  assert.equal(ins(3, floor + 9, 'd', null).k, floor + 9, 'at or past the floor: as it is');
});

// spec: TEXT-ID-ONCE
test("a leader that took over from a store with seqs it may not hold (as a crashed leader leaves it) moves a follower's text past them; the text comes out as typed", async (t) => {
  const srv = await server(t, 'h');
  // What a leader that crashed while sending ahead leaves: a reservation past the ops stored.
  const crashed = (s: ClientStorage): ClientStorage => ({
    ...s,
    async load(room) {
      const got = await s.load(room);
      if (got) got.reservedSeq = got.lastSeq + 100;
      return got;
    },
  });
  const b = browser(crashed, notes);
  const first = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes>;
  const second = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes>;
  await first.whenOnline({ timeoutMs: 5000 });
  await first.text('doc').insert(0, 'ab')!.durable;
  await first.close();
  await until(() => (second as unknown as { leading: boolean }).leading && second.status() === 'online', 5000, 'the second tab leads');
  const lastSeq = 1;
  const floor = second.textClockFloor();
  assert.equal(floor, (lastSeq + 100 + 1) * TEXT_CLOCKS_PER_SEQ, 'past every seq the store reserved');
  const follower = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes>;
  const peer = await connect({ url: srv.url, room: 'r', machine: notes });
  t.after(() => Promise.all([peer.close(), follower.close(), second.close()]));
  await until(() => follower.text('doc').toString() === 'ab', 5000, "the follower has the leader's view");
  const ft = follower.text('doc');
  ft.insert(2, 'xy');
  ft.insert(4, '!'); // after its own "y", before the leader has moved it
  const last = ft.delete(2, 1)!; // its "x"
  await last.stable;
  for (const r of [second, follower, peer]) await until(() => r.text('doc').toString('stable') === 'aby!', 5000, 'stable in every room');
  const held = peer.getState('stable').doc;
  const ks = compactText(held).chunks.flatMap((c) => c.runs.filter((r) => held.clients[r[0]] === second.clientId).map((r) => r[1]));
  assert.ok(ks.length >= 2 && ks.slice(1).every((k) => k >= floor), `the follower's characters are past the floor: ${ks}`);
});

// spec: OP-REJECTED-TOLD
test('onRejected in a follower hears its own rejected ops (a listener added as a follower carries over when it leads); the leader hears every one', async (t) => {
  const srv = await server(t, 'g');
  const b = browser();
  const leader = await b.tab(srv.url);
  const follower = (await b.tab(srv.url)) as Awaited<ReturnType<typeof b.tab>> & { leading: boolean };
  t.after(() => follower.close());
  await leader.whenOnline({ timeoutMs: 5000 });
  const heard = { leader: [] as OpHandle[], follower: [] as OpHandle[] };
  const said = (hs: OpHandle[]) => hs.map((h) => `${h.name}:${h.error}`);
  leader.onRejected((h) => heard.leader.push(h));
  const off = follower.onRejected((h) => heard.follower.push(h));
  const ok = follower.ops.say({ text: 'fine' });
  const bad = follower.ops.say({ text: '   ' }); // passes validation, throws at its place
  leader.ops.say({ text: '  ' }); // the leader's own: not the follower's to hear
  await ok.stable;
  await assert.rejects(bad.authoritative);
  await until(() => heard.follower.length === 1 && heard.leader.length === 2, 5000, 'told');
  assert.equal(heard.follower[0], bad, 'the follower hears its own handle');
  assert.deepEqual(said(heard.follower), ['say:empty message']);
  assert.deepEqual(said(heard.leader), ['say:empty message', 'say:empty message'], 'the leader hears both');
  await leader.close();
  await until(() => follower.leading && follower.status() === 'online', 5000, 'the follower leads');
  const late = follower.ops.say({ text: ' ' });
  await until(() => heard.follower.includes(late), 5000, 'the listener added as a follower heard it as a leader');
  off();
  const after = follower.ops.say({ text: '  ' });
  await after.authoritative.catch(() => {});
  assert.ok(!heard.follower.includes(after), 'not after off()');
});

test('undo: the leader undoes the shared client’s last step (a follower’s op too); a follower has none, and its undo listener hears once it leads', async (t) => {
  const srv = await server(t, 'h');
  const b = browser(undefined, notes);
  const leader = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes> & { leading: boolean };
  const follower = (await b.tab(srv.url)) as unknown as ConnectedRoom<typeof notes> & { leading: boolean };
  t.after(() => follower.close());
  await leader.whenOnline({ timeoutMs: 5000 });
  const told: boolean[] = [];
  follower.onUndoChange((s) => told.push(s.canUndo));
  await follower.ops.setCell({ v: 'f' }).durable;
  assert.equal(follower.canUndo(), false, 'a follower keeps no undo history');
  assert.equal(follower.undo(), undefined);
  assert.equal(follower.redo(), undefined);
  assert.equal(
    follower.undoGroup(() => 7),
    7,
    'undoGroup still runs its function',
  );
  assert.equal(leader.canUndo(), true, 'the follower’s op is a step of the shared client');
  await leader.undo()!.stable;
  await until(() => follower.getState('stable').cell === '', 5000, 'undone in the follower');
  assert.equal(leader.canRedo(), true);
  assert.deepEqual(told, [], 'nothing to tell a follower');
  await leader.ops.setCell({ v: 'l' }).durable;
  await leader.close();
  await until(() => follower.leading, 5000, 'the follower leads');
  // A new leader's room starts with no history (undo is per session, docs/undo.md).
  assert.equal(follower.canUndo(), false);
  await follower.ops.setCell({ v: 'g' }).durable;
  assert.equal(follower.canUndo(), true);
  assert.deepEqual(told, [true], 'the listener added as a follower hears its room');
  await follower.undo()!.stable;
  assert.equal(follower.getState('stable').cell, 'l');
});
