export { createServer } from './server.ts';
export type { ServerOptions, HerculesServer, Limits } from './server.ts';
export { AuthError, jwtAuthenticator, tokenFromRequest } from './auth.ts';
export type { Access, AccessHook, Authenticate, Identity, JwtOptions } from './auth.ts';
export { SqliteStore } from './store/sqlite.ts';
export type { SqliteStoreOptions } from './store/sqlite.ts';
export { FencedError, StorageError } from './store/room-store.ts';
export type { RoomStore, RoomMeta, RoomInit, LoadedRoom, RoomAppend, Appended } from './store/room-store.ts';
