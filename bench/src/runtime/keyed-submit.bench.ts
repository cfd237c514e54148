/**
 * What an idempotency key costs a backend submit (issue 16): `server.room(name).submit` in this
 * process (SQLite in a temp dir), 2,000 sequential ops after 1,200 of warm-up (so the room already
 * remembers its 1,000 keys), without and with a key; alternated. Per op: wall time (mostly the
 * commit's fsync) and this process's CPU time.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/runtime/keyed-submit.bench.ts [--rounds 2]
 */
import { parseArgs } from 'node:util';
import { createServer } from '@hercules/server';
import { chat } from '../../../apps/machines.ts';
import { removeTemp, tempDir } from './common.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2' } } });
const N = 2000;
console.log('| run | wall µs per op | CPU µs per op |\n|---|--:|--:|');
for (let round = 1; round <= Number(values.rounds); round++) {
  for (const keyed of [false, true]) {
    const dir = tempDir('keyed-submit');
    const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
    const room = srv.room('r', 'chat');
    const opts = (i: number, tag: string) => ({ author: 'backend', ...(keyed ? { key: `${tag}-${i}-0123456789abcdef0123` } : {}) });
    for (let i = 0; i < 1200; i++) await room.submit('say', { text: `warm ${i}` }, opts(i, 'warm'));
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await room.submit('say', { text: `op ${i}` }, opts(i, 'op'));
    const cpu = process.cpuUsage(cpu0);
    const wall = ((performance.now() - t0) / N) * 1000;
    console.log(`| ${keyed ? 'keyed' : 'no key'} ${round} | ${wall.toFixed(0)} | ${((cpu.user + cpu.system) / N).toFixed(0)} |`);
    await srv.close();
    removeTemp(dir);
  }
}
