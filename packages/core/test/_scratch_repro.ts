import fc from 'fast-check';
import { PROTOCOL_VERSION, ViewEngine, type ServerMessage } from '../src/index.ts';
import { Harness, actionsArb, ledger } from './view-engine-model.ts';
const welcome: ServerMessage = { t: 'welcome', v: PROTOCOL_VERSION, client: 'me', author: 'me', from: 1, entries: [], highWater: 0, visibleSeq: 0, rejected: [], stable: 0, members: ['me', 'other'] };
{
  const e = new ViewEngine(ledger, { clientId: 'me', now: () => 0 });
  e.connected(); e.receive(welcome);
  e.submit('inc', { key: 'a', by: 1 }); e.durable(1);
  e.receive({ t: 'log', from: 1, entries: [{ k: 'own', seq: 1 }] });
  console.log('A positions', e.positions(), 'durable===auth', e.getState('durable') === e.getState('authoritative'), 'submitted===durable', e.getState('submitted') === e.getState('durable'));
}
{
  let t = 0;
  const e = new ViewEngine(ledger, { clientId: 'me', now: () => t, batching: { intervalMs: 10 } });
  e.connected(); e.receive(welcome); e.drain();
  e.receive({ t: 'log', from: 1, entries: [{ k: 'op', e: { pos: 1, client: 'other', seq: 1, name: 'inc', args: { key: 'a', by: 1 }, author: 'other' } }] });
  e.receive({ t: 'deregister', reason: 'ack timeout' });
  console.log('B before', e.drain().send, e.nextDeadline());
  e.disconnected();
  const o = e.drain();
  console.log('B after disconnected', o.send, e.connection());
}
const r = fc.check(fc.property(actionsArb(50), (a) => { new Harness({ batching: { intervalMs: 10 }, strictDisconnect: true }).run(a); }), { numRuns: 1000 });
console.log(r.failed, r.seed, r.counterexamplePath, JSON.stringify(r.counterexample), String(r.errorInstance).split('\n')[0]);
