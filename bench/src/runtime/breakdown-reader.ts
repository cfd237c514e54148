/**
 * Child-process entry for breakdown.ts: reader B in its own process, as on another device (in
 * the writer's process it would wait behind the writer's work: one thread). Connects, and for
 * each new value of cell (0, 0) in its Submitted view (where another client's op shows first:
 * the peers' delivery) and in its Authoritative view (once stored) tells the parent when it saw
 * it, by `performance.timeOrigin + performance.now()` (one clock for both processes,
 * sub-millisecond).
 *
 *   child -> parent  { ready: true } once online; { seen: text, view, at } per value and view
 *   parent -> child  { cmd: 'stats', id }  child -> parent { id, stats: ReceiveStats }
 *   parent -> child  { cmd: 'close', id }  closes the room, replies, exits
 *
 * Options come as one JSON argument: { url, storagePath? } (no path: memoryStorage()).
 */
import { connect, memoryStorage } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { spreadsheet } from '../../../apps/machines.ts';

const opts = JSON.parse(process.argv[2] ?? '{}') as { url: string; storagePath?: string };
const storage = opts.storagePath ? sqliteStorage(opts.storagePath) : memoryStorage();
const room = await connect({ url: opts.url, room: 'breakdown', machine: spreadsheet, storage, clientId: 'bd-b', sendAhead: true });
await room.whenOnline({ timeoutMs: 30_000 });
for (const view of ['submitted', 'authoritative'] as const) {
  let last: string | undefined;
  room.subscribe(view, (s) => {
    const at = performance.timeOrigin + performance.now();
    const v = s.cells[0][0];
    if (v === last) return;
    last = v;
    // Reported after the notification round, so the listener (inside B's notify time) only records.
    setImmediate(() => process.send!({ seen: v, view, at }));
  });
}
process.on('message', async (m: { cmd: string; id: number }) => {
  if (m.cmd === 'stats') process.send!({ id: m.id, stats: room.receiveStats() });
  if (m.cmd === 'close') {
    await room.close();
    process.send!({ id: m.id }, () => process.exit(0));
  }
});
process.send!({ ready: true });
