/**
 * Failover with real processes: two Hercules cluster nodes (the CLI, `serve --nats`) over a
 * private 3-node NATS cluster; a client given both URLs; the node serving its room is killed
 * with SIGKILL. The other node takes the room over once the dead node's lease expires, the
 * client resumes there, and every op it made is Authoritative exactly once, in order.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect } from '@hercules/client';
import { freePort, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { startNatsCluster, type NatsCluster } from '../src/nats-dev.ts';

const BIN = fileURLToPath(new URL('../../server/bin/hercules.js', import.meta.url));
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

let cluster: NatsCluster;
before(async () => {
  cluster = await startNatsCluster({ nodes: 3 });
});
after(async () => {
  await cluster?.close();
});

interface NodeProc {
  id: string;
  url: string;
  proc: ChildProcess;
  exited: Promise<unknown>;
}

async function startNode(id: string, prefix: string): Promise<NodeProc> {
  const port = await freePort();
  const proc = spawn(
    process.execPath,
    [
      BIN,
      'serve',
      '--machines',
      MACHINES,
      '--port',
      String(port),
      '--nats',
      cluster.urls.join(','),
      '--node-id',
      id,
      '--shards',
      '4',
      '--lease-ms',
      '2000',
      '--nats-prefix',
      prefix,
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  const exited = new Promise((r) => proc.once('exit', r));
  await until(
    async () => {
      if (proc.exitCode !== null) throw new Error(`node ${id} exited: ${err}`);
      return fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
    },
    20_000,
    `node ${id} to listen`,
  );
  return { id, url: `ws://127.0.0.1:${port}`, proc, exited };
}

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
