/**
 * Import fuzzer: room files with the protocol fuzzer's hostile values (hostile.ts) put where a
 * room file holds data (the checkpoint state, log arguments) and wrong values where it holds
 * numbers, strings and ids, imported into a real server both in process (`importRoom`, which
 * sees every value) and over `PUT /admin/rooms/:room` (which sees what JSON carries of them).
 * Seeded and deterministic. Checked for each file and each way (SEC-IMPORT):
 *   - the verdict is the domain's: a file is refused exactly when what was put in it is outside
 *     the domain (judged by args.ts on the value as the server received it: NaN over HTTP is
 *     null, and null is fine as an argument), as `bad-argument`, 400 over HTTP (never a 500),
 *     with a message that names the field;
 *   - a refused file leaves no trace: the store has no such room;
 *   - an accepted one round-trips: its export is what was imported (compared by a print that
 *     tells -0, NaN, undefined and Dates apart), the room loads, and a welcome carrying its
 *     checkpoint and log encodes and decodes.
 */
import { ClientCodec, PROTOCOL_VERSION, RoomEngine, ServerCodec, findNonJson, scanOp, type ClientRecord, type LogEntry, type RoomOutput } from '@hercules/core';
import { createServer, MemoryStore, type HerculesServer, type RoomFile } from '@hercules/server';
import { exactPrint, FuzzFailure, fuzzMachine } from './fuzz.ts';
import { hostileValue, nestedValue } from './hostile.ts';
import { Rng } from './rng.ts';

/** Deepest nesting of an imported state (the server's MAX_STATE_DEPTH, restated as the spec's bound). */
const STATE_DEPTH = 500;
const ADMIN = 'import-fuzz-admin-token-of-32-characters-or-more';

export interface ImportFuzzStats {
  files: number;
  refused: number;
  accepted: number;
}

/**
 * A room of the fuzz machine as its engine made it: two users' clients, ops that ran, threw,
 * were refused by the schema, and one the server ordered under a key; so its client records
 * hold every field a record has (digest, recent, rejected, owner, durable, keys).
 */
export function baseRoomFile(): RoomFile {
  const engine = new RoomEngine(fuzzMachine, { ackTimeoutMs: 400 });
  const entries: LogEntry[] = [];
  const clients: Record<string, ClientRecord> = {};
  const take = (out: RoomOutput) => {
    entries.push(...structuredClone(out.persist.appended));
    for (const [id, rec] of Object.entries(out.persist.clients)) clients[id] = structuredClone(rec);
  };
  for (const [conn, user] of [
    ['c1', 'u1'],
    ['c2', 'u2'],
  ]) {
    take(engine.open(conn, 0, { user, access: 'write' }));
    take(engine.message(conn, { t: 'hello', v: PROTOCOL_VERSION, client: conn, machine: { name: 'fuzz', version: 1 }, have: 0 }, 0));
    const ops = [
      { seq: 1, name: 'add', args: { k: 1 } },
      { seq: 2, name: 'add', args: { k: 13 } }, // throws: a rejected op in the record
      { seq: 3, name: 'keep', args: { a: [1, 'x', null], b: { c: true } } },
      { seq: 4, name: 'add', args: { k: 5000 } }, // refused by the schema
      { seq: 5, name: 'note', args: { text: `from ${user}` } },
    ];
    take(engine.message(conn, { t: 'ops', ops }, 0));
  }
  take(engine.message('c2', { t: 'ack', pos: entries.length, durable: 3 }, 0));
  take(engine.submitAsServer('backend', 'note', { text: 'keyed' }, 'key-1', 0).out);
  return {
    format: 'hercules-room',
    formatVersion: 1,
    machine: { name: fuzzMachine.name, version: fuzzMachine.version },
    checkpoint: { pos: 0, state: structuredClone(fuzzMachine.initial) },
    entries,
    clients,
    stable: 0,
  };
}

/** One mutation of a room file: the field it changed, and the verdict the domain gives the file as the server received it. */
interface Mutation {
  file: RoomFile;
  /** What the refusal's message must name (a field's path, or the start of one). */
  names: string;
  /** Whether `received` (the file as the server got it: as given, or through JSON) is in the domain. */
  valid(received: RoomFile): boolean;
}

/** Values no number field may take, whichever way they travel (NaN and ±Infinity become null in JSON, also wrong). */
const BAD_NUMBERS: unknown[] = [-1, 1.5, 2 ** 53, 1e300, -(2 ** 53), Number.NaN, Number.POSITIVE_INFINITY, '7', null, true, [], {}];
/** Values no string field of a file may take (a lone surrogate survives JSON). */
const BAD_STRINGS: unknown[] = ['a\uD800', 7, null, {}, ['x']];

