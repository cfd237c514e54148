/**
 * One soak client process: several clients (one per room it is given), each with its own
 * SQLite store, submitting an op every 30-150 ms (with opMs given: opMs/3 to 5 opMs/3). Reports on stdout, one JSON line each:
 *   {t:'restored', c, k, v1}       at start, before any frame: the highest k in c's Durable view; v1: under v2,
 *                                  how many of the ops it holds pending were written under v1 (inc, note)
 *   {t:'online', c, v}             c is online (welcomed), running machine version v
 *   {t:'durable', c, k} / {t:'durable', c, j}   op k (note j) of client c is durable on this device
 *   {t:'op', c, k, d, a, v}        op k reached Visible; its delays to Durable, Authoritative, Visible (ms)
 *   {t:'refused', c, reason}       an op of c (one made before, restored from the store, or a new one) was refused
 *   {t:'too-old', c}               the server refused c as client-too-old; the process exits 3 (the app reloads)
 *   {t:'quiet', c}                 after 'stop' on stdin: nothing of c is pending any more
 * It may be SIGKILLed at any moment; on restart it resumes from its stores.
 *   args: url dir proc rooms [version: 1 (default) or 2, the soak machine's] [opMs, default 90]
 * Under v1 about one op in six is a note (its own chain, j); under v2 every op is an add.
 */
import { connect, type ConnectedRoom } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { HerculesError, OpRejectedError, type OpHandle } from '@hercules/core';
import { soak, soakV2 } from './machine.ts';

const [url, dir, proc, roomsArg, versionArg, opMsArg] = process.argv.slice(2);
const opMs = Number(opMsArg ?? 90);
const version = versionArg === '2' ? 2 : 1;
// One server, or a cluster's nodes (comma-separated): the client moves to the next when its own goes.
const urls = url.includes(',') ? url.split(',') : url;
const rooms = roomsArg.split(',');
const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
// The soak reads our stdout; if it is gone, so is our reason to run.
process.stdout.on('error', () => process.exit(0));
let stopping = false;
const quiet: Promise<void>[] = [];
// client-too-old: once every client here has been refused (or a moment after the first), the app reloads.
const tooOld = new Set<string>();
function refusedTooOld(id: string): void {
  if (tooOld.has(id)) return;
  tooOld.add(id);
  out({ t: 'too-old', c: id });
  if (tooOld.size === rooms.length) process.exit(3);
  if (tooOld.size === 1) setTimeout(() => process.exit(3), 1000);
}
/** Submits, unless the room stopped for good: refused as client-too-old, it waits for the reload (undefined). */
function submit(id: string, fn: () => OpHandle): OpHandle | undefined {
  try {
    return fn();
  } catch (e) {
    if (e instanceof HerculesError && e.code === 'client-too-old') {
      refusedTooOld(id);
      return undefined;
    }
    throw e;
  }
}
/** Reports an op's refusal (only refusals: a fatal error or a closed room is not one). */
function onRefused(id: string, h: OpHandle): void {
  h.authoritative.catch((e) => {
    if (e instanceof OpRejectedError && h.error !== undefined) out({ t: 'refused', c: id, reason: h.error });
  });
}

for (const [i, room] of rooms.entries()) {
  const id = `${proc}c${i}`;
  let warned = false;
  const common = {
    url: urls,
    room,
    clientId: id,
    storage: sqliteStorage(`${dir}/${id}.sqlite`),
    backoff: { minMs: 50, maxMs: 1000 },
    watchdogMs: 4000,
    onError: (e: Error) => {
      if (e instanceof HerculesError && e.code === 'client-too-old') refusedTooOld(id);
      else if (!warned) {
        warned = true;
        console.warn(`${id}: ${e.message}`);
      }
    },
  };
  const r: ConnectedRoom<typeof soak> | ConnectedRoom<typeof soakV2> =
    version === 2 ? await connect({ ...common, machine: soakV2 }) : await connect({ ...common, machine: soak });
  // Still offline (the socket opens later): what this device kept, and nothing else.
  // A pending op keeps the name it was written with: under v2, inc and note are v1's.
  const v1 = version === 2 ? r.pending().filter((h) => h.name === 'inc' || h.name === 'note').length : 0;
  out({ t: 'restored', c: id, k: r.getState('durable').clients[id]?.last ?? 0, v1 });
  // Ops restored from the store (written before a restart, perhaps under v1): their refusals too.
  for (const h of r.pending()) onRefused(id, h);
  const loop = async () => {
    // k must continue from what survived: wait for the server's view of our history.
    while (r.status() !== 'online') await new Promise((res) => setTimeout(res, 20));
    out({ t: 'online', c: id, v: version });
    const mine0 = r.getState('submitted').clients[id];
    let k = mine0?.n ?? 0;
    let j = mine0?.notes ?? 0;
    while (!stopping) {
      await new Promise((res) => setTimeout(res, (opMs / 3) * (1 + Math.random() * 4)));
      if (stopping) break;
      if (version === 1 && Math.random() < 1 / 6) {
        const note = ++j;
        const h = submit(id, () => (r as ConnectedRoom<typeof soak>).ops.note({ j: note }));
        if (!h) return new Promise<void>(() => {}); // the process exits for its reload
        h.durable.then(
          () => out({ t: 'durable', c: id, j: note }),
          () => {},
        );
        onRefused(id, h);
        continue;
      }
      const mine = ++k;
      const h = submit(id, () =>
        version === 2 ? (r as ConnectedRoom<typeof soakV2>).ops.add({ k: mine, from: 2 }) : (r as ConnectedRoom<typeof soak>).ops.inc({ k: mine }),
      );
      if (!h) return new Promise<void>(() => {}); // the process exits for its reload
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
      onRefused(id, h);
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
