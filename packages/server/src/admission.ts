/**
 * Who may connect, to which room, with which machine: the checks a connection passes before it
 * joins a room, on the request and on its first frame (hello). Transport-neutral: it sees the
 * request's URL and headers and the decoded hello, never a socket. What is refused is a
 * `Refusal`: an error code of the closed vocabulary (docs/errors.md), a close code, and a
 * message for the client.
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { HerculesError, parseClientMessage, protocolRefusal, type ErrorCode, type HelloMessage, type Machine } from '@hercules/core';
import { AuthError, type Access, type AccessHook, type Authenticate, type Identity } from './auth.ts';

/** What a connection request carries, whatever transport brought it: an HTTP upgrade request will do. */
export interface ConnectionRequest {
  /** The request target, e.g. `/?room=NAME&token=…`. */
  readonly url?: string;
  readonly headers: IncomingMessage['headers'];
  readonly socket?: { readonly remoteAddress?: string };
  /**
   * When a server accepted the connection, by `acceptClock()` of the server that accepted it
   * (a relayed connection's edge node). Of two connections of one client id, the one accepted
   * later is the newer (LIVE-HONEST): the client's own clock is not trusted for that, since it
   * may be wrong or go back. Absent: the serving node's acceptClock() when it gets the request.
   */
  readonly acceptedAt?: number;
}

/**
 * A server's clock for ordering connections (ConnectionRequest.acceptedAt): ms since the epoch,
 * from the process's start time plus a monotonic clock, so it never goes back within a process
 * (the wall clock may, when NTP steps it) and nodes of a cluster agree on it as their clocks do.
 */
export function acceptClock(): number {
  return Math.floor(performance.timeOrigin + performance.now());
}

export interface Refusal {
  code: ErrorCode;
  /** The close code for the transport (WebSocket: 4xxx are Hercules's own). */
  closeCode: number;
  message: string;
  /** A fatal refusal ends the client room; a non-fatal one is retried with backoff. */
  fatal: boolean;
}

export interface Admitted {
  room: string;
  identity?: Identity;
  access: 'read' | 'write';
}

export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,128}$/;

export const isRefusal = (r: object): r is Refusal => 'closeCode' in r;

/** The room a request names (`?room=`), or a refusal. */
export function roomOf(req: ConnectionRequest): string | Refusal {
  let room = '';
  try {
    room = new URL(req.url ?? '/', 'http://x').searchParams.get('room') ?? '';
  } catch {
    /* an unparsable URL names no room */
  }
  if (!ROOM_NAME.test(room)) return { code: 'bad-room', closeCode: 4003, message: 'missing or bad ?room= (1-128 of A-Z a-z 0-9 . _ ~ -)', fatal: true };
  return room;
}

export interface AdmissionOptions {
  authenticate?: Authenticate;
  access?: AccessHook;
  /** Connections open plus being admitted: more are refused with `server-full`. */
  maxConnections: number;
  /** Connections open now (admission adds those it is still admitting). */
  openConnections: () => number;
  log: Logger;
}

/** The request checks: room name, the connection limit, authentication and room access. */
export class Admission {
  /** Requests being authenticated: they count against maxConnections already. */
  private admitting = 0;

  constructor(private readonly opts: AdmissionOptions) {}

  /**
   * Admit a request, or say why not. The connection limit is counted with the requests still
   * being admitted, so a burst of them cannot overshoot it.
   */
  async admit(req: ConnectionRequest): Promise<Admitted | Refusal> {
    const room = roomOf(req);
    if (typeof room !== 'string') return room;
    const max = this.opts.maxConnections;
    if (this.opts.openConnections() + this.admitting >= max)
      return { code: 'server-full', closeCode: 4011, message: `this server has its maximum of ${max} connections; retrying later may succeed`, fatal: false };
    this.admitting++;
    try {
      return await this.check(req, room);
    } catch (e) {
      this.opts.log.error({ err: (e as Error).stack }, 'admitting a connection failed');
      return { code: 'internal', closeCode: 1011, message: 'the server failed to admit this connection', fatal: true };
    } finally {
      this.admitting--;
    }
  }

