/**
 * Issue 38, item 4 (d): the concurrent `friendsforever` trace (Joseph Gentle, editing-traces,
 * CC BY 4.0) replayed by its two agents as two clients through a server, each transaction
 * submitted against its parents' version (text-trace.ts): both end with `endContent` exactly.
 * The traces are not in the repository: they are read from HERCULES_TRACES or
 * ../shared/data/editing-traces beside it; without them the test is skipped, saying so. It takes
 * 20 to 65 s on the shared 2-core VM, so it is not in `npm run test:unit` (which reads the test
 * files directly in each package's test folder): run it with `npm run test:text-trace`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@hercules/client';
import { textToString } from '@hercules/core';
import { createServer, MemoryStore } from '../../src/index.ts';
import { readConcurrentTrace, replayConcurrent, textTraceMachine } from './text-trace.ts';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
const dir = process.env.HERCULES_TRACES ?? join(root, '..', 'shared', 'data', 'editing-traces');
const file = join(dir, 'friendsforever.json.gz');
const limits = { opsPerSecond: 1e9, opsBurst: 1e9, bytesPerSecond: 1e12, bytesBurst: 1e12 };

test('friendsforever by its two agents as two clients through a server, each transaction against its parents: both end with endContent exactly', {
  skip: existsSync(file) ? false : `no ${file} (set HERCULES_TRACES to the editing-traces directory)`,
  timeout: 300_000,
}, async (t) => {
  const trace = readConcurrentTrace(file);
  const store = new MemoryStore();
  const srv = await createServer({ port: 0, store, machines: [textTraceMachine], log: 'silent', limits });
  t.after(() => srv.close());
  const rooms = await Promise.all(['ada', 'bob'].map((clientId) => connect({ url: srv.url, room: 'ff', machine: textTraceMachine, clientId })));
  t.after(() => Promise.all(rooms.map((r) => r.close())));
  await Promise.all(rooms.map((r) => r.whenOnline({ timeoutMs: 10_000 })));
  const stats = await replayConcurrent(trace, rooms);
  t.diagnostic(`${stats.txns} transactions, ${stats.ops} ops, ${stats.waits} waits for the other agent`);
  assert.equal(stats.txns, trace.txns.length);
  assert.ok(stats.waits > 0, 'the agents waited for each other: the trace was replayed concurrently');
  const head = Math.max(...rooms.map((r) => r.positions().authoritative));
  assert.equal(head, stats.ops, 'the server ordered every op once');
  for (const r of rooms) {
    await r.until('authoritative', () => r.positions().authoritative >= head, { timeoutMs: 30_000 });
    for (const view of ['authoritative', 'submitted'] as const) {
      const text = textToString(r.getState(view).doc);
      assert.equal(text.length, trace.endContent.length, `${r.clientId}'s ${view} text has endContent's length`);
      assert.ok(text === trace.endContent, `${r.clientId}'s ${view} text is endContent exactly`);
    }
  }
});
