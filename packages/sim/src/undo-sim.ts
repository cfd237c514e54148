/**
 * The undo simulator (docs/undo.md, spec UNDO-*): several clients submit, undo and redo at random
 * over a real RoomEngine and real ClientRooms, with links that delay, drop and reconnect and
 * clients that crash and restart from their store. Its checkers read the global log:
 *
 * - UNDO-OWN: an undo or redo changes a path only where the value there is absent or written by
 *   its own client (every value the simulated ops write names its writer: `${client}.${n}`).
 * - UNDO-REDO: a redo puts back, on each path its undo changed and nobody changed since, the
 *   value the undo took away.
 * - UNDO-CONVERGE: once faults stop, every view of every client equals the server's state and
 *   the machine folded over the log.
 *
 * A run is one seed; `plant` plants a bug (undo-sim.test.ts) that the named checker must catch.
 */
import {
  ClientRoom,
  RoomEngine,
  UNDO_OP,
  VIEWS,
  applyOp,
  defineMachine,
  diffState,
  sameJson,
  type Change,
  type ClientMessage,
  type LogEntry,
  type OpRecord,
  type RoomOutput,
  type ServerMessage,
  type UndoArgs,
} from '@hercules/core';
import { Rng } from './rng.ts';

interface Cells {
  cells: Record<string, string>;
  doc: { title: string };
  /** Rows of cells: edited in place (undo by index, guarded by the lengths) or grown by a row. */
  grid: string[][];
}

/** Values name their writer, so a checker can tell whose write a path holds. */
export const undoMachine = defineMachine({
  name: 'sim-undo',
  version: 1,
  // No two cells start equal, and a new row's cells are new values: a cell's value names its writer.
  initial: {
    cells: {},
    doc: { title: '' },
    grid: [
      ['g00', 'g01', 'g02'],
      ['g10', 'g11', 'g12'],
    ],
  } as Cells,
  ops: {
    set(s, a: { key: string; value: string }) {
      s.cells[a.key] = a.value;
    },
    title(s, a: { value: string }) {
      s.doc.title = a.value;
    },
    cell(s, a: { row: number; col: number; value: string }) {
      if (a.row >= s.grid.length) throw new Error(`no row ${a.row}`);
      s.grid[a.row][a.col] = a.value;
    },
    row(s, a: { value: string }) {
      if (s.grid.length >= 5) throw new Error('the grid is full');
      s.grid.push([a.value, `${a.value}/1`, `${a.value}/2`]);
    },
    /** Throws unless the cell holds `expect`: may succeed speculatively and be rejected in order. */
    swap(s, a: { key: string; expect: string; value: string }) {
      if ((s.cells[a.key] ?? '') !== a.expect) throw new Error(`${a.key} is no longer ${a.expect}`);
      s.cells[a.key] = a.value;
    },
  },
});

type M = typeof undoMachine;
/** 'writes-overtake': the store completes writes out of order, as it did before seeds 348 and 966 were fixed. */
export type UndoPlant = 'takes-others' | 'redo-nothing' | 'diverge' | 'writes-overtake';

export interface UndoSimResult {
  seed: number;
  ok: boolean;
  rule?: string;
  error?: string;
  counts: Record<string, number>;
}

class UndoViolation extends Error {
  constructor(
    readonly rule: string,
    message: string,
  ) {
    super(`[${rule}] ${message}`);
  }
}

interface Client {
  id: string;
  room?: ClientRoom<M>;
  conn?: string;
  epoch: number;
  disk: OpRecord[];
  lastSeq: number;
  lastDigest?: number;
  /** When each link direction may deliver next (FIFO: never before the previous frame). */
  up: number;
  down: number;
  /**
   * When the store's last write completes. Writes complete in order, as the client driver's do
   * (one at a time): a write that overtook an earlier one and was reported durable before it
   * lost that op in a crash, and the restarted client found its ops with a hole (seq-gap) on
   * every reconnect for ever (seeds 348, 966: the runs that did not finish).
   */
  diskAt: number;
  n: number;
}

const KEYS = ['a', 'b', 'c', 'd'];

