/**
 * A clone for the soak: a client started from a copy of another client's store, as restoring a
 * backup does, while the original goes on under the same client id. It submits ops of its own
 * and reports, one JSON line: {t:'clone', visible, conflict, other}. Every op must be refused
 * with client-id-conflict: the seqs it uses are the original's on the server.
 *   args: url storageFile room [version] (url: one server, or a cluster's nodes, comma-separated;
 *   version: the soak machine's the server runs, 1 by default)
 */
import { connect } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { HerculesError } from '@hercules/core';
import { soak, soakV2 } from './machine.ts';

const [url, file, room, versionArg] = process.argv.slice(2);
const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
process.stdout.on('error', () => process.exit(0));
const common = { url: url.includes(',') ? url.split(',') : url, room, storage: sqliteStorage(file), backoff: { minMs: 50, maxMs: 500 }, onError: () => {} };
const r2 = versionArg === '2' ? await connect({ ...common, machine: soakV2 }) : undefined;
const r1 = r2 ? undefined : await connect({ ...common, machine: soak });
const r = (r2 ?? r1)!;
// k far beyond the original's: were one applied, the room's state would count a gap too.
const hs = [1, 2, 3].map((i) => (r2 ? r2.ops.add({ k: 1e9 + i, from: 2 }) : r1!.ops.inc({ k: 1e9 + i })));
const settled = await Promise.race([Promise.allSettled(hs.map((h) => h.visible)), new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), 60_000))]);
if (settled === 'timeout') out({ t: 'clone', client: r.clientId, visible: 0, conflict: 0, other: ['timeout'] });
else {
  const conflict = settled.filter((s) => s.status === 'rejected' && s.reason instanceof HerculesError && s.reason.code === 'client-id-conflict').length;
  const visible = settled.filter((s) => s.status === 'fulfilled').length;
  const other = settled
    .filter((s) => s.status === 'rejected' && !(s.reason instanceof HerculesError && s.reason.code === 'client-id-conflict'))
    .map((s) => String((s as PromiseRejectedResult).reason));
  out({ t: 'clone', client: r.clientId, visible, conflict, other });
}
await r.close().catch(() => {});
process.exit(0);
