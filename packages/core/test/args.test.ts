/**
 * The argument domain (args.ts): what op arguments may hold so that every replica reads them
 * alike, whichever path (memory, MessagePack, JSON) brought them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import { HerculesError, ViewEngine, checkOpArgs, chainDigest, defineMachine, domainCopy, findNonJson } from '../src/index.ts';

const deep = (n: number) => { let v: unknown = 0; for (let i = 0; i < n; i++) v = [v]; return v; };
const protoKey = JSON.parse('{"__proto__": 1}');

test('findNonJson names the first value outside the domain, with its path', () => {
  const cases: [unknown, RegExp][] = [
    [{ a: NaN }, /args\.a is NaN/],
    [{ a: [1, Infinity] }, /args\.a\[1\] is Infinity/],
    [{ a: -0 }, /args\.a is -0/],
    [{ d: new Date(0) }, /args\.d is a Date/],
    [{ u: undefined }, /args\.u is undefined/],
    [{ b: new Uint8Array(1) }, /args\.b is a Uint8Array/],
    [{ s: 'x\uD800' }, /args\.s is a string with a lone surrogate/],
    [{ ['k\uDC00']: 1 }, /key with a lone surrogate/],
    [protoKey, /"__proto__" key/],
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
  assert.throws(() => domainCopy('move', { x: NaN }), (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /^move\(args\.x is NaN\)/.test(e.message));
});

test('checkOpArgs gives the JSON text (for the digest) or why the server refuses; size is bounded', () => {
  assert.deepEqual(checkOpArgs({ a: 1 }), { json: '{"a":1}' });
  assert.deepEqual(checkOpArgs(undefined), { json: '' });
  assert.match((checkOpArgs({ a: NaN }) as { problem: string }).problem, /args\.a is NaN/);
  assert.match((checkOpArgs({ s: 'x'.repeat(300_000) }) as { problem: string }).problem, /exceed the 262144-byte limit/);
});

test('the digest chain depends on every op before it, in order', () => {
  const a = chainDigest(chainDigest('0', 'say', '{"t":1}'), 'say', '{"t":2}');
  assert.equal(a, chainDigest(chainDigest('0', 'say', '{"t":1}'), 'say', '{"t":2}'), 'deterministic');
  assert.notEqual(a, chainDigest(chainDigest('0', 'say', '{"t":2}'), 'say', '{"t":1}'), 'order matters');
  assert.notEqual(a, chainDigest(chainDigest('0', 'say', '{"t":1}'), 'yell', '{"t":2}'), 'names matter');
  assert.notEqual(chainDigest('0', 'a', 'bc'), chainDigest('0', 'ab', 'c'), 'fields are separated');
});

test('a client id must be valid Unicode: a lone surrogate would reach the server as another id', () => {
  const m = defineMachine({ name: 'm', version: 1, initial: {}, ops: {} });
  assert.throws(() => new ViewEngine(m, { clientId: 'c\uD800', now: () => 0 }), /valid Unicode/);
});
