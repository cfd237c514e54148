/**
 * A cluster's webhook positions (the server's `WebhookCursors`): a NATS KV bucket,
 * `<prefix>_webhooks`, replicated as the leases are. Webhooks are sent by the node that serves
 * the room; when the room moves to another node (its owner died, or gave the shard up), the new
 * node starts with the room's next commit there from the position the last one saved, so what
 * the receiver had not accepted is sent again (at least once), not skipped. Every node keeps the
 * bucket in memory as it changes (a KV watch), so a lane starts without a read on the commit path.
 * Lanes are not resumed at start-up: a room's backlog goes out with its next commit.
 */
import type { WebhookCursors } from '@hercules/server/core';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';

export async function natsWebhookCursors(nc: NatsConnection, opts: { bucket: string; replicas: number; onWarning(m: string): void }): Promise<WebhookCursors> {
  const kv = await new Kvm(nc).create(opts.bucket, { replicas: opts.replicas, history: 1 });
  // A KV key takes letters, digits, - _ = / and dots between tokens; a room name may hold ~.
  const keyOf = (hook: string, room: string) => `${hook}.${Buffer.from(room).toString('base64url')}`;
  const kept = new Map<string, number>();
  const watch = await kv.watch({ key: '>' });
  void (async () => {
    for await (const e of watch) {
      if (e.operation === 'PUT') kept.set(e.key, Number(e.string()));
      else kept.delete(e.key);
    }
  })().catch((e) => opts.onWarning(`webhook positions: the watch of ${opts.bucket} stopped: ${(e as Error).message}`));
  return {
    load: () => [],
    at: (hook, room) => kept.get(keyOf(hook, room)),
    save(hook, room, pos) {
      const key = keyOf(hook, room);
      kept.set(key, pos);
      // Lost, the position only moves back: entries are sent again, never skipped.
      kv.put(key, String(pos)).catch((e) => opts.onWarning(`webhook positions: saving ${room} at ${pos} failed: ${(e as Error).message}`));
    },
    close: () => watch.stop(),
  };
}
