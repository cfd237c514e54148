/**
 * A tiny synchronous loopback between ClientRooms and one RoomEngine, for unit tests.
 * Frames are queued per direction and delivered only when the test says so, so a test can
 * hold messages in flight and look at the views in between.
 */
import { ClientRoom, RoomEngine, type ClientMessage, type Machine, type OpRecord, type RoomOutput, type ServerMessage } from '../src/index.ts';

export class Loopback<M extends Machine<any, any>> {
  now = 0;
  readonly server: RoomEngine<any>;
  readonly rooms = new Map<string, ClientRoom<M>>();
  readonly toServer: { conn: string; msg: ClientMessage }[] = [];
  readonly toClient = new Map<string, ServerMessage[]>();
  readonly writes = new Map<string, OpRecord[]>();
  readonly warnings: string[] = [];
  private conns = new Map<string, string>();
  private epoch = 0;

  constructor(
    readonly machine: M,
    opts: { ackTimeoutMs?: number } = {},
  ) {
    this.server = new RoomEngine(machine, opts);
  }

  client(id: string, opts: { autoDurable?: boolean } = {}): ClientRoom<M> {
    const room = new ClientRoom(this.machine, { clientId: id, now: () => this.now, notify: 'sync' });
    room.attach({
      send: (msg) => {
        const c = this.conns.get(id);
        if (c) this.toServer.push({ conn: c, msg: structuredClone(msg) });
      },
      persist: (ops) => {
        this.writes.set(id, [...(this.writes.get(id) ?? []), ...ops]);
        if (opts.autoDurable !== false) queueMicrotask(() => room.durable(ops[ops.length - 1].seq));
      },
      warn: (m) => this.warnings.push(`${id}: ${m}`),
    });
    this.rooms.set(id, room);
    this.toClient.set(id, []);
    return room;
  }

  connect(id: string): void {
    const conn = `${id}#${++this.epoch}`;
    this.conns.set(id, conn);
    this.out(this.server.open(conn, this.now));
    this.rooms.get(id)!.connected();
  }

  disconnect(id: string): void {
    const conn = this.conns.get(id);
    if (!conn) return;
    this.conns.delete(id);
    this.toClient.set(id, []);
    for (let i = this.toServer.length - 1; i >= 0; i--) if (this.toServer[i].conn === conn) this.toServer.splice(i, 1);
    this.rooms.get(id)!.disconnected();
    this.out(this.server.close(conn, this.now));
  }

  out(o: RoomOutput): void {
    for (const { conn, msg } of o.send) {
      const id = [...this.conns].find(([, c]) => c === conn)?.[0];
      if (id) this.toClient.get(id)!.push(structuredClone(msg));
    }
    for (const { conn } of o.close) {
      const id = [...this.conns].find(([, c]) => c === conn)?.[0];
      if (id) {
        this.conns.delete(id);
        this.rooms.get(id)!.disconnected();
      }
    }
  }

  /** Deliver everything queued to the server. */
  up(): void {
    while (this.toServer.length) {
      const { conn, msg } = this.toServer.shift()!;
      this.out(this.server.message(conn, msg, this.now));
    }
  }

  /** Deliver everything queued to one client (or all). */
  down(id?: string): void {
    for (const [cid, q] of this.toClient) {
      if (id && cid !== id) continue;
      while (q.length) this.rooms.get(cid)!.receive(q.shift()!);
    }
  }

  /** Let microtasks (durable confirmations) run, then exchange until quiet. */
  async settle(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setImmediate(r));
      if (this.toServer.length === 0 && [...this.toClient.values()].every((q) => q.length === 0)) return;
      this.up();
      this.down();
    }
    throw new Error('loopback did not settle');
  }

  tick(ms: number): void {
    this.now += ms;
    this.out(this.server.tick(this.now));
  }
}