type Box = Record<string, unknown> | unknown[];

/** Every number and string field of a file, as [path, the object holding it, its key, its kind]. */
function fieldsOf(f: RoomFile): [string, Box, string | number, 'number' | 'string' | 'id'][] {
  const out: [string, Box, string | number, 'number' | 'string' | 'id'][] = [['checkpoint.pos', f.checkpoint, 'pos', 'number']];
  out.push(['stable', f as unknown as Box, 'stable', 'number']);
  f.entries.forEach((e, i) => {
    for (const [k, v] of Object.entries(e)) {
      if (typeof v === 'number') out.push([`entries[${i}].${k}`, e as unknown as Box, k, 'number']);
      else if (typeof v === 'string') out.push([`entries[${i}].${k}`, e as unknown as Box, k, k === 'client' || k === 'name' ? 'id' : 'string']);
    }
  });
  for (const [id, rec] of Object.entries(f.clients)) {
    const walk = (v: unknown, path: string) => {
      if (v === null || typeof v !== 'object') return;
      for (const [k, x] of Object.entries(v)) {
        const p = Array.isArray(v) ? `${path}[${k}]` : `${path}.${k}`;
        const key = Array.isArray(v) ? Number(k) : k;
        if (typeof x === 'number') out.push([p, v as Box, key, 'number']);
        else if (typeof x === 'string') out.push([p, v as Box, key, 'string']);
        else walk(x, p);
      }
    };
    walk(rec, `clients[${JSON.stringify(id)}]`);
  }
  return out;
}

/** Set `key` of `box` to `v`, as an own property even for "__proto__". */
function put(box: Box, key: string | number, v: unknown): void {
  Object.defineProperty(box, key, { value: v, enumerable: true, writable: true, configurable: true });
}

/** A hostile value for a data field: the fuzzer's, now and then one past the argument size bound. */
function dataValue(rng: Rng): unknown {
  return rng.chance(0.05) ? { text: 'x'.repeat(300_000) } : rng.chance(0.05) ? nestedValue(rng, 400) : hostileValue(rng);
}

function mutate(rng: Rng, base: RoomFile): Mutation {
  const file = structuredClone(base);
  const stateOk = (r: RoomFile) => findNonJson(r.checkpoint.state, 'checkpoint.state', 0, STATE_DEPTH) === undefined;
  switch (rng.int(0, 5)) {
    case 0: // a value in the state
      put(file.checkpoint.state as Box, 'extra', dataValue(rng));
      return { file, names: 'checkpoint.state', valid: stateOk };
    case 1: {
      // a log entry's arguments
      const i = rng.int(0, file.entries.length - 1);
      put(file.entries[i] as unknown as Box, 'args', dataValue(rng));
      return { file, names: `entries[${i}].args`, valid: (r) => !('problem' in scanOp(0, r.entries[i].name, r.entries[i].args)) };
    }
    case 2:
    case 3: {
      // a number or a string field
      const fields = fieldsOf(file);
      const [path, box, key, kind] = fields[rng.int(0, fields.length - 1)];
      const bad = kind === 'number' ? BAD_NUMBERS : kind === 'id' ? [...BAD_STRINGS, '', 'x'.repeat(200)] : BAD_STRINGS;
      put(box, key, rng.pick(bad));
      return { file, names: path, valid: () => false };
    }
    case 4: {
      // a field the engine never writes, on an entry or a client record
      const holders: [string, Box][] = [
        ...file.entries.map((e, i): [string, Box] => [`entries[${i}]`, e as unknown as Box]),
        ...Object.entries(file.clients).map(([id, rec]): [string, Box] => [`clients[${JSON.stringify(id)}]`, rec as unknown as Box]),
      ];
      const [path, box] = holders[rng.int(0, holders.length - 1)];
      const key = rng.pick(['zz', '__proto__', 'constructor']);
      put(box, key, hostileValue(rng));
      return { file, names: path, valid: (r) => !Object.hasOwn(at(r, path) as object, key) };
    }
    default:
      return { file, names: '', valid: () => true };
  }
}

/** The entry or client record at `entries[i]` or `clients["id"]`. */
function at(f: RoomFile, path: string): unknown {
  const m = /^entries\[(\d+)\]$/.exec(path);
  return m ? f.entries[Number(m[1])] : f.clients[JSON.parse(path.slice('clients['.length, -1)) as string];
}

/** What the server stored as room `name`: its export, or undefined if there is none. */
async function stored(srv: HerculesServer<MemoryStore>, name: string): Promise<RoomFile | undefined> {
  return srv.store.disk.rooms.has(name) ? await srv.room(name).export() : undefined;
}

