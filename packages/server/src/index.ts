export { createServer } from './server.ts';
export type { ServerOptions, HerculesServer, Limits } from './server.ts';
export { AuthError, jwtAuthenticator, tokenFromRequest } from './auth.ts';
export type { Access, AccessHook, Authenticate, Identity, JwtOptions } from './auth.ts';
export { SqliteStore, StorageError } from './store/sqlite.ts';