/** One seeded run. */
export class UndoSim {
  readonly rng: Rng;
  now = 0;
  private readonly queue: { at: number; n: number; run: () => void }[] = [];
  private events = 0;
  readonly server = new RoomEngine(undoMachine);
  readonly clients: Client[] = [];
  readonly log: LogEntry[] = [];
  readonly counts: Record<string, number> = {};
  private faults = true;
  private readonly checker = new UndoChecker();

  constructor(
    readonly seed: number,
    readonly plant?: UndoPlant,
  ) {
    this.rng = new Rng(seed ^ 0x07d0);
    const n = this.rng.int(2, 4);
    for (let i = 0; i < n; i++) this.clients.push({ id: `u${i}`, epoch: 0, disk: [], lastSeq: 0, up: 0, down: 0, diskAt: 0, n: 0 });
  }

  readonly notes: string[] = [];
  note(m: string): void {
    this.notes.push(`${this.now}: ${m}`);
  }

  count(k: string): void {
    this.counts[k] = (this.counts[k] ?? 0) + 1;
  }

  at(t: number, run: () => void): void {
    this.queue.push({ at: t, n: this.events++, run });
  }

  /** Run the seed: random activity for `activeMs`, then heal and check convergence. */
  async run(activeMs = 1500): Promise<void> {
    const captureMs = this.rng.pick([0, 0, 50]);
    for (const c of this.clients) this.start(c, captureMs);
    for (let t = 0; t < activeMs; t += this.rng.int(1, 20)) this.at(t, () => this.act(captureMs));
    for (let t = 0; t < activeMs + 5000; t += 50) this.at(t, () => this.tick());
    this.at(activeMs, () => this.heal(captureMs));
    // Faults stop at activeMs and the last tick is 5 s later; a run still busy long after that
    // is a livelock (a client reconnecting for ever): a failure to report, not a hang.
    const settleBy = activeMs + 60_000;
    while (this.queue.length > 0) {
      this.queue.sort((a, b) => a.at - b.at || a.n - b.n);
      const e = this.queue.shift()!;
      if (e.at > settleBy) throw new UndoViolation('UNDO-CONVERGE', `still busy ${settleBy} ms in (simulated time): the clients never settle`);
      this.now = Math.max(this.now, e.at);
      e.run();
      // A turn ends between events: microtasks run (the undo stack's turn grouping).
      await Promise.resolve();
    }
    this.checkConverged();
  }

  private tick(): void {
    this.serverOut(this.server.tick(this.now));
    for (const c of this.clients) c.room?.tick();
  }

  private act(captureMs: number): void {
    if (!this.faults) return;
    const r = this.rng.float();
    const c = this.rng.pick(this.clients);
    if (r < 0.02) return this.crash(c, captureMs);
    if (r < 0.05) return this.disconnect(c);
    if (!c.room) return;
    if (r < 0.6) return this.submit(c);
    if (r < 0.8) return void (c.room.undo() && this.count('undo'));
    if (r < 0.95) return void (c.room.redo() && this.count('redo'));
    c.room.stopCapturing();
  }

  private submit(c: Client): void {
    const room = c.room!;
    const value = () => `${c.id}.${++c.n}`;
    const k = this.rng.float();
    if (k < 0.2) {
      room.undoGroup(() => {
        room.ops.set({ key: this.rng.pick(KEYS), value: value() });
        room.ops.title({ value: value() });
      });
    } else if (k < 0.3) room.ops.title({ value: value() });
    else if (k < 0.38) room.ops.cell({ row: this.rng.int(0, 4), col: this.rng.int(0, 2), value: value() });
    else if (k < 0.4) room.ops.row({ value: value() });
    else if (k < 0.5) {
      const key = this.rng.pick(KEYS);
      room.ops.swap({ key, expect: room.getState().cells[key] ?? '', value: value() });
    } else room.ops.set({ key: this.rng.pick(KEYS), value: value() });
    this.count('op');
  }

