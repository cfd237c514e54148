/**
 * The client's MessagePack codec (msgpack.ts) against msgpackr configured as the server has it
 * (server-codec.ts): every protocol value crosses both ways unchanged, and the decoder refuses
 * anything else with a malformed-frame error, never another error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { decode, encode, MAX_DEPTH } from '../src/msgpack.ts';
import { ServerFrame } from '../src/wire.ts';
import { ClientCodec, HerculesError, ServerCodec, parseClientMessage, type ServerMessage } from '../src/index.ts';

// Fixed seed as in the other property tests; FC_SEED and FC_RUNS (a multiplier) run more.
const SEED = Number(process.env.FC_SEED ?? 42);
const RUNS = Number(process.env.FC_RUNS ?? 1);
const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });
const bytes = (...b: number[]) => Uint8Array.from(b);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function malformed(b: Uint8Array, why?: string): void {
  let e: unknown;
  try {
    decode(b);
  } catch (caught) {
    e = caught;
  }
  if (!(e instanceof HerculesError) || e.code !== 'malformed-frame') {
    assert.fail(`${hex(b.subarray(0, 40))}${b.length > 40 ? '...' : ''}${why ? ` (${why})` : ''}: ${e === undefined ? 'decoded' : String(e)}`);
  }
}

const BOUNDARIES = [
  0,
  1,
  31,
  32,
  127,
  128,
  255,
  256,
  65535,
  65536,
  2 ** 32 - 1,
  2 ** 32,
  -1,
  -31,
  -32,
  -33,
  -127,
  -128,
  -129,
  -32767,
  -32768,
  -32769,
  -(2 ** 31),
  -(2 ** 31) - 1,
  2 ** 53 - 1,
  -(2 ** 53 - 1),
  2 ** 53,
  1.5,
  -1.5,
  0.1,
  5e-324,
  1.7976931348623157e308,
  3.4028234663852886e38,
];

/** The protocol's values: JSON data (args.ts's domain) and undefined, nested. */
const leaf = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  fc.constantFrom(...BOUNDARIES),
  fc.integer({ min: -(2 ** 31) - 2, max: 2 ** 32 + 1 }),
  fc.maxSafeInteger(),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
  fc.string({ unit: 'grapheme', maxLength: 40 }), // unicode, astral characters included
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc
    .constantFrom(15, 16, 31, 32, 255, 256)
    .chain((n) => fc.constantFrom('x'.repeat(n), 'é'.repeat(n >> 1), '\u{1F600}'.repeat(n >> 2), '\uFEFF'.repeat(n >> 1))),
);
const key = fc.string({ unit: 'grapheme', maxLength: 12 }).filter((k) => k !== '__proto__');
const { value } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc.oneof(
    fc.array(tie('value'), { maxLength: 20 }),
    fc.constantFrom(15, 16, 17).chain((n) => fc.array(tie('value'), { minLength: n, maxLength: n })),
  ),
  object: fc.dictionary(key, tie('value'), { maxKeys: 18, noNullPrototype: true }),
}));

test('property: every protocol value survives ours -> msgpackr, msgpackr -> ours and ours -> ours, undefined kept', () => {
  fc.assert(
    fc.property(value, (v) => {
      assert.deepStrictEqual(packr.unpack(encode(v)), v);
      assert.deepStrictEqual(decode(packr.pack(v)), v);
      assert.deepStrictEqual(decode(encode(v)), v);
    }),
    { numRuns: 3000 * RUNS, seed: SEED, includeErrorInReport: true },
  );
});

