/**
 * Property tests of the ViewEngine alone, against a naive reference that recomputes each of the
 * five views from its full log. The server model, the reference and every per-step check live
 * in view-engine-model.ts (`Harness`); what is checked after EVERY input:
 *
 *  - all five views deep-equal the reference fold of their logs (stable / visible / authoritative
 *    are prefixes of the global log; durable and submitted add our pending ops in seq order at
 *    positions authLen + i + 1, with the author the engine knows), and `positions()` equals the
 *    reference lengths (so the prefix chain holds);
 *  - snapshots are deep-frozen; `drain().changed` lists exactly the views whose snapshot object
 *    changed; a view whose log did not change keeps its snapshot object (===);
 *  - each own op's stage is what the reference says, only moves forward, and every change is in
 *    `drain().progressed`; stage times are present and ordered; position/error once ordered;
 *  - batching: 'off' never queues, interval batching queues exactly the frames with remote ops,
 *    later frames queue behind, ticks flush at the deadline (the reference mirrors the queue, so
 *    views are compared even while frames wait);
 *  - frames sent: hello.have, ack.pos, ops (durable, each once per connection, in order, all
 *    durable ops reach the server while connected); persist and prune; no warnings.
 *
 * Run: node --import tsx --test packages/core/test/view-engine.property.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PROTOCOL_VERSION, ViewEngine, type Batching, type ServerMessage } from '../src/index.ts';
import { actionsArb, Harness, ledger, ME, OTHER, restoreArb, type Action, type HarnessOptions } from './view-engine-model.ts';

const RUNS = 300;
const authorArb = fc.constantFrom(ME, 'me@auth'); // the server may stamp a different author than our id
const batchingArb = fc.constantFrom<Batching>('off', { intervalMs: 10 }, { auto: true, budgetMs: 0 });

const MODES: { label: string; batching: Batching }[] = [
  { label: "batching 'off'", batching: 'off' },
  { label: 'batching { intervalMs: 10 }', batching: { intervalMs: 10 } },
  { label: 'batching { auto: true, budgetMs: 0 }', batching: { auto: true, budgetMs: 0 } },
];

/** The main property: a random valid conversation (the run may also switch batching mode). */
const conversation = (opts: Omit<HarnessOptions, 'serverAuthor'>, maxLength = 50) =>
  fc.property(actionsArb(maxLength), authorArb, (actions, serverAuthor) => {
    new Harness({ ...opts, serverAuthor }).run(actions);
  });

for (const { label, batching } of MODES) {
  // spec: VIEW-PREFIX, VIEW-GLOBAL-PREFIX, VIEW-SPECULATIVE, VIEW-FROZEN, VIEW-SHARED, HANDLE-STAGES, DUR-BEFORE-SEND
  test(`every input: five views equal the naive fold of their logs, identity, stages, frames (${label})`, () => {
    fc.assert(conversation({ batching }), { numRuns: RUNS, includeErrorInReport: true });
  });
}

// spec: DUR-SURVIVES-RESTART
test('restore: a restarted engine shows its durable ops at once, then stays equal to the reference', () => {
  fc.assert(
    fc.property(restoreArb, batchingArb, authorArb, actionsArb(30), (restore, batching, serverAuthor, actions) => {
      // The harness compares all five views (and positions, stages, ...) right after construction.
      const h = new Harness({ batching, restore, serverAuthor });
      const e = h.engine;
      const restored = [...h.own.keys()];
      assert.deepEqual(
        e.pending().map((o) => [o.seq, o.stage]),
        restored.map((s) => [s, 'durable']),
      );
      assert.ok(e.getState('durable') === e.getState('submitted'), 'nothing is memory-only after a restart');
      assert.equal(e.positions().durable - e.positions().authoritative, restored.length);
      // Each restored op that cannot throw shows in the speculative views before any server contact.
      const log = e.getState('durable').log;
      for (const s of restored) {
        const o = h.own.get(s)!;
        if (o.name !== 'withdraw' && o.name !== 'boom') assert.ok(log.includes(`${ME}:${s}`), `restored op ${s} missing from the durable view`);
      }
      // Then a conversation (reconnect with catch-up entries or a checkpoint over our ops, ...),
      // ending with a submit that must get seq lastSeq + 1 (checked by the harness).
      h.run([...actions, { t: 'submit', op: { name: 'inc', args: { key: 'a', by: 1 } } }]);
    }),
    { numRuns: 200, includeErrorInReport: true },
  );
});

