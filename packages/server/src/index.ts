/**
 * @hercules/server: `@hercules/server/core` (core.ts: the server without SQLite) plus the SQLite
 * store and the embedded server's `createServer`, which keeps rooms in a SQLite file in `dataDir`.
 */
export * from './core.ts';
// These take the place of core's: the embedded server's createServer adds SQLite in `dataDir`.
export { createServer } from './server.ts';
export type { ServerOptions, HerculesServer } from './server.ts';
export { SqliteStore } from './store/sqlite.ts';
export type { SqliteStoreOptions } from './store/sqlite.ts';