test('numbers and strings: the same bytes as msgpackr (smallest int form, else float64, never float32)', () => {
  for (const n of BOUNDARIES) assert.equal(hex(encode(n)), hex(packr.pack(n)), String(n));
  assert.equal(hex(encode(2 ** 32)), 'cb41f0000000000000', 'an integer beyond 32 bits: float64, as msgpackr');
  assert.equal(hex(encode(1.5)), 'cb3ff8000000000000');
  fc.assert(
    fc.property(fc.oneof(fc.integer({ min: -(2 ** 31) - 5, max: 2 ** 32 + 5 }), fc.double(), fc.string({ unit: 'binary', maxLength: 300 })), (x) => {
      assert.equal(hex(encode(x)), hex(packr.pack(x)));
    }),
    { numRuns: 3000 * RUNS, seed: SEED, includeErrorInReport: true },
  );
  // A leading U+FEFF stays (TextDecoder drops it unless told not to), at every length.
  for (const n of [0, 10, 40, 100, 70000]) {
    const bom = '\uFEFF' + 'x'.repeat(n);
    assert.equal(decode(encode(bom)), bom);
    assert.equal(decode(packr.pack(bom)), bom);
  }
  // -0 is outside the domain (the op stubs make it 0); it is written as the integer 0, as msgpackr does.
  assert.equal(hex(encode(-0)), '00');
  assert.ok(Object.is(decode(encode(-0)), 0));
  for (const x of [NaN, Infinity, -Infinity]) assert.ok(Object.is(decode(encode(x)), x) && Object.is(packr.unpack(encode(x)), x));
  assert.equal(hex(encode(undefined)), 'd40000');
  assert.deepStrictEqual(decode(encode([undefined, { a: undefined }])), [undefined, { a: undefined }]);
  // A lone surrogate (outside the domain) becomes U+FFFD, as TextEncoder makes it.
  assert.equal(decode(encode('a\uD800b')), 'a\uFFFDb');
  assert.equal(packr.unpack(encode('\uDC00')), '\uFFFD');
});

test('sizes at the format boundaries: str8/16/32, array16/32, map16/32, read back by both', () => {
  for (const n of [15, 16, 65535, 65536]) {
    const arr = Array.from({ length: n }, (_, i) => i % 200);
    const obj = Object.fromEntries(arr.map((x, i) => [`k${i}`, x]));
    for (const v of [arr, obj]) {
      assert.deepStrictEqual(packr.unpack(encode(v)), v);
      // msgpackr (this configuration) writes every object as a map 16: 65535 keys at most.
      if (v === arr || n < 65536) assert.deepStrictEqual(decode(packr.pack(v)), v);
    }
  }
  for (const n of [31, 32, 255, 256, 65535, 65536, 70000]) {
    const s = 'é'.repeat(n);
    assert.equal(packr.unpack(encode(s)), s);
    assert.equal(decode(packr.pack(s)), s);
  }
});