/**
 * The parts of a room file an import stores, printed so that -0, NaN, undefined and Dates differ.
 * An entry's `args: undefined` is an op without arguments, as an absent `args` is (what a store
 * keeps of it).
 */
const print = (f: RoomFile) =>
  exactPrint({
    machine: f.machine,
    checkpoint: f.checkpoint,
    entries: f.entries.map(({ args, ...e }) => (args === undefined ? e : { ...e, args })),
    clients: f.clients,
    stable: f.stable,
  });

/** A welcome with this room's checkpoint and log, through the codecs a client and the server use. */
function welcomeTravels(f: RoomFile): void {
  const welcome = {
    t: 'welcome' as const,
    v: PROTOCOL_VERSION,
    client: 'c1',
    author: 'u1',
    checkpoint: f.checkpoint,
    from: f.checkpoint.pos + 1,
    entries: f.entries,
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: f.stable,
    members: [],
  };
  new ClientCodec().decode(new ServerCodec().encode(welcome));
}

/**
 * Import `sent` as room `name` in process (`http` false) or over HTTP, and check the verdict,
 * the trace and the round trip. `received`: the file as the server gets it. Returns whether it was accepted.
 */
async function importOnce(srv: HerculesServer<MemoryStore>, name: string, m: Mutation, http: boolean, fail: (what: string) => never): Promise<boolean> {
  const received: RoomFile = http ? JSON.parse(JSON.stringify(m.file)) : m.file;
  const valid = m.valid(received);
  let refusal: string | undefined;
  if (http) {
    const res = await fetch(`${srv.url.replace('ws://', 'http://')}/admin/rooms/${name}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(m.file),
    });
    const body = (await res.json()) as { error?: string; message?: string };
    if (res.status === 400 && body.error === 'bad-argument') refusal = body.message ?? '';
    else if (res.status !== 201) fail(`PUT answered ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  } else {
    try {
      await srv.importRoom(name, m.file);
    } catch (e) {
      if ((e as { code?: string }).code !== 'bad-argument') fail(`importRoom threw ${String(e)}`);
      refusal = (e as Error).message;
    }
  }
  const kept = await stored(srv, name);
  if (refusal !== undefined) {
    if (valid) fail(`a file in the domain was refused: ${refusal.slice(0, 300)}`);
    if (!refusal.includes(m.names)) fail(`the refusal does not name ${m.names}: ${refusal.slice(0, 300)}`);
    if (kept) fail('a refused import left the room in the store');
    return false;
  }
  if (!valid) fail(`a file outside the domain at ${m.names} was imported`);
  if (!kept || print(kept) !== print(received)) fail(`the export of an imported room differs from the import${differ(print(received), kept && print(kept))}`);
  await srv.room(name).state();
  welcomeTravels(kept);
  return true;
}

/**
 * `count` mutated room files, each imported both ways, on a server over `store` (default a new
 * MemoryStore; a test plants a faulty one); throws FuzzFailure naming SEC-IMPORT.
 */
export async function runImportFuzz(seed: number, count: number, store: MemoryStore = new MemoryStore()): Promise<ImportFuzzStats> {
  const rng = new Rng(seed);
  const srv = await createServer({ port: 0, store, machines: [fuzzMachine], admin: { token: ADMIN }, log: 'silent' });
  const stats: ImportFuzzStats = { files: 0, refused: 0, accepted: 0 };
  try {
    const base = baseRoomFile();
    for (let n = 0; n < count; n++) {
      const m = mutate(rng, base);
      for (const http of [false, true]) {
        const name = `f${n}-${http ? 'http' : 'call'}`;
        const fail = (what: string): never => {
          throw new FuzzFailure(
            `import fuzz seed ${seed} failed at file ${n} (${http ? 'PUT /admin/rooms' : 'importRoom'}): [SEC-IMPORT] ${what}\n  replay: npm run fuzz -- --imports ${count} --seed ${seed}`,
            'SEC-IMPORT',
          );
        };
        if (await importOnce(srv, name, m, http, fail)) {
          stats.accepted++;
          await srv.room(name).delete();
        } else stats.refused++;
        stats.files++;
      }
    }
    return stats;
  } finally {
    await srv.close();
  }
}

/** Where two prints part, for a failure's message. */
function differ(a: string, b: string | undefined): string {
  if (b === undefined) return ': nothing was stored';
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return ` at character ${i}:\n  imported …${a.slice(Math.max(0, i - 80), i + 120)}\n  exported …${b.slice(Math.max(0, i - 80), i + 120)}`;
}
