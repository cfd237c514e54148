/**
 * A client driver on a fake clock and a hand-driven store, against a real RoomEngine over
 * connections whose frames travel when the test says: client-driver.test.ts and the tests of
 * what a crash and restart leave (text-restart.test.ts).
 */
import assert from 'node:assert/strict';
import {
  ClientDriver,
  ClientRoom,
  RoomEngine,
  type BaseSnapshot,
  type Batching,
  type ClientMessage,
  type ClientRestore,
  type DriverStore,
  type Machine,
  type OpRecord,
  type RoomOutput,
} from '../src/index.ts';
import type { FakeClock } from '@hercules/test-utils';
import { room as fixture } from './fixtures.ts';

/** A store whose writes finish only when the test says, successfully or not. */
export class HandStore implements DriverStore {
  appends: { ops: OpRecord[]; done: (e?: unknown) => void }[] = [];
  bases: { base: BaseSnapshot; done: (e?: unknown) => void }[] = [];
  reserves: { through: number; done: (e?: unknown) => void }[] = [];
  held: OpRecord[] = [];
  /** The reservation this store holds. */
  reservedSeq = 0;
  reserve?: (through: number, done: (e?: unknown) => void) => void;
  /** `reserving`: a store that keeps seq reservations (DriverStore.reserve). */
  constructor(reserving = false) {
    if (reserving) {
      this.reserve = (through, done) =>
        this.reserves.push({
          through,
          done: (e) => {
            if (e === undefined) this.reservedSeq = through;
            done(e);
          },
        });
    }
  }
  append(ops: readonly OpRecord[], done: (e?: unknown) => void): void {
    this.appends.push({
      ops: [...ops],
      done: (e) => {
        if (e === undefined) this.held.push(...ops);
        done(e);
      },
    });
  }
  /** Confirm the oldest reservation not yet finished. */
  confirmReserve(error?: unknown): number {
    const r = this.reserves.shift();
    assert.ok(r, 'a reservation is under way');
    r.done(error);
    return r.through;
  }
  saveBase(base: BaseSnapshot, done: (e?: unknown) => void): void {
    this.bases.push({ base, done });
  }
  /** Confirm the oldest write not yet finished. */
  confirm(error?: unknown): OpRecord[] {
    const w = this.appends.shift();
    assert.ok(w, 'a write is under way');
    w.done(error);
    return w.ops;
  }
}

/** A client (room + driver) of `machine` with its own clock and store, and the frames it sent per connection. */
export function driverClient<M extends Machine<any, any>>(
  machine: M,
  id: string,
  clock: FakeClock,
  opts: {
    batching?: Batching;
    baseEveryMs?: number;
    seqBlock?: number;
    restore?: ClientRestore;
    store?: HandStore;
    fatal?: (code: string, message: string) => boolean;
  } = {},
) {
  const store = opts.store ?? new HandStore(opts.seqBlock !== undefined);
  const errors: Error[] = [];
  const room = new ClientRoom(machine, { clientId: id, now: clock.now, batching: opts.batching, notify: 'sync', restore: opts.restore });
  const driver = new ClientDriver(room, {
    store,
    clock,
    baseEveryMs: opts.baseEveryMs,
    seqBlock: opts.seqBlock,
    report: (e) => errors.push(e),
    fatal: opts.fatal,
  });
  const sent: ClientMessage[] = [];
  const opsSent = () => sent.flatMap((m) => (m.t === 'ops' ? m.ops.map((o) => o.seq) : []));
  return { room, driver, store, errors, sent, opsSent };
}
export type Client = ReturnType<typeof driverClient<Machine<any, any>>>;

/** A RoomEngine and connections between it and clients; frames travel when `flush()` says. */
export class Net {
  readonly server: RoomEngine<any>;
  private conns = new Map<string, Client>();
  private n = 0;
  private up: { conn: string; msg: ClientMessage }[] = [];
  constructor(
    readonly clock: FakeClock,
    machine: Machine<any, any> = fixture,
  ) {
    this.server = new RoomEngine(machine, { ackTimeoutMs: 10_000 });
  }
  open(c: Client): string {
    const conn = `${c.room.clientId}#${++this.n}`;
    this.conns.set(conn, c);
    this.out(this.server.open(conn, this.clock.t));
    c.driver.opened({
      send: (msg) => {
        c.sent.push(msg);
        if (this.conns.get(conn) === c) this.up.push({ conn, msg: structuredClone(msg) });
      },
    });
    return conn;
  }
  /** Break the connection: what is in flight on it is lost. */
  drop(conn: string): void {
    const c = this.conns.get(conn);
    if (!c) return;
    this.conns.delete(conn);
    this.up = this.up.filter((f) => f.conn !== conn);
    c.driver.closed();
    this.out(this.server.close(conn, this.clock.t));
  }
  /** Deliver everything in flight, both ways, until quiet. */
  flush(): void {
    for (let i = 0; i < 100; i++) {
      this.clock.settle();
      const f = this.up.shift();
      if (!f) return;
      this.out(this.server.message(f.conn, f.msg, this.clock.t));
    }
  }
  private out(o: RoomOutput): void {
    for (const { conn, msg } of o.send) this.conns.get(conn)?.driver.received(structuredClone(msg));
  }
}
