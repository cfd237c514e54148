/**
 * Webhooks: each room's committed ops POSTed to the app's backend, at least once, in log order,
 * with retries, backoff and a signature. A delivery never holds up a commit: a commit only notes
 * the room's new head; each webhook's worker reads the entries after the last position its
 * receiver accepted from the room store (`RoomStore.peek`: any store that passes the conformance
 * suite) and keeps that position in its `WebhookCursors`: on disk for the embedded server
 * (`webhooks.sqlite` beside the rooms, webhook-cursors-sqlite.ts), so a restart resumes where the
 * receiver last answered 2xx; in memory otherwise (`memoryCursors`). docs/admin-api.md describes
 * the requests.
 *
 *   POST <url>  { room, from, to, entries, gap? }
 *   webhook-id: <room>:<from>-<to>         the same on every retry: receivers dedupe by it
 *   webhook-timestamp: <s since the epoch>
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, `${id}.${timestamp}.${body}`)> (one per secret)
 *
 * That is the Standard Webhooks format (standardwebhooks.com): a receiver verifies it with that
 * project's library in its language; the secret is `whsec_` + base64 of the key. The scheme of
 * our own before it (x-hercules-* headers) is kept behind `signature: 'legacy'`, deprecated.
 *
 * `gap: { from, to }`: those positions were compacted into a checkpoint before they could be
 * delivered (the receiver was down that long, or the room was imported); read the room's state
 * to catch up. A new webhook starts with the first commit it sees, not the rooms' history.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { HerculesError, type LogEntry } from '@hercules/core';
import type { Metrics } from './metrics.ts';

export interface WebhookOptions {
  /** Where to POST (http or https). */
  url: string;
  /**
   * The signing secret: `whsec_` + the base64 of 24 to 64 random bytes (newWebhookSecret() makes
   * one), the Standard Webhooks form. A list signs each request with each secret, for rotation:
   * the new one first, the old one until every receiver has the new. With `signature: 'legacy'`:
   * one string of at least 32 characters.
   */
  secret: string | readonly string[];
  /**
   * 'standard' (default): the Standard Webhooks headers. 'legacy' (deprecated, to be removed):
   * the scheme before it, x-hercules-delivery, x-hercules-timestamp (ms) and x-hercules-signature
   * (`sha256=<hex HMAC-SHA256(secret, timestamp.body)>`), for receivers not yet moved.
   */
  signature?: 'standard' | 'legacy';
  /** Only these rooms (default: every room). */
  rooms?: readonly string[];
  /** Entries per request, at most (default 100). */
  maxBatch?: number;
  /** First retry after this long, doubling up to 60 s (default 500 ms). */
  retryMinMs?: number;
  /** A request unanswered after this long is a failure (default 10 s). */
  timeoutMs?: number;
  /** Gather the commits of this long into one request (default 10 ms): fewer requests, less of the server's CPU. */
  batchMs?: number;
}

/**
 * Where each webhook's position in each room is kept: the last position its receiver accepted.
 * A position lost only moves back (those entries are delivered again: at least once).
 */
export interface WebhookCursors {
  /** Every position kept, at startup: the lanes a previous run left resume from them. */
  load(): { hook: string; room: string; pos: number }[];
  /**
   * The position kept for a room this process has no lane for yet (its first commit here): where
   * another process left it, e.g. the node a room moved from. Absent: a new lane starts at the
   * commit that made it.
   */
  at?(hook: string, room: string): number | undefined;
  save(hook: string, room: string, pos: number): void;
  close(): void;
}

/**
 * Positions kept in memory only: a restart starts each webhook at the first commit it sees (what
 * the previous run did not deliver is not sent). For a store without a disk of the server's own
 * (a MemoryStore, a cluster node's ClusterStore: a room's commits reach the node that serves it).
 */
export function memoryCursors(): WebhookCursors {
  const pos = new Map<string, { hook: string; room: string; pos: number }>();
  return {
    load: () => [...pos.values()],
    save: (hook, room, p) => void pos.set(`${hook}\0${room}`, { hook, room, pos: p }),
    close: () => {},
  };
}

/** Where the worker reads a room's log: the loaded room's engine, or the store. */
export type ReadLog = (room: string, after: number, max: number) => Promise<{ from: number; entries: readonly LogEntry[] }>;

const MAX_RETRY_MS = 60_000;

