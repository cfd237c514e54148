/**
 * The server under a flood, in its own process so its memory is its own: createServer with the
 * demo machines on a temp data directory. Prints its URL; answers 'mem' over IPC with its memory
 * after a full GC (run with --expose-gc).
 */
import { createServer } from '@hercules/server';
import { chat } from '../../../apps/machines.ts';

const [dataDir, limitsJson] = process.argv.slice(2);
const server = await createServer({ port: 0, dataDir, machines: [chat], log: process.env.FLOOD_LOG ?? 'warn', limits: JSON.parse(limitsJson ?? '{}') });
process.send!({ url: server.url });
process.on('message', async (m: { t: string }) => {
  if (m.t === 'mem') {
    (globalThis as { gc?: () => void }).gc?.();
    const u = process.memoryUsage();
    process.send!({
      t: 'mem',
      rss: u.rss,
      heapUsed: u.heapUsed,
      heapTotal: u.heapTotal,
      external: u.external,
      arrayBuffers: u.arrayBuffers,
      rooms: server.loadedRooms().length,
    });
  }
  if (m.t === 'close') {
    await server.close();
    process.exit(0);
  }
});
