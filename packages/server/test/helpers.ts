import { WebSocket } from 'ws';
import type { ConnectedRoom } from '@hercules/client';
import { ClientCodec, PROTOCOL_VERSION, type ClientMessage, type Machine, type ServerMessage } from '@hercules/core';
import { until } from '@hercules/test-utils';

// The generic helpers live in @hercules/test-utils (shared with the client tests, the soak, the
// e2e test and the benchmarks); re-exported so the server's tests import from one place.
export { freePort, tempDir, until } from '@hercules/test-utils';

export const online = (r: ConnectedRoom<any>) => until(() => r.status() === 'online', 10_000, 'online');

/**
 * A hand-driven WebSocket connection that can send anything a client could: for tests of what
 * the server does with hostile, wrong or silent peers. `query` is appended to `?room=`.
 */
export async function rawConnection(url: string, room: string, query = '') {
  const ws = new WebSocket(`${url}/?room=${room}${query}`);
  const codec = new ClientCodec();
  const msgs: ServerMessage[] = [];
  let closed: { code: number; reason: string } | undefined;
  ws.on('message', (d: Buffer) => msgs.push(codec.decode(new Uint8Array(d))));
  ws.on('close', (code, reason) => {
    closed = { code, reason: reason.toString() };
  });
  ws.on('error', () => {});
  await new Promise<void>((res) => {
    ws.once('open', () => res());
    ws.once('close', () => res());
  });
  return {
    ws,
    msgs,
    codec,
    closed: () => closed,
    send: (m: ClientMessage) => ws.send(codec.encode(m)),
    /** hello for `machine`, optionally claiming another machine version or protocol version. */
    hello: (client: string, machine: Machine<any, any>, o: { version?: number; protocol?: number } = {}) =>
      ws.send(
        codec.encode({
          t: 'hello',
          v: o.protocol ?? PROTOCOL_VERSION,
          client,
          machine: { name: machine.name, version: o.version ?? machine.version },
          have: 0,
        }),
      ),
    welcomed: () => msgs.some((m) => m.t === 'welcome'),
    /** How many of its own ops the server has given a verdict on. */
    verdicts: () => msgs.reduce((n, m) => n + (m.t === 'log' ? m.entries.filter((e) => e.k === 'own').length : 0), 0),
  };
}
