/**
 * The admin HTTP API, for a team's backend (never for browsers): every request carries
 * `Authorization: Bearer <admin token>`. Mounted by createServer under /admin/ when `admin` is
 * given; without it those paths do not exist (404). docs/admin-api.md describes each route, and
 * docs/admin-api.openapi.json is its OpenAPI description.
 *
 *   POST /admin/revoke                { user, room?, reason? } -> { closed }        (server.revoke)
 *   GET  /admin/rooms?after=&limit=   -> { rooms: RoomSummary[], next? }               (server.rooms)
 *   GET  /admin/rooms/:room/state     -> { state }                                     (server.room(r).state)
 *   GET  /admin/rooms/:room/state?at=P -> { position, state }                          (server.room(r).stateAt)
 *   GET  /admin/rooms/:room/log?from=&to= -> LogPage                                   (server.room(r).log)
 *   POST /admin/rooms/:room/ops       { op, args?, author, key?, machine? } -> result  (server.room(r).submit)
 *   GET  /admin/rooms/:room/export    -> RoomFile                                      (server.room(r).export)
 *   PUT  /admin/rooms/:room           RoomFile -> { imported }                         (server.importRoom)
 *   DELETE /admin/rooms/:room         -> { deleted }                                   (server.room(r).delete)
 *   POST /admin/drain                 -> { draining, shards }                          (a cluster node hands its rooms over)
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HerculesError, isErrorCode } from '@hercules/core';
import { ROOMS_PAGE_MAX, type RoomService } from './room-service.ts';
import { MAX_IMPORT_BYTES } from './room-file.ts';

export interface AdminOptions {
  /** The admin credential: a random string of at least 32 characters, kept out of clients. */
  token: string;
}

/** Largest request body read (JSON): the admin routes take small documents. */
const MAX_BODY_BYTES = 64 << 10;

/** Check the options at startup: a short token can be guessed. */
export function checkAdminOptions(caller: string, admin: AdminOptions | undefined): void {
  if (admin === undefined) return;
  if (!admin || typeof admin.token !== 'string' || admin.token.length < 32)
    throw new HerculesError('bad-argument', `${caller}: admin.token must be a string of at least 32 characters (e.g. openssl rand -hex 32)`);
}

/** The backend calls the routes make: a service's, or a cluster node's through its locator (located-backend.ts), whose revoke is async. */
type Service = Pick<RoomService, 'room' | 'rooms' | 'importRoom'> & {
  revoke: (target: Parameters<RoomService['revoke']>[0]) => number | Promise<number>;
  /** Hand this server's rooms over to the other nodes and take no new ones (a cluster node's: Placement.drain). */
  drain?: () => Promise<DrainResult>;
};

/** What `POST /admin/drain` answers: whether the node drains, and the shards it still holds (none once it is drained). */
export interface DrainResult {
  draining: boolean;
  shards: number[];
}
/** Answers a request (the body is read by the route that needs one); `room`: the path's `{room}`. */
type Handle = (service: Service, req: IncomingMessage, res: ServerResponse, room: string) => Promise<void>;

/** The routes: one table that serves them and that docs/admin-api.openapi.json describes (ADMIN_ROUTES). */
const ROUTES: { method: string; path: string; handle: Handle }[] = [
  {
    method: 'POST',
    path: '/admin/drain',
    async handle(service, _req, res) {
      if (!service.drain)
        return reply(res, 409, { error: 'bad-argument', message: 'this server is not a cluster node: it has no other node to hand its rooms to' });
      reply(res, 200, await service.drain());
    },
  },
  {
    method: 'POST',
    path: '/admin/revoke',
    async handle(service, req, res) {
      const body = await readJson(req, res);
      if (body === undefined) return;
      const { user, room, reason } = body as { user?: unknown; room?: unknown; reason?: unknown };
      if (
        typeof user !== 'string' ||
        user.length === 0 ||
        (room !== undefined && typeof room !== 'string') ||
        (reason !== undefined && typeof reason !== 'string')
      )
        return reply(res, 400, { error: 'bad-argument', message: 'expected JSON { "user": string, "room"?: string, "reason"?: string }' });
      reply(res, 200, { closed: await service.revoke({ user, ...(room !== undefined ? { room } : {}), ...(reason !== undefined ? { reason } : {}) }) });
    },
  },
  {
    method: 'GET',
    path: '/admin/rooms',
    async handle(service, req, res) {
      const q = new URL(req.url ?? '/', 'http://admin').searchParams;
      const after = q.get('after') || undefined;
      const limit = q.get('limit');
      if (limit !== null && !/^[1-9][0-9]*$/.test(limit))
        return reply(res, 400, { error: 'bad-argument', message: `limit must be an integer >= 1 (at most ${ROOMS_PAGE_MAX} are listed), got ${limit}` });
      // A larger limit is taken as the maximum (docs/admin-api.md), however many digits it has.
      reply(res, 200, await service.rooms({ after, ...(limit !== null ? { limit: Math.min(Number(limit), ROOMS_PAGE_MAX) } : {}) }));
    },
  },
  {
    method: 'GET',
    path: '/admin/rooms/{room}/state',
    async handle(service, req, res, room) {
      const at = new URL(req.url ?? '/', 'http://admin').searchParams.get('at');
      if (at === null) return reply(res, 200, { state: await service.room(room).state() });
      const position = positionParam('at', at);
      if (typeof position === 'string') return reply(res, 400, { error: 'bad-argument', message: position });
      reply(res, 200, { position, state: await service.room(room).stateAt(position) });
    },
  },
  {
    method: 'GET',
    path: '/admin/rooms/{room}/log',
    async handle(service, req, res, room) {
      const q = new URL(req.url ?? '/', 'http://admin').searchParams;
      const range: { from?: number; to?: number } = {};
      for (const k of ['from', 'to'] as const) {
        const v = q.get(k);
        if (v === null) continue;
        const p = positionParam(k, v);
        if (typeof p === 'string') return reply(res, 400, { error: 'bad-argument', message: p });
        range[k] = p;
      }
      reply(res, 200, await service.room(room).log(range));
    },
  },
  {
    method: 'POST',
    path: '/admin/rooms/{room}/ops',
    async handle(service, req, res, room) {
      const body = await readJson(req, res);
      if (body === undefined) return;
      const { op, args, author, key, machine } = body as Record<string, unknown>;
      if (
        typeof op !== 'string' ||
        typeof author !== 'string' ||
        (key !== undefined && typeof key !== 'string') ||
        (machine !== undefined && typeof machine !== 'string')
      )
        return reply(res, 400, {
          error: 'bad-argument',
          message: 'expected JSON { "op": string, "args"?: any, "author": string, "key"?: string, "machine"?: string }',
        });
      reply(res, 200, await service.room(room, machine).submit(op, args, { author, ...(key !== undefined ? { key } : {}) }));
    },
  },
  { method: 'GET', path: '/admin/rooms/{room}/export', handle: async (service, _req, res, room) => reply(res, 200, await service.room(room).export()) },
  {
    method: 'PUT',
    path: '/admin/rooms/{room}',
    async handle(service, req, res, room) {
      const file = await readJson(req, res, MAX_IMPORT_BYTES);
      if (file === undefined) return;
      await service.importRoom(room, file as never);
      reply(res, 201, { imported: room });
    },
  },
  {
    method: 'DELETE',
    path: '/admin/rooms/{room}',
    handle: async (service, _req, res, room) => reply(res, 200, { deleted: await service.room(room).delete() }),
  },
];

