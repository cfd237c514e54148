/**
 * The server's room pipeline without a transport or SQLite (`@hercules/server/pipeline`): what
 * the simulator runs, and what a new transport or store is built against. Importing it loads
 * neither `ws` nor `better-sqlite3`.
 */
export { RoomHost } from './room-host.ts';
export type { RoomHostEvents, RoomHostOptions, RoomHostState, RoomMember } from './room-host.ts';
export { RoomRegistry } from './room-registry.ts';
export type { RoomRegistryEvents, RoomRegistryOptions } from './room-registry.ts';
export { systemClock } from './clock.ts';
export type { Clock } from './clock.ts';
export { RECONNECT_TO_RESUME, reconnectToResume } from './recovery.ts';
export { delayedConnection } from './connection.ts';
export type { Connection, ConnectionEvents } from './connection.ts';
export { MemoryStore, MemoryDisk } from './store/memory.ts';
export type { MemoryStoreOptions, AppendFault, AppendFaultStage } from './store/memory.ts';
export {
  FencedError,
  StorageError,
  checkAgainstHead,
  checkAppend,
  checkListRooms,
  checkRoomName,
  compareRoomNames,
  exportProblem,
  DEFAULT_RETENTION,
  checkRetention,
  retentionFor,
  retentionSetting,
  retentionCut,
  retentionStart,
} from './store/room-store.ts';
export { stateDigest, checkpointDigest, keepDigests, importedDigests, MAX_CHECKPOINT_DIGESTS, DIGEST_PATTERN } from './store/state-digest.ts';
export type { CheckpointDigest } from './store/state-digest.ts';
export type {
  RoomStore,
  RoomMeta,
  RoomInit,
  LoadedRoom,
  RoomAppend,
  Appended,
  CheckedAppend,
  ListRoomsOptions,
  StoredRoomInfo,
  RoomExport,
  RoomPeek,
  HistoryRetention,
  HistoryOption,
  RetentionSetting,
  HistoryEntry,
  HistoryQuery,
  RoomHistory,
} from './store/room-store.ts';