  private start(c: Client, captureMs: number): void {
    const room = new ClientRoom(
      undoMachine,
      {
        clientId: c.id,
        now: () => this.now,
        notify: 'sync',
        undo: { captureMs },
        restore: structuredClone({ lastSeq: c.lastSeq, durable: c.disk, ...(c.lastDigest !== undefined ? { lastDigest: c.lastDigest } : {}) }),
      },
      {
        send: (msg) => this.toServer(c, room, msg),
        persist: (ops) => {
          const copy = structuredClone(ops);
          const done = this.now + this.rng.int(0, 5);
          c.diskAt = this.plant === 'writes-overtake' ? done : Math.max(c.diskAt, done);
          this.at(c.diskAt, () => {
            if (c.room !== room) return; // the write died with the process
            for (const op of copy) {
              c.disk.push(op);
              if (op.seq > c.lastSeq) {
                c.lastSeq = op.seq;
                c.lastDigest = op.digest;
              }
            }
            room.durable(copy[copy.length - 1].seq);
          });
        },
        resync: () => this.disconnect(c),
        warn: (m) => this.note(`${c.id} warn: ${m}`),
        // connect() closes its socket on a fatal refusal and stops; this client, like an app
        // that calls connect() again whatever the error, tries again (a store with a hole: a
        // local seq-gap on every welcome, LOG-OWN-HOLE), so such a run never settles.
        fatal: (code, m) => {
          this.note(`${c.id} fatal ${code}: ${m}`);
          this.disconnect(c);
        },
      },
    );
    c.room = room;
    this.connect(c);
  }

  private connect(c: Client): void {
    if (!c.room || c.conn) return;
    const conn = `${c.id}#${++c.epoch}`;
    c.conn = conn;
    c.up = c.down = this.now;
    this.serverOut(this.server.open(conn, this.now));
    c.room.connected();
  }

  private disconnect(c: Client): void {
    const conn = c.conn;
    if (!conn) return;
    this.count('disconnect');
    c.conn = undefined;
    c.room?.disconnected();
    this.serverOut(this.server.close(conn, this.now));
    this.at(this.now + this.rng.int(10, 300), () => this.connect(c));
  }

  private crash(c: Client, captureMs: number): void {
    if (!c.room) return;
    this.count('crash');
    const conn = c.conn;
    c.room.close();
    c.room = undefined;
    c.conn = undefined;
    if (conn) this.serverOut(this.server.close(conn, this.now));
    this.at(this.now + this.rng.int(20, 400), () => {
      if (!c.room) this.start(c, captureMs);
    });
  }

  private heal(captureMs: number): void {
    this.faults = false;
    for (const c of this.clients) {
      if (!c.room) this.start(c, captureMs);
      else this.connect(c);
    }
  }

  private latency(): number {
    return this.rng.int(1, 40);
  }

  private toServer(c: Client, room: ClientRoom<M>, msg: ClientMessage): void {
    const conn = c.conn;
    if (!conn || c.room !== room) return;
    const m = this.plant === 'takes-others' || this.plant === 'redo-nothing' ? plantUp(this.plant, msg, this.server.headSnapshot()) : msg;
    c.up = Math.max(c.up, this.now + this.latency());
    const copy = structuredClone(m);
    this.at(c.up, () => {
      if (c.conn !== conn) return;
      this.serverOut(this.server.message(conn, copy, this.now));
    });
  }

  private serverOut(o: RoomOutput): void {
    for (const e of o.persist.appended) {
      this.log.push(e);
      this.checker.entry(e);
    }
    for (const { conn, msg } of o.send) {
      const c = this.clients.find((x) => x.conn === conn);
      if (!c) continue;
      const m = this.plant === 'diverge' && c === this.clients[0] ? plantDown(msg) : msg;
      c.down = Math.max(c.down, this.now + this.latency());
      const copy = structuredClone(m);
      this.at(c.down, () => {
        if (c.conn === conn) c.room?.receive(copy as ServerMessage);
      });
    }
    for (const { conn } of o.close) {
      const c = this.clients.find((x) => x.conn === conn);
      if (c) {
        c.conn = undefined;
        c.room?.disconnected();
        this.at(this.now + 50, () => this.connect(c));
      }
    }
  }

