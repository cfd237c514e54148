import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ClientRoom, HerculesError, RoomEngine, UNDO_OP, applyOp, defineMachine, diffState, type Change } from '../src/index.ts';
import { Loopback } from './harness.ts';

interface Cells {
  cells: Record<string, string>;
  doc: { title: string; tags: string[] };
  count: number;
}

const cells = defineMachine({
  name: 'undo-cells',
  version: 1,
  initial: { cells: {}, doc: { title: '', tags: [] }, count: 0 } as Cells,
  ops: {
    set(s, a: { key: string; value: string }) {
      s.cells[a.key] = a.value;
    },
    clear(s, a: { key: string }) {
      delete s.cells[a.key];
    },
    title(s, a: { title: string }) {
      s.doc.title = a.title;
    },
    tag(s, a: { tag: string }) {
      s.doc.tags.push(a.tag);
    },
    add(s, a: { by: number }) {
      s.count += a.by;
    },
    fail(_s, _a: undefined) {
      throw new Error('no');
    },
  },
  inverses: {
    add: (a) => ({ name: 'add', args: { by: -a.by } }),
  },
});

/** Two connected clients a and b; time moves 1 s between calls so each op is its own step. */
async function pair() {
  const net = new Loopback(cells);
  const a = net.client('a');
  const b = net.client('b');
  net.connect('a');
  net.connect('b');
  await net.settle();
  return { net, a, b };
}

// spec: UNDO-OWN, UNDO-CONVERGE
test('undo takes back our write and converges on every replica', async () => {
  const { net, a, b } = await pair();
  a.ops.set({ key: 'x', value: 'a1' });
  assert.equal(a.canUndo(), true);
  await net.settle();
  net.now += 1000;
  const h = a.undo();
  assert.ok(h);
  assert.equal(h.name, UNDO_OP);
  assert.equal(a.getState().cells.x, undefined, 'speculatively undone at once');
  assert.equal(a.canUndo(), false);
  assert.equal(a.canRedo(), true);
  await net.settle();
  assert.deepEqual(b.getState('authoritative').cells, {});
  assert.deepEqual(a.getState('authoritative'), b.getState('authoritative'));
});

// spec: UNDO-OWN
test('undo leaves a path someone else wrote since as they wrote it, and restores ours', async () => {
  const { net, a, b } = await pair();
  a.undoGroup(() => {
    a.ops.set({ key: 'x', value: 'a1' });
    a.ops.set({ key: 'y', value: 'a1' });
  });
  await net.settle();
  b.ops.set({ key: 'x', value: 'b1' });
  await net.settle();
  a.undo();
  await net.settle();
  assert.deepEqual(b.getState('authoritative').cells, { x: 'b1' }, "b's x stays; a's y is taken back");
  assert.deepEqual(a.getState('authoritative'), b.getState('authoritative'));
});

// spec: UNDO-REDO
test('redo restores our change where nobody wrote since; new ops clear the redo stack', async () => {
  const { net, a, b } = await pair();
  a.ops.title({ title: 'Plan' });
  a.stopCapturing(); // the same turn: without this, one step
  a.ops.set({ key: 'k', value: 'v' });
  a.undo();
  a.undo();
  assert.deepEqual(a.getState().doc.title, '');
  a.redo();
  assert.equal(a.getState().doc.title, 'Plan');
  assert.equal(a.getState().cells.k, undefined);
  assert.equal(a.canRedo(), true);
  a.ops.set({ key: 'z', value: '1' });
  assert.equal(a.canRedo(), false, 'a new change clears redo');
  await net.settle();
  assert.deepEqual(b.getState('authoritative'), a.getState('authoritative'));
  assert.equal(b.getState('authoritative').doc.title, 'Plan');
});

