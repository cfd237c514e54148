/**
 * Colyseus server for the peer benchmark, run as its own process (see colyseus.ts). One room
 * type 'cells'; rooms are matched by the `doc` join option, so clients of one doc share a room.
 * Prints `PORT <n>` on stdout once listening on 127.0.0.1.
 */
import { Room, Server, type Client } from '@colyseus/core';
import { WebSocketTransport } from '@colyseus/ws-transport';
import { Encoder, schema, t } from '@colyseus/schema';

// Patches of a busy room exceed the default 8 KB encode buffer; it grows on demand but warns
// each time, so start larger.
Encoder.BUFFER_SIZE = 256 * 1024;

const CellsState = schema({ cells: t.map('string') }, 'CellsState');
type CellsState = InstanceType<typeof CellsState>;

// Colyseus' default patch rate is 50 ms (20 Hz); state changes leave the server only on that
// tick. Kept as shipped unless COLYSEUS_PATCH_RATE overrides it (ms).
const patchRate = Number(process.env.COLYSEUS_PATCH_RATE ?? 50);

class CellsRoom extends Room<{ state: CellsState }> {
  override state = new CellsState();
  override patchRate = patchRate;
  override messages = {
    // Server-authoritative: the only way a cell changes is through this handler.
    set(this: CellsRoom, _client: Client, msg: { key: string; value: string }) {
      this.state.cells.set(msg.key, msg.value);
    },
  };
}

// greet: false hides the banner. Colyseus installs its own SIGTERM/SIGINT handlers (option
// gracefullyShutdown, default on) that dispose the rooms and exit; stop() relies on that.
const server = new Server({ transport: new WebSocketTransport(), greet: false });
server.define('cells', CellsRoom).filterBy(['doc']);
await server.listen(0, '127.0.0.1');
const addr = server.transport.server!.address();
console.log(`PORT ${typeof addr === 'object' && addr ? addr.port : addr}`);