// spec: LOG-CLIENT-ORDER
test('restore: the next op continues after the restored lastSeq, even with nothing left to replay', () => {
  const e = new ViewEngine(ledger, { clientId: ME, now: () => 0 }, { lastSeq: 7, durable: [] });
  assert.equal(e.submit('inc', { key: 'a', by: 1 }).seq, 8);
  assert.deepEqual(e.getState('submitted').log, [`${ME}:8`]);
  assert.ok(e.getState('durable') === ledger.initial);
});

// ---------------------------------------------------------------- the properties can fail

const proto = ViewEngine.prototype as unknown as Record<string, (...args: any[]) => any>;

/** Plant a bug in the engine and expect the conversation property to find it. */
function expectCaught(name: string, patch: (orig: (...args: any[]) => any) => (...args: any[]) => any, re: RegExp, batching: Batching = 'off'): void {
  const orig = proto[name];
  proto[name] = patch(orig);
  try {
    const r = fc.check(conversation({ batching }), { numRuns: 300, endOnFailure: true });
    assert.ok(r.failed, `planted bug in ${name} went unnoticed`);
    assert.match(String((r.errorInstance as Error)?.message), re);
  } finally {
    proto[name] = orig;
  }
}

test('sensitivity: planted engine bugs are caught by the conversation property', () => {
  // No rebase after remote ops / rejections.
  expectCaught(
    'rebase',
    () =>
      function (this: { needRebase: boolean }) {
        this.needRebase = false;
      },
    /durable|submitted/,
  );
  // Speculative ops replayed one position off (seen through ctx.position by `stamp`).
  expectCaught(
    'fold',
    (orig) =>
      function (this: unknown, s: unknown, ops: unknown, first: number) {
        return orig.call(this, s, ops, first + 1);
      },
    /view differs/,
  );
  // Visibility claimed one op early.
  expectCaught(
    'onVisible',
    (orig) =>
      function (this: unknown, seq: number) {
        return orig.call(this, seq + 1);
      },
    /visible|stage|positions/,
  );
  // Stable frontier not clamped to what this client has made visible.
  expectCaught(
    'onStable',
    () =>
      function (this: any, pos: number) {
        if (pos > this.serverStable) this.serverStable = pos;
        const target = Math.min(this.serverStable, this.authLen);
        if (target <= this.stableLen) return;
        this.stableLen = target; // (and the state left stale)
      },
    /positions|stable|held/,
  );
  // A rebase on every step: views whose logs did not change get new snapshot objects.
  expectCaught(
    'rebase',
    (orig) =>
      function (this: { needRebase: boolean }) {
        this.needRebase = true;
        return orig.call(this);
      },
    /snapshot replaced|changed\.has/,
  );
  // An op skipping its 'visible' stage.
  expectCaught(
    'advance',
    (orig) =>
      function (this: unknown, op: unknown, stage: string, t: number) {
        if (stage !== 'visible') return orig.call(this, op, stage, t);
      },
    /stage/,
  );
  // Batched frames processed without the final rebase.
  expectCaught(
    'flushInbox',
    (orig) =>
      function (this: any) {
        const f = this.rebase;
        this.rebase = () => {
          this.needRebase = false;
        };
        try {
          orig.call(this);
        } finally {
          this.rebase = f;
        }
      },
    /durable|submitted|view differs/,
    { intervalMs: 10 },
  );
});

// ---------------------------------------------------------------- engine bugs found (skipped)

