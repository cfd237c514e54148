/**
 * @hercules/core — the pure heart of Hercules. No sockets, disks or timers in here:
 * transports, storage and clocks are adapters around these engines.
 */
export {
  defineMachine,
  applyOp,
  applyOps,
  current,
  deepFreeze,
  SYSTEM_CLIENT,
  MIGRATE_OP,
  isMigrationEntry,
  machineVersions,
  machineAt,
  migrateState,
  translateOp,
  hasOp,
} from './machine.ts';
export { keyedMap } from './keyed-map.ts';
export type { KeyedMap, KeyedMapNode, KeyedMapLeaf, KeyedMapBranch } from './keyed-map.ts';
export { partChanges, joinParts, partsUnder } from './base-parts.ts';
export type { PartChanges } from './base-parts.ts';
export {
  createText,
  textOps,
  textAt,
  textToString,
  textHandle,
  isText,
  compactText,
  treeText,
  textRunText,
  textRunSize,
  textRunLeft,
  textLongArgs,
  textIndexOf,
  textPlaceAt,
  textPlaceIndex,
  isTextPlace,
  insertArgs,
  deleteArgs,
  textClockEnd,
  textClockFloor,
  textNextClock,
  TEXT_CLOCKS_PER_SEQ,
  TEXT_INSERT,
  TEXT_DELETE,
} from './text.ts';
export type {
  Text,
  TextRun,
  TextRunV1,
  TextV1,
  TextChunk,
  TextBranch,
  TextNode,
  TextFlat,
  TextLike,
  TextId,
  TextAnchor,
  TextOwnAnchor,
  TextRange,
  TextPath,
  TextHandle,
  TextRoom,
  TextView,
  TextInsertArgs,
  TextDeleteArgs,
  TextPlace,
} from './text.ts';
export { prepareRestore, storedRoomVersion, cannotRun } from './room-migration.ts';
export type { PreparedRestore } from './room-migration.ts';
export { findNonJson, domainCopy, domainBytes, scanOp, sameArgs, GENESIS_DIGEST, MAX_ARG_DEPTH } from './args.ts';
export type {
  Machine,
  MachineSpec,
  OpCall,
  MigrateFrom,
  OpTranslation,
  OpContext,
  OpFn,
  OpArgs,
  OpsOf,
  PresenceOf,
  StateOf,
  Json,
  OpInvocation,
} from './machine.ts';
export * from './protocol.ts';
export { ERROR_CODES, HerculesError, OpRejectedError, errorMessage, isErrorCode } from './errors.ts';
export type { ErrorCode } from './errors.ts';
export { LeanViewEngine, VIEWS } from './view-engine.ts';
export { ViewEngine } from './full-view-engine.ts';
export { PresenceState } from './presence.ts';
export type { PresenceApi } from './presence.ts';
export type { ViewName, Stage, OwnOp, Batching, ViewEngineOptions, ClientRestore, EngineOutput, BaseSnapshot } from './view-engine.ts';
export { RoomEngine, PRESENCE_BURST, SERVER_CLIENT, MAX_SERVER_KEYS } from './room-engine.ts';
export type {
  RoomOptions,
  RoomOutput,
  RoomDurableState,
  ClientRecord,
  ConnId,
  AuthorizeOp,
  AuthorizeContext,
  Principal,
  ServerSubmitResult,
} from './room-engine.ts';
export { ClientRoom } from './full-client-room.ts';
export { LeanClientRoom } from './client-room.ts';
export { undoFeature, textFeature, presenceFeature, receiptsFeature, ALL_ROOM_FEATURES } from './room-features.ts';
export type { RoomFeatures } from './room-features.ts';
export type { MemberPosition } from './receipts.ts';
export { UNDO_OP, diffState, sameJson } from './undo.ts';
export type { UndoAction, UndoArgs, Change } from './undo.ts';
export type { UndoOptions, UndoStatus } from './undo-stack.ts';
export type { OpHandle, OpStubs, RoomDriver, ClientRoomOptions, Listener, AppRoom, ViewPositions, RoomPresence, ReceiveStats } from './client-room.ts';
export { ClientDriver } from './client-driver.ts';
export type { Clock } from './clock.ts';
export type { DriverStore, DriverLink, ClientDriverOptions } from './client-driver.ts';
export { ClientCodec } from './wire.ts';
export { ServerCodec } from './server-codec.ts';
export { measureFrame, MAX_FRAME_UNITS } from './frame-size.ts';
export type { FrameSize } from './frame-size.ts';
