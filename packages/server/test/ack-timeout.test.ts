/**
 * The ack timeout on a busy server (VIS-DROP-DEAD): a member's ack that waits in the server's own
 * input (behind its rate limit, or behind other rooms' turns) is not late. A bench of 100 busy
 * rooms saw writers deregistered at 2,0xx ms while their acks waited there (issue 43).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { ServerMessage } from '@hercules/core';
import { createServer } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until, rawConnection } from './helpers.ts';

const says = (from: number, n: number) => ({
  t: 'ops' as const,
  ops: Array.from({ length: n }, (_, i) => ({ seq: from + i, name: 'say', args: { text: 'x' } })),
});
const lastPos = (msgs: ServerMessage[]) =>
  msgs.reduce((p, m) => (m.t === 'log' && m.entries.length ? Math.max(p, m.from + m.entries.length - 1) : m.t === 'welcome' ? Math.max(p, m.highWater) : p), 0);

// spec: VIS-DROP-DEAD
test('a member whose acks wait behind its own rate-limited ops is not deregistered; a silent one is', async (t) => {
  const { dir, cleanup } = tempDir('ack-timeout');
  const ackTimeoutMs = 1000;
  // 100 ops at once, then 100 a second: a frame of 120 more leaves the bucket at -120, so what
  // comes after it waits 1.2 s, between one and two timeouts.
  const srv = await createServer({
    port: 0,
    dataDir: dir,
    machines: [chat],
    ackTimeoutMs,
    heartbeatMs: 60_000,
    limits: { opsPerSecond: 100, opsBurst: 100 },
    log: pino({ level: 'silent' }),
  });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const [a, busy, silent] = await Promise.all(['a', 'busy', 'silent'].map(() => rawConnection(srv.url, 'r')));
  a.hello('a', chat);
  busy.hello('busy', chat);
  silent.hello('silent', chat);
  await until(() => a.welcomed() && busy.welcomed() && silent.welcomed(), 10_000, 'welcomed');
  // The busy member acks everything it has seen, every 50 ms, from the start.
  const acking = setInterval(() => busy.send({ t: 'ack', pos: lastPos(busy.msgs) }), 50);
  t.after(() => clearInterval(acking));
  busy.send(says(1, 100));
  busy.send(says(101, 120));
  a.send(says(1, 1));
  await until(() => silent.msgs.some((m) => m.t === 'deregister'), 5_000, 'the silent member deregistered');
  // The busy member's ops all ordered, then one more timeout of its acks being handled in time.
  await until(() => busy.verdicts() === 220, 10_000, "the busy member's ops ordered");
  await new Promise((r) => setTimeout(r, ackTimeoutMs + 200));
  assert.equal(
    busy.msgs.find((m) => m.t === 'deregister'),
    undefined,
    'its acks were in time: they waited in the server, behind its own ops',
  );
  clearInterval(acking);
  a.ws.close();
  busy.ws.close();
  silent.ws.close();
});
