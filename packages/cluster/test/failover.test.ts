/**
 * Failover with real processes: two Hercules cluster nodes (the CLI, `serve --nats`) over a
 * private 3-node NATS cluster; a client given both URLs; the node serving its room is killed
 * with SIGKILL. The other node takes the room over once the dead node's lease expires, the
 * client resumes there, and every op it made is Authoritative exactly once, in order.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect } from '@hercules/client';
import { HERCULES_BIN as BIN, serveProcess, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';

const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

let cluster: NatsCluster;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
});
after(async () => {
  await cluster?.close();
});

/** A node process (the CLI, `serve --nats`) on the private NATS cluster. */
const startNode = (id: string, prefix: string) =>
  serveProcess([
    ...['--machines', MACHINES, '--nats', cluster.urls.join(','), '--node-id', id],
    ...['--shards', '4', '--lease-ms', '2000', '--nats-prefix', prefix, '--log-level', 'warn'],
  ]);

const texts = (room: { getState(v: 'authoritative'): unknown }) =>
  (room.getState('authoritative') as { messages: { text: string }[] }).messages.map((m) => m.text);

test('SIGKILL of the node serving a room: the other node takes it over, the client resumes there, every op exactly once', async () => {
  const a = await startNode('fa', 'f1');
  const b = await startNode('fb', 'f1');
  try {
    const x = await connect({ url: [a.url, b.url], room: 'failover', machine: chat, onError: () => {}, backoff: { minMs: 50, maxMs: 250 } });
    await x.whenOnline({ timeoutMs: 15_000 });
    let n = 0;
    for (; n < 5; n++) x.submit('say', { text: `m${n}` } as never);
    await until(() => texts(x).length === 5, 10_000, 'the first ops authoritative on node fa');
    a.proc.kill('SIGKILL');
    await a.exited;
    const killedAt = performance.now();
    for (; n < 10; n++) x.submit('say', { text: `m${n}` } as never);
    await until(() => texts(x).length === 10, 20_000, 'the ops after the kill authoritative on node fb');
    const recoveredMs = performance.now() - killedAt;
    assert.deepEqual(
      texts(x),
      Array.from({ length: 10 }, (_, i) => `m${i}`),
      'every op once, in order',
    );
    const health = await (await fetch(`${b.url.replace('ws', 'http')}/healthz`)).json();
    assert.equal(health.rooms, 1, 'node fb serves the room');
    console.log(`# kill -> the first op after it Authoritative: ${Math.round(recoveredMs)} ms`);
    await x.close();
    // `hercules audit` walks the room's stream: one chain, the ten ops once each, no problem.
    const audit = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(process.execPath, [BIN, 'audit', '--nats', cluster.urls.join(','), '--room', 'failover', '--shards', '4', '--nats-prefix', 'f1'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      p.stdout.on('data', (d) => (out += d));
      p.on('exit', (code) => resolve({ code, out }));
    });
    assert.equal(audit.code, 0, audit.out);
    const report = JSON.parse(audit.out);
    assert.deepEqual(report.problems, []);
    assert.equal(report.ops, 10);
    assert.ok(report.claims >= 2, `a claim by each owner (${report.claims})`);
  } finally {
    for (const p of [a, b]) if (p.proc.exitCode === null) p.proc.kill('SIGKILL');
  }
});
