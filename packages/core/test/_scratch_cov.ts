import fc from 'fast-check';
import { Harness, actionsArb, coverage, restoreArb } from './view-engine-model.ts';
const N = Number(process.argv[2] ?? 250), LEN = Number(process.argv[3] ?? 40);
for (const batching of ['off', { intervalMs: 10 }, { auto: true, budgetMs: 0 }] as const) {
  const t0 = Date.now(); let steps = 0; let fails = 0;
  fc.assert(fc.property(actionsArb(LEN), fc.constantFrom('me', 'me@auth'), (a, author) => { steps += a.length; try { new Harness({ batching: batching as any, serverAuthor: author }).run(a); } catch (e) { fails++; if (fails < 2) console.log(String(e).slice(0, 4000)); } }), { numRuns: N });
  console.log(JSON.stringify(batching), Date.now() - t0, 'ms', steps, 'steps', fails, 'fails');
}
{
  const t0 = Date.now(); let fails = 0;
  fc.assert(fc.property(restoreArb, actionsArb(25), fc.constantFrom('me', 'me@auth'), (r, a, author) => { try { new Harness({ batching: 'off', restore: r, serverAuthor: author }).run(a); } catch (e) { fails++; if (fails < 2) console.log(String(e).slice(0, 4000)); } }), { numRuns: N });
  console.log('restore', Date.now() - t0, 'ms', fails, 'fails');
}
console.log(coverage);
