import { rmSync } from 'node:fs';
import { defineMachine } from '@hercules/core';
import { connect, memoryStorage } from '@hercules/client';
import { createServer } from '@hercules/server';

/** A counter that remembers who added: what each UI app shows. */
export const counter = defineMachine({
  name: 'counter',
  version: 1,
  initial: { n: 0, by: [] as string[] },
  ops: {
    add(state, args: { by: string }) {
      state.n++;
      state.by.push(args.by);
    },
  },
});

/** An in-process server and two clients of one room: what each UI app runs against. */
export async function twoClients(name: string) {
  const dataDir = `./data-${name}`;
  rmSync(dataDir, { recursive: true, force: true }); // each run from an empty room
  const server = await createServer({ port: 0, dataDir, machines: [counter], log: 'silent' });
  const a = await connect({ url: server.url, room: name, machine: counter, storage: memoryStorage() });
  const b = await connect({ url: server.url, room: name, machine: counter, storage: memoryStorage() });
  const close = async () => {
    await a.close();
    await b.close();
    await server.close();
  };
  return { a, b, close };
}