  private async check(req: ConnectionRequest, room: string): Promise<Admitted | Refusal> {
    const { authenticate, log } = this.opts;
    let identity: Identity | undefined;
    if (authenticate) {
      const refused = (why: string): Refusal => ({ code: 'unauthenticated', closeCode: 4401, message: `unauthenticated: ${why}`, fatal: true });
      try {
        // The hook is typed for an HTTP request; a transport without one passes what it has.
        const id = await authenticate(req as IncomingMessage);
        if (!id) return refused('the server refused your credentials');
        if (typeof id.user !== 'string' || id.user.length === 0)
          throw new HerculesError('bad-argument', 'authenticate returned an identity without a user; return { user: <non-empty string> } or throw AuthError');
        identity = id;
      } catch (e) {
        if (e instanceof AuthError) return refused(e.message);
        log.error({ err: (e as Error).stack }, 'authenticate hook failed');
        return refused('the server could not check your credentials');
      }
    }
    let access: Access = 'write';
    if (this.opts.access) {
      try {
        access = await this.opts.access(identity, room);
      } catch (e) {
        log.error({ err: (e as Error).stack, room }, 'access hook failed');
        access = 'none';
      }
      if (access !== 'none' && access !== 'read' && access !== 'write') {
        log.error({ room, access }, 'access hook returned something other than none, read or write; treating it as none');
        access = 'none';
      }
    }
    if (access === 'none')
      return {
        code: 'forbidden',
        closeCode: 4403,
        message: `forbidden: ${identity ? `user ${identity.user}` : 'this client'} has no access to room ${room}`,
        fatal: true,
      };
    return { room, ...(identity ? { identity } : {}), access };
  }
}

/**
 * Check a connection's first frame: it must be hello, in a protocol version this server speaks, for a
 * machine this server has. Returns the hello and its machine, or a refusal.
 */
export function checkHello(frame: unknown, machines: ReadonlyMap<string, Machine<any, any>>): { hello: HelloMessage; machine: Machine<any, any> } | Refusal {
  let hello: HelloMessage;
  try {
    const m = parseClientMessage(frame);
    if (m.t !== 'hello') throw new HerculesError('not-ready', `the first message must be hello, got ${m.t}`);
    hello = m;
  } catch (e) {
    return { code: e instanceof HerculesError ? e.code : 'malformed-frame', closeCode: 1008, message: (e as Error).message, fatal: true };
  }
  // SEC-PROTOCOL-RANGE: the room's own rule, at the door.
  const refused = protocolRefusal(hello.v);
  if (refused !== undefined) return { code: 'protocol-version', closeCode: 4001, message: refused, fatal: true };
  const machine = machines.get(hello.machine.name);
  if (machine && machine.version !== hello.machine.version) {
    // This server serves the newest version it has of each machine (docs/migrations.md).
    const older = hello.machine.version < machine.version;
    return {
      code: older ? 'client-too-old' : 'server-too-old',
      closeCode: 4002,
      message: older
        ? `this server runs ${machine.name}@${machine.version}, the client ${machine.name}@${hello.machine.version}; reload the app to get the new version (its saved ops are kept, and translated)`
        : `this server's newest ${machine.name} is version ${machine.version}, the client runs ${machine.name}@${hello.machine.version}; deploy the new machine to the server`,
      fatal: true,
    };
  }
  if (!machine) {
    const known = [...machines.values()].map((m) => `${m.name}@${m.version}`).join(', ');
    return {
      code: 'machine-mismatch',
      closeCode: 4002,
      message: `this server has no machine ${hello.machine.name}@${hello.machine.version}; it serves ${known}`,
      fatal: true,
    };
  }
  return { hello, machine };
}

/** A room at its member limit refuses more (retried with backoff). */
export function roomFull(room: string, members: number, maxClientsPerRoom: number): Refusal | undefined {
  if (members < maxClientsPerRoom) return undefined;
  return {
    code: 'room-full',
    closeCode: 4009,
    message: `room ${room} has its maximum of ${maxClientsPerRoom} connections; retrying later may succeed`,
    fatal: false,
  };
}