test('decode reads every standard form msgpackr does for these values: float32, (u)int64, str8/16/32, fixext 1 type 0', () => {
  const cases: [Uint8Array, unknown][] = [
    [bytes(0xca, 0x3f, 0xc0, 0, 0), 1.5],
    [bytes(0xcf, 0, 0, 0, 1, 0, 0, 0, 0), 2 ** 32],
    [bytes(0xcf, 0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 2 ** 53 - 1],
    [bytes(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 2 ** 64],
    [bytes(0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), -1],
    [bytes(0xd3, 0xff, 0xe0, 0, 0, 0, 0, 0, 1), -(2 ** 53) + 1],
    [bytes(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0), -(2 ** 63)],
    [bytes(0xcc, 5), 5],
    [bytes(0xcd, 0, 5), 5],
    [bytes(0xce, 0, 0, 0, 5), 5],
    [bytes(0xd0, 0xff), -1],
    [bytes(0xd1, 0xff, 0xff), -1],
    [bytes(0xd2, 0xff, 0xff, 0xff, 0xff), -1],
    [bytes(0xd9, 1, 0x61), 'a'],
    [bytes(0xda, 0, 1, 0x61), 'a'],
    [bytes(0xdb, 0, 0, 0, 1, 0x61), 'a'],
    [bytes(0xdc, 0, 1, 1), [1]],
    [bytes(0xdd, 0, 0, 0, 1, 1), [1]],
    [bytes(0xde, 0, 1, 0xa1, 0x61, 1), { a: 1 }],
    [bytes(0xdf, 0, 0, 0, 1, 0xa1, 0x61, 1), { a: 1 }],
    [bytes(0xd4, 0, 0), undefined],
    [bytes(0xd4, 0, 7), undefined],
    [bytes(0x81, 0xd9, 1, 0x61, 1), { a: 1 }],
    [bytes(0x81, 0xda, 0, 1, 0x61, 1), { a: 1 }],
    [bytes(0x81, 0xa2, 0xc3, 0xa9, 1), { é: 1 }],
    [bytes(0xa3, 0xe2, 0x82, 0xac), '€'],
    [bytes(0xa4, 0xf0, 0x9f, 0x98, 0x80), '\u{1F600}'],
    [bytes(0xa2, 0xff, 0x61), '\uFFFDa'], // invalid UTF-8: replaced, as by msgpackr and TextDecoder
  ];
  // Not valid UTF-8, short and long: overlong forms, surrogates, past U+10FFFF, cut short, bad
  // continuation bytes, stray continuation and lead bytes. Both decoders read them alike.
  const invalid = [
    [0xc0, 0x80],
    [0xc1, 0xbf],
    [0xe0, 0x80, 0x80],
    [0xe0, 0x9f, 0xbf],
    [0xf0, 0x80, 0x80, 0x80],
    [0xf0, 0x8f, 0xbf, 0xbf],
    [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf],
    [0xf4, 0x90, 0x80, 0x80],
    [0xf7, 0xbf, 0xbf, 0xbf],
    [0xe2, 0x82],
    [0xf0, 0x9f, 0x98],
    [0xe2, 0x28, 0xa1],
    [0xc3, 0x28],
    [0x80],
    [0xbf, 0x61],
    [0xf5, 0x80, 0x80, 0x80],
    [0xff],
    [0xc3],
  ];
  for (const bad of invalid) {
    for (const pad of [0, 1, 40]) {
      const str = [...Array(pad).fill(0x61), ...bad, 0x62];
      const b = Uint8Array.from([...(str.length < 32 ? [0xa0 | str.length] : [0xd9, str.length]), ...str]);
      cases.push([b, packr.unpack(b)]);
    }
  }
  for (const [b, want] of cases) {
    assert.deepStrictEqual(decode(b), want, hex(b));
    assert.deepStrictEqual(packr.unpack(b), want, `msgpackr ${hex(b)}`);
  }
});

test('short strings come from a cache keyed by their bytes: strings that share a slot stay apart', () => {
  // Same length, first and last byte: the same slot.
  const v = ['row', 'rxw', 'row', { row: 1, rxw: 2, rw: 3, r: 4, '': 5 }, 'rxw', 'r\u00e9w', 'rw', '', 'x'.repeat(31), 'x'.repeat(30) + 'y'];
  for (let i = 0; i < 3; i++) assert.deepStrictEqual(decode(encode(v)), v);
  assert.deepStrictEqual(decode(encode(['rxw', 'row'])), ['rxw', 'row']);
});

test('a "__proto__" key never sets a prototype: renamed "__proto_", as msgpackr does', () => {
  const b = packr.pack(JSON.parse('{"__proto__": {"polluted": 1}, "a": 1}'));
  const o = decode(b) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(o), Object.prototype);
  assert.equal((o as { polluted?: unknown }).polluted, undefined);
  assert.deepStrictEqual(Object.keys(o), ['__proto_', 'a']);
  assert.deepStrictEqual(o, packr.unpack(b));
  assert.equal(({} as { polluted?: unknown }).polluted, undefined);
});

// spec: SEC-MALFORMED
test('malformed input: always HerculesError(malformed-frame), never another error', () => {
  malformed(bytes(), 'empty');
  malformed(bytes(0x01, 0x02), 'bytes after the value');
  malformed(bytes(0xc1), 'never used');
  malformed(bytes(0xc4, 1, 0), 'bin 8: the client never receives bytes');
  malformed(bytes(0xc5, 0, 1, 0), 'bin 16');
  malformed(bytes(0xc6, 0, 0, 0, 1, 0), 'bin 32');
  for (const type of [0, 1, 0x72, 0xff, 0x65, 0x42]) {
    if (type !== 0) malformed(bytes(0xd4, type, 0), `fixext 1 type ${type}`);
    malformed(bytes(0xd5, type, 0, 0), `fixext 2 type ${type}`);
    malformed(bytes(0xd6, type, 0, 0, 0, 0), `fixext 4 type ${type}`);
    malformed(bytes(0xc7, 1, type, 0), `ext 8 type ${type}`);
  }
  malformed(bytes(0xd4, 0), 'a truncated undefined');
  malformed(bytes(0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 0), 'a timestamp');
  malformed(bytes(0xdd, 0xff, 0xff, 0xff, 0xff), 'an array claiming 2^32-1 elements, without allocating them');
  malformed(bytes(0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0), 'a map claiming 2^32-1 pairs');
  malformed(bytes(0xdb, 0xff, 0xff, 0xff, 0xff, 0x61), 'a 4 GiB string');
  malformed(bytes(0xc9, 0xff, 0xff, 0xff, 0xff, 0), 'a 4 GiB ext');
  // Map keys are strings: the protocol's objects have no others (msgpackr would make a number,
  // a boolean or nil key a string, and refuses arrays and maps).
  for (const k of [[0x01], [0xc0], [0xc2], [0xd4, 0, 0], [0x91, 1], [0x80], [0xcb, 0, 0, 0, 0, 0, 0, 0, 0]])
    malformed(bytes(0x81, ...k, 2), `key ${hex(bytes(...k))}`);
  malformed(bytes(0x82, 0xa1, 0x61, 1), 'a map missing its second pair');
});

// spec: SEC-MALFORMED
test('nesting: up to MAX_DEPTH containers decode, deeper is malformed (no stack overflow), however deep', () => {
  const nested = (n: number) => {
    const b = new Uint8Array(n + 1).fill(0x91);
    b[n] = 0xc0;
    return b;
  };
  let v = decode(nested(MAX_DEPTH));
  for (let i = 0; i < MAX_DEPTH; i++) v = (v as unknown[])[0];
  assert.equal(v, null);
  malformed(nested(MAX_DEPTH + 1));
  malformed(nested(1_000_000));
  const maps = new Uint8Array(2 * 200_000 + 1);
  for (let i = 0; i < 200_000; i++) maps.set([0x81, 0xc0], 2 * i);
  maps[maps.length - 1] = 0xc0;
  malformed(maps);
  // The encoder refuses what it cannot send rather than overflow: a cycle, a Date, a bigint.
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  for (const bad of [cyclic, new Date(0), 1n, () => 1, Symbol('s'), new Uint8Array(1), new Map()]) {
    assert.throws(
      () => encode(bad),
      (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument',
      String(typeof bad),
    );
  }
  assert.deepStrictEqual(decode(encode({ after: 'a refused value' })), { after: 'a refused value' }, 'the encoder recovers');
});

// spec: SEC-MALFORMED
test('property: every truncation of a valid encoding, and every extension of it, is malformed', () => {
  fc.assert(
    fc.property(value, fc.uint8Array({ minLength: 1, maxLength: 4 }), (v, extra) => {
      for (const b of [encode(v), new Uint8Array(packr.pack(v))]) {
        for (let n = 0; n < b.length; n += Math.max(1, b.length >> 5)) malformed(b.subarray(0, n), `prefix ${n} of ${b.length}`);
        const longer = new Uint8Array(b.length + extra.length);
        longer.set(b);
        longer.set(extra, b.length);
        malformed(longer, 'trailing bytes');
      }
    }),
    { numRuns: 500 * RUNS, seed: SEED, includeErrorInReport: true },
  );
});

// spec: SEC-MALFORMED
test('property: random and mutated bytes decode or throw malformed-frame; what decodes, msgpackr decodes alike', () => {
  const agree = (b: Uint8Array) => {
    let ours: unknown;
    try {
      ours = decode(b);
    } catch (e) {
      if (!(e instanceof HerculesError) || e.code !== 'malformed-frame') throw new Error(`${hex(b)}: ${String(e)}`);
      return;
    }
    assert.deepStrictEqual(ours, packr.unpack(b), hex(b));
  };
  fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), agree), { numRuns: 20000 * RUNS, seed: SEED, includeErrorInReport: true });
  fc.assert(
    fc.property(value, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), (v, edits) => {
      const b = Uint8Array.from(encode(v));
      for (const [i, x] of edits) b[i % b.length] = x;
      agree(b);
    }),
    { numRuns: 5000 * RUNS, seed: SEED, includeErrorInReport: true },
  );
});

