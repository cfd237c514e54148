/**
 * Child-process entry for Fig. 14's `--procs` variant (fig14-batching.ts): some of the room's
 * clients in a process of their own, as the paper's clients ran on machines of their own. Each
 * process has its own event loop and heap, so its clients' rebases and garbage do not queue
 * behind the other processes' clients.
 *
 *   child -> parent  { ready: {} }
 *   parent -> child  { cmd: 'connect', id, url, room, ids, members, mode }   -> { id }  (once its clients are online and see `members` members)
 *   parent -> child  { cmd: 'run', id, ops, total, seed }                   -> { id, doneAt, cpuS }
 *                    (each client submits `ops` ops 20 ms apart; doneAt: the wall clock, ms since
 *                    the epoch at sub-ms precision, when every op of the room is Visible at all of
 *                    this process's clients; cpuS: this process's CPU from `run` until then)
 *   parent -> child  { cmd: 'closeRooms', id }                              -> { id }
 */
import { connect, type ConnectedRoom } from '@hercules/client';
import type { Batching } from '@hercules/core';
import { Rng } from '@hercules/test-utils';
import { byteArray } from '../../../apps/machines.ts';

const modes: Record<string, Batching> = { off: 'off', interval: { intervalMs: 16 }, auto: { auto: true } };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const wallNow = () => performance.timeOrigin + performance.now();
let rooms: ConnectedRoom<typeof byteArray>[] = [];

type Msg = { cmd: string; id: number } & Record<string, any>;
async function handle(m: Msg): Promise<Record<string, unknown>> {
  if (m.cmd === 'connect') {
    for (const clientId of m.ids as string[]) rooms.push(await connect({ url: m.url, room: m.room, machine: byteArray, clientId, batching: modes[m.mode] }));
    while (rooms.some((r) => r.status() !== 'online' || r.members().length < m.members)) await sleep(20);
    return {};
  }
  if (m.cmd === 'run') {
    const rand = new Rng(m.seed).source();
    const cpu0 = process.cpuUsage();
    await Promise.all(
      rooms.map(async (r) => {
        for (let k = 0; k < m.ops; k++) {
          r.ops.increment({ offset: Math.floor(rand() * 100_000), count: 500 });
          await sleep(20);
        }
      }),
    );
    while (!rooms.every((r) => r.positions().visible >= m.total)) await sleep(5);
    const doneAt = wallNow();
    const c = process.cpuUsage(cpu0);
    return { doneAt, cpuS: (c.user + c.system) / 1e6 };
  }
  if (m.cmd === 'closeRooms') {
    for (const r of rooms) await r.close();
    rooms = [];
    return {};
  }
  throw new Error(`unknown command ${m.cmd}`);
}
process.on('message', (m: Msg) => {
  void handle(m).then((r) => process.send!({ id: m.id, ...r }));
});
process.on('disconnect', () => process.exit(0)); // the benchmark died: do not outlive it
process.send!({ ready: {} });
