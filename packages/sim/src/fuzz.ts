/**
 * Protocol fuzzer: the server's decoder (ServerCodec) and room engine fed random and mutated
 * frames from hostile connections, while honest clients keep working through the same codecs.
 * Seeded and deterministic: a failure names the rule of docs/spec.md it broke and prints the
 * command that replays it. The hostile frames are made in fuzz-frames.ts; one run (FuzzRun)
 * sends them, routes the room's output and checks the rules below.
 *
 * Checked at every frame:
 *   - SEC-LIMITS: every frame is measured before it is decoded, as the server does (measureFrame):
 *     the measure throws only too-large or malformed-frame, refuses every amplifying frame over
 *     MAX_FRAME_UNITS (1 in 40 attacks: an op of up to 300,000 empty maps or arrays, a byte each)
 *     and never an honest client's frame, and what a frame decodes to never counts more than it
 *     measured; presence floods (bursts of 1 to 40 values, 3,000-5,000 characters or random)
 *     reach the others only within MAX_PRESENCE_BYTES
 *   - SEC-MALFORMED: decoding either yields a value or throws HerculesError('malformed-frame');
 *     the engine never throws; a frame that is not a valid ClientMessage gets an error reply,
 *     to its sender only
 *   - LIVE-HONEST: no honest connection ever receives an error
 *   - LOG-CONTIGUOUS, STABLE-MONOTONIC: the log head and the stable frontier never go back, and
 *     stable <= head
 *   - OP-ARG-DOMAIN: an honest stub keeps its arguments in the domain or refuses them
 * And at the end, after the attackers stop and the network heals:
 *   - LIVE-CONVERGE: every honest op reached a verdict and each honest client's Authoritative
 *     view equals the server's state; LIVE-HONEST: rejected only because the op threw
 *   - SEC-AUTHOR: every author in the state is a user, never a client id; LOG-EXACTLY-ONCE: each
 *     accepted honest op took effect once
 *   - OP-REFUSED, SEC-ACCESS: nothing was done in the name of the banned or read-only users
 *   - REC-RESTORE, REC-CATCHUP: a room restored from the engine's durable state, as JSON (what
 *     storage keeps), the log replayed from storage, and a fresh client caught up through the
 *     codecs hold exactly the same state as the live replicas, compared by a print that tells
 *     -0, NaN, undefined, Dates and bytes apart: an op whose arguments left the JSON domain
 *     would show here (the `keep` op stores them verbatim)
 */
import {
  ClientCodec,
  ClientRoom,
  HerculesError,
  MAX_FRAME_UNITS,
  MAX_PRESENCE_BYTES,
  PROTOCOL_VERSION,
  RoomEngine,
  ServerCodec,
  defineMachine,
  domainBytes,
  measureFrame,
  parseClientMessage,
  type ClientMessage,
  type OpHandle,
  type RoomOutput,
  scanOp,
} from '@hercules/core';
import { FrameMaker, packr } from './fuzz-frames.ts';
import { Rng } from './rng.ts';

const small = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && Number.isInteger((v as { k?: unknown }).k) && Math.abs((v as { k: number }).k) < 1000;

/** A Standard Schema written by hand, so the fuzzer needs no validator library. */
const addSchema = {
  '~standard': {
    version: 1 as const,
    vendor: 'hercules-fuzz',
    validate: (v: unknown) => (small(v) ? { value: v as { k: number } } : { issues: [{ message: 'k must be an integer between -999 and 999' }] }),
  },
};

export const fuzzMachine = defineMachine({
  name: 'fuzz',
  version: 1,
  initial: { n: 0, byAuthor: {} as Record<string, number>, notes: [] as string[], kept: [] as unknown[], keptPrint: 0 },
  ops: {
    add(s, a: { k: number }, ctx) {
      if (a.k === 13) throw new Error('unlucky');
      s.n += a.k;
      s.byAuthor[ctx.author] = (s.byAuthor[ctx.author] ?? 0) + 1;
    },
    note(s, a: { text: string }, ctx) {
      s.notes.push(String(a?.text).slice(0, 16));
      if (s.notes.length > 8) s.notes.shift();
      s.byAuthor[ctx.author] = (s.byAuthor[ctx.author] ?? 0) + 1;
    },
    /**
     * Stores its argument as given: an argument that means different things on different paths
     * would show. (An op without arguments gets undefined, which state must not hold: JSON, and
     * so every checkpoint, has no undefined. Writing state outside the domain is the machine's
     * own doing; it stores null for it.)
     */
    keep(s, a: unknown, ctx) {
      s.kept.push(a === undefined ? null : a);
      if (s.kept.length > 8) s.kept.shift();
      // Every argument it ever kept, as this replica sees it, folded into one string.
      s.keptPrint = (scanOp(s.keptPrint, 'keep', exactPrint(a)) as { digest: number }).digest;
      s.byAuthor[ctx.author] = (s.byAuthor[ctx.author] ?? 0) + 1;
    },
  },
  schemas: { add: addSchema },
});

