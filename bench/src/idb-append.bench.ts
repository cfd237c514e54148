/**
 * The IndexedDB client store's append beside the size of the room's base (issue 43): 100 appends
 * of one op after a base of N keys, fake-indexeddb in Node (its structured clone is JavaScript,
 * slower than a browser's, so absolute figures are high; what matters is the growth with N).
 * Version 1 of the database kept the base in the client row, which every append read and wrote.
 *
 *   node -C @hercules/source --import tsx bench/src/idb-append.bench.ts [--rounds 3]
 */
import { parseArgs } from 'node:util';
import { IDBFactory, IDBKeyRange } from 'fake-indexeddb';
import { indexedDbStorage } from '@hercules/client';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' } } });
const stateOf = (n: number) => ({
  items: Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, { id: i, text: `item number ${i}`, done: i % 2 === 0 }])),
});

async function msPerAppend(keys: number): Promise<number> {
  const s = indexedDbStorage('bench', { indexedDB: new IDBFactory(), IDBKeyRange });
  await s.init('room', 'c');
  await s.saveBase('room', { pos: 1, state: stateOf(keys), ownSeq: 0 });
  const t = performance.now();
  for (let i = 1; i <= 100; i++) await s.append('room', [{ client: 'c', seq: i, name: 'say', args: { text: 'x' } }]);
  const ms = (performance.now() - t) / 100;
  await s.close();
  return ms;
}

for (let r = 0; r < Number(values.rounds); r++) {
  const row: Record<string, string> = {};
  for (const keys of [0, 1000, 20_000]) row[`${keys} keys`] = `${(await msPerAppend(keys)).toFixed(2)} ms`;
  console.log(`round ${r}: ms per append with a base of`, row);
}
