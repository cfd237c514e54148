/**
 * Property tests of the ViewEngine alone, against a naive reference that recomputes each of the
 * five views from its full log (see view-engine-model.ts for the server model and reference).
 *
 * Run: node --import tsx --test packages/core/test/view-engine.property.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ViewEngine, type Batching } from '../src/index.ts';
import { actionsArb, Harness, ledger, ME, restoreArb, type Action } from './view-engine-model.ts';

const RUNS = 250;

const MODES: { label: string; batching: Batching }[] = [
  { label: "batching 'off'", batching: 'off' },
  { label: 'batching { intervalMs: 10 }', batching: { intervalMs: 10 } },
  { label: 'batching { auto: true, budgetMs: 0 }', batching: { auto: true, budgetMs: 0 } },
];

for (const { label, batching } of MODES) {
  test(`views equal the naive fold of their logs after every input (${label})`, () => {
    fc.assert(
      fc.property(actionsArb(40), (actions) => {
        new Harness({ batching }).run(actions);
      }),
      { numRuns: RUNS, includeErrorInReport: true },
    );
  });
}

test('restore: a restarted engine shows its durable ops at once, then converges with the server', () => {
  fc.assert(
    fc.property(
      restoreArb,
      fc.constantFrom<Batching>('off', { intervalMs: 10 }, { auto: true, budgetMs: 0 }),
      actionsArb(25),
      (restore, batching, actions) => {
        // The harness compares all five views with the reference right after construction.
        const h = new Harness({ batching, restore });
        const e = h.engine;
        const durableSeqs = [...h.own.keys()];
        assert.deepEqual(e.pending().map((o) => [o.seq, o.stage]), durableSeqs.map((s) => [s, 'durable']));
        assert.ok(e.getState('durable') === e.getState('submitted'), 'nothing is memory-only after a restart');
        // Each restored op that can take effect on top of the base shows in the speculative views.
        const log = e.getState('durable').log;
        for (const s of durableSeqs) {
          const o = h.own.get(s)!;
          if (o.name !== 'withdraw' && o.name !== 'boom') assert.ok(log.includes(`${ME}:${s}`), `restored op ${s} missing from the durable view`);
        }
        // The next op continues after the restored lastSeq.
        h.run([...actions, { t: 'submit', op: { name: 'inc', args: { key: 'a', by: 1 } } }]);
      },
    ),
    { numRuns: 200, includeErrorInReport: true },
  );
});

test('restore without storage: an empty restore equals a fresh engine', () => {
  const e = new ViewEngine(ledger, { clientId: ME, now: () => 0 }, { lastSeq: 7, durable: [] });
  assert.equal(e.submit('inc', { key: 'a', by: 1 }).seq, 8);
  assert.deepEqual(e.getState('submitted').log, [`${ME}:8`]);
  assert.ok(e.getState('durable') === ledger.initial);
});

/**
 * The view-engine header promises: "Whenever two adjacent logs are equal their snapshots are the
 * same object, so quiet views share identity." This checks that promise after every input.
 */
test("adjacent views with equal logs share one snapshot object (header claim)", () => {
  fc.assert(
    fc.property(actionsArb(30), (actions: Action[]) => {
      new Harness({ batching: 'off', checkAdjacentIdentity: true }).run(actions);
    }),
    { numRuns: RUNS, includeErrorInReport: true },
  );
});
