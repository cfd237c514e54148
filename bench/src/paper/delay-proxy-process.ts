/**
 * Child-process entry for the delay proxy (see `startDelayProxyProcess` in delay-proxy.ts): the
 * emulated network gets its own event loop, so a client process busy with its own work (a
 * rebase, an fsync) does not hold up packets, as it would not on a real network.
 *
 *   child -> parent  { ready: { port } }
 *   parent -> child  { cmd: 'connections' | 'cutAll' | 'close', id }   child -> parent { id, n? }
 */
import { startDelayProxy, type DelayProxyOptions } from './delay-proxy.ts';

const proxy = await startDelayProxy(JSON.parse(process.argv[2]) as DelayProxyOptions);
process.on('message', async (m: { cmd: string; id: number }) => {
  if (m.cmd === 'connections') process.send!({ id: m.id, n: proxy.connections() });
  else if (m.cmd === 'cutAll') {
    proxy.cutAll();
    process.send!({ id: m.id });
  } else if (m.cmd === 'close') {
    await proxy.close();
    process.send!({ id: m.id });
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0)); // the benchmark died: do not outlive it
process.send!({ ready: { port: proxy.port } });
