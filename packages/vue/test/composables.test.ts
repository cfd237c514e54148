/**
 * @hercules/vue (issue 41, item 4): the composables in an effectScope, in a mounted component
 * (happy-dom) and in a server render, against a ClientRoom driven by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Window } from 'happy-dom';
import { countSubscriptions } from '@hercules/test-utils';

// A DOM for Vue's runtime-dom, before it loads (it looks for `document` once, on import).
const win = new Window();
Object.assign(globalThis, { window: win, document: win.document, navigator: win.navigator });
for (const name of ['Node', 'Element', 'HTMLElement', 'SVGElement', 'Text', 'Comment', 'DocumentFragment', 'Event'] as const)
  Object.assign(globalThis, { [name]: win[name] });

const { createApp, createSSRApp, effectScope, h, isReadonly, nextTick, ref, shallowRef, watch } = await import('vue');
const { renderToString } = await import('vue/server-renderer');
const { ClientRoom, PROTOCOL_VERSION, defineMachine } = await import('@hercules/core');
const { useMembers, useMemberPositions, useOpStage, useOthers, usePositions, usePresence, useSeenBy, useStatus, useUndo, useView } = await import(
  '../src/index.ts'
);

const machine = defineMachine({
  name: 'composables',
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
type Room = InstanceType<typeof ClientRoom<typeof machine>>;

/** A room whose view subscriptions are counted: what a composable leaves subscribed. */
function countedRoom(clientId = 'c'): { room: Room; listening: () => number } {
  const room = new ClientRoom(machine, { clientId, now: () => 0, notify: 'sync' });
  return { room, listening: countSubscriptions(room) };
}

test('useView in an effect scope: the selected part, set only when it changed, readonly; unsubscribed when the scope stops', () => {
  const { room, listening } = countedRoom();
  const scope = effectScope();
  const changes = { a: 0, b: 0, pair: 0 };
  const { a, pair } = scope.run(() => {
    const a = useView(room, 'submitted', (s) => s.a);
    const b = useView(room, 'submitted', (s) => s.b);
    // A new array from each snapshot, equal by the given isEqual while a.n stays.
    const pair = useView(
      room,
      'submitted',
      (s) => [s.a.n, 'a'] as const,
      (x, y) => x[0] === y[0],
    );
    watch(a, () => changes.a++, { flush: 'sync' });
    watch(b, () => changes.b++, { flush: 'sync' });
    watch(pair, () => changes.pair++, { flush: 'sync' });
    return { a, pair };
  })!;
  assert.equal(listening(), 3);
  room.ops.incA();
  assert.equal(a.value.n, 1);
  assert.deepEqual(changes, { a: 1, b: 0, pair: 1 }, 'b kept its identity: its ref was not set');
  room.ops.incB();
  room.ops.incB();
  assert.deepEqual(changes, { a: 1, b: 2, pair: 1 }, 'isEqual held the pair: not set');
  assert.deepEqual(pair.value, [1, 'a']);
  assert.ok(isReadonly(a), 'a readonly ref');
  scope.stop();
  assert.equal(listening(), 0, 'the scope ended: no subscription left');
  room.ops.incA();
  assert.equal(a.value.n, 1, 'no longer follows the room');
});

test('useView follows a room and a view given as refs', async () => {
  const first = countedRoom('one');
  const second = countedRoom('two');
  second.room.ops.incA();
  second.room.ops.incA();
  const room = shallowRef<Room>(first.room);
  const view = ref<'submitted' | 'visible'>('submitted');
  const scope = effectScope();
  const n = scope.run(() => useView(room, view, (s) => s.a.n))!;
  first.room.ops.incA();
  assert.equal(n.value, 1);
  room.value = second.room;
  await nextTick();
  assert.equal(n.value, 2, "the second room's state");
  assert.deepEqual([first.listening(), second.listening()], [0, 1], 'moved its subscription');
  view.value = 'visible';
  await nextTick();
  assert.equal(n.value, 0, 'nothing of ours is visible yet');
  scope.stop();
  assert.equal(second.listening(), 0);
});