export interface FuzzStats {
  frames: number;
  malformedBytes: number;
  invalidMessages: number;
  validMessages: number;
  refusedOps: number;
  honestOps: number;
  reconnects: number;
  /** Frames measureFrame refused as too large before they were decoded. */
  tooLarge: number;
  /** Presence frames the attackers sent (floods among them). */
  presence: number;
}

export class FuzzFailure extends Error {
  /** The rule of docs/spec.md the run broke (absent for a crash of the fuzzer itself). */
  constructor(
    message: string,
    readonly rule?: string,
  ) {
    super(message);
  }
}

/** A print of a state that tells apart what JSON would merge: -0, NaN, ±Infinity, undefined, Dates, bytes. */
export function exactPrint(v: unknown): string {
  return (
    JSON.stringify(v, function (k, x) {
      const raw = (this as Record<string, unknown>)[k];
      if (Object.is(raw, -0)) return '«-0»';
      if (typeof raw === 'number' && !Number.isFinite(raw)) return `«${raw}»`;
      if (raw === undefined && k !== '') return '«undefined»';
      if (raw instanceof Date) return `«Date ${raw.getTime()}»`;
      if (raw instanceof Uint8Array) return `«bytes ${Array.from(raw).join(',')}»`;
      return x;
    }) ?? '«undefined»'
  );
}

interface Attacker {
  name: string;
  user: string;
  access: 'read' | 'write';
  conn: string;
  codec: ServerCodec;
  epoch: number;
  client: string;
}

interface Honest {
  id: string;
  user: string;
  room: ClientRoom<typeof fuzzMachine>;
  conn?: string;
  up: Uint8Array[];
  down: Uint8Array[];
  cc: ClientCodec;
  sc: ServerCodec;
  handles: OpHandle[];
  epoch: number;
}

type FuzzState = typeof fuzzMachine.initial;

export function runFuzz(seed: number, count: number): FuzzStats {
  const run = new FuzzRun(seed, count);
  run.connectAll();
  while (run.stats.frames < count) run.step();
  run.heal();
  run.checkEnd();
  return run.stats;
}

/**
 * One fuzz run: the room engine, three honest clients, three attackers (a writer, a banned
 * user, a reader) and the clock, checked at every frame (route, handle) and at the end (checkEnd).
 */
