import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RoomEngine, ServerCodec } from '@hercules/core';
import { FuzzFailure, runFuzz } from '../src/fuzz.ts';

test('fuzz: 50,000 hostile frames against the decoder and the room engine, honest clients unharmed', () => {
  const s = runFuzz(1, 50_000);
  assert.equal(s.frames, 50_000);
  // The campaign reaches every layer: bytes the decoder refuses, messages the parser refuses,
  // and ops the room refuses before ordering (banned user, read-only, schema, authorize).
  assert.ok(s.malformedBytes > 5000, `undecodable ${s.malformedBytes}`);
  assert.ok(s.invalidMessages > 5000, `invalid ${s.invalidMessages}`);
  assert.ok(s.refusedOps > 1000, `refused ${s.refusedOps}`);
  assert.ok(s.honestOps > 5000, `honest ${s.honestOps}`);
});

test('fuzz: notices a room that forgets to refuse ops (planted bug)', () => {
  const proto = RoomEngine.prototype as unknown as { refusal: unknown };
  const real = proto.refusal;
  proto.refusal = () => undefined;
  try {
    assert.throws(
      () => runFuzz(2, 5000),
      (e: unknown) =>
        e instanceof FuzzFailure &&
        (e.rule === 'OP-REFUSED' || e.rule === 'SEC-ACCESS') &&
        /\[(OP-REFUSED|SEC-ACCESS)\] \d+ ops took effect in the name of (banned|reader)/.test(e.message) &&
        /npm run fuzz -- --seed 2 --count 5000/.test(e.message),
    );
  } finally {
    proto.refusal = real;
  }
});

test('fuzz: notices a decoder that crashes instead of refusing (planted bug)', () => {
  const real = ServerCodec.prototype.decode;
  ServerCodec.prototype.decode = function (this: ServerCodec, data: Uint8Array) {
    if (data.length > 0 && data[0] === 0x92 && data.length < 4) throw new TypeError('cannot read properties of undefined');
    return real.call(this, data);
  };
  try {
    assert.throws(
      () => runFuzz(3, 20_000),
      (e: unknown) => e instanceof FuzzFailure && e.rule === 'SEC-MALFORMED' && /\[SEC-MALFORMED\] decoder threw TypeError/.test(e.message),
    );
  } finally {
    ServerCodec.prototype.decode = real;
  }
});

test('fuzz: notices a room that stamps the client id as author instead of the user (planted bug)', () => {
  const proto = RoomEngine.prototype as unknown as { onHello: (s: { author?: string; client?: string }, ...rest: unknown[]) => void };
  const real = proto.onHello;
  proto.onHello = function (this: unknown, s: { author?: string; client?: string }, ...rest: unknown[]) {
    real.call(this, s, ...rest);
    if (s.client) s.author = s.client;
  };
  try {
    assert.throws(
      () => runFuzz(2, 2000),
      (e: unknown) => e instanceof FuzzFailure && e.rule === 'SEC-AUTHOR' && /\[SEC-AUTHOR\] an op took effect with author [hx]\d/.test(e.message), // a client id, honest or not
    );
  } finally {
    proto.onHello = real;
  }
});
