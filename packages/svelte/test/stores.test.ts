/**
 * @hercules/svelte (issue 41, item 4): the stores through the store contract (subscribe,
 * svelte/store's get and derived) and through `$store` in a component compiled by Svelte and
 * rendered on the server, against a ClientRoom driven by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { derived, get, type Readable } from 'svelte/store';
import { compile } from 'svelte/compiler';
import { render } from 'svelte/server';
import { ClientRoom, PROTOCOL_VERSION, defineMachine } from '@hercules/core';
import { countSubscriptions } from '@hercules/test-utils';
import {
  memberPositionsStore,
  membersStore,
  opStageStore,
  othersStore,
  positionsStore,
  presenceStore,
  seenByStore,
  statusStore,
  undoStore,
  viewStore,
} from '../src/index.ts';

const machine = defineMachine({
  name: 'stores',
  version: 1,
  initial: { a: { n: 0 }, b: { n: 0 } },
  ops: {
    incA(s) {
      s.a.n++;
    },
    incB(s) {
      s.b.n++;
    },
  },
});
type Room = ClientRoom<typeof machine>;

/** A room whose view subscriptions are counted: what a store leaves subscribed. */
function countedRoom(clientId = 'c'): { room: Room; listening: () => number } {
  const room = new ClientRoom(machine, { clientId, now: () => 0, notify: 'sync' });
  return { room, listening: countSubscriptions(room) };
}

/** Every value `store` gives its subscriber, and the unsubscribe. */
function record<T>(store: Readable<T>): { values: T[]; stop: () => void } {
  const values: T[] = [];
  return { values, stop: store.subscribe((v) => values.push(v)) };
}

test('viewStore: the selected part, given again only when it changed; subscribed to the room only while it has subscribers', () => {
  const { room, listening } = countedRoom();
  const a = viewStore(room, 'submitted', (s) => s.a);
  assert.equal(listening(), 0, 'not subscribed before its first subscriber');
  const seenA = record(a);
  const seenB = record(viewStore(room, 'submitted', (s) => s.b));
  const pair = record(
    viewStore(
      room,
      'submitted',
      (s) => [s.a.n, 'a'] as const,
      (x, y) => x[0] === y[0],
    ),
  );
  assert.equal(listening(), 3);
  room.ops.incA();
  room.ops.incB();
  room.ops.incB();
  assert.deepEqual(
    seenA.values.map((v) => v.n),
    [0, 1],
    'a: its first value, then one change',
  );
  assert.deepEqual(
    seenB.values.map((v) => v.n),
    [0, 1, 2],
  );
  assert.equal(pair.values.length, 2, 'isEqual held the pair while b changed');
  for (const s of [seenA, seenB, pair]) s.stop();
  assert.equal(listening(), 0, 'the last unsubscribe left the room');
  room.ops.incA();
  assert.equal(get(a).n, 2, 'a new subscriber gets the state of now');
  assert.equal(listening(), 0, 'get() subscribed and left');
});

