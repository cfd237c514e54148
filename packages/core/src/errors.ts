/**
 * Every error Hercules raises or sends says what went wrong and what to do about it. `code` is
 * stable and machine-readable, and one of a closed set: docs/errors.md says, for each, what it
 * means, whether it is fatal on the wire, and what to do (a test keeps the two in step).
 * `message` is for humans.
 */
export const ERROR_CODES = [
  // Raised by the library, at the call that went wrong.
  'bad-argument',
  'bad-machine',
  'unknown-op',
  'too-large',
  'op-rejected',
  'timeout',
  'closed',
  'unreachable',
  'store-in-use',
  /** A room store write lost: the room is not where the writer expected (another writer wrote first). */
  'fenced',
  /** A read of a room's history (stateAt, log) named a position the server no longer keeps (its retention, docs/history.md). */
  'not-retained',
  // Sent by a server in an error frame; a fatal one becomes the client room's failure.
  'protocol-version',
  'machine-mismatch',
  /** The client runs an older version of the room's machine (docs/migrations.md): the app should reload. */
  'client-too-old',
  /** The client runs a newer version of the machine than the server (or the room) has: deploy it to the server. */
  'server-too-old',
  'malformed-frame',
  'not-ready',
  'seq-gap',
  'replaced',
  'unauthenticated',
  'forbidden',
  /** The server revoked the connection's user (server.revoke, or the admin endpoint). */
  'revoked',
  'client-id-conflict',
  'bad-room',
  'room-full',
  'server-full',
  'rate-limited',
  'hello-timeout',
  'encode-failed',
  'storage-failed',
  'internal',
  // Answered by the admin HTTP API (docs/admin-api.md) for a request that names no route.
  /** No admin route at that path (HTTP 404). */
  'not-found',
  /** An admin route exists at that path, but not for that method (HTTP 405, with `Allow`). */
  'method-not-allowed',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** Whether `v` is a code of this version (a newer server may send one this client does not know). */
export function isErrorCode(v: unknown): v is ErrorCode {
  return typeof v === 'string' && (ERROR_CODES as readonly string[]).includes(v);
}

export class HerculesError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HerculesError';
    this.code = code;
  }
}

/**
 * The error an op's `authoritative`/`visible`/`stable` promises reject with when the op has no
 * effect: it threw at its place in the global order, or (`refused`) the server refused it before
 * ordering (no write access, invalid arguments, an unknown op, the authorize hook).
 */
export class OpRejectedError extends HerculesError {
  readonly opId: string;
  readonly refused: boolean;
  constructor(opId: string, reason: string, refused = false) {
    super('op-rejected', `operation ${opId} was ${refused ? 'refused' : 'rejected'}: ${reason}`);
    this.name = 'OpRejectedError';
    this.opId = opId;
    this.refused = refused;
  }
}

/**
 * The default of a switch over a union: compiles only if every member has its case (`value`
 * is then `never`), so adding a member fails the build at each switch that forgot it. At run
 * time (a value from outside the types, e.g. off the wire) it throws 'internal' naming it.
 */
export function unreachable(value: never, what: string): never {
  throw new HerculesError('internal', `unexpected ${what}: ${JSON.stringify(value)}`);
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  try {
    return String(e);
  } catch {
    return 'unprintable error';
  }
}
