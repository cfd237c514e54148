export {
  useView,
  useOps,
  useOpStage,
  useMembers,
  usePositions,
  useStatus,
  useTick,
  useOthers,
  usePresence,
  useSeenBy,
  useMemberPositions,
  useUndo,
} from './hooks.ts';
export { Inspector, trackOp } from './inspector.tsx';
export { TimeTravel, type HistorySource, type HistoryEntryInfo } from './time-travel.tsx';