// spec: LOG-TENTATIVE
test('malformed acks frames: a missing position, a bad position or an unknown client reference is malformed-frame', () => {
  const bad = (v: unknown[]) =>
    assert.throws(
      () => new ClientCodec().decode(encode(v)),
      (e: unknown) => e instanceof HerculesError && e.code === 'malformed-frame',
    );
  bad([ServerFrame.Acks]);
  bad([ServerFrame.Acks, 'c1']);
  bad([ServerFrame.Acks, 'c1', -1]);
  bad([ServerFrame.Acks, 'c1', 1.5]);
  bad([ServerFrame.Acks, 0, 1]);
  bad([ServerFrame.Acks, 'c1', 1, 'c2']);
  assert.deepStrictEqual(new ClientCodec().decode(encode([ServerFrame.Acks, 'c1', 1, 0, 2])), {
    t: 'acks',
    acks: [
      { client: 'c1', pos: 1 },
      { client: 'c1', pos: 2 },
    ],
  });
});

test('ClientCodec reads ServerCodec frames and ServerCodec reads ClientCodec frames', () => {
  const sc = new ServerCodec(),
    cc = new ClientCodec();
  const msgs: ServerMessage[] = [
    {
      t: 'welcome',
      v: 1,
      client: 'c1',
      author: 'alice',
      checkpoint: { pos: 3, state: { list: [1, 'é', { deep: [null, true] }] } },
      from: 4,
      entries: [{ pos: 4, client: 'c2', seq: 1, name: 'add', args: undefined, author: 'bob' }],
      highWater: 2 ** 40,
      digest: 2 ** 53 - 1,
      visibleSeq: 0,
      rejected: [],
      stable: 3,
      members: ['c1', 'c2'],
    },
    {
      t: 'log',
      from: 5,
      entries: [
        { k: 'op', e: { pos: 5, client: 'c2', seq: 2, name: 'add', args: { n: -1.5, s: '\u{1F600}' }, author: 'bob' } },
        { k: 'own', seq: 3 },
        { k: 'op', e: { pos: 7, client: 'c2', seq: 3, name: 'add', args: undefined, author: 'bob', error: 'boom' } },
      ],
    },
    // Refused before ordering: the flag crosses in the own form (three elements) and the full one.
    {
      t: 'log',
      from: 8,
      entries: [
        { k: 'own', seq: 4, error: 'boom' },
        { k: 'own', seq: 5, error: 'not authorized: no', refused: true },
        { k: 'op', e: { pos: 10, client: 'c2', seq: 4, name: 'add', args: null, author: 'c2', error: 'read-only access', refused: true } },
        { k: 'own', seq: 6 },
      ],
    },
    {
      t: 'welcome',
      v: 2,
      client: 'c1',
      author: 'c1',
      from: 1,
      entries: [{ pos: 1, client: 'c1', seq: 1, name: 'add', args: null, author: 'c1', error: 'x is NaN', refused: true }],
      highWater: 2,
      visibleSeq: 0,
      rejected: [
        { seq: 1, error: 'x is NaN', refused: true },
        { seq: 2, error: 'boom' },
      ],
      stable: 0,
      members: [],
    },
    { t: 'visible', seq: 3 },
    { t: 'stable', pos: 7 },
    // LOG-TENTATIVE (protocol 4): a log ahead of its commit, and the commit's confirmation.
    { t: 'log', from: 11, entries: [{ k: 'op', e: { pos: 11, client: 'c2', seq: 5, name: 'add', args: { n: 1 }, author: 'bob' } }], tentative: true },
    { t: 'committed', pos: 11 },
    {
      t: 'log',
      from: 12,
      entries: [{ k: 'op', e: { pos: 12, client: 'c2', seq: 6, name: 'add', args: null, author: 'bob', error: 'boom' } }],
      tentative: true,
      committed: 11,
    },
    { t: 'members', members: ['c1'] },
    // Delivery receipts (protocol 7): client ids interned with the log's (c2 is a reference by now).
    {
      t: 'acks',
      acks: [
        { client: 'c2', pos: 12 },
        { client: 'c3', pos: 0 },
      ],
    },
    { t: 'acks', acks: [{ client: 'c3', pos: 2 ** 40 }] },
    { t: 'ping' },
  ];
  for (const m of msgs) assert.deepStrictEqual(cc.decode(sc.encode(m)), m);
  // Compact frames of their own, not the generic form.
  assert.equal(new ServerCodec().encode({ t: 'committed', pos: 11 })[1], ServerFrame.Committed);
  const acks = new ServerCodec().encode({ t: 'acks', acks: [{ client: 'ab', pos: 5 }] });
  assert.equal(acks[1], ServerFrame.Acks);
  assert.equal(acks.length, 6, 'fixarray 1, type 1, "ab" as fixstr 3, 5 as fixint 1: one ack of a new client is 6 bytes');
  assert.deepStrictEqual(
    new ClientCodec().decode(sc.encode({ t: 'receipts', on: true } as never)),
    { t: 'receipts', on: true },
    'an unknown type goes generic',
  );
  const cc2 = new ClientCodec(),
    sc2 = new ServerCodec();
  assert.deepStrictEqual(
    sc2.decode(
      cc2.encode({
        t: 'ops',
        ops: [
          { seq: 1, name: 'add', args: undefined },
          { seq: 2, name: 'add', args: { x: null } },
        ],
      }),
    ),
    {
      t: 'ops',
      ops: [
        { seq: 1, name: 'add', args: undefined },
        { seq: 2, name: 'add', args: { x: null } },
      ],
    },
  );
  assert.deepStrictEqual(sc2.decode(cc2.encode({ t: 'ack', pos: 2 ** 33 })), { t: 'ack', pos: 2 ** 33 });
  assert.deepStrictEqual(sc2.decode(cc2.encode({ t: 'hello', v: 1, client: 'c1', machine: { name: 'm', version: 1 }, have: 0 })), {
    t: 'hello',
    v: 1,
    client: 'c1',
    machine: { name: 'm', version: 1 },
    have: 0,
  });
});

