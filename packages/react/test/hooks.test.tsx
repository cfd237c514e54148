/** @jsxRuntime automatic */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Window } from 'happy-dom';

// A DOM for react-dom in Node.
const win = new Window();
Object.assign(globalThis, { window: win, document: win.document, navigator: win.navigator, HTMLElement: win.HTMLElement, IS_REACT_ACT_ENVIRONMENT: true });

const { act } = await import('react');
const { createRoot } = await import('react-dom/client');
const { ClientRoom, defineMachine } = await import('@hercules/core');
const { useView, useOpStage, usePositions, useUndo } = await import('../src/index.ts');

const machine = defineMachine({
  name: 'hooks',
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

test('useView re-renders only when the selected part changes, by identity', async () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const renders = { a: 0, b: 0 };
  const seen: number[] = [];
  function A() {
    const a = useView(room, 'submitted', (s) => s.a);
    renders.a++;
    seen.push(a.n);
    return null;
  }
  function B() {
    useView(room, 'submitted', (s) => s.b);
    renders.b++;
    return null;
  }
  const el = document.createElement('div');
  const root = createRoot(el as unknown as Element);
  await act(async () => {
    root.render(
      <>
        <A />
        <B />
      </>,
    );
  });
  assert.deepEqual(renders, { a: 1, b: 1 });
  await act(async () => {
    room.ops.incA();
  });
  assert.deepEqual(renders, { a: 2, b: 1 }, 'B did not re-render: its part kept its identity');
  await act(async () => {
    room.ops.incA();
    room.ops.incA();
  });
  assert.deepEqual(renders, { a: 3, b: 1 }, 'two changes in one batch: one render of A, none of B');
  assert.equal(seen.at(-1), 3);
  await act(async () => {
    room.ops.incB();
  });
  assert.deepEqual(renders, { a: 3, b: 2 }, 'now only B re-renders');
  await act(async () => {
    root.unmount();
  });
});

test('useOpStage follows an op through its stages', async () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const stages: (string | undefined)[] = [];
  const h = room.ops.incA();
  function S() {
    stages.push(useOpStage(h));
    return null;
  }
  const root = createRoot(document.createElement('div') as unknown as Element);
  await act(async () => {
    root.render(<S />);
  });
  assert.equal(stages.at(-1), 'submitted');
  await act(async () => {
    room.durable(1);
    await h.durable;
  });
  assert.equal(stages.at(-1), 'durable');
  await act(async () => {
    root.unmount();
  });
});

test("<Inspector> counts the room's ops by itself, from their submit on: no trackOp needed", async () => {
  const { Inspector } = await import('../src/index.ts');
  const { recentOps } = await import('../src/inspector.tsx');
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const before = room.ops.incA(); // submitted before the inspector opened: still pending, so counted
  const root = createRoot(document.createElement('div') as unknown as Element);
  await act(async () => {
    root.render(<Inspector room={room as never} />);
  });
  const handles: unknown[] = [before];
  await act(async () => {
    handles.push(room.ops.incA(), room.ops.incB());
  });
  assert.deepEqual(recentOps(room), handles);
  await act(async () => {
    room.durable(3);
  });
  assert.equal(recentOps(room).length, 3, 'a handle is counted once, however often it moves');
  await act(async () => {
    root.unmount();
  });
});

test('usePositions re-renders as the room makes progress, and not otherwise', async () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const seen: { durable: number; submitted: number }[] = [];
  function P() {
    seen.push(usePositions(room));
    return null;
  }
  const root = createRoot(document.createElement('div') as unknown as Element);
  await act(async () => {
    root.render(<P />);
  });
  await act(async () => {
    room.ops.incA();
  });
  await act(async () => {
    room.durable(1);
  });
  assert.deepEqual(
    seen.map((p) => [p.submitted, p.durable]),
    [
      [0, 0],
      [1, 0],
      [1, 1],
    ],
  );
  await act(async () => {
    room.flushNotifications();
  });
  assert.equal(seen.length, 3, 'no render without progress');
  await act(async () => {
    root.unmount();
  });
});

// spec: PRESENCE-EPHEMERAL
test('useOthers re-renders only when the selected part of the others’ presence changes; usePresence sets ours', async () => {
  const { PROTOCOL_VERSION } = await import('@hercules/core');
  const { useOthers, usePresence } = await import('../src/index.ts');
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0, notify: 'sync' });
  room.connected();
  room.receive({
    t: 'welcome',
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    from: 1,
    entries: [],
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: 0,
    members: ['me'],
  });
  const names: unknown[] = [];
  let setMine: (v: unknown) => void = () => {};
  const mine: unknown[] = [];
  function P() {
    names.push(
      useOthers(
        room,
        (o) => o.map((p) => (p.value as { name: string }).name).join(','),
        (a, b) => a === b,
      ),
    );
    const [m, set] = usePresence(room);
    mine.push(m);
    setMine = set;
    return null;
  }
  const root = createRoot(document.createElement('div') as unknown as Element);
  await act(async () => {
    root.render(<P />);
  });
  await act(async () => {
    room.receive({ t: 'presence', peers: [{ client: 'x', value: { name: 'Ada', cursor: 1 } }] });
  });
  await act(async () => {
    room.receive({ t: 'presence', peers: [{ client: 'x', value: { name: 'Ada', cursor: 2 } }] }); // the name did not change
  });
  await act(async () => {
    room.receive({ t: 'presence', peers: [{ client: 'y', value: { name: 'Bo' } }] });
  });
  await act(async () => {
    room.receive({ t: 'presence', peers: [{ client: 'x', value: null }] });
  });
  assert.deepEqual(names, ['', 'Ada', 'Ada,Bo', 'Bo'], 'no render when only a cursor moved');
  await act(async () => {
    setMine({ name: 'Me' });
  });
  assert.deepEqual(mine.at(-1), { name: 'Me' });
  assert.deepEqual(room.presence.get(), { name: 'Me' });
  await act(async () => {
    root.unmount();
  });
});

test('useUndo re-renders as canUndo and canRedo change; undo and redo act on the room', async () => {
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  const seen: string[] = [];
  let api!: ReturnType<typeof useUndo>;
  function U() {
    api = useUndo(room);
    seen.push(`${api.canUndo}/${api.canRedo}`);
    return null;
  }
  const root = createRoot(document.createElement('div') as unknown as Element);
  await act(async () => {
    root.render(<U />);
  });
  await act(async () => {
    room.ops.incA();
  });
  await act(async () => {
    api.undo();
  });
  assert.equal(room.getState().a.n, 0);
  await act(async () => {
    api.redo();
  });
  assert.equal(room.getState().a.n, 1);
  assert.deepEqual(seen, ['false/false', 'true/false', 'false/true', 'true/false']);
  await act(async () => root.unmount());
});
