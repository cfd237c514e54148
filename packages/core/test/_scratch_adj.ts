import fc from 'fast-check';
import { Harness, actionsArb, restoreArb } from './view-engine-model.ts';
const kinds = new Map<string, { n: number; trace?: string }>();
for (const batching of ['off', { intervalMs: 10 }, { auto: true, budgetMs: 0 }] as const)
fc.assert(fc.property(actionsArb(40), fc.constantFrom('me', 'me@auth'), (a, author) => {
  try { new Harness({ batching: batching as any, serverAuthor: author, checkAdjacentIdentity: true }).run(a); }
  catch (e) { const m = String((e as Error).message); const k = m.split('\n')[0]; const r = kinds.get(k) ?? { n: 0 }; r.n++; if (!r.trace || m.length < r.trace.length) r.trace = m; kinds.set(k, r); }
}), { numRuns: 1000 });
for (const [k, r] of kinds) console.log(r.n, k, '\n', r.trace, '\n');
