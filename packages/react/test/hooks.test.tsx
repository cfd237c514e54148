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
const { useView, useOpStage, usePositions, useSeenBy, useMemberPositions, useUndo } = await import('../src/index.ts');
const { PROTOCOL_VERSION } = await import('@hercules/core');

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

test('useSeenBy and useMemberPositions: the room asks for receipts while mounted, re-renders as acks and members change, and stops asking on unmount', async () => {
  const sent: { t: string; on?: boolean }[] = [];
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0, notify: 'sync' }, { send: (m) => sent.push(m as never), persist() {} });
  room.connected();
  const welcome = {
    t: 'welcome' as const,
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: 0,
    from: 1,
    entries: [],
  };
  room.receive({ ...welcome, members: ['ada', 'grace', 'me'] });
  const op = room.ops.incA();
  room.durable(1);
  room.flushSends();
  room.receive({ t: 'log', from: 1, entries: [{ k: 'own', seq: 1 }] });
  assert.equal(op.position, 1);
  const seen: string[][] = [];
  const behind: number[][] = [];
  function Receipt() {
    seen.push([...useSeenBy(room, op)]);
    behind.push(useMemberPositions(room).map((p) => p.behind));
    return null;
  }
  const el = document.createElement('div');
  const root = createRoot(el as unknown as Element);
  await act(async () => root.render(<Receipt />));
  assert.deepEqual(
    sent.filter((m) => m.t === 'receipts'),
    [{ t: 'receipts', on: true }],
    'mounting asks once, for both hooks',
  );
  assert.deepEqual(seen.at(-1), []);
  await act(async () =>
    room.receive({
      t: 'acks',
      acks: [
        { client: 'ada', pos: 1 },
        { client: 'grace', pos: 0 },
      ],
    }),
  );
  assert.deepEqual(seen.at(-1), ['ada']);
  assert.deepEqual(behind.at(-1), [0, 1]);
  const renders = seen.length;
  await act(async () => room.receive({ t: 'acks', acks: [{ client: 'ada', pos: 1 }] }));
  assert.equal(seen.length, renders, 'the same answer does not re-render');
  await act(async () => room.receive({ t: 'acks', acks: [{ client: 'grace', pos: 1 }] }));
  assert.deepEqual(seen.at(-1), ['ada', 'grace']);
  await act(async () => room.receive({ t: 'members', members: ['grace', 'me'] }));
  assert.deepEqual(seen.at(-1), ['grace'], 'a member that left is no longer counted');
  await act(async () => root.unmount());
  assert.deepEqual(sent.filter((m) => m.t === 'receipts').at(-1), { t: 'receipts', on: false }, 'unmounting stops them');
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

test('<Inspector history>: a slider over the retained log shows the state at a position, who wrote the op there, and the views on it', async () => {
  const { Inspector } = await import('../src/index.ts');
  const room = new ClientRoom(machine, { clientId: 'c', now: () => 0, notify: 'sync' });
  room.ops.incA();
  // A server's history: positions 2..5 kept; the state at p counts p.
  const entries = [3, 4, 5].map((pos) => ({
    pos,
    name: 'incA',
    args: {},
    author: `user${pos}`,
    client: `client-${pos}`,
    time: Date.UTC(2026, 10, 28, 12, 0, pos),
  }));
  const asked: number[] = [];
  const history = {
    log: async () => ({ start: 2, head: 5, entries }),
    stateAt: async (p: number) => {
      asked.push(p);
      return { n: p };
    },
  };
  const el = document.createElement('div');
  const root = createRoot(el as unknown as Element);
  await act(async () => {
    root.render(<Inspector room={room as never} history={history} />);
  });
  await act(async () => {}); // the state read settles
  const q = (id: string) => el.querySelector(`[data-testid="${id}"]`) as unknown as HTMLInputElement;
  assert.equal(q('tt-slider').min, '2');
  assert.equal(q('tt-slider').max, '5');
  assert.equal(q('tt-at').textContent, '5', 'at the head at first');
  assert.match(q('tt-op').textContent ?? '', /#5 incA by user5 \(client client-5\) at 12:00:05/);
  assert.deepEqual(JSON.parse(q('tt-state').textContent ?? ''), { n: 5 });
  // Slide back to 3.
  await act(async () => {
    const input = q('tt-slider');
    Object.getOwnPropertyDescriptor(win.HTMLInputElement.prototype, 'value')!.set!.call(input, '3');
    input.dispatchEvent(new win.Event('input', { bubbles: true }) as unknown as Event);
  });
  await act(async () => {});
  assert.equal(q('tt-at').textContent, '3');
  assert.match(q('tt-op').textContent ?? '', /#3 incA by user3/);
  assert.deepEqual(JSON.parse(q('tt-state').textContent ?? ''), { n: 3 });
  assert.deepEqual(asked, [5, 3]);
  // The five views' marks stand at the client's positions.
  const positions = room.positions();
  for (const v of ['stable', 'visible', 'authoritative', 'durable', 'submitted'] as const)
    assert.equal(q(`tt-mark-${v}`).getAttribute('data-pos'), String(positions[v]));
  await act(async () => {
    root.unmount();
  });
});