// spec: UNDO-STEP
test('ops of one turn are one step; a new turn after captureMs is another; the merge window groups typing', async () => {
  const { net, a } = await pair();
  a.ops.set({ key: 'x', value: '1' });
  a.ops.set({ key: 'y', value: '1' });
  await Promise.resolve();
  net.now += 1000;
  for (const t of ['h', 'he', 'hel']) {
    a.ops.title({ title: t });
    await Promise.resolve();
    net.now += 100; // inside the 500 ms window
  }
  const undo = a.undo()!;
  assert.equal(a.getState().doc.title, '');
  assert.deepEqual(a.getState().cells, { x: '1', y: '1' });
  // Typing merged into one restore per path.
  const args = (undo as unknown as { op: { args: { do: unknown[] } } }).op.args;
  assert.equal(args.do.length, 1);
  a.undo();
  assert.deepEqual(a.getState().cells, {});
  assert.equal(a.canUndo(), false);
  await net.settle();
});

// spec: UNDO-REJECTED
test('an op the server rejects leaves no undo step; undo works offline and on unconfirmed ops', async () => {
  const net = new Loopback(cells);
  const a = net.client('a');
  a.ops.fail(undefined);
  assert.equal(a.canUndo(), false, 'an op that threw changed nothing');
  a.ops.set({ key: 'x', value: 'off' });
  a.stopCapturing();
  a.ops.set({ key: 'y', value: 'off' });
  a.undo(); // offline, before any confirmation
  assert.deepEqual(a.getState().cells, { x: 'off' });
  net.connect('a');
  await net.settle();
  assert.deepEqual(a.getState('authoritative').cells, { x: 'off' });
  assert.deepEqual(net.server.headSnapshot().cells, { x: 'off' });
});

// spec: UNDO-INVERSE
test('a declared inverse is used where restoring values would be wrong (a counter others move)', async () => {
  const { net, a, b } = await pair();
  a.ops.add({ by: 5 });
  b.ops.add({ by: 10 });
  await net.settle();
  net.now += 1000;
  a.undo();
  await net.settle();
  assert.equal(b.getState('authoritative').count, 10, "b's +10 stays, a's +5 is taken back");
  a.redo();
  await net.settle();
  assert.equal(b.getState('authoritative').count, 15);
});