// spec: VIS-ACK-WITH-OPS
test('an ops message carrying an ack crosses the wire whole, in the compact frame and the plain one, and a bad one is refused', () => {
  const cc = new ClientCodec(),
    sc = new ServerCodec();
  const ops = [
    { seq: 4, name: 'add', args: 1 },
    { seq: 5, name: 'add', args: { x: 'y' } },
  ];
  const roundTrip = (m: Parameters<ClientCodec['encode']>[0]) => parseClientMessage(sc.decode(cc.encode(m)));
  assert.deepStrictEqual(roundTrip({ t: 'ops', ops, ack: { pos: 9 } }), { t: 'ops', ops, ack: { pos: 9 } });
  assert.deepStrictEqual(roundTrip({ t: 'ops', ops, ack: { pos: 10, durable: 5 } }), { t: 'ops', ops, ack: { pos: 10, durable: 5 } });
  // One frame of a few bytes more than the ops alone, where there were two.
  assert.ok(cc.encode({ t: 'ops', ops, ack: { pos: 11 } }).length < cc.encode({ t: 'ops', ops }).length + 4);
  // Ops the compact frame cannot carry (a declared gap) go as a plain message, the ack with them.
  const gap = [{ seq: 9, name: 'add', args: 2, after: 5 }];
  assert.deepStrictEqual(roundTrip({ t: 'ops', ops: gap, ack: { pos: 12, durable: 9 } }), { t: 'ops', ops: gap, ack: { pos: 12, durable: 9 } });
  // Without an ack, the frame is the one protocol 2 knows.
  assert.equal(new ClientCodec().encode({ t: 'ops', ops })[1], 1);
  const refused = (v: unknown, why: RegExp) =>
    assert.throws(
      () => parseClientMessage(v),
      (e: unknown) => e instanceof HerculesError && e.code === 'malformed-frame' && why.test(e.message),
    );
  refused({ t: 'ops', ops, ack: { pos: -1 } }, /ops\.ack\.pos must be a non-negative integer/);
  refused({ t: 'ops', ops, ack: { pos: 1, durable: 'x' } }, /ops\.ack\.durable must be/);
  refused({ t: 'ops', ops, ack: [1] }, /ops\.ack must be an object/);
  refused(sc.decode(new Packr({ useRecords: false }).pack([3, 'x', 0, 1, 'add', 1])), /ops\.ack\.pos must be a non-negative integer/);
  assert.throws(() => sc.decode(new Packr({ useRecords: false }).pack([3, 1, 0])), /expected an ack and a first seq/);
});
