/** `hercules audit` and `hercules nats-dev`: the cluster's tools (docs/deployment.md). */
import { resolve } from 'node:path';
import { cannotStart, fail, loadCluster, num, type ClusterModule } from './common.ts';
import type { Values } from './options.ts';

export async function audit(values: Values): Promise<void> {
  const nats = values.nats as string | undefined;
  const room = values.room as string | undefined;
  if (!nats) fail('audit needs --nats <urls>');
  if (room === undefined) fail('audit needs --room <name>');
  const shards = num('shards', values.shards as string | undefined, 64);
  if (!Number.isInteger(shards) || shards < 1) fail(`--shards must be a positive integer, got ${JSON.stringify(values.shards)}`);
  const prefix = values['nats-prefix'] as string | undefined;
  const cluster = await loadCluster();
  let report: { problems: string[] };
  try {
    report = await cluster.auditRoomOnNats({ nats: nats.split(',').map((u) => u.trim()), room, shards, ...(prefix ? { prefix } : {}) });
  } catch (e) {
    cannotStart((e as Error).message);
  }
  console.log(JSON.stringify(report, null, 2));
  process.exit(report.problems.length > 0 ? 1 : 0);
}

export async function natsDev(values: Values): Promise<void> {
  const nodes = num('nodes', values.nodes as string | undefined, 3);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 9) fail(`--nodes must be an integer from 1 to 9, got ${JSON.stringify(values.nodes)}`);
  const dir = values.dir as string | undefined;
  const cluster = await loadCluster();
  let c: Awaited<ReturnType<ClusterModule['startNatsCluster']>>;
  try {
    c = await cluster.startNatsCluster({ nodes, ...(dir ? { dir: resolve(dir) } : {}) });
  } catch (e) {
    cannotStart((e as Error).message);
  }
  console.log(
    `NATS cluster of ${nodes} running (data and logs in ${c.dir}). Start Hercules nodes with:\n  --nats ${c.urls.join(',')}${nodes === 1 ? ' --nats-replicas 1' : ''}\nCtrl-C stops it.`,
  );
  const stop = async () => {
    await c.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  await new Promise(() => {});
}
