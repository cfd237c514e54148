/**
 * Colyseus behind the common peer interface. The server (colyseus-server.ts) runs in its own
 * process and keeps each doc's room state in memory; a cell is an entry of the room state's
 * MapSchema<string> `cells`.
 *
 * Colyseus is server-authoritative: a client never writes its own state. set() only sends a
 * 'set' message, so "Submitted" means "sent", not "applied locally". The edit becomes visible
 * (to the sender too) when the server's next state patch arrives; patches go out every
 * `patchRate` ms (50 by default) and carry only the latest value of each changed key, so edits
 * of one key within a patch interval coalesce and only the last one is delivered.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Callbacks, Client } from '@colyseus/sdk';
import type { MapSchema, Schema } from '@colyseus/schema';
import { pkgVersion } from './peer-process.ts';
import type { PeerClient, PeerServer, PeerSystem } from './types.ts';

/** The room state as the client decodes it (its classes come from the server's handshake). */
type CellsState = Schema & { cells: MapSchema<string> };

const serverFile = fileURLToPath(new URL('./colyseus-server.ts', import.meta.url));

export const colyseus: PeerSystem = {
  name: `Colyseus ${pkgVersion('@colyseus/core')} (@colyseus/sdk ${pkgVersion('@colyseus/sdk')}, schema ${pkgVersion('@colyseus/schema')}, patchRate ${process.env.COLYSEUS_PATCH_RATE ?? 50} ms)`,

  async startServer(): Promise<PeerServer> {
    // cwd = this directory, so `--import tsx` and the Colyseus packages resolve from here.
    const proc = spawn(process.execPath, ['--import', 'tsx', serverFile], {
      cwd: fileURLToPath(new URL('.', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      proc.stdout!.on('data', (d: Buffer) => {
        out += d;
        const m = /PORT (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      proc.once('exit', (code) => reject(new Error(`colyseus server exited (${code}) before listening`)));
    });
    proc.stdout!.resume(); // keep draining so the child never blocks on a full pipe
    return {
      port,
      pid: proc.pid!,
      async stop() {
        if (proc.exitCode !== null || proc.signalCode !== null) return;
        proc.kill('SIGTERM'); // Colyseus' own handler disposes the rooms and exits
        const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      },
    };
  },

  async connect(host, port, doc): Promise<PeerClient> {
    const client = new Client(`ws://${host}:${port}`);
    const room = await client.joinOrCreate<CellsState>('cells', { doc });
    // joinOrCreate resolves on JOIN_ROOM; the full state follows once the client acks that.
    await new Promise<void>((r) => room.onStateChange.once(() => r()));

    // Own edits, told apart from others' by value (the workloads use unique values): a patch
    // showing our n-th set means the server has handled sets 1..n (one client's messages are
    // processed in order), even if a later edit of the same key coalesced over some of them.
    const own = new Map<string, number>(); // key + '\0' + value -> seq
    const waiters = new Map<number, () => void>(); // seq -> resolve
    let seq = 0,
      ackedSeq = 0;
    const listeners: ((key: string, value: string) => void)[] = [];

    // Registered after the initial state, so pre-existing cells are not reported as remote.
    // onChange on a map fires for additions and replacements, with (key, value).
    Callbacks.get(room).onChange('cells', (key, value) => {
      const s = own.get(key + '\0' + value);
      if (s === undefined) for (const fn of listeners) fn(key, value);
      else if (s > ackedSeq) ackedSeq = s;
    });
    // Resolve acks once per decoded patch (the change callbacks above have run by then).
    room.onStateChange(() => {
      for (const [n, resolve] of waiters)
        if (n <= ackedSeq) {
          resolve();
          waiters.delete(n);
        }
    });

    return {
      set(key, value) {
        own.set(key + '\0' + value, ++seq);
        if (own.size > 100_000) own.delete(own.keys().next().value!);
        room.send('set', { key, value });
      },
      acked(key, value) {
        const s = own.get(key + '\0' + value);
        if (s === undefined) return Promise.reject(new Error('not set here'));
        if (s <= ackedSeq) return Promise.resolve();
        return new Promise<void>((resolve) => {
          const prev = waiters.get(s);
          waiters.set(
            s,
            prev
              ? () => {
                  prev();
                  resolve();
                }
              : resolve,
          );
        });
      },
      onRemote(fn) {
        listeners.push(fn);
      },
      async close() {
        await room.leave();
      },
    };
  },
};