/** Check the options at startup. */
export function checkWebhooks(caller: string, hooks: readonly WebhookOptions[] | undefined): void {
  for (const [i, h] of (hooks ?? []).entries()) {
    let url: URL | undefined;
    try {
      url = new URL(h?.url);
    } catch {
      /* below */
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
      throw new HerculesError('bad-argument', `${caller}: webhooks[${i}].url must be an http(s) URL`);
    if (h.signature !== undefined && h.signature !== 'standard' && h.signature !== 'legacy')
      throw new HerculesError('bad-argument', `${caller}: webhooks[${i}].signature must be 'standard' or 'legacy'`);
    const secretProblem = h.signature === 'legacy' ? legacySecretProblem(h.secret) : standardSecretProblem(h.secret);
    if (secretProblem) throw new HerculesError('bad-argument', `${caller}: webhooks[${i}].secret ${secretProblem}`);
    if (h.rooms !== undefined && !(Array.isArray(h.rooms) && h.rooms.every((r) => typeof r === 'string')))
      throw new HerculesError('bad-argument', `${caller}: webhooks[${i}].rooms must be a list of room names`);
  }
}

/** The shortest and longest key the Standard Webhooks spec allows for HMAC-SHA256, in bytes. */
const KEY_BYTES = { min: 24, max: 64 };
const WHSEC = /^whsec_((?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$/;

/** What is wrong with a secret for the standard scheme, or undefined. */
function standardSecretProblem(secret: unknown): string | undefined {
  const list = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(list) || list.length === 0) return 'must be a whsec_ secret or a non-empty list of them';
  for (const s of list) {
    const key = typeof s === 'string' ? WHSEC.exec(s)?.[1] : undefined;
    const bytes = key === undefined ? 0 : Buffer.from(key, 'base64').length;
    if (bytes < KEY_BYTES.min || bytes > KEY_BYTES.max)
      return `must be whsec_ followed by the base64 of ${KEY_BYTES.min} to ${KEY_BYTES.max} random bytes (newWebhookSecret() from @hercules/server makes one), as Standard Webhooks receivers expect; a secret of the old scheme needs signature: 'legacy' (deprecated)`;
  }
  return undefined;
}

function legacySecretProblem(secret: unknown): string | undefined {
  if (typeof secret !== 'string' || secret.length < 32)
    return "must be a string of at least 32 characters (the receiver checks the signature with it); signature: 'legacy' takes one secret";
  return undefined;
}

/** A new random secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The Standard Webhooks signature of `body` sent as `id` at `timestamp` (seconds since the epoch):
 * `v1,<base64 HMAC-SHA256>` keyed with the secret's bytes. Signed with node:crypto rather than the
 * `standardwebhooks` package, which hashes in JavaScript: 11-14 µs against 91 µs for a body of
 * 100 entries (12 KB), measured; the tests verify what this signs with that package.
 */
export function standardWebhookSignature(secret: string, id: string, timestamp: number | string, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The legacy signature header's value for `body` sent at `timestamp` (ms).
 * @deprecated The scheme of `signature: 'legacy'`; verify the default Standard Webhooks headers instead.
 */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * The headers that say who sent `body` and that it is whole. The delivery id is the same on
 * every retry. A Standard Webhooks id must hold no `.` (the signed text joins id, timestamp and
 * body with dots), and room names may: a room's dots are written %2E, which no room name holds.
 */
function signedHeaders(opts: WebhookOptions, room: string, span: string, body: string, nowMs: number): Record<string, string> {
  if (opts.signature === 'legacy') {
    const timestamp = String(nowMs);
    return {
      'x-hercules-delivery': `${room}:${span}`,
      'x-hercules-timestamp': timestamp,
      'x-hercules-signature': webhookSignature(opts.secret as string, timestamp, body),
    };
  }
  const id = `${room.replaceAll('.', '%2E')}:${span}`;
  const timestamp = Math.floor(nowMs / 1000);
  const secrets = typeof opts.secret === 'string' ? [opts.secret] : opts.secret;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => standardWebhookSignature(s, id, timestamp, body)).join(' '),
  };
}

/** One webhook's progress in one room. */
interface Lane {
  hook: Hook;
  room: string;
  /** The last position the receiver accepted (on disk too). */
  cursor: number;
  /** The room's head as last seen (Infinity: unknown, after a restart). */
  head: number;
  busy: boolean;
  attempt: number;
  /** The last position of a request that failed: its retry carries the same entries (the same delivery id). */
  retryTo?: number;
  timer?: ReturnType<typeof setTimeout>;
}

interface Hook {
  id: string;
  opts: WebhookOptions;
  rooms?: ReadonlySet<string>;
}

export class Webhooks {
  private readonly hooks: Hook[];
  private readonly lanes = new Map<string, Lane>();
  private readonly abort = new AbortController();
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    hooks: readonly WebhookOptions[],
    private readonly cursors: WebhookCursors,
    private readonly read: ReadLog,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.hooks = hooks.map((opts) => ({
      id: createHash('sha256').update(opts.url).digest('hex').slice(0, 16),
      opts,
      ...(opts.rooms ? { rooms: new Set(opts.rooms) } : {}),
    }));
    for (const h of this.hooks)
      if (h.opts.signature === 'legacy')
        log.warn(
          { webhook: h.opts.url },
          "webhook signature 'legacy' is deprecated and will be removed: verify the Standard Webhooks headers (the default) instead",
        );
    // Resume what a previous run left undelivered: each lane reads until the room has no more.
    for (const r of cursors.load()) {
      const hook = this.hooks.find((h) => h.id === r.hook);
      if (!hook || (hook.rooms && !hook.rooms.has(r.room))) continue;
      const lane = this.lane(hook, r.room, r.pos);
      lane.head = Number.POSITIVE_INFINITY;
      this.pump(lane);
    }
  }

  /** A commit of `room` was stored: its entries are for every webhook that wants the room. O(webhooks), no I/O. */
  committed(room: string, entries: readonly LogEntry[]): void {
    if (this.closed || entries.length === 0) return;
    const last = entries[entries.length - 1].pos;
    for (const hook of this.hooks) {
      if (hook.rooms && !hook.rooms.has(room)) continue;
      let lane = this.lanes.get(`${hook.id}\0${room}`);
      if (!lane) {
        // First sight of this room for this webhook: start where another process left it (a room
        // that moved here), else at this commit, not the room's history. A position at or past
        // this commit is a room deleted and created again since: start at this commit.
        const kept = this.cursors.at?.(hook.id, room);
        lane = this.lane(hook, room, kept !== undefined && kept < entries[0].pos ? kept : entries[0].pos - 1);
        this.cursors.save(hook.id, room, lane.cursor);
      }
      lane.head = Math.max(lane.head === Number.POSITIVE_INFINITY ? 0 : lane.head, last);
      // An idle lane waits a moment, so the commits of that moment go in one request.
      if (!lane.busy && !lane.timer)
        lane.timer = setTimeout(() => {
          lane.timer = undefined;
          this.pump(lane);
        }, hook.opts.batchMs ?? 10);
    }
  }

  /**
   * The first position of `room` some webhook has not delivered: the store keeps the log from
   * there even once a checkpoint covers it (SqliteStoreOptions.retainFrom). Undefined: none waits.
   */
  retainFrom(room: string): number | undefined {
    let min: number | undefined;
    for (const lane of this.lanes.values()) if (lane.room === room && (min === undefined || lane.cursor + 1 < min)) min = lane.cursor + 1;
    return min;
  }

  /** Stop: no new requests, those in flight aborted (they are retried after the next start). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lane of this.lanes.values()) if (lane.timer) clearTimeout(lane.timer);
    this.abort.abort();
    await Promise.allSettled([...this.inflight]);
    this.cursors.close();
  }

  private lane(hook: Hook, room: string, cursor: number): Lane {
    const lane: Lane = { hook, room, cursor, head: cursor, busy: false, attempt: 0 };
    this.lanes.set(`${hook.id}\0${room}`, lane);
    return lane;
  }

  /** Deliver what the lane's receiver has not accepted yet, one request at a time, in order. */
  private pump(lane: Lane): void {
    if (this.closed || lane.busy || lane.timer || lane.head <= lane.cursor) return;
    lane.busy = true;
    const p = this.deliver(lane).then(
      (more) => {
        lane.busy = false;
        lane.attempt = 0;
        if (more) this.pump(lane);
      },
      (e: unknown) => {
        lane.busy = false;
        if (this.closed) return;
        this.metrics.webhookDeliveries.inc({ result: 'failed' });
        const delay = Math.min(MAX_RETRY_MS, (lane.hook.opts.retryMinMs ?? 500) * 2 ** lane.attempt++) * (0.8 + 0.4 * Math.random());
        this.log.warn(
          {
            webhook: lane.hook.opts.url,
            room: lane.room,
            after: lane.cursor,
            attempt: lane.attempt,
            retryInMs: Math.round(delay),
            err: e instanceof Error ? e.message : String(e),
          },
          'webhook delivery failed; retrying',
        );
        lane.timer = setTimeout(() => {
          lane.timer = undefined;
          this.pump(lane);
        }, delay);
      },
    );
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  /** One request: true if there may be more to deliver. Throws if the receiver did not accept it. */
  private async deliver(lane: Lane): Promise<boolean> {
    const max = lane.retryTo !== undefined ? Math.max(1, lane.retryTo - lane.cursor) : (lane.hook.opts.maxBatch ?? 100);
    const { from, entries } = await this.read(lane.room, lane.cursor, max);
    const gap = from > lane.cursor + 1;
    if (entries.length === 0 && !gap) {
      lane.head = lane.cursor; // nothing more stored (after a restart: the room's head was unknown)
      return false;
    }
    const to = entries.length ? entries[entries.length - 1].pos : from - 1;
    const body = JSON.stringify({ room: lane.room, from: lane.cursor + 1, to, entries, ...(gap ? { gap: { from: lane.cursor + 1, to: from - 1 } } : {}) });
    const res = await fetch(lane.hook.opts.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(lane.hook.opts, lane.room, `${lane.cursor + 1}-${to}`, body, Date.now()) },
      body,
      signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(lane.hook.opts.timeoutMs ?? 10_000)]),
    });
    await res.arrayBuffer().catch(() => {}); // let the connection be reused
    if (!res.ok) {
      lane.retryTo = to;
      throw new HerculesError('unreachable', `${lane.hook.opts.url} answered ${res.status}; the delivery is retried with backoff, check the receiver`);
    }
    if (this.closed) return false;
    lane.retryTo = undefined;
    lane.cursor = to;
    this.cursors.save(lane.hook.id, lane.room, to);
    this.metrics.webhookDeliveries.inc({ result: 'ok' });
    return lane.head > to;
  }
}
