/**
 * Child-process entry: one Hercules server (createServer) for the runtime benchmarks, so the
 * server has its own event loop and its own CPU accounting. Started by `startServer` in
 * common.ts with `fork`; talks to the parent over the IPC channel:
 *
 *   child -> parent  { ready: { url, port } }
 *   parent -> child  { cmd: 'stats', id }   child -> parent { id, cpu, elu, writeBytes, monoUs, hops }
 *   parent -> child  { cmd: 'close', id }   closes the server, replies, then exits (which also
 *                                           writes the CPU profile when run with --cpu-prof)
 *
 * Options come as one JSON argument: { dataDir, simulateRttMs?, commitWindowMs?, hopProbe?, store? }.
 * `store: 'memory'` keeps the rooms in a MemoryStore (createServer's `store` option: nothing
 * written anywhere), for comparisons with servers that keep their documents in memory; the
 * default is SQLite in `dataDir`, as shipped.
 * `hopProbe` runs a chain of setTimeout(simulateRttMs / 2) beside the real traffic and records
 * how long each really took: the emulated one-way delay as this event loop delivers it.
 */
import { readFileSync } from 'node:fs';
import { performance as perf } from 'node:perf_hooks';

// Same default as the CLI (packages/server/bin/hercules.js): the server is production unless
// told otherwise (Mutative's production build). Set before anything imports it.
process.env.NODE_ENV ??= 'production';

const opts = JSON.parse(process.argv[2] ?? '{}') as {
  dataDir: string;
  simulateRttMs?: number;
  commitWindowMs?: number;
  hopProbe?: boolean;
  store?: 'sqlite' | 'memory';
};
const { createServer, MemoryStore } = await import('@hercules/server');
const machines = await import('../../../apps/machines.ts');
const { kvMap, kvKeyedMap } = await import('../peers/kv-machine.ts');
const { textBench } = await import('../text/machine.ts');

const common = {
  machines: [machines.chat, machines.spreadsheet, machines.interiorDesign, machines.byteArray, kvMap, kvKeyedMap, textBench],
  simulateRttMs: opts.simulateRttMs ?? 0,
  commitWindowMs: opts.commitWindowMs ?? 0,
  // The load generators send far more than one user would: lift the per-connection op rate
  // limit (docs/security.md) so the benchmarks measure the server, not the limiter.
  limits: { opsPerSecond: 1e9, opsBurst: 1e9, bytesPerSecond: 1e12, bytesBurst: 1e12 },
  log: 'warn' as const,
};

// `store: 'memory'`: the server as shipped, with its rooms in a MemoryStore (createServer's `store`).
const memory = opts.store === 'memory' ? new MemoryStore() : undefined;
const server = memory
  ? await createServer({ ...common, port: 0, host: '127.0.0.1', store: memory })
  : await createServer({ ...common, port: 0, host: '127.0.0.1', dataDir: opts.dataDir });

const hops: number[] = [];
let probing = false;
if (opts.hopProbe && (opts.simulateRttMs ?? 0) > 0) {
  probing = true;
  const half = opts.simulateRttMs! / 2;
  const step = () => {
    const t0 = performance.now();
    setTimeout(() => {
      hops.push(performance.now() - t0);
      if (probing) step();
    }, half).unref();
  };
  step();
}

const send = (m: unknown) => process.send!(m);
/** Bytes this process caused to be written to the storage layer (Linux /proc/self/io), or -1. */
function writeBytes(): number {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : -1;
  } catch {
    return -1;
  }
}
process.on('message', async (m: { cmd: string; id: number; resetHops?: boolean }) => {
  if (m.cmd === 'stats') {
    send({
      id: m.id,
      cpu: process.cpuUsage(),
      elu: perf.eventLoopUtilization(),
      writeBytes: writeBytes(),
      monoUs: Number(process.hrtime.bigint() / 1000n),
      hops: m.resetHops ? hops.splice(0) : [...hops],
    });
  } else if (m.cmd === 'close') {
    probing = false;
    await server.close();
    await memory?.close();
    process.send!({ id: m.id, closed: true }, () => process.exit(0));
  }
});
// The parent died without closing us: do not linger.
process.on('disconnect', () => {
  void server.close().finally(() => process.exit(0));
});
send({ ready: { url: server.url, port: server.port } });
