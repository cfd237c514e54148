export { createServer } from './server.ts';
export type { ServerOptions, HerculesServer } from './server.ts';
export { SqliteStore, StorageError } from './store.ts';
