/**
 * ServiceMetrics on its own (one of the room service's named parts, issue 36 item 1): outputs
 * built by hand, a manual clock, and a fresh metrics registry, read back through prom-client.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry, RoomOutput, ServerMessage } from '@hercules/core';
import { createMetrics, type Metrics } from '../src/metrics.ts';
import { FakeClock } from '@hercules/test-utils';
import type { OutputPath } from '../src/room-host.ts';
import { ServiceMetrics, VISIBLE_DELAY_KEEP_MS } from '../src/service-metrics.ts';
import { FencedError, StorageError } from '../src/store/room-store.ts';

const PATH: OutputPath = { engine: 1, tentative: 2, apply: 3, send: 4, commitWait: 5, commit: 6 } as OutputPath;

function entry(client: string, seq: number, pos: number, extra: Partial<LogEntry> = {}): LogEntry {
  return { client, seq, pos, author: client, op: 'add', args: [1], ...extra } as unknown as LogEntry;
}

function output(appended: LogEntry[], send: { conn: string; msg: ServerMessage }[] = [], checkpoint?: { pos: number; state: unknown }): RoomOutput {
  return { send, close: [], sendFirst: false, persist: { appended, clients: {}, ...(checkpoint ? { checkpoint } : {}) }, warnings: [] };
}

/** A counter's value, or a histogram's number of observations, over the series matching `labels`. */
async function count(metric: { get(): Promise<unknown> }, labels: Record<string, string> = {}): Promise<number> {
  const { values } = (await metric.get()) as { values: { value: number; labels: Record<string, unknown>; metricName?: string }[] };
  const histogram = values.some((v) => v.metricName?.endsWith('_count'));
  return values
    .filter((v) => !histogram || v.metricName!.endsWith('_count'))
    .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    .reduce((n, v) => n + v.value, 0);
}

function setup(): { clock: FakeClock; metrics: Metrics; sm: ServiceMetrics; clients: Map<string, string> } {
  const clock = new FakeClock({ start: 1000, microtasks: true });
  const metrics = createMetrics();
  const clients = new Map<string, string>();
  return { clock, metrics, clients, sm: new ServiceMetrics(metrics, clock, (conn) => clients.get(conn)) };
}

test('counts ordered, rejected and refused ops and where their time went', async () => {
  const { sm, metrics } = setup();
  sm.roomLoaded('r');
  sm.delivered('r', output([entry('a', 1, 1), entry('a', 2, 2, { error: 'threw' }), entry('b', 1, 3, { error: 'no', refused: true })]), 0, 10, PATH);
  assert.equal(await count(metrics.opsSequenced), 3);
  assert.equal(await count(metrics.opsRejected), 2);
  assert.equal(await count(metrics.opsRefused), 1);
  assert.equal(await count(metrics.opPath, { stage: 'commit' }), 1);
  // An output that orders nothing observes no op path.
  sm.delivered('r', output([]), 0, 10, PATH);
  assert.equal(await count(metrics.opPath, { stage: 'engine' }), 1);
});

test('a visible or stable frontier observes the visible delay of the receiver’s own ops up to it, once', async () => {
  const { sm, metrics, clients } = setup();
  clients.set('c1', 'a');
  sm.roomLoaded('r');
  sm.delivered('r', output([entry('a', 1, 1), entry('a', 2, 2), entry('a', 3, 3)]), 0, 100, PATH);
  assert.equal(sm.room('r')!.orderedAt.get('a')!.length, 3);
  sm.delivered('r', output([], [{ conn: 'c1', msg: { t: 'visible', seq: 2 } as ServerMessage }]), 0, 150, PATH);
  assert.equal(await count(metrics.visibleDelay), 2);
  assert.deepEqual(sm.room('r')!.orderedAt.get('a'), [{ seq: 3, pos: 3, t: 100 }]);
  // The same frontier again observes nothing more; a stable frontier past pos 3 takes the rest.
  sm.delivered('r', output([], [{ conn: 'c1', msg: { t: 'visible', seq: 2 } as ServerMessage }]), 0, 160, PATH);
  assert.equal(await count(metrics.visibleDelay), 2);
  sm.delivered('r', output([], [{ conn: 'c1', msg: { t: 'stable', pos: 3 } as ServerMessage }]), 0, 170, PATH);
  assert.equal(await count(metrics.visibleDelay), 3);
  assert.equal(sm.room('r')!.orderedAt.has('a'), false);
  // A connection that has not said hello has no client: nothing is observed.
  sm.delivered('r', output([], [{ conn: 'unknown', msg: { t: 'visible', seq: 9 } as ServerMessage }]), 0, 170, PATH);
  assert.equal(await count(metrics.visibleDelay), 3);
});

test('a checkpoint observes the stable delay since the last one; own log entries the authoritative delay', async () => {
  const { sm, metrics, clock } = setup();
  sm.roomLoaded('r');
  clock.advance(500);
  sm.delivered('r', output([], [], { pos: 1, state: {} }), 0, clock.now(), PATH);
  assert.equal(await count(metrics.stableDelay), 1);
  const own = { t: 'log', entries: [{ k: 'own' }] } as unknown as ServerMessage;
  const other = { t: 'log', entries: [{ k: 'other' }] } as unknown as ServerMessage;
  sm.delivered(
    'r',
    output(
      [],
      [
        { conn: 'c', msg: own },
        { conn: 'c', msg: other },
      ],
    ),
    0,
    10,
    PATH,
  );
  assert.equal(await count(metrics.authoritativeDelay), 1);
});

test('entries of a client that never came back are dropped after VISIBLE_DELAY_KEEP_MS; a gone room is forgotten', () => {
  const { sm } = setup();
  sm.roomLoaded('r');
  sm.delivered('r', output([entry('a', 1, 1)]), 0, 0, PATH);
  sm.delivered('r', output([entry('a', 2, 2)]), 0, 1000, PATH);
  sm.dropStale(VISIBLE_DELAY_KEEP_MS + 500);
  assert.deepEqual(sm.room('r')!.orderedAt.get('a'), [{ seq: 2, pos: 2, t: 1000 }]);
  sm.dropStale(VISIBLE_DELAY_KEEP_MS + 1001);
  assert.equal(sm.room('r')!.orderedAt.has('a'), false);
  sm.roomGone('r');
  assert.equal(sm.room('r'), undefined);
  // Outputs of a room not (or no longer) loaded still count, without bookkeeping.
  sm.delivered('r', output([entry('a', 3, 3)]), 0, 0, PATH);
  assert.equal(sm.room('r'), undefined);
});

test('a failed room is counted by its cause', async () => {
  const { sm, metrics } = setup();
  sm.roomFailed('commit', new StorageError('x', undefined, 'value'));
  sm.roomFailed('commit', new FencedError('r', 1, 2));
  sm.roomFailed('commit', new StorageError('disk', undefined));
  sm.roomFailed('deliver', new Error('bug'));
  assert.equal(await count(metrics.outputFailures, { stage: 'serialize' }), 1);
  assert.equal(await count(metrics.outputFailures, { stage: 'fenced' }), 1);
  assert.equal(await count(metrics.outputFailures, { stage: 'deliver' }), 1);
  assert.equal(await count(metrics.storageErrors), 1);
});
