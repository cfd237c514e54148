/**
 * One soak client process: several clients (one per room it is given), each with its own
 * SQLite store, submitting an op every 30-150 ms. Reports on stdout, one JSON line each:
 *   {t:'restored', c, k}           at start, before any frame: the highest k in c's Durable view
 *   {t:'durable', c, k}            op k of client c is durable on this device
 *   {t:'op', c, k, d, a, v}        op k reached Visible; its delays to Durable, Authoritative, Visible (ms)
 *   {t:'quiet', c}                 after 'stop' on stdin: nothing of c is pending any more
 * It may be SIGKILLed at any moment; on restart it resumes from its stores.
 */
import { connect } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { soak } from './machine.ts';

const [url, dir, proc, roomsArg] = process.argv.slice(2);
// One server, or a cluster's nodes (comma-separated): the client moves to the next when its own goes.
const urls = url.includes(',') ? url.split(',') : url;
const rooms = roomsArg.split(',');
const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
// The soak reads our stdout; if it is gone, so is our reason to run.
process.stdout.on('error', () => process.exit(0));
let stopping = false;
const quiet: Promise<void>[] = [];

for (const [i, room] of rooms.entries()) {
  const id = `${proc}c${i}`;
  const r = await connect({
    url: urls,
    room,
    machine: soak,
    clientId: id,
    storage: sqliteStorage(`${dir}/${id}.sqlite`),
    backoff: { minMs: 50, maxMs: 1000 },
    watchdogMs: 4000,
  });
  // Still offline (the socket opens later): what this device kept, and nothing else.
  out({ t: 'restored', c: id, k: r.getState('durable').clients[id]?.last ?? 0 });
  const loop = async () => {
    // k must continue from what survived: wait for the server's view of our history.
    while (r.status() !== 'online') await new Promise((res) => setTimeout(res, 20));
    let k = r.getState('submitted').clients[id]?.n ?? 0;
    while (!stopping) {
      await new Promise((res) => setTimeout(res, 30 + Math.random() * 120));
      if (stopping) break;
      const mine = ++k;
      const h = r.ops.inc({ k: mine });
      h.durable.then(
        () => out({ t: 'durable', c: id, k: mine }),
        () => {},
      );
      h.visible.then(
        () => {
          const t = h.times;
          out({ t: 'op', c: id, k: mine, d: t.durable! - t.submitted!, a: t.authoritative! - t.submitted!, v: t.visible! - t.submitted! });
        },
        () => {},
      );
    }
    while (r.pending().length > 0) await new Promise((res) => setTimeout(res, 50));
    out({ t: 'quiet', c: id });
  };
  quiet.push(loop());
}
process.stdin.on('data', (d) => {
  if (String(d).includes('stop')) stopping = true;
});
await Promise.all(quiet);
process.exit(0);