/** A log position from the query (`name=value`), or why it is not one. */
function positionParam(name: string, v: string): number | string {
  const n = Number(v);
  return /^(0|[1-9][0-9]*)$/.test(v) && Number.isSafeInteger(n) ? n : `${name} must be a log position (an integer >= 0), got ${v.slice(0, 40)}`;
}

/** Every route as [method, path], what docs/admin-api.openapi.json describes (a test keeps the two in step). */
export const ADMIN_ROUTES: readonly (readonly [string, string])[] = ROUTES.map((r) => [r.method, r.path] as const);

/** `path` against a route's path: `{room}` takes a room name. The room, or undefined if it does not match. */
function match(pattern: string, path: string): string | undefined {
  const [before, after = ''] = pattern.split('{room}');
  if (pattern === path) return '';
  if (!pattern.includes('{room}') || !path.startsWith(before) || !path.endsWith(after)) return undefined;
  const room = path.slice(before.length, path.length - after.length);
  return /^[A-Za-z0-9._~-]{1,128}$/.test(room) ? room : undefined;
}

/** A handler for /admin/ paths: answers them and returns true, or returns false for other paths. */
export function adminHttp(admin: AdminOptions, service: Service): (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> {
  const want = createHash('sha256').update(admin.token).digest();
  // Compared as digests in constant time: the comparison says nothing about how much matched.
  const authorized = (req: IncomingMessage) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    return m !== null && timingSafeEqual(createHash('sha256').update(m[1]).digest(), want);
  };
  return async (req, res, path) => {
    if (path !== '/admin' && !path.startsWith('/admin/')) return false;
    if (!authorized(req)) {
      reply(res, 401, { error: 'unauthenticated', message: 'send Authorization: Bearer <the server admin token>' });
      return true;
    }
    const found = ROUTES.flatMap((r) => {
      const room = match(r.path, path);
      return room === undefined ? [] : [{ r, room }];
    });
    if (found.length === 0) {
      reply(res, 404, { error: 'not-found', message: `no admin route ${path}; see docs/admin-api.md` });
      return true;
    }
    const hit = found.find((f) => f.r.method === req.method);
    if (!hit) {
      res.setHeader('allow', found.map((f) => f.r.method).join(', '));
      reply(res, 405, { error: 'method-not-allowed', message: `use ${found.map((f) => f.r.method).join(' or ')}` });
      return true;
    }
    try {
      await hit.r.handle(service, req, res, hit.room);
    } catch (e) {
      answerError(res, e);
    }
    return true;
  };
}

/** A HerculesError as an HTTP answer: its code and message, with the status that fits. */
function answerError(res: ServerResponse, e: unknown): void {
  if (!(e instanceof HerculesError) || !isErrorCode(e.code)) throw e; // a bug: the server's 500 handler logs it
  const status = ERROR_STATUS[e.code] ?? 503;
  reply(res, status, { error: e.code, message: e.message });
}

/** The HTTP status of an error's code; any other is 503. */
const ERROR_STATUS: Partial<Record<string, number>> = { 'bad-room': 404, 'bad-argument': 400, 'unknown-op': 400, 'machine-mismatch': 409, 'not-retained': 410 };

function reply(res: ServerResponse, status: number, body: unknown): void {
  // Serialised before the status is set: a body JSON cannot write (a state nested deeper than its
  // stack) is the server's 500, never a 200 with an error text.
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(`${json}\n`);
}

/** The request's JSON body, or undefined after answering 400/413 itself. */
async function readJson(req: IncomingMessage, res: ServerResponse, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      reply(res, 413, { error: 'too-large', message: `the body is over ${maxBytes} bytes` });
      req.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  try {
    const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch {
    /* answered below */
  }
  reply(res, 400, { error: 'bad-argument', message: 'the body must be a JSON object' });
  return undefined;
}