const WELCOME: ServerMessage = {
  t: 'welcome',
  v: PROTOCOL_VERSION,
  client: ME,
  author: ME,
  from: 1,
  entries: [],
  highWater: 0,
  visibleSeq: 0,
  rejected: [],
  stable: 0,
  members: [ME, OTHER],
};

/**
 * Found by this file, fixed in the engine (identity, documented invariant): view-engine.ts's header promises "Whenever two adjacent
 * logs are equal their snapshots are the same object, so quiet views share identity." After
 * one of our ops becomes authoritative (an accepted `{k:'own'}` entry) with nothing else pending,
 * the Durable and Authoritative logs are equal, yet getState('durable') !== getState('authoritative'):
 * onEntry applies the op to authState (a new object) and does not rebase Durable/Submitted, which
 * keep the speculative snapshot (equal content, different object) until the next rebase.
 * fast-check found it with seed 42, path "67:3:1:2:8:11"; shrunk counterexample
 *   [connect, welcome, submit inc{a,1}, durable(1), log [{k:'own',seq:1}]], server author 'me'
 * (only the durable/authoritative pair fails; submitted/durable, visible/authoritative and
 * stable/visible always share their snapshot when their logs are equal.)
 */
// spec: VIEW-SHARED
test('adjacent views with equal logs share one snapshot object (regression: durable/authoritative)', () => {
  fc.assert(
    fc.property(actionsArb(30), authorArb, (actions: Action[], serverAuthor) => {
      new Harness({ batching: 'off', serverAuthor, checkAdjacentIdentity: true }).run(actions);
    }),
    { numRuns: RUNS, includeErrorInReport: true, seed: 42 },
  );
});

test('regression: durable and authoritative logs equal -> one snapshot', () => {
  const e = new ViewEngine(ledger, { clientId: ME, now: () => 0 });
  e.connected();
  e.receive(WELCOME);
  e.submit('inc', { key: 'a', by: 1 });
  e.durable(1);
  e.receive({ t: 'log', from: 1, entries: [{ k: 'own', seq: 1 }] });
  assert.deepEqual(e.positions(), { stable: 0, visible: 0, authoritative: 1, durable: 1, submitted: 1 });
  assert.deepEqual(e.getState('durable'), e.getState('authoritative'));
  assert.ok(e.getState('durable') === e.getState('authoritative'));
});

/**
 * Found by this file, fixed in the engine (frame after close): disconnected() flushes the batch inbox while the connection still
 * counts as 'ready'; a `deregister` queued behind a batched frame is then answered with a
 * `{t:'register'}` in the output of disconnected(), i.e. a frame for a transport that is closed
 * (an adapter that buffers sends while offline would send it before the next hello).
 * fast-check found it with seed 42, path "38:3:4:6:10:11:16:14:16"; shrunk counterexample
 *   [connect, welcome, log [remote inc{a,1}] (queued), deregister (queued), disconnect]  (intervalMs: 10)
 */
test('disconnected() emits no frames for the dead connection (regression)', () => {
  fc.assert(
    fc.property(actionsArb(50), (actions) => {
      new Harness({ batching: { intervalMs: 10 }, strictDisconnect: true }).run(actions);
    }),
    { numRuns: 1000, includeErrorInReport: true, seed: 42 },
  );
});

test('regression: no register frame from disconnected()', () => {
  const e = new ViewEngine(ledger, { clientId: ME, now: () => 0, batching: { intervalMs: 10 } });
  e.connected();
  e.receive(WELCOME);
  e.drain();
  e.receive({ t: 'log', from: 1, entries: [{ k: 'op', e: { pos: 1, client: OTHER, seq: 1, name: 'inc', args: { key: 'a', by: 1 }, author: OTHER } }] }); // queued
  e.receive({ t: 'deregister', reason: 'ack timeout' }); // queued behind it
  assert.deepEqual(e.drain().send, []);
  e.disconnected();
  assert.deepEqual(e.drain().send, []);
});