  /** UNDO-CONVERGE: every view of every client is the server's state, the fold of the log. */
  private checkConverged(): void {
    const head = this.server.headSnapshot();
    if (!sameJson(head, this.checker.state)) throw new UndoViolation('UNDO-CONVERGE', `the server's state differs from the fold of its log`);
    for (const c of this.clients) {
      for (const v of VIEWS) {
        const s = c.room!.getState(v);
        if (!sameJson(s, head))
          throw new UndoViolation(
            'UNDO-CONVERGE',
            `${c.id} (${c.room!.connection()}, ${c.room!.pending().length} pending, conn ${c.conn}) ${v} view ${JSON.stringify(s)} differs from the server's ${JSON.stringify(head)}`,
          );
      }
    }
  }
}

/** The plants: an undo that restores whatever the server holds now; a redo that does nothing. */
function plantUp(plant: UndoPlant, msg: ClientMessage, head: Cells): ClientMessage {
  if (msg.t !== 'ops') return msg;
  const ops = msg.ops.map((op) => {
    if (op.name !== UNDO_OP) return op;
    const a = op.args as UndoArgs;
    if (plant === 'redo-nothing') return a.redo ? { ...op, args: { ...a, do: [] } } : op;
    const actions = a.do.map((x) => ('path' in x ? { ...x, from: valueAt(head, x.path) } : x));
    return { ...op, args: { ...a, do: actions.map((x) => Object.fromEntries(Object.entries(x).filter(([, v]) => v !== undefined))) } };
  });
  return { ...msg, ops } as ClientMessage;
}

/** The plant 'diverge': one client receives others' undo ops with nothing to do. */
function plantDown(msg: ServerMessage): ServerMessage {
  if (msg.t !== 'log') return msg;
  const entries = msg.entries.map((w) => (w.k === 'op' && w.e.name === UNDO_OP ? { ...w, e: { ...w.e, args: { ...(w.e.args as UndoArgs), do: [] } } } : w));
  return { ...msg, entries };
}

function valueAt(s: unknown, path: readonly (string | number)[]): unknown {
  let o = s;
  for (const k of path) o = o !== null && typeof o === 'object' && Object.hasOwn(o, k) ? (o as Record<string, unknown>)[k] : undefined;
  return o;
}

/** Reads the global log entry by entry, folding it, and checks UNDO-OWN and UNDO-REDO. */
export class UndoChecker {
  state: Cells = undoMachine.initial;
  /** For each undo op (`client:seq`): the paths it changed, with the value each held before. */
  private readonly undone = new Map<string, Undone>();
  /** The latest undo of each client's step (`client:of`). */
  private readonly lastUndoOf = new Map<string, string>();
  /** Where each path last changed. */
  private readonly changedAt = new Map<string, number>();
  /**
   * What each client's changes of each path (`client path`) left there, every one: an undo of a
   * step that grew an array, edited an element, then grew it again restores the array to what the
   * first growth left (the undo simulator's seed 318, judged action by action), not only the last.
   */
  private readonly left = new Map<string, unknown[]>();

  entry(e: LogEntry): void {
    const next = e.error !== undefined ? this.state : applyOp(undoMachine, this.state, e, e.pos).state;
    const changes: Change[] = [];
    diffState(this.state, next, changes);
    if (e.name === UNDO_OP && e.error === undefined) this.checkUndo(e, changes, next);
    for (const c of changes) {
      this.changedAt.set(c.path.join('/'), e.pos);
      const k = `${e.client} ${c.path.join('/')}`;
      const values = this.left.get(k);
      if (!values) this.left.set(k, [c.after]);
      else if (!values.some((x) => sameJson(x, c.after))) values.push(c.after);
    }
    this.state = next;
  }

  private checkUndo(e: LogEntry, changes: Change[], next: Cells): void {
    const a = e.args as UndoArgs;
    const key = `${e.client}:${a.of}`;
    const u = a.redo ? this.undone.get(this.lastUndoOf.get(key) ?? '') : undefined;
    this.checkEachAction(e, u, next);
    if (!a.redo) {
      const targets = new Map(a.do.flatMap((x) => ('path' in x ? [[x.path.join('/'), x.to] as const] : [])));
      this.undone.set(`${e.client}:${e.seq}`, { pos: e.pos, before: new Map(changes.map((c) => [c.path.join('/'), c.before])), targets });
      this.lastUndoOf.set(key, `${e.client}:${e.seq}`);
      return;
    }
    if (!u) return;
    for (const [p, before] of u.before) {
      if (this.changedSince(p, u.pos)) continue; // someone (or we) wrote it since
      const now = valueAt(next, p.split('/'));
      if (!sameJson(now, before))
        throw new UndoViolation(
          'UNDO-REDO',
          `${e.client}:${e.seq} (redo at ${e.pos}) left ${p} at ${JSON.stringify(now)}; its undo at ${u.pos} took away ${JSON.stringify(before)} and nobody wrote it since`,
        );
    }
  }