test('a mounted component re-renders when its part changes and unsubscribes when unmounted; a server render reads once and subscribes nothing', async () => {
  const { room, listening } = countedRoom();
  room.ops.incA();
  let renders = 0;
  const Count = {
    setup() {
      const n = useView(room, 'submitted', (s) => s.a.n);
      return () => {
        renders++;
        return h('p', `a=${n.value}`);
      };
    },
  };
  assert.equal(await renderToString(createSSRApp(Count)), '<p>a=1</p>');
  assert.equal(listening(), 0, 'the server render left no subscription');

  const el = document.createElement('div');
  const app = createApp(Count);
  app.mount(el as unknown as Element);
  assert.equal(el.textContent, 'a=1');
  const before = renders;
  room.ops.incA();
  await nextTick();
  assert.equal(el.textContent, 'a=2');
  room.ops.incB();
  await nextTick();
  assert.equal(renders, before + 1, 'no render for a change to another part');
  app.unmount();
  assert.equal(listening(), 0);
});

test('useOpStage, usePositions, useMembers, useOthers, usePresence and useStatus follow the room', async () => {
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0, notify: 'sync' });
  const scope = effectScope();
  const handle = shallowRef(room.ops.incA());
  const refs = scope.run(() => ({
    stage: useOpStage(handle),
    positions: usePositions(room),
    members: useMembers(room),
    names: useOthers(room, (o) => o.map((p) => (p.value as { name: string }).name).join(',')),
    mine: usePresence(room),
  }))!;
  assert.equal(refs.stage.value, 'submitted');
  assert.deepEqual([refs.positions.value.submitted, refs.positions.value.durable], [1, 0]);
  room.durable(1);
  await handle.value.durable;
  assert.equal(refs.stage.value, 'durable');
  assert.equal(refs.positions.value.durable, 1);
  handle.value = room.ops.incB();
  await nextTick();
  assert.equal(refs.stage.value, 'submitted', 'follows the handle ref');

  room.connected();
  const welcome = { t: 'welcome', v: PROTOCOL_VERSION, client: 'me', author: 'me', from: 1, entries: [], highWater: 0, visibleSeq: 0, rejected: [], stable: 0 };
  room.receive({ ...welcome, members: ['me', 'you'] } as Parameters<Room['receive']>[0]);
  assert.deepEqual(refs.members.value, ['me', 'you']);
  room.receive({ t: 'presence', peers: [{ client: 'x', value: { name: 'Ada' } }] });
  assert.equal(refs.names.value, 'Ada');
  refs.mine.value = { name: 'Me' };
  assert.deepEqual(room.presence.get(), { name: 'Me' });
  assert.deepEqual(refs.mine.value, { name: 'Me' });
  scope.stop();

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
  const statusScope = effectScope();
  const s = statusScope.run(() => useStatus(fake))!;
  assert.equal(s.value, 'connecting');
  status = 'online';
  for (const fn of listeners) fn(status);
  assert.equal(s.value, 'online');
  statusScope.stop();
  assert.equal(listeners.size, 0);
});

test('useSeenBy and useMemberPositions: receipts asked for while the scope lives, refs follow acks and members, stopped when it ends', () => {
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
  const scope = effectScope();
  const refs = scope.run(() => ({ seen: useSeenBy(room, op), positions: useMemberPositions(room) }))!;
  assert.deepEqual(
    sent.filter((m) => m.t === 'receipts'),
    [{ t: 'receipts', on: true }],
  );
  assert.deepEqual(refs.seen.value, []);
  room.receive({ t: 'acks', acks: [{ client: 'ada', pos: 1 }] });
  assert.deepEqual(refs.seen.value, ['ada']);
  assert.deepEqual(refs.positions.value, [{ client: 'ada', pos: 1, behind: 0 }]);
  room.receive({ t: 'members', members: ['me'] });
  assert.deepEqual(refs.seen.value, []);
  scope.stop();
  assert.deepEqual(sent.filter((m) => m.t === 'receipts').at(-1), { t: 'receipts', on: false });
});

test('useUndo: canUndo and canRedo follow the room; undo and redo act on it; unsubscribed when the scope stops', () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const scope = effectScope();
  const u = scope.run(() => useUndo(room))!;
  assert.deepEqual([u.canUndo.value, u.canRedo.value], [false, false]);
  room.ops.incA();
  assert.deepEqual([u.canUndo.value, u.canRedo.value], [true, false]);
  u.undo();
  assert.equal(room.getState().a.n, 0);
  assert.deepEqual([u.canUndo.value, u.canRedo.value], [false, true]);
  u.redo();
  assert.equal(room.getState().a.n, 1);
  scope.stop();
  room.undo();
  assert.deepEqual([u.canUndo.value, u.canRedo.value], [true, false], 'no longer followed');
});