class FuzzRun {
  readonly stats: FuzzStats = {
    frames: 0,
    malformedBytes: 0,
    invalidMessages: 0,
    validMessages: 0,
    refusedOps: 0,
    honestOps: 0,
    reconnects: 0,
    tooLarge: 0,
    presence: 0,
  };
  private readonly rng: Rng;
  private now = 0;
  private readonly engine = new RoomEngine(fuzzMachine, {
    ackTimeoutMs: 400,
    authorize: (op, ctx) => (ctx.user === 'banned' ? 'banned user' : !(op.name === 'note' && (op.args as { text?: unknown })?.text === 'forbidden')),
  });
  private readonly frames: FrameMaker;
  private lastHead = 0;
  private lastStable = 0;
  /** Honest clients' writes waiting to be durable: they settle when the run says so. */
  private readonly queueDurable: (() => void)[] = [];
  private readonly honest: Honest[];
  private readonly attackers: Attacker[] = [
    { name: 'x', user: 'mallory', access: 'write', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
    { name: 'b', user: 'banned', access: 'write', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
    { name: 'r', user: 'reader', access: 'read', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
  ];
  private readonly byConn = new Map<string, Honest | Attacker>();
  /** Every entry the room appended, as a store keeps it (JSON text). */
  private readonly stored: string[] = [];

  constructor(
    private readonly seed: number,
    private readonly count: number,
  ) {
    this.rng = new Rng(seed);
    this.frames = new FrameMaker(this.rng, this.engine);
    this.honest = ['h1', 'h2', 'h3'].map((id, i) => this.makeHonest(id, `u${i + 1}`));
  }

  private fail(rule: string, what: string): never {
    throw new FuzzFailure(
      `fuzz seed ${this.seed} failed after ${this.stats.frames} frames: [${rule}] ${what}\n  replay: npm run fuzz -- --seed ${this.seed} --count ${this.count}`,
      rule,
    );
  }

  private makeHonest(id: string, user: string): Honest {
    const h: Honest = { id, user, up: [], down: [], cc: new ClientCodec(), sc: new ServerCodec(), handles: [], epoch: 0, room: undefined as never };
    h.room = new ClientRoom(fuzzMachine, { clientId: id, now: () => this.now, notify: 'sync' });
    h.room.attach({
      send: (m) => {
        if (h.conn) h.up.push(h.cc.encode(m));
      },
      persist: (ops) => this.queueDurable.push(() => h.room.durable(ops[ops.length - 1].seq)),
      warn: () => {},
      fatal: (code, message) => this.fail('LIVE-HONEST', `honest client ${id} got a fatal error ${code}: ${message}`),
    });
    return h;
  }

  /** Connects everyone: the honest clients say hello first, the attackers after. */
  connectAll(): void {
    for (const h of this.honest) this.connectHonest(h);
    // Honest clients use their ids first (real ids are random UUIDs an attacker cannot know in
    // advance); from then on only their users may use them.
    for (const h of this.honest) for (const bytes of h.up.splice(0)) this.route(this.engine.message(h.conn!, h.sc.decode(bytes), this.now));
    for (const a of this.attackers) this.connectAttacker(a);
  }

  /** Hands the room's output to its connections and checks it (SEC-LIMITS, LIVE-HONEST, SEC-MALFORMED, the frontiers). */
  private route(out: RoomOutput, from?: string, mustAnswer = false): void {
    for (const e of out.persist.appended) this.stored.push(JSON.stringify(e));
    const answered = this.routeSend(out, from);
    this.routeClose(out);
    if (mustAnswer && !answered) this.fail('SEC-MALFORMED', `an invalid message from ${from} got no error reply`);
    this.checkFrontiers();
  }

  /** Delivers the messages to the honest clients' inboxes; true when an error went to `from`. */
  private routeSend(out: RoomOutput, from?: string): boolean {
    let answered = false;
    for (const { conn, msg } of out.send) {
      const who = this.byConn.get(conn);
      if (!who) continue;
      if (msg.t === 'presence')
        for (const p of msg.peers) {
          const size = p.value === null ? 1 : domainBytes(p.value);
          if (typeof size !== 'number' || size > MAX_PRESENCE_BYTES)
            this.fail('SEC-LIMITS', `presence of ${p.client} (${exactPrint(p.value).slice(0, 60)}) went out past the bound: ${JSON.stringify(size)}`);
        }
      if (msg.t === 'error') {
        if ('room' in who) this.fail('LIVE-HONEST', `honest client ${who.id} received error ${msg.code}: ${msg.message}`);
        if (conn !== from) this.fail('SEC-MALFORMED', `error ${msg.code} went to ${conn}, not to the sender ${from}`);
        answered = true;
      }
      if ('room' in who) who.down.push(who.sc.encode(msg));
    }
    return answered;
  }

  private routeClose(out: RoomOutput): void {
    for (const { conn } of out.close) {
      const who = this.byConn.get(conn);
      if (!who) continue;
      this.byConn.delete(conn);
      if ('room' in who) {
        who.conn = undefined;
        who.up = [];
        who.down = [];
        who.room.disconnected();
      } else who.conn = '';
    }
  }

  private checkFrontiers(): void {
    const head = this.engine.head(),
      stable = this.engine.stableFrontier();
    if (head < this.lastHead) this.fail('LOG-CONTIGUOUS', `log head went back from ${this.lastHead} to ${head}`);
    if (stable < this.lastStable) this.fail('STABLE-MONOTONIC', `stable frontier went back from ${this.lastStable} to ${stable}`);
    if (stable > head) this.fail('STABLE-MONOTONIC', `stable frontier ${stable} is past the head ${head}`);
    this.lastHead = head;
    this.lastStable = stable;
  }

  private connectHonest(h: Honest): void {
    h.conn = `${h.id}#${++h.epoch}`;
    h.cc = new ClientCodec();
    h.sc = new ServerCodec();
    this.byConn.set(h.conn, h);
    this.route(this.engine.open(h.conn, this.now, { user: h.user, access: 'write' }));
    h.room.connected();
  }

  private connectAttacker(a: Attacker): void {
    a.conn = `${a.name}#${++a.epoch}`;
    a.codec = new ServerCodec();
    this.byConn.set(a.conn, a);
    this.stats.reconnects++;
    this.route(this.engine.open(a.conn, this.now, { user: a.user, access: a.access }));
    // Most reconnects say a proper hello, so the fuzzing reaches the op path; some try to
    // take over an honest client's id (which must be refused).
    a.client = this.rng.chance(0.9) ? `${a.name}${a.epoch % 3}` : this.rng.pick(['h1', 'h2', 'h3']);
    const hello = { t: 'hello', v: PROTOCOL_VERSION, client: a.client, machine: { name: 'fuzz', version: 1 }, have: 0 };
    const out = this.engine.message(a.conn, a.codec.decode(new ClientCodec().encode(hello as ClientMessage)), this.now);
    this.route(out, a.conn);
    if (!this.byConn.has(a.conn)) a.conn = '';
  }

  /** One step of the run: an attack (70%), an honest op (15%), a delivery (12%) or a tick (3%). */
  step(): void {
    const rng = this.rng;
    this.now += rng.int(0, 15);
    const r = rng.float();
    if (r < 0.7) this.attack(rng.pick(this.attackers));
    else if (r < 0.85) this.honestOp(rng.pick(this.honest));
    else if (r < 0.97) {
      this.settleDurable();
      this.deliver(rng.pick(this.honest), false);
    } else {
      this.route(this.engine.tick(this.now));
      for (const h of this.honest) {
        h.room.tick();
        if (!h.conn) this.connectHonest(h);
      }
    }
  }

  /** An attacker (reconnected if it was dropped) sends now and then a presence flood, then one hostile frame. */
  private attack(a: Attacker): void {
    if (!a.conn) this.connectAttacker(a);
    if (!a.conn) return;
    // A presence flood: values back to back, as fast as a socket takes them.
    const flood = this.rng.chance(0.02) ? this.rng.int(1, 40) : 0;
    for (let i = 0; i < flood && a.conn && this.stats.frames < this.count; i++) {
      this.stats.presence++;
      this.handle(a, this.frames.presenceFrame(), false);
    }
    if (a.conn && this.stats.frames < this.count) {
      const frame = this.frames.attackFrame(a.client);
      this.handle(a, frame.bytes, frame.overBound);
    }
  }

  /** An honest op: mostly an add (13 throws in the machine), else a keep of a hostile value through the stub. */
  private honestOp(h: Honest): void {
    if (this.rng.chance(0.8)) h.handles.push(h.room.ops.add({ k: this.rng.pick([this.rng.int(-999, 999), 13]) }));
    else {
      // Through the stubs, arguments enter the domain (-0 becomes 0) or are refused at once.
      const v = this.frames.randomValue();
      try {
        h.handles.push(h.room.ops.keep(v));
      } catch (e) {
        if (!(e instanceof HerculesError) || (e.code !== 'bad-argument' && e.code !== 'too-large'))
          this.fail('OP-ARG-DOMAIN', `stub keep(${exactPrint(v).slice(0, 80)}) threw ${String(e)}`);
        this.stats.honestOps--;
      }
    }
    this.stats.honestOps++;
  }

  /** One hostile frame, as the server takes it: measured, decoded, checked, handed to the room. */
  private handle(a: Attacker, bytes: Uint8Array, overBound: boolean): void {
    this.stats.frames++;
    const measured = this.measure(bytes, overBound);
    if (measured === undefined) return this.dropAttacker(a);
    let value: unknown;
    try {
      value = a.codec.decode(bytes);
    } catch (e) {
      if (!(e instanceof HerculesError) || e.code !== 'malformed-frame')
        this.fail('SEC-MALFORMED', `decoder threw ${String(e)} instead of a malformed-frame error`);
      // The server answers with an error frame and closes; the attacker comes back.
      this.stats.malformedBytes++;
      return this.dropAttacker(a);
    }
    // The raw value msgpackr makes of the frame (the codec then reshapes its tuples).
    const decoded = unitsOf(packr.unpack(bytes));
    if (decoded > measured)
      this.fail('SEC-LIMITS', `a frame measured ${measured} units and decoded to ${decoded}: ${Buffer.from(bytes).toString('hex').slice(0, 80)}`);
    this.admit(a, value);
  }

  /** measureFrame's units for a frame, or undefined when it refused the frame (counted); SEC-LIMITS. */
  private measure(bytes: Uint8Array, overBound: boolean): number | undefined {
    let measured: number;
    try {
      measured = measureFrame(bytes).units;
    } catch (e) {
      if (!(e instanceof HerculesError) || (e.code !== 'malformed-frame' && e.code !== 'too-large'))
        this.fail('SEC-LIMITS', `measureFrame threw ${String(e)} instead of too-large or malformed-frame`);
      if ((e as HerculesError).code === 'too-large') this.stats.tooLarge++;
      else this.stats.malformedBytes++;
      return undefined;
    }
    if (measured > MAX_FRAME_UNITS) this.fail('SEC-LIMITS', `a frame of ${measured} units passed the bound of ${MAX_FRAME_UNITS}`);
    if (overBound) this.fail('SEC-LIMITS', 'an amplifying frame over the bound was not refused before decoding');
    return measured;
  }

  /** A decoded frame handed to the room: an invalid message must be answered (SEC-MALFORMED), the engine must not throw. */
  private admit(a: Attacker, value: unknown): void {
    let valid = true;
    try {
      parseClientMessage(value);
    } catch {
      valid = false;
    }
    if (valid) this.stats.validMessages++;
    else this.stats.invalidMessages++;
    let out: RoomOutput;
    try {
      out = this.engine.message(a.conn, value, this.now);
    } catch (e) {
      return this.fail('SEC-MALFORMED', `room engine threw on ${JSON.stringify(value)?.slice(0, 200)}: ${(e as Error).stack}`);
    }
    for (const e of out.persist.appended) if (e.refused) this.stats.refusedOps++;
    this.route(out, a.conn, !valid);
  }

  private dropAttacker(a: Attacker): void {
    const conn = a.conn;
    this.byConn.delete(conn);
    a.conn = '';
    this.route(this.engine.close(conn, this.now));
  }

  /** Delivers some (or `all`) of an honest client's frames both ways; its frames must pass the measure (SEC-LIMITS). */
  private deliver(h: Honest, all: boolean): void {
    const nUp = all ? h.up.length : this.rng.int(0, h.up.length);
    for (const bytes of h.up.splice(0, nUp)) {
      if (!h.conn) break;
      try {
        measureFrame(bytes);
      } catch (e) {
        this.fail('SEC-LIMITS', `an honest client's frame was refused: ${String(e)}`);
      }
      this.route(this.engine.message(h.conn, h.sc.decode(bytes), this.now));
    }
    const nDown = all ? h.down.length : this.rng.int(0, h.down.length);
    for (const bytes of h.down.splice(0, nDown)) h.room.receive(h.cc.decode(bytes));
  }

  private settleDurable(): void {
    for (const f of this.queueDurable.splice(0)) f();
  }

  /** Heal: attackers stop, everything is delivered, acks flow, timeouts fire. */
  heal(): void {
    for (let round = 0; round < 200; round++) {
      this.settleDurable();
      for (const h of this.honest) {
        if (!h.conn) this.connectHonest(h);
        this.deliver(h, true);
        h.room.tick();
      }
      this.now += 50;
      this.route(this.engine.tick(this.now));
      const done =
        this.honest.every((h) => h.handles.every((x) => x.stage === 'visible' || x.stage === 'rejected')) &&
        this.honest.every((h) => h.up.length === 0 && h.down.length === 0);
      if (done && round > 3) break;
    }
  }

  /** The checks after healing: authors, verdicts and convergence, refusals, restore, replay, catch-up. */
  checkEnd(): void {
    const head = this.engine.headSnapshot() as FuzzState;
    // Authors are the users the transport authenticated, never the client ids they chose.
    const users = new Set([...this.honest.map((h) => h.user), ...this.attackers.map((a) => a.user)]);
    for (const a of Object.keys(head.byAuthor)) if (!users.has(a)) this.fail('SEC-AUTHOR', `an op took effect with author ${a}, who is no user`);
    for (const h of this.honest) this.checkHonest(h, head);
    // The banned user's ops are refused by the authorize hook, the reader's by its access.
    if (head.byAuthor.banned) this.fail('OP-REFUSED', `${head.byAuthor.banned} ops took effect in the name of banned`);
    if (head.byAuthor.reader) this.fail('SEC-ACCESS', `${head.byAuthor.reader} ops took effect in the name of reader`);
    const restored = this.checkRestore(head);
    this.checkCatchUp(restored, head);
  }

  /** LIVE-CONVERGE, LIVE-HONEST, LOG-EXACTLY-ONCE for one honest client. */
  private checkHonest(h: Honest, head: FuzzState): void {
    const pending = h.handles.filter((x) => x.stage !== 'visible' && x.stage !== 'rejected');
    if (pending.length)
      this.fail('LIVE-CONVERGE', `honest client ${h.id} has ${pending.length} ops without a verdict, e.g. ${pending[0].id} at ${pending[0].stage}`);
    for (const x of h.handles)
      if (x.stage === 'rejected' && !/unlucky/.test(x.error ?? '')) this.fail('LIVE-HONEST', `honest op ${x.id} was rejected: ${x.error}`);
    const auth = h.room.getState('authoritative');
    if (exactPrint(auth) !== exactPrint(head))
      this.fail(
        'LIVE-CONVERGE',
        `honest client ${h.id}'s Authoritative view differs from the server's state: ${exactPrint(auth).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
      );
    const accepted = h.handles.filter((x) => x.stage === 'visible').length;
    if ((head.byAuthor[h.user] ?? 0) !== accepted)
      this.fail('LOG-EXACTLY-ONCE', `user ${h.user} has ${head.byAuthor[h.user] ?? 0} ops in the state, but its client had ${accepted} accepted`);
  }

  /** REC-RESTORE: the room restored from its durable state, and its log replayed from storage, equal the live one; returns the restored room. */
  private checkRestore(head: FuzzState): RoomEngine<FuzzState> {
    // What a store keeps is JSON text; a restarted server starts from it.
    const restored = new RoomEngine(fuzzMachine, {}, JSON.parse(JSON.stringify(this.engine.durableState())));
    if (exactPrint(restored.headSnapshot()) !== exactPrint(head))
      this.fail(
        'REC-RESTORE',
        `a room restored from its durable state differs from the live one: ${exactPrint(restored.headSnapshot()).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
      );
    // The whole log replayed from what the store keeps, with no checkpoint (a checkpoint would
    // carry the live replicas' reading of every compacted op, hiding any that reads differently).
    const replayed = new RoomEngine(
      fuzzMachine,
      {},
      { checkpoint: { pos: 0, state: fuzzMachine.initial }, suffix: this.stored.map((t) => JSON.parse(t)), clients: {}, stable: 0 },
    );
    if (exactPrint(replayed.headSnapshot()) !== exactPrint(head))
      this.fail(
        'REC-RESTORE',
        `the log replayed from storage gives another state than the live one: ${exactPrint(replayed.headSnapshot()).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
      );
    return restored;
  }

  /** REC-CATCHUP: a client that joins now catches up through the codecs from the restored room. */
  private checkCatchUp(restored: RoomEngine<FuzzState>, head: FuzzState): void {
    const now = this.now;
    const late = new ClientRoom(fuzzMachine, { clientId: 'late', now: () => now, notify: 'sync' });
    const lateCodecs = { cc: new ClientCodec(), sc: new ServerCodec() };
    late.attach({
      send: (m) => {
        const out = restored.message('late#1', lateCodecs.sc.decode(lateCodecs.cc.encode(m)), now);
        for (const { conn, msg } of out.send) if (conn === 'late#1') late.receive(lateCodecs.cc.decode(lateCodecs.sc.encode(msg)));
      },
      persist: () => {},
    });
    restored.open('late#1', now, { user: 'late' });
    late.connected();
    if (exactPrint(late.getState('authoritative')) !== exactPrint(head))
      this.fail('REC-CATCHUP', `a client that joined late holds a different state: ${exactPrint(late.getState('authoritative')).slice(0, 300)}`);
  }
}

/**
 * A decoded value's size in measureFrame's units, strings by their UTF-16 length (at most their
 * UTF-8 bytes, whatever msgpackr made of bytes that are not UTF-8), keys by 1: never more than
 * the frame measured, or the measure could be fooled.
 */
function unitsOf(v: unknown): number {
  if (v === null || v === undefined || typeof v === 'boolean') return 1;
  if (typeof v === 'number') return 9;
  if (typeof v === 'string') return 5 + v.length;
  if (v instanceof Uint8Array) return 5 + v.length;
  if (typeof v !== 'object') return 9;
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + unitsOf(x), 5);
  let n = 5;
  // A key counts 1, the least any value measures: msgpackr makes a string of a key that was not
  // one (false, a number, an array), which may be longer than its bytes were.
  for (const x of Object.values(v)) n += 1 + unitsOf(x);
  return n;
}
