/**
 * The argument domain (args.ts): what op arguments may hold so that every replica reads them
 * alike, whichever path (memory, MessagePack, JSON) brought them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import { HerculesError, ViewEngine, defineMachine, domainCopy, findNonJson, scanOp } from '../src/index.ts';

const deep = (n: number) => {
  let v: unknown = 0;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};
const protoKey = JSON.parse('{"__proto__": 1}');

// spec: OP-ARG-DOMAIN
test('findNonJson names the first value outside the domain, with its path', () => {
  const cases: [unknown, RegExp][] = [
    [{ a: NaN }, /args\.a is NaN/],
    [{ a: [1, Infinity] }, /args\.a\[1\] is Infinity/],
    [{ a: -0 }, /args\.a is -0/],
    [{ d: new Date(0) }, /args\.d is a Date/],
    [{ u: undefined }, /args\.u is undefined/],
    [{ b: new Uint8Array(1) }, /args\.b is a Uint8Array/],
    [{ s: 'x\uD800' }, /args\.s is a string with a lone surrogate/],
    [{ 'k\uDC00': 1 }, /key with a lone surrogate/],
    [protoKey, /"__proto__" key/],
    // biome-ignore lint/suspicious/noSparseArray: the hole is what this case tests
    [[1, , 3], /hole in a sparse array/],
    [{ f: () => 1 }, /args\.f is a function/],
    [{ big: 1n }, /args\.big is a bigint/],
    [deep(257), /nested deeper than 256 levels/],
  ];
  for (const [v, re] of cases) assert.match(findNonJson(v, 'args') ?? 'none', re);
  for (const ok of [null, true, 0, 1.5, '', 'ok \u{1F600}', [], {}, { a: [1, { b: null }] }, deep(255), Object.create(null)]) {
    assert.equal(findNonJson(ok, 'args'), undefined, JSON.stringify(ok));
  }
});

// spec: OP-ARG-DOMAIN
test('domainCopy: a frozen copy with -0 turned into 0, equal to what JSON and MessagePack give back; the rest refused with the op and path', () => {
  const input = { a: -0, list: [-0, 1, { z: -0 }], s: 'x' };
  const out = domainCopy('move', input) as typeof input;
  assert.ok(Object.is(out.a, 0) && Object.is(out.list[0], 0) && Object.is((out.list[2] as { z: number }).z, 0));
  assert.ok(Object.isFrozen(out) && Object.isFrozen(out.list));
  assert.notEqual(out, input, 'a copy: the caller may keep editing its object');
  const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });
  assert.deepEqual(JSON.parse(JSON.stringify(out)), out);
  assert.deepEqual(packr.unpack(packr.pack(out)), out);
  assert.equal(domainCopy('noArgs', undefined), undefined);
  assert.throws(
    () => domainCopy('move', { x: NaN }),
    (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /^move\(args\.x is NaN\)/.test(e.message),
  );
});

// spec: OP-ARG-DOMAIN, LOG-ONE-HISTORY
test('scanOp: the domain check, an upper bound of the MessagePack size, and the digest, in one walk', () => {
  const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });
  for (const args of [
    { a: 1 },
    { id: 'chair-1', x: 3.5, y: -4 },
    ['é', '\u{1F600}', 'x'.repeat(40), null, true, [1, 2, 3]],
    { nested: { deeper: { list: [1.5, 'two'] } } },
  ]) {
    const r = scanOp(0, 'op', args) as { digest: number; bytes: number };
    assert.ok(r.bytes >= packr.pack(args).length + 'op'.length, `size ${r.bytes} bounds MessagePack's ${packr.pack(args).length} for ${JSON.stringify(args)}`);
    assert.ok(r.bytes <= 3 * (packr.pack(args).length + 10), 'and not by much');
  }
  assert.match((scanOp(0, 'op', { a: NaN }) as { problem: string }).problem, /args\.a is NaN/);
  assert.match((scanOp(0, 'op', { s: 'x'.repeat(300_000) }) as { problem: string }).problem, /exceed the 262144-byte limit/);
  assert.ok(Number.isSafeInteger((scanOp(0, 'op', undefined) as { digest: number }).digest));
});

// spec: LOG-ONE-HISTORY
test('the digest chain depends on every op before it, in order, and on nothing but the JSON data', () => {
  const d = (prev: number, name: string, args: unknown) => (scanOp(prev, name, args) as { digest: number }).digest;
  const a = d(d(0, 'say', { t: 1 }), 'say', { t: 2 });
  assert.equal(a, d(d(0, 'say', { t: 1 }), 'say', { t: 2 }), 'deterministic');
  assert.equal(a, d(d(0, 'say', JSON.parse('{"t":1}')), 'say', JSON.parse(JSON.stringify({ t: 2 }))), 'the same after a JSON round trip');
  assert.notEqual(a, d(d(0, 'say', { t: 2 }), 'say', { t: 1 }), 'order matters');
  assert.notEqual(a, d(d(0, 'say', { t: 1 }), 'yell', { t: 2 }), 'names matter');
  assert.notEqual(d(0, 'a', ['bc']), d(0, 'ab', ['c']), 'strings do not run together');
  assert.notEqual(d(0, 'a', [1, [2]]), d(0, 'a', [[1], 2]), 'structure matters');
  assert.notEqual(d(0, 'a', { x: '1' }), d(0, 'a', { x: 1 }), 'types matter');
});

test('a client id must be valid Unicode: a lone surrogate would reach the server as another id', () => {
  const m = defineMachine({ name: 'm', version: 1, initial: {}, ops: {} });
  assert.throws(() => new ViewEngine(m, { clientId: 'c\uD800', now: () => 0 }), /valid Unicode/);
});
