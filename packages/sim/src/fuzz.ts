/**
 * Protocol fuzzer: the server's decoder (ServerCodec) and room engine fed random and mutated
 * frames from hostile connections, while honest clients keep working through the same codecs.
 * Seeded and deterministic: a failure names the rule of docs/spec.md it broke and prints the
 * command that replays it.
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
import { Packr } from 'msgpackr';
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
import { Rng } from './rng.ts';
import { hostileValue } from './hostile.ts';

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

const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });
const INTERESTING = [
  0x00, 0xff, 0x7f, 0x80, 0xc0, 0xc1, 0xc2, 0xc3, 0xcc, 0xcd, 0xce, 0xcf, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xe0,
];

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

export function runFuzz(seed: number, count: number): FuzzStats {
  const rng = new Rng(seed);
  let now = 0;
  const stats: FuzzStats = {
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
  const fail = (rule: string, what: string): never => {
    throw new FuzzFailure(
      `fuzz seed ${seed} failed after ${stats.frames} frames: [${rule}] ${what}\n  replay: npm run fuzz -- --seed ${seed} --count ${count}`,
      rule,
    );
  };
  const engine = new RoomEngine(fuzzMachine, {
    ackTimeoutMs: 400,
    authorize: (op, ctx) => (ctx.user === 'banned' ? 'banned user' : !(op.name === 'note' && (op.args as { text?: unknown })?.text === 'forbidden')),
  });
  let lastHead = 0,
    lastStable = 0;

  const honest: Honest[] = ['h1', 'h2', 'h3'].map((id, i) => {
    const h: Honest = {
      id,
      user: `u${i + 1}`,
      up: [],
      down: [],
      cc: new ClientCodec(),
      sc: new ServerCodec(),
      handles: [],
      epoch: 0,
      room: undefined as never,
    };
    h.room = new ClientRoom(fuzzMachine, { clientId: id, now: () => now, notify: 'sync' });
    h.room.attach({
      send: (m) => {
        if (h.conn) h.up.push(h.cc.encode(m));
      },
      persist: (ops) => queueDurable.push(() => h.room.durable(ops[ops.length - 1].seq)),
      warn: () => {},
      fatal: (code, message) => fail('LIVE-HONEST', `honest client ${id} got a fatal error ${code}: ${message}`),
    });
    return h;
  });
  const queueDurable: (() => void)[] = [];
  const attackers: Attacker[] = [
    { name: 'x', user: 'mallory', access: 'write', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
    { name: 'b', user: 'banned', access: 'write', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
    { name: 'r', user: 'reader', access: 'read', conn: '', codec: new ServerCodec(), epoch: 0, client: '' },
  ];
  const byConn = new Map<string, Honest | Attacker>();

  /** Every entry the room appended, as a store keeps it (JSON text). */
  const stored: string[] = [];
  const route = (out: RoomOutput, from?: string, mustAnswer = false) => {
    let answered = false;
    for (const e of out.persist.appended) stored.push(JSON.stringify(e));
    for (const { conn, msg } of out.send) {
      const who = byConn.get(conn);
      if (!who) continue;
      if (msg.t === 'presence')
        for (const p of msg.peers) {
          const size = p.value === null ? 1 : domainBytes(p.value);
          if (typeof size !== 'number' || size > MAX_PRESENCE_BYTES)
            fail('SEC-LIMITS', `presence of ${p.client} (${exactPrint(p.value).slice(0, 60)}) went out past the bound: ${JSON.stringify(size)}`);
        }
      if (msg.t === 'error') {
        if ('room' in who) fail('LIVE-HONEST', `honest client ${who.id} received error ${msg.code}: ${msg.message}`);
        if (conn !== from) fail('SEC-MALFORMED', `error ${msg.code} went to ${conn}, not to the sender ${from}`);
        answered = true;
      }
      if ('room' in who) who.down.push(who.sc.encode(msg));
    }
    for (const { conn } of out.close) {
      const who = byConn.get(conn);
      if (!who) continue;
      byConn.delete(conn);
      if ('room' in who) {
        who.conn = undefined;
        who.up = [];
        who.down = [];
        who.room.disconnected();
      } else who.conn = '';
    }
    if (mustAnswer && !answered) fail('SEC-MALFORMED', `an invalid message from ${from} got no error reply`);
    const head = engine.head(),
      stable = engine.stableFrontier();
    if (head < lastHead) fail('LOG-CONTIGUOUS', `log head went back from ${lastHead} to ${head}`);
    if (stable < lastStable) fail('STABLE-MONOTONIC', `stable frontier went back from ${lastStable} to ${stable}`);
    if (stable > head) fail('STABLE-MONOTONIC', `stable frontier ${stable} is past the head ${head}`);
    lastHead = head;
    lastStable = stable;
  };

  const connectHonest = (h: Honest) => {
    h.conn = `${h.id}#${++h.epoch}`;
    h.cc = new ClientCodec();
    h.sc = new ServerCodec();
    byConn.set(h.conn, h);
    route(engine.open(h.conn, now, { user: h.user, access: 'write' }));
    h.room.connected();
  };
  const connectAttacker = (a: Attacker) => {
    a.conn = `${a.name}#${++a.epoch}`;
    a.codec = new ServerCodec();
    byConn.set(a.conn, a);
    stats.reconnects++;
    route(engine.open(a.conn, now, { user: a.user, access: a.access }));
    // Most reconnects say a proper hello, so the fuzzing reaches the op path; some try to
    // take over an honest client's id (which must be refused).
    a.client = rng.chance(0.9) ? `${a.name}${a.epoch % 3}` : rng.pick(['h1', 'h2', 'h3']);
    const hello = { t: 'hello', v: PROTOCOL_VERSION, client: a.client, machine: { name: 'fuzz', version: 1 }, have: 0 };
    const out = engine.message(a.conn, a.codec.decode(new ClientCodec().encode(hello as ClientMessage)), now);
    route(out, a.conn);
    if (!byConn.has(a.conn)) a.conn = '';
  };
  for (const h of honest) connectHonest(h);
  // Honest clients use their ids first (real ids are random UUIDs an attacker cannot know in
  // advance); from then on only their users may use them.
  for (const h of honest) for (const bytes of h.up.splice(0)) route(engine.message(h.conn!, h.sc.decode(bytes), now));

  // ---------------------------------------------------------------- frame generation
  const clientIds = ['h1', 'h2', 'h3', 'x1', 'x2', 'b1', 'r1', '', 'a'.repeat(200)];
  const randomValue = (depth = 0): unknown => hostileValue(rng, depth);
  const validMessage = (a: Attacker): ClientMessage | Record<string, unknown> => {
    switch (rng.int(0, 6)) {
      case 0:
        return {
          t: 'hello',
          v: rng.chance(0.9) ? PROTOCOL_VERSION : rng.int(0, 3),
          client: rng.pick(clientIds),
          machine: { name: rng.chance(0.9) ? 'fuzz' : 'other', version: rng.chance(0.9) ? 1 : 2 },
          have: rng.pick([0, 0, rng.int(0, engine.head() + 3), 1e9]),
        };
      case 1:
      case 2: {
        const first = rng.chance(0.8) ? (engine.clientRecord(a.client)?.highWater ?? 0) + 1 : rng.int(0, 40);
        return {
          t: 'ops',
          ops: Array.from({ length: rng.int(1, 4) }, (_, i) => ({
            seq: first + i,
            name: rng.pick(['add', 'add', 'note', 'keep', 'keep', 'burn', '']),
            args: rng.chance(0.5) ? { k: rng.int(-1200, 1200) } : rng.chance(0.3) ? { text: rng.pick(['hi', 'forbidden']) } : randomValue(),
          })),
          // An ack riding on the ops (protocol 3, VIS-ACK-WITH-OPS), now and then a bad one.
          ...(rng.chance(0.3)
            ? {
                ack: rng.chance(0.9)
                  ? {
                      pos: rng.pick([0, rng.int(0, engine.head() + 2), -1, 1.5]),
                      ...(rng.chance(0.3) ? { durable: rng.pick([0, rng.int(0, 50), -1, 'x']) } : {}),
                    }
                  : randomValue(),
              }
            : {}),
        };
      }
      case 3:
        return {
          t: 'ack',
          pos: rng.pick([0, rng.int(0, engine.head() + 2), -1, 1.5]),
          ...(rng.chance(0.3) ? { durable: rng.pick([0, rng.int(0, 50), 1e15, -1, 2.5, 'x']) } : {}),
        };
      case 4:
        return { t: 'register' };
      default:
        return { t: rng.pick(['welcome', 'log', 'nope', 7]), x: randomValue() };
    }
  };
  const mutate = (b: Uint8Array): Uint8Array => {
    let out = Uint8Array.from(b);
    for (let n = rng.int(1, 4); n > 0; n--) {
      switch (rng.int(0, 5)) {
        case 0:
          if (out.length) {
            const i = rng.int(0, out.length - 1);
            out[i] ^= 1 << rng.int(0, 7);
          }
          break;
        case 1:
          if (out.length) out[rng.int(0, out.length - 1)] = rng.pick(INTERESTING);
          break;
        case 2:
          out = out.slice(0, rng.int(0, out.length));
          break;
        case 3: {
          const extra = Uint8Array.from({ length: rng.int(1, 8) }, () => rng.int(0, 255));
          const o = new Uint8Array(out.length + extra.length);
          o.set(out);
          o.set(extra, out.length);
          out = o;
          break;
        }
        case 4:
          if (out.length > 1) {
            const i = rng.int(0, out.length - 1);
            out.copyWithin(i, rng.int(0, out.length - 1));
          }
          break;
        default:
          if (out.length) {
            const i = rng.int(0, out.length - 1);
            const j = rng.int(i, out.length);
            out = Uint8Array.from([...out.slice(0, i), ...out.slice(j), ...out.slice(i, j)]);
          }
          break;
      }
    }
    return out;
  };
  // An attacker's frame as a fresh ClientCodec frames it (ops as [1, firstSeq, name or the index
  // of a name already in the frame, args, ...] or with an ack [3, pos, durable, firstSeq, ...],
  // acks as [2, pos], anything else as [0, message]),
  // but through msgpackr, which also writes what ClientCodec refuses to send (Dates, bytes).
  const clientFrame = (m: ClientMessage | Record<string, unknown>): Uint8Array => {
    if (m.t === 'ops') {
      const ops = (m as ClientMessage & { t: 'ops' }).ops;
      const names = new Map<string, number>();
      const ref = (name: string) => {
        const i = names.get(name);
        if (i !== undefined) return i;
        names.set(name, names.size);
        return name; // first use: the name itself, as the interner sends it
      };
      const ack = (m as { ack?: unknown }).ack;
      // With an ack: [3, pos, durable or 0, firstSeq, ...] (a non-object ack only fits the plain form).
      if (ack !== undefined && (typeof ack !== 'object' || ack === null)) return packr.pack([0, m]);
      const head = ack === undefined ? [1] : [3, (ack as { pos: unknown }).pos, (ack as { durable?: unknown }).durable ?? 0];
      return packr.pack([...head, ops[0].seq, ...ops.flatMap((o) => [ref(o.name), o.args])]);
    }
    if (m.t === 'ack') {
      const a = m as { pos: unknown; durable?: unknown };
      return packr.pack(a.durable === undefined ? [2, a.pos] : [2, a.pos, a.durable]);
    }
    return packr.pack([0, m]);
  };
  /** An ops frame [1, seq, 'add', args] whose args are `n` empty maps or arrays, a byte each on the wire (issue 40's frame). */
  const amplifyingFrame = (seq: number, n: number): Uint8Array => {
    const f = new Uint8Array(8 + 5 + n).fill(rng.chance(0.5) ? 0x80 : 0x90);
    f.set([0x94, 0x01, 0xcc, seq & 0x7f, 0xa3, 0x61, 0x64, 0x64, 0xdd]);
    new DataView(f.buffer).setUint32(9, n);
    return f;
  };
  const presenceValue = () =>
    rng.chance(0.6)
      ? `${'p'.repeat(rng.int(3000, 5000))}`
      : rng.chance(0.5)
        ? { cursor: [rng.int(0, 99), rng.int(0, 99)], pad: 'q'.repeat(rng.int(0, 4100)) }
        : randomValue();
  /** The frame being handled is an amplifying one over the bound: measureFrame must refuse it. */
  let overBound = false;
  const attackFrame = (a: Attacker): Uint8Array => {
    if (rng.chance(1 / 40)) {
      const n = rng.chance(0.3) ? rng.int(262_000, 300_000) : rng.int(1, 20_000);
      overBound = 5 * n > MAX_FRAME_UNITS;
      return amplifyingFrame(rng.int(1, 100), n);
    }
    switch (rng.int(0, 9)) {
      case 0:
        return Uint8Array.from({ length: rng.int(0, 48) }, () => rng.int(0, 255));
      case 1:
        return packr.pack([rng.int(0, 3), randomValue(), randomValue()]);
      case 2:
        return packr.pack(randomValue());
      case 3:
      case 4:
      case 5:
      case 6:
        return clientFrame(validMessage(a));
      default:
        return mutate(clientFrame(validMessage(a)));
    }
  };

  for (const a of attackers) connectAttacker(a);

  // ---------------------------------------------------------------- the run
  const attack = (a: Attacker) => {
    if (!a.conn) connectAttacker(a);
    if (!a.conn) return;
    // A presence flood: values back to back, as fast as a socket takes them.
    const flood = rng.chance(0.02) ? rng.int(1, 40) : 0;
    for (let i = 0; i < flood && a.conn && stats.frames < count; i++) {
      stats.presence++;
      handle(a, clientFrame({ t: 'presence', value: presenceValue() }));
    }
    overBound = false;
    if (a.conn && stats.frames < count) handle(a, attackFrame(a));
    overBound = false;
  };
  /** One hostile frame, as the server takes it: measured, decoded, checked, handed to the room. */
  const handle = (a: Attacker, bytes: Uint8Array) => {
    stats.frames++;
    let value: unknown;
    let measured: number;
    try {
      measured = measureFrame(bytes).units;
    } catch (e) {
      if (!(e instanceof HerculesError) || (e.code !== 'malformed-frame' && e.code !== 'too-large'))
        fail('SEC-LIMITS', `measureFrame threw ${String(e)} instead of too-large or malformed-frame`);
      if ((e as HerculesError).code === 'too-large') stats.tooLarge++;
      else stats.malformedBytes++;
      return dropAttacker(a);
    }
    if (measured > MAX_FRAME_UNITS) fail('SEC-LIMITS', `a frame of ${measured} units passed the bound of ${MAX_FRAME_UNITS}`);
    if (overBound) fail('SEC-LIMITS', 'an amplifying frame over the bound was not refused before decoding');
    try {
      value = a.codec.decode(bytes);
    } catch (e) {
      if (!(e instanceof HerculesError) || e.code !== 'malformed-frame') fail('SEC-MALFORMED', `decoder threw ${String(e)} instead of a malformed-frame error`);
      // The server answers with an error frame and closes; the attacker comes back.
      stats.malformedBytes++;
      return dropAttacker(a);
    }
    // The raw value msgpackr makes of the frame (the codec then reshapes its tuples).
    const decoded = unitsOf(packr.unpack(bytes));
    if (decoded > measured)
      fail('SEC-LIMITS', `a frame measured ${measured} units and decoded to ${decoded}: ${Buffer.from(bytes).toString('hex').slice(0, 80)}`);
    let valid = true;
    try {
      parseClientMessage(value);
    } catch {
      valid = false;
    }
    if (valid) stats.validMessages++;
    else stats.invalidMessages++;
    let out: RoomOutput;
    try {
      out = engine.message(a.conn, value, now);
    } catch (e) {
      return fail('SEC-MALFORMED', `room engine threw on ${JSON.stringify(value)?.slice(0, 200)}: ${(e as Error).stack}`);
    }
    for (const e of out.persist.appended) if (e.refused) stats.refusedOps++;
    route(out, a.conn, !valid);
  };
  const dropAttacker = (a: Attacker) => {
    const conn = a.conn;
    byConn.delete(conn);
    a.conn = '';
    route(engine.close(conn, now));
  };
  const deliver = (h: Honest, all: boolean) => {
    const nUp = all ? h.up.length : rng.int(0, h.up.length);
    for (const bytes of h.up.splice(0, nUp)) {
      if (!h.conn) break;
      try {
        measureFrame(bytes);
      } catch (e) {
        fail('SEC-LIMITS', `an honest client's frame was refused: ${String(e)}`);
      }
      route(engine.message(h.conn, h.sc.decode(bytes), now));
    }
    const nDown = all ? h.down.length : rng.int(0, h.down.length);
    for (const bytes of h.down.splice(0, nDown)) h.room.receive(h.cc.decode(bytes));
  };
  const settleDurable = () => {
    for (const f of queueDurable.splice(0)) f();
  };

  while (stats.frames < count) {
    now += rng.int(0, 15);
    const r = rng.float();
    if (r < 0.7) attack(rng.pick(attackers));
    else if (r < 0.85) {
      const h = rng.pick(honest);
      if (rng.chance(0.8)) h.handles.push(h.room.ops.add({ k: rng.pick([rng.int(-999, 999), 13]) }));
      else {
        // Through the stubs, arguments enter the domain (-0 becomes 0) or are refused at once.
        const v = randomValue();
        try {
          h.handles.push(h.room.ops.keep(v));
        } catch (e) {
          if (!(e instanceof HerculesError) || (e.code !== 'bad-argument' && e.code !== 'too-large'))
            fail('OP-ARG-DOMAIN', `stub keep(${exactPrint(v).slice(0, 80)}) threw ${String(e)}`);
          stats.honestOps--;
        }
      }
      stats.honestOps++;
    } else if (r < 0.97) {
      settleDurable();
      deliver(rng.pick(honest), false);
    } else {
      route(engine.tick(now));
      for (const h of honest) {
        h.room.tick();
        if (!h.conn) connectHonest(h);
      }
    }
  }

  // Heal: attackers stop, everything is delivered, acks flow, timeouts fire.
  for (let round = 0; round < 200; round++) {
    settleDurable();
    for (const h of honest) {
      if (!h.conn) connectHonest(h);
      deliver(h, true);
      h.room.tick();
    }
    now += 50;
    route(engine.tick(now));
    const done =
      honest.every((h) => h.handles.every((x) => x.stage === 'visible' || x.stage === 'rejected')) &&
      honest.every((h) => h.up.length === 0 && h.down.length === 0);
    if (done && round > 3) break;
  }
  const head = engine.headSnapshot() as typeof fuzzMachine.initial;
  // Authors are the users the transport authenticated, never the client ids they chose.
  const users = new Set([...honest.map((h) => h.user), ...attackers.map((a) => a.user)]);
  for (const a of Object.keys(head.byAuthor)) if (!users.has(a)) fail('SEC-AUTHOR', `an op took effect with author ${a}, who is no user`);
  for (const h of honest) {
    const pending = h.handles.filter((x) => x.stage !== 'visible' && x.stage !== 'rejected');
    if (pending.length)
      fail('LIVE-CONVERGE', `honest client ${h.id} has ${pending.length} ops without a verdict, e.g. ${pending[0].id} at ${pending[0].stage}`);
    for (const x of h.handles) if (x.stage === 'rejected' && !/unlucky/.test(x.error ?? '')) fail('LIVE-HONEST', `honest op ${x.id} was rejected: ${x.error}`);
    const auth = h.room.getState('authoritative');
    if (exactPrint(auth) !== exactPrint(head))
      fail(
        'LIVE-CONVERGE',
        `honest client ${h.id}'s Authoritative view differs from the server's state: ${exactPrint(auth).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
      );
    const accepted = h.handles.filter((x) => x.stage === 'visible').length;
    if ((head.byAuthor[h.user] ?? 0) !== accepted)
      fail('LOG-EXACTLY-ONCE', `user ${h.user} has ${head.byAuthor[h.user] ?? 0} ops in the state, but its client had ${accepted} accepted`);
  }
  // The banned user's ops are refused by the authorize hook, the reader's by its access.
  if (head.byAuthor.banned) fail('OP-REFUSED', `${head.byAuthor.banned} ops took effect in the name of banned`);
  if (head.byAuthor.reader) fail('SEC-ACCESS', `${head.byAuthor.reader} ops took effect in the name of reader`);
  // What a store keeps is JSON text; a restarted server starts from it.
  const restored = new RoomEngine(fuzzMachine, {}, JSON.parse(JSON.stringify(engine.durableState())));
  if (exactPrint(restored.headSnapshot()) !== exactPrint(head))
    fail(
      'REC-RESTORE',
      `a room restored from its durable state differs from the live one: ${exactPrint(restored.headSnapshot()).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
    );
  // The whole log replayed from what the store keeps, with no checkpoint (a checkpoint would
  // carry the live replicas' reading of every compacted op, hiding any that reads differently).
  const replayed = new RoomEngine(
    fuzzMachine,
    {},
    { checkpoint: { pos: 0, state: fuzzMachine.initial }, suffix: stored.map((t) => JSON.parse(t)), clients: {}, stable: 0 },
  );
  if (exactPrint(replayed.headSnapshot()) !== exactPrint(head))
    fail(
      'REC-RESTORE',
      `the log replayed from storage gives another state than the live one: ${exactPrint(replayed.headSnapshot()).slice(0, 300)} vs ${exactPrint(head).slice(0, 300)}`,
    );
  // A client that joins now catches up through the codecs from the restored room.
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
    fail('REC-CATCHUP', `a client that joined late holds a different state: ${exactPrint(late.getState('authoritative')).slice(0, 300)}`);
  return stats;
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