  /**
   * UNDO-OWN for each action at its place: an op's actions run in turn (applyUndo), so a restore
   * finds the values the actions before it left. Judging the op as a whole from the state before
   * it was wrong: undoing "add a row, then edit a cell" restores the cell, then the grid whole,
   * and the grid's value before the op held the edited cell (seeds 690, 773, 1306 failed so).
   */
  private checkEachAction(e: LogEntry, u: Undone | undefined, next: Cells): void {
    const a = e.args as UndoArgs;
    let s = this.state;
    for (const action of a.do) {
      const after = applyOp(undoMachine, s, { ...e, args: { ...a, do: [action] } }, e.pos).state;
      const changes: Change[] = [];
      diffState(s, after, changes);
      this.checkOwn(e, changes, u);
      s = after;
    }
    if (!sameJson(s, next)) throw new Error(`the checker's fold of ${e.client}:${e.seq} action by action differs from the op's result`);
  }

  /** Whether `path`, a path above it or one below it changed after `pos`. */
  private changedSince(path: string, pos: number): boolean {
    for (const [p, at] of this.changedAt) {
      if (at <= pos) continue;
      if (p === path || path.startsWith(`${p}/`) || p.startsWith(`${path}/`)) return true;
    }
    return false;
  }

  /**
   * UNDO-OWN: each path an action changed held a value absent (or initial), written by this
   * client, left there by one of this client's changes of the path, or, for a redo, the value its
   * undo restores
   * (which another client's undo may also have put back: values are compared, docs/undo.md).
   * Never a value another client wrote.
   */
  private checkOwn(e: LogEntry, changes: Change[], u: Undone | undefined): void {
    for (const c of changes) {
      const v = c.before;
      const p = c.path.join('/');
      const ours =
        v === undefined ||
        v === '' ||
        (typeof v === 'string' && v.startsWith(`${e.client}.`)) ||
        (this.left.get(`${e.client} ${p}`)?.some((x) => sameJson(v, x)) ?? false) ||
        (u !== undefined && u.targets.has(p) && sameJson(v, u.targets.get(p)));
      if (!ours)
        throw new UndoViolation(
          'UNDO-OWN',
          `${e.client}:${e.seq} (${UNDO_OP} at ${e.pos}) changed ${c.path.join('.')} from ${JSON.stringify(v)}, another client's write`,
        );
    }
  }
}

interface Undone {
  pos: number;
  /** The paths the undo changed, with the value each held before it. */
  before: Map<string, unknown>;
  /** What its actions restore, by path. */
  targets: Map<string, unknown>;
}

/** The undo simulator's checkers, by the rule of docs/spec.md each checks. */
export const UNDO_CHECKERS: readonly { rule: string; description: string }[] = [
  { rule: 'UNDO-OWN', description: 'an undo or redo never takes back a value another client wrote (undo simulator)' },
  { rule: 'UNDO-REDO', description: 'a redo puts back what its undo took away where nobody wrote since (undo simulator)' },
  { rule: 'UNDO-CONVERGE', description: 'with undo and redo among concurrent ops, every view of every client ends equal to the server (undo simulator)' },
];

/** Run one seed; a violation or a crash is a failed result, never a throw. */
export async function runUndoSeed(seed: number, plant?: UndoPlant): Promise<UndoSimResult> {
  const sim = new UndoSim(seed, plant);
  try {
    await sim.run();
    return { seed, ok: true, counts: sim.counts };
  } catch (e) {
    const rule = e instanceof UndoViolation ? e.rule : undefined;
    const error = `${e instanceof Error ? e.message : String(e)}${sim.notes.length ? ` (${sim.notes.slice(-3).join('; ')})` : ''}`;
    return { seed, ok: false, ...(rule ? { rule } : {}), error, counts: sim.counts };
  }
}