test("svelte/store's derived reads a viewStore; a component's $store renders it on the server and leaves nothing subscribed", async (t) => {
  const { room, listening } = countedRoom();
  room.ops.incA();
  const doubled = derived(
    viewStore(room, 'submitted', (s) => s.a.n),
    (n) => n * 2,
  );
  const seen = record(doubled);
  room.ops.incA();
  assert.deepEqual(seen.values, [2, 4]);
  seen.stop();

  // Classic component syntax (export let, $store): what Svelte 4 and 5 both compile.
  const source = '<script>\n  export let count;\n</script>\n\n<p>a={$count}</p>\n';
  const { js } = compile(source, { generate: 'server', filename: 'Count.svelte' });
  const dir = mkdtempSync(join(tmpdir(), 'hercules-svelte-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // The compiled module imports svelte/internal/*: resolved here, since it runs from a temporary folder.
  const code = js.code.replace(/from '(svelte\/[^']+)'/g, (_, spec: string) => `from '${import.meta.resolve(spec)}'`);
  writeFileSync(join(dir, 'Count.js'), code);
  const Count = (await import(pathToFileURL(join(dir, 'Count.js')).href)).default;
  const { body } = render(Count, { props: { count: viewStore(room, 'submitted', (s) => s.a.n) } });
  assert.match(body, /<p>a=2<\/p>/);
  assert.equal(listening(), 0, 'the server render unsubscribed its $count');
});

test('opStageStore, positionsStore, membersStore, othersStore, presenceStore and statusStore follow the room', async () => {
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0, notify: 'sync' });
  const handle = room.ops.incA();
  const stage = record(opStageStore(handle));
  const positions = record(positionsStore(room));
  room.durable(1);
  await handle.durable;
  assert.deepEqual(stage.values, ['submitted', 'durable']);
  assert.deepEqual(
    positions.values.map((p) => [p.submitted, p.durable]),
    [
      [1, 0],
      [1, 1],
    ],
  );

  room.connected();
  const members = record(membersStore(room));
  const names = record(othersStore(room, (o) => o.map((p) => (p.value as { name: string }).name).join(',')));
  const welcome = { t: 'welcome', v: PROTOCOL_VERSION, client: 'me', author: 'me', from: 1, entries: [], highWater: 0, visibleSeq: 0, rejected: [], stable: 0 };
  room.receive({ ...welcome, members: ['me', 'you'] } as Parameters<Room['receive']>[0]);
  room.receive({ t: 'presence', peers: [{ client: 'x', value: { name: 'Ada', cursor: 1 } }] });
  room.receive({ t: 'presence', peers: [{ client: 'x', value: { name: 'Ada', cursor: 2 } }] });
  assert.deepEqual(members.values.at(-1), ['me', 'you']);
  assert.deepEqual(names.values, ['', 'Ada'], 'not given again when only a cursor moved');

  const mine = presenceStore(room);
  const seenMine = record(mine);
  mine.set({ name: 'Me' });
  mine.update((p) => ({ ...(p as object), away: true }));
  assert.deepEqual(room.presence.get(), { name: 'Me', away: true });
  assert.deepEqual(seenMine.values, [undefined, { name: 'Me' }, { name: 'Me', away: true }]);

  let status = 'connecting';
  const listeners = new Set<(s: unknown) => void>();
  const fake = Object.assign(Object.create(room) as Room, {
    status: () => status,
    onStatus: (fn: (s: unknown) => void) => {
      listeners.add(fn);
      return () => {
        listeners.delete(fn);
      };
    },
  });
  const seenStatus = record(statusStore(fake));
  status = 'online';
  for (const fn of listeners) fn(status);
  assert.deepEqual(seenStatus.values, ['connecting', 'online']);
  seenStatus.stop();
  assert.equal(listeners.size, 0);
  for (const s of [stage, positions, members, names, seenMine]) s.stop();
});

test('seenByStore and memberPositionsStore: receipts asked for while subscribed, values as acks and members change, stopped after', () => {
  const sent: { t: string; on?: boolean }[] = [];
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0, notify: 'sync' }, { send: (m) => sent.push(m as never), persist() {} });
  room.connected();
  room.receive({
    t: 'welcome',
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: 0,
    from: 1,
    entries: [],
    members: ['ada', 'me'],
  });
  const op = room.ops.incA();
  room.durable(1);
  room.flushSends();
  room.receive({ t: 'log', from: 1, entries: [{ k: 'own', seq: 1 }] });
  const seen = record(seenByStore(room, op));
  const positions = record(memberPositionsStore(room));
  assert.deepEqual(
    sent.filter((m) => m.t === 'receipts'),
    [{ t: 'receipts', on: true }],
  );
  room.receive({ t: 'acks', acks: [{ client: 'ada', pos: 1 }] });
  assert.deepEqual(seen.values, [[], ['ada']]);
  assert.deepEqual(positions.values.at(-1), [{ client: 'ada', pos: 1, behind: 0 }]);
  room.receive({ t: 'members', members: ['me'] });
  assert.deepEqual(seen.values.at(-1), []);
  seen.stop();
  positions.stop();
  assert.deepEqual(sent.filter((m) => m.t === 'receipts').at(-1), { t: 'receipts', on: false });
});

test('undoStore: given again only when canUndo or canRedo changes', () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const r = record(undoStore(room));
  room.ops.incA();
  room.ops.incB(); // the same step: nothing changes
  room.undo();
  room.redo();
  r.stop();
  room.undo();
  assert.deepEqual(
    r.values.map((v) => `${v.canUndo}/${v.canRedo}`),
    ['false/false', 'true/false', 'false/true', 'true/false'],
  );
});