// spec: UNDO-CHECKED
test('the server checks an undo like any op: malformed arguments are refused, apps cannot submit it directly', async () => {
  const server = new RoomEngine(cells);
  assert.throws(
    () => server.submitAsServer('api', UNDO_OP, { nope: 1 }, undefined, 0),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  assert.throws(
    () => server.submitAsServer('api', UNDO_OP, { do: [{ op: 'set', args: { key: 1 } }, { op: 'nope' }], of: 1 }, undefined, 0),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  const r = server.submitAsServer('api', UNDO_OP, { do: [{ path: ['count'], from: 0, to: 3 }], of: 1 }, undefined, 0);
  assert.equal(r.result.error, undefined);
  assert.equal(server.headSnapshot().count, 3);
  const a = new ClientRoom(cells, { clientId: 'a' });
  assert.throws(
    () => a.submit(UNDO_OP, { do: [], of: 1 }),
    (e: unknown) => e instanceof HerculesError && e.code === 'unknown-op',
  );
  assert.throws(
    () => defineMachine({ name: 'x', version: 1, initial: {}, ops: { '~mine': () => {} } }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-machine',
  );
});

// spec: UNDO-STEP
test('a submit that throws leaves the stacks as they were', () => {
  const a = new ClientRoom(cells, { clientId: 'a' });
  a.ops.set({ key: 'x', value: '1' });
  a.undo();
  assert.throws(
    () => a.ops.set({ key: 'x', value: undefined as unknown as string }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
  );
  assert.equal(a.canRedo(), true, 'the redo stack is kept');
  assert.equal(a.canUndo(), false, 'no step for the op that was not submitted');
  a.redo();
  assert.equal(a.getState().cells.x, '1');
});

// spec: UNDO-STEP
test('undo tracking can be turned off', () => {
  const a = new ClientRoom(cells, { clientId: 'a', undo: false });
  a.ops.set({ key: 'x', value: '1' });
  assert.equal(a.canUndo(), false);
  assert.equal(a.undo(), undefined);
});

// spec: UNDO-STEP
test('onUndoChange hears canUndo and canRedo change', () => {
  const a = new ClientRoom(cells, { clientId: 'a' });
  const heard: string[] = [];
  a.onUndoChange((s) => heard.push(`${s.canUndo}/${s.canRedo}`));
  a.ops.set({ key: 'x', value: '1' });
  a.ops.set({ key: 'x', value: '2' });
  a.undo();
  a.redo();
  assert.deepEqual(heard, ['true/false', 'false/true', 'true/false']);
});

test('diffState names the changed paths and compares arrays whole', () => {
  const before = Object.freeze({ a: Object.freeze({ x: 1, y: Object.freeze([1]) }), b: 2 });
  const after = { a: { x: 1, y: [1, 2], z: 3 }, c: 4 };
  const out: Change[] = [];
  diffState(before, after, out);
  assert.deepEqual(out, [
    { path: ['a', 'y'], before: [1], after: [1, 2] },
    { path: ['a', 'z'], before: undefined, after: 3 },
    { path: ['c'], before: undefined, after: 4 },
    { path: ['b'], before: 2, after: undefined },
  ]);
});

// spec: UNDO-REDO (property): ops that write disjoint paths; undo then redo gives the state before undo.
test('property: for ops on disjoint paths, undo then redo gives the state before the undo', () => {
  const opArb = fc.oneof(
    fc.record({ name: fc.constant('set' as const), key: fc.constantFrom('p', 'q', 'r', 's'), value: fc.string({ maxLength: 4 }) }),
    fc.record({ name: fc.constant('clear' as const), key: fc.constantFrom('p', 'q', 'r', 's') }),
    fc.record({ name: fc.constant('title' as const), value: fc.string({ maxLength: 4 }) }),
    fc.record({ name: fc.constant('tag' as const), value: fc.string({ maxLength: 2 }) }),
  );
  fc.assert(
    fc.property(fc.array(fc.array(opArb, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 6 }), fc.nat(5), (steps, undos) => {
      const a = new ClientRoom(cells, { clientId: 'a', undo: { captureMs: 0 } });
      for (const step of steps) {
        // Disjoint: a step's ops write distinct paths (the first op on each path is kept).
        const seen = new Set<string>();
        a.undoGroup(() => {
          for (const op of step) {
            const path = op.name === 'set' || op.name === 'clear' ? `cells.${op.key}` : op.name;
            if (seen.has(path)) continue;
            seen.add(path);
            if (op.name === 'set') a.ops.set({ key: op.key, value: op.value });
            else if (op.name === 'clear') a.ops.clear({ key: op.key });
            else if (op.name === 'title') a.ops.title({ title: op.value });
            else a.ops.tag({ tag: op.value });
          }
        });
      }
      for (let i = 0; i < undos; i++) a.undo();
      const before = a.getState();
      if (!a.undo()) return;
      a.redo();
      assert.deepEqual(a.getState(), before);
    }),
    { numRuns: 300 },
  );
});

// spec: UNDO-CONVERGE
test('applyOp runs an undo with no room around it (a replica replaying the log)', () => {
  const s0 = cells.initial;
  const r = applyOp(cells, s0, { client: 'a', seq: 2, name: UNDO_OP, args: { do: [{ path: ['cells', 'x'], to: 'v' }], of: 1 }, author: 'a' }, 1);
  assert.equal(r.error, undefined);
  assert.equal(r.state.cells.x, 'v');
  const skipped = applyOp(
    cells,
    r.state,
    { client: 'a', seq: 3, name: UNDO_OP, args: { do: [{ path: ['cells', 'x'], from: 'other' }], of: 1 }, author: 'a' },
    2,
  );
  assert.equal(skipped.state.cells.x, 'v', 'the value is no longer ours: left alone');
});

// spec: UNDO-OWN
test('an element edited in place is undone by index; an array others grew or shrank since is left alone', async () => {
  const grid = defineMachine({
    name: 'undo-grid',
    version: 1,
    initial: {
      rows: [
        ['a', 'b'],
        ['c', 'd'],
      ],
    },
    ops: {
      cell(s, a: { row: number; col: number; text: string }) {
        s.rows[a.row][a.col] = a.text;
      },
      addRow(s) {
        s.rows.unshift(['new', 'new']);
      },
    },
  });
  const net = new Loopback(grid);
  const a = net.client('a');
  const b = net.client('b');
  net.connect('a');
  net.connect('b');
  await net.settle();
  a.ops.cell({ row: 0, col: 0, text: 'A' });
  await net.settle();
  b.ops.cell({ row: 1, col: 1, text: 'B' });
  await net.settle();
  a.undo();
  await net.settle();
  assert.deepEqual(
    b.getState('authoritative').rows,
    [
      ['a', 'b'],
      ['c', 'B'],
    ],
    "a's cell back, b's kept",
  );
  a.redo();
  await net.settle();
  b.ops.addRow();
  await net.settle();
  a.undo(); // rows moved: index 0 is no longer a's cell
  await net.settle();
  assert.deepEqual(b.getState('authoritative').rows, [
    ['new', 'new'],
    ['A', 'b'],
    ['c', 'B'],
  ]);
  assert.deepEqual(a.getState('authoritative'), b.getState('authoritative'));
});

// spec: UNDO-REDO
test('a step that wrote a path twice: its undo and redo are one restore each, so a redo never goes past what its undo took away', async () => {
  // The undo simulator's seed 1213 (issue 39): a's step wrote x twice (v1, then v2), with a write
  // of y between, so the two writes were two restores (v2 -> v1, then v1 -> v0). Another client
  // then put x back to v1. The undo's first restore found v1, not v2, and did nothing; its second
  // found v1 and made it v0. The redo's restores, oldest first, made v0 v1, then v1 v2: it left
  // v2 where its undo had taken away v1.
  const { net, a, b } = await pair();
  a.ops.set({ key: 'x', value: 'v0' });
  await net.settle();
  net.now += 1000;
  a.undoGroup(() => {
    a.ops.set({ key: 'x', value: 'v1' });
    a.getState(); // each op runs on its own (as when a frame comes between them): one record each
    a.ops.set({ key: 'y', value: 'y1' });
    a.getState();
    a.ops.set({ key: 'x', value: 'v2' });
  });
  await net.settle();
  b.ops.set({ key: 'x', value: 'v1' });
  await net.settle();
  a.undo();
  await net.settle();
  assert.deepEqual(b.getState('authoritative').cells, { x: 'v1' }, "x is b's v1, not what a's step left (v2): kept; a's y is taken back");
  a.redo();
  await net.settle();
  assert.deepEqual(b.getState('authoritative').cells, { x: 'v1', y: 'y1' }, 'the redo puts back y and leaves x as its undo found it');
  assert.deepEqual(a.getState('authoritative'), b.getState('authoritative'));
});

// spec: UNDO-REDO
test('a step that edits an element, grows its array, then edits the element again: undo and redo take all of it', async () => {
  // The two edits of rows[0][0] are not joined into one restore: the array grew between them, so
  // the growth's restore must come between theirs (joined, the undo would leave the new row).
  const grid = defineMachine({
    name: 'undo-grid-grow',
    version: 1,
    initial: { rows: [['a'], ['b']] },
    ops: {
      cell(s, a: { text: string }) {
        s.rows[0][0] = a.text;
      },
      addRow(s) {
        s.rows.push(['new']);
      },
    },
  });
  const net = new Loopback(grid);
  const a = net.client('a');
  net.connect('a');
  await net.settle();
  a.undoGroup(() => {
    a.ops.cell({ text: 'A1' });
    a.getState();
    a.ops.addRow();
    a.getState();
    a.ops.cell({ text: 'A2' });
  });
  await net.settle();
  const after = a.getState('authoritative');
  a.undo();
  await net.settle();
  assert.deepEqual(a.getState('authoritative').rows, [['a'], ['b']]);
  a.redo();
  await net.settle();
  assert.deepEqual(a.getState('authoritative'), after);
});
