/**
 * Authentication and room access for the server. The server asks two hooks, once per
 * connection, before the WebSocket is handed to a room:
 *
 *   authenticate(request) -> who is this? (a user id, plus claims for the access hook)
 *   access(identity, room) -> 'none' | 'read' | 'write'
 *
 * `jwtAuthenticator` is the built-in `authenticate`: it verifies a JWT (jose) signed with a
 * shared secret, a public key, or a key from a JWKS file or URL.
 */
import { readFileSync } from 'node:fs';
import { createPublicKey, KeyObject } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createLocalJWKSet, createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { HerculesError } from '@hercules/core';

/** Who a connection belongs to, as `authenticate` established it. */
export interface Identity {
  /** Stamped as `ctx.author` on every op of the connection; owns the client ids it uses. */
  readonly user: string;
  /** Anything else the access and authorize hooks may want (e.g. the token's claims). */
  readonly claims?: Readonly<Record<string, unknown>>;
  /**
   * When the credential stops being valid (ms since the epoch): the server closes the
   * connection then, with `unauthenticated`, and a client whose `token` is a function comes back
   * with a fresh one. The JWT authenticator sets it from `exp` (plus the clock tolerance).
   */
  readonly expiresAt?: number;
}

/**
 * Return the identity, or throw `AuthError` (or return null) to refuse the connection; the
 * client is told why. May be async. Called once per connection, before the room is joined.
 */
export type Authenticate = (req: IncomingMessage) => Identity | null | Promise<Identity | null>;

export type Access = 'none' | 'read' | 'write';

/** Decide what an identity may do in a room. `identity` is undefined when there is no `authenticate`. */
export type AccessHook = (identity: Identity | undefined, room: string) => Access | Promise<Access>;

/** A refusal whose message is safe to show the client. */
export class AuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuthError';
  }
}

/**
 * The token a client presented: `Authorization: Bearer <token>` or, for browsers (which cannot
 * set headers on a WebSocket), the `token` query parameter.
 */
export function tokenFromRequest(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  if (typeof h === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (m) return m[1];
  }
  const q = new URL(req.url ?? '/', 'http://x').searchParams.get('token');
  return q ?? undefined;
}

export interface JwtOptions {
  /** HMAC shared secret (HS256/384/512). */
  secret?: string | Uint8Array;
  /** A public key: PEM (SPKI or certificate) or a JWK object (RS*, PS*, ES*, EdDSA). */
  publicKey?: string | Record<string, unknown> | KeyObject;
  /** A JWKS file (`{ "keys": [...] }`) read once at startup; keys are picked by `kid`. */
  jwksFile?: string;
  /** A JWKS URL, fetched and cached by jose. */
  jwksUrl?: string;
  /** Required `iss`, if set. */
  issuer?: string | string[];
  /** Required `aud`, if set. */
  audience?: string | string[];
  /** Accepted algorithms; default: whatever the key type allows. */
  algorithms?: string[];
  /** The claim that names the user. Default 'sub'. */
  userClaim?: string;
  /** Clock skew tolerance, seconds. Default 30. */
  clockToleranceSec?: number;
}

/** Build an `authenticate` hook that verifies a JWT. Throws at once if the key material is unusable. */
export function jwtAuthenticator(opts: JwtOptions): Authenticate {
  const given = [opts.secret, opts.publicKey, opts.jwksFile, opts.jwksUrl].filter((x) => x !== undefined).length;
  if (given !== 1) {
    throw new HerculesError('bad-argument', `jwt: give exactly one of secret, publicKey, jwksFile, jwksUrl (got ${given})`);
  }
  let key: Uint8Array | KeyObject | JWTVerifyGetKey;
  if (opts.secret !== undefined) {
    key = typeof opts.secret === 'string' ? new TextEncoder().encode(opts.secret) : opts.secret;
    if (key.length < 32)
      throw new HerculesError('bad-argument', 'jwt.secret must be at least 32 bytes; a short HMAC secret can be guessed offline from any token');
  } else if (opts.publicKey !== undefined) {
    try {
      const k = opts.publicKey;
      key = k instanceof KeyObject ? k : typeof k === 'string' ? createPublicKey(k) : createPublicKey({ key: k as never, format: 'jwk' });
      if (key.type !== 'public') throw new HerculesError('bad-argument', `it is a ${key.type} key`);
    } catch (e) {
      throw new HerculesError('bad-argument', `jwt.publicKey is not a usable public key: ${(e as Error).message}`);
    }
  } else if (opts.jwksFile !== undefined) {
    let jwks: unknown;
    try {
      jwks = JSON.parse(readFileSync(opts.jwksFile, 'utf8'));
    } catch (e) {
      throw new HerculesError('bad-argument', `jwt.jwksFile ${opts.jwksFile} cannot be read as JSON: ${(e as Error).message}`);
    }
    if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as { keys?: unknown }).keys)) {
      throw new HerculesError('bad-argument', `jwt.jwksFile ${opts.jwksFile} must hold { "keys": [ ... ] }`);
    }
    key = createLocalJWKSet(jwks as never);
  } else {
    let url: URL;
    try {
      url = new URL(opts.jwksUrl!);
    } catch {
      throw new HerculesError('bad-argument', `jwt.jwksUrl is not a URL: ${opts.jwksUrl}`);
    }
    key = createRemoteJWKSet(url);
  }
  const userClaim = opts.userClaim ?? 'sub';
  const verifyOpts = {
    ...(opts.issuer !== undefined ? { issuer: opts.issuer } : {}),
    ...(opts.audience !== undefined ? { audience: opts.audience } : {}),
    ...(opts.algorithms !== undefined ? { algorithms: opts.algorithms } : {}),
    clockTolerance: opts.clockToleranceSec ?? 30,
  };
  return async (req) => {
    const token = tokenFromRequest(req);
    if (!token) throw new AuthError('no token: send Authorization: Bearer <jwt> or ?token=<jwt>');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key as never, verifyOpts));
    } catch (e) {
      throw new AuthError(`invalid token: ${describeJoseError(e)}`);
    }
    const user = payload[userClaim];
    if (typeof user !== 'string' || user.length === 0 || user.length > 256) {
      throw new AuthError(`invalid token: claim ${userClaim} must name the user (a string of 1-256 characters)`);
    }
    return typeof payload.exp === 'number' ? { user, claims: payload, expiresAt: (payload.exp + verifyOpts.clockTolerance) * 1000 } : { user, claims: payload };
  };
}

function describeJoseError(e: unknown): string {
  if (e instanceof joseErrors.JWTExpired) return 'expired; get a fresh token';
  if (e instanceof joseErrors.JWTClaimValidationFailed) return `claim ${e.claim} ${e.reason === 'check_failed' ? 'is wrong' : e.reason}`;
  if (e instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad signature';
  if (e instanceof joseErrors.JOSEAlgNotAllowed) return 'algorithm not allowed';
  if (e instanceof joseErrors.JWKSNoMatchingKey) return 'no key matches its kid';
  if (e instanceof joseErrors.JWSInvalid || e instanceof joseErrors.JWTInvalid) return 'malformed';
  return e instanceof Error ? e.message : String(e);
}
