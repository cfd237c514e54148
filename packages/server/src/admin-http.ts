/**
 * The admin HTTP API, for a team's backend (never for browsers): every request carries
 * `Authorization: Bearer <admin token>`. Mounted by createServer under /admin/ when `admin` is
 * given; without it those paths do not exist (404). docs/admin-api.md describes each route.
 *
 *   POST /admin/revoke   { user, room?, reason? } -> { closed }   (server.revoke)
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HerculesError } from '@hercules/core';
import type { RoomService } from './room-service.ts';

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

/** A handler for /admin/ paths: answers them and returns true, or returns false for other paths. */
export function adminHttp(
  admin: AdminOptions,
  service: Pick<RoomService, 'revoke'>,
): (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> {
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
    if (path === '/admin/revoke') {
      if (req.method !== 'POST') {
        methodNotAllowed(res, 'POST');
        return true;
      }
      const body = await readJson(req, res);
      if (body === undefined) return true;
      const { user, room, reason } = body as { user?: unknown; room?: unknown; reason?: unknown };
      if (
        typeof user !== 'string' ||
        user.length === 0 ||
        (room !== undefined && typeof room !== 'string') ||
        (reason !== undefined && typeof reason !== 'string')
      ) {
        reply(res, 400, { error: 'bad-argument', message: 'expected JSON { "user": string, "room"?: string, "reason"?: string }' });
        return true;
      }
      const closed = service.revoke({ user, ...(room !== undefined ? { room } : {}), ...(reason !== undefined ? { reason } : {}) });
      reply(res, 200, { closed });
      return true;
    }
    reply(res, 404, { error: 'not-found', message: `no admin route ${path}; see docs/admin-api.md` });
    return true;
  };
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(`${JSON.stringify(body)}\n`);
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('allow', allow);
  reply(res, 405, { error: 'method-not-allowed', message: `use ${allow}` });
}

/** The request's JSON body, or undefined after answering 400/413 itself. */
async function readJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      reply(res, 413, { error: 'too-large', message: `the body is over ${MAX_BODY_BYTES} bytes` });
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
