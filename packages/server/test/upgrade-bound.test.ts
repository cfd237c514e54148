/**
 * upgrade-bound.ts on a bare node:http server: the closes Node's own sweep makes first are
 * counted as the bound's, and other client errors are answered as Node answers them. (The
 * servers' bound, end to end: limits.test.ts and packages/cluster/test/node.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { until } from '@hercules/test-utils';
import { boundConnections, boundedHttpOptions, type PendingCloseReason } from '../src/upgrade-bound.ts';

async function bare(t: { after: (fn: () => unknown) => void }, sweepAfterMs: number, timerMs: number) {
  // Node's headersTimeout from the first, the timer from the second: the test picks which comes first.
  const http = createServer(boundedHttpOptions({ upgradeTimeoutMs: sweepAfterMs, maxPendingConnections: 10 }), (_req, res) => res.end('ok'));
  const closed: PendingCloseReason[] = [];
  const bound = boundConnections(http, { upgradeTimeoutMs: timerMs, maxPendingConnections: 10 }, { closed: (reason) => closed.push(reason) });
  http.on('upgrade', (_req, socket) => socket.destroy());
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  t.after(() => {
    bound.close();
    return new Promise<void>((r) => http.close(() => r()));
  });
  return { port: (http.address() as AddressInfo).port, closed, bound };
}

function send(port: number, bytes: string) {
  const s = connect(port, '127.0.0.1', () => bytes && s.write(bytes));
  let received = '';
  let done = false;
  s.on('error', () => {});
  s.on('data', (d) => {
    received += d.toString();
  });
  s.on('close', () => {
    done = true;
  });
  return { received: () => received, closed: () => done, destroy: () => s.destroy() };
}

test("a pending connection that Node's own header sweep closes first is counted as upgrade-timeout, with its 408", async (t) => {
  const b = await bare(t, 200, 60_000);
  const half = send(b.port, 'GET / HTTP/1.1\r\nHost: x\r\n');
  t.after(half.destroy);
  await until(() => half.closed(), 10_000, 'closed by the sweep');
  assert.match(half.received(), /^HTTP\/1\.1 408 /);
  assert.deepEqual(b.closed, ['upgrade-timeout']);
  assert.equal(b.bound.pending(), 0);
});

test('other client errors are answered as Node answers them (400) and not counted', async (t) => {
  const b = await bare(t, 60_000, 60_000);
  const bad = send(b.port, 'NOT HTTP AT ALL\r\n\r\n');
  t.after(bad.destroy);
  await until(() => bad.closed(), 10_000, 'closed');
  assert.match(bad.received(), /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.deepEqual(b.closed, []);
  // A plain request is served and ends the wait.
  const ok = send(b.port, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await until(() => ok.closed(), 10_000, 'answered');
  assert.match(ok.received(), /^HTTP\/1\.1 200 OK/);
  assert.equal(b.bound.pending(), 0);
});
