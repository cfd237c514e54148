/**
 * Every error Hercules raises says what went wrong and what to do about it.
 * `code` is stable and machine-readable; `message` is for humans.
 */
export type ErrorCode =
  | 'bad-argument'
  | 'bad-machine'
  | 'bad-state'
  | 'protocol-version'
  | 'machine-mismatch'
  | 'malformed-frame'
  | 'not-ready'
  | 'seq-gap'
  | 'unknown-op'
  | 'op-rejected'
  | 'replaced'
  | 'unauthenticated'
  | 'forbidden'
  | 'too-large'
  /** A client store is open in another process or tab: one client, one writer. */
  | 'store-in-use'
  /** Ops under this client id and seq are not this client's: two clients share an id, or a store was restored from a backup. */
  | 'client-id-conflict'
  /** A wait (connect, until) ran out of time. */
  | 'timeout'
  /** The room was closed while something waited on it. */
  | 'closed'
  /** The server could not be reached: refused, unknown host, or no answer. */
  | 'unreachable'
  /** A room store write lost: the room is not where the writer expected (another writer wrote first). */
  | 'fenced'
  /** A room store could not read or write (disk full, I/O error, a value it cannot hold). */
  | 'storage-failed'
  | 'internal';

export class HerculesError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HerculesError';
    this.code = code;
  }
}

/** The error an op's `authoritative`/`visible` promises reject with when the global order rejected it. */
export class OpRejectedError extends HerculesError {
  readonly opId: string;
  constructor(opId: string, reason: string) {
    super('op-rejected', `operation ${opId} was rejected: ${reason}`);
    this.name = 'OpRejectedError';
    this.opId = opId;
  }
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  try {
    return String(e);
  } catch {
    return 'unprintable error';
  }
}
