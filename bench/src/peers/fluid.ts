/**
 * Fluid Framework behind the common peer interface: a container whose one initial object is a
 * SharedMap `cells`, served by tinylicious (Fluid's single-process test/dev service: in-memory op
 * log, snapshots written to a git store on disk) in its own process.
 *
 * set() = map.set(), applied locally at once (optimistic). acked: Fluid's "server has it" is the
 * ordering service sequencing the op and echoing it back. By default that is tracked per edit (the
 * map's 'op' event for our own op); FLUID_ACK=saved uses the container-wide 'saved' event instead,
 * which fires only when *no* op is pending, so it never fires while edits stream faster than a
 * round trip (see report).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { TinyliciousClient } from '@fluidframework/tinylicious-client';
import { ConnectionState, type IFluidContainer } from 'fluid-framework';
import { SharedMap, type ISharedMap } from 'fluid-framework/legacy';
import { pkgVersion } from './peer-process.ts';
import type { PeerClient, PeerServer, PeerSystem } from './types.ts';
import { freePort } from '@hercules/test-utils';

const schema = { initialObjects: { cells: SharedMap } } as const;
const ackMode = process.env.FLUID_ACK === 'saved' ? 'saved' : 'op';

/** host:port/doc -> container id; the first connect() for a doc creates the container, later
 *  (and concurrent) ones wait for its id and load it. Ids live only as long as the server, so
 *  stop() forgets them all (one server at a time; the connect port may be a proxy's). */
const containers = new Map<string, Promise<string>>();

async function whenConnected(container: IFluidContainer) {
  if (container.connectionState !== ConnectionState.Connected) {
    await new Promise<void>((r) => container.once('connected', () => r()));
  }
}

export const fluid: PeerSystem = {
  name: `Fluid Framework ${pkgVersion('fluid-framework')} SharedMap + tinylicious ${pkgVersion('tinylicious')} (ack: ${ackMode})`,

  async startServer(): Promise<PeerServer> {
    // tinylicious takes its port from $PORT and also uses it for its own internal URLs, so it
    // cannot be given port 0: pick a free port first (small race, fine on a bench machine).
    const port = await freePort();
    const storage = mkdtempSync(join(tmpdir(), 'tinylicious-'));
    const bin = createRequire(import.meta.url).resolve('tinylicious'); // dist/index.js, runs the service
    const proc = spawn(process.execPath, [bin], {
      // PORT: listening port (all interfaces). storage: snapshot git store, default /var/tmp.
      env: { ...process.env, PORT: String(port), storage, logger__level: 'error' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    // Ready once it answers HTTP (its "Listening" line is an info log, silenced above).
    for (let i = 0; ; i++) {
      if (proc.exitCode !== null) throw new Error(`tinylicious exited (${proc.exitCode})`);
      try {
        await fetch(`http://127.0.0.1:${port}/`);
        break;
      } catch {
        /* not up yet */
      }
      if (i > 300) throw new Error('tinylicious did not start in 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      port,
      pid: proc.pid!,
      async stop() {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGTERM');
          const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
          await exited;
          clearTimeout(t);
        }
        rmSync(storage, { recursive: true, force: true });
        containers.clear();
      },
    };
  },

  async connect(host, port, doc): Promise<PeerClient> {
    // All HTTP and socket.io traffic goes to domain:port (the proxy); tinylicious' driver uses
    // only these URLs (no discovery), so nothing bypasses the proxy.
    const client = new TinyliciousClient({ connection: { domain: `http://${host}`, port } });
    let container: IFluidContainer<typeof schema>;
    const slot = `${host}:${port}/${doc}`;
    const id = containers.get(slot);
    if (id === undefined) {
      const created = client.createContainer(schema, '2').then(async (r) => {
        container = r.container;
        return r.container.attach();
      });
      containers.set(slot, created);
      await created;
    } else {
      ({ container } = await client.getContainer(await id, schema, '2'));
    }
    container = container!;
    await whenConnected(container);
    const map: ISharedMap = container.initialObjects.cells;

    const listeners: ((key: string, value: string) => void)[] = [];
    map.on('valueChanged', (changed, local) => {
      if (local) return;
      const value = map.get<string>(changed.key);
      if (value !== undefined) for (const fn of listeners) fn(changed.key, value);
    });

    // Per-edit acks: the map emits 'op' for every sequenced op, with local = true for ours.
    const waiting = new Map<string, (() => void)[]>(); // key + '\0' + value -> resolvers
    const ackedOps = new Set<string>(); // acked before acked() was asked (bounded below)
    if (ackMode === 'op') {
      map.on('op', (msg, local) => {
        const op = msg.contents as { type?: string; key?: string; value?: { value?: unknown } };
        if (!local || op.type !== 'set') return;
        const id = op.key + '\0' + String(op.value?.value);
        const rs = waiting.get(id);
        if (rs) {
          waiting.delete(id);
          for (const r of rs) r();
        } else {
          ackedOps.add(id);
          if (ackedOps.size > 100_000) ackedOps.delete(ackedOps.values().next().value!);
        }
      });
    }

    return {
      set(key, value) {
        map.set(key, value);
      },
      acked(key, value) {
        if (ackMode === 'saved') {
          return container.isDirty ? new Promise<void>((r) => container.once('saved', () => r())) : Promise.resolve();
        }
        const id = key + '\0' + value;
        if (ackedOps.delete(id)) return Promise.resolve();
        return new Promise<void>((r) => {
          const rs = waiting.get(id);
          if (rs) rs.push(r);
          else waiting.set(id, [r]);
        });
      },
      onRemote(fn) {
        listeners.push(fn);
      },
      async close() {
        // IFluidContainer.dispose() only close()s the underlying container, which leaves its runtime
        // (and the GC session-expiry timer, a ~30-day setTimeout) alive, so the process never exits.
        // Disposing the underlying IContainer (a private field of fluid-static's FluidContainer)
        // tears the runtime down too.
        const inner = (container as unknown as { container?: { dispose(): void } }).container;
        if (inner) inner.dispose();
        else container.dispose();
      },
    };
  },
};
