/**
 * One closed error vocabulary: every code in ERROR_CODES, and every reason the server counts a
 * closed connection under, is documented in docs/errors.md, and the page documents nothing else.
 * A client that hears a code it does not know (a newer server) fails with 'internal', naming it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, ViewEngine, defineMachine, isErrorCode, type ErrorCode, type ServerMessage } from '@hercules/core';
import { SILENT_CLOSE_REASONS, createMetrics } from '../src/metrics.ts';

const doc = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../../docs/errors.md'), 'utf8');

/** The first cell of every table row under each `## ` heading: `code` -> section. */
function documented(): Map<string, string> {
  const out = new Map<string, string>();
  let section = '';
  for (const line of doc.split('\n')) {
    if (line.startsWith('## ')) section = line.slice(3);
    const m = /^\| `([a-z-]+)` \|/.exec(line);
    if (m) {
      assert.ok(!out.has(m[1]), `${m[1]} is documented twice`);
      out.set(m[1], section);
    }
  }
  return out;
}

test('docs/errors.md documents every error code and every silent close reason, and nothing else', () => {
  const docs = documented();
  const expected = [...ERROR_CODES, ...SILENT_CLOSE_REASONS].sort();
  assert.deepEqual([...docs.keys()].sort(), expected);
  for (const r of SILENT_CLOSE_REASONS) assert.equal(docs.get(r), 'Closed without an error frame', `${r} is never sent, so it is not an error code`);
  assert.equal(new Set(ERROR_CODES).size, ERROR_CODES.length, 'no code listed twice');
});

test('isErrorCode knows exactly the codes of this version', () => {
  for (const c of ERROR_CODES) assert.equal(isErrorCode(c), true, c);
  for (const c of ['refused', 'slow-consumer', 'bad-state', '', 'INTERNAL', 42, undefined]) assert.equal(isErrorCode(c), false, String(c));
});

test('a fatal error frame with a code this client does not know fails the client as internal, keeping the code in the message', () => {
  const m = defineMachine({ name: 'm', version: 1, initial: {}, ops: {} });
  const fatalOf = (code: string, fatal = true) => {
    const v = new ViewEngine(m, { clientId: 'c', now: () => 0 });
    v.connected();
    v.drain();
    v.receive({ t: 'error', code: code as ErrorCode, message: 'the room moved', fatal } satisfies ServerMessage);
    return v.drain();
  };
  assert.deepEqual(fatalOf('room-moved').fatal, { code: 'internal', message: 'room-moved: the room moved' });
  assert.deepEqual(fatalOf('forbidden').fatal, { code: 'forbidden', message: 'the room moved' });
  assert.deepEqual(fatalOf('room-moved', false).warnings, ['server error internal: room-moved: the room moved']);
});

test('the refused-connections metric counts under a closed set of reasons: a free-form one does not compile', async () => {
  const m = createMetrics();
  m.refusedConnections.inc({ reason: 'room-full' });
  m.refusedConnections.inc({ reason: 'heartbeat-timeout' });
  // @ts-expect-error: not an error code nor a silent close reason (npm run typecheck fails without this line's expectation)
  m.refusedConnections.inc({ reason: 'room is full' });
  const values = (await m.refusedConnections.get()).values.map((v) => v.labels.reason).sort();
  assert.deepEqual(values, ['heartbeat-timeout', 'room is full', 'room-full']);
});
