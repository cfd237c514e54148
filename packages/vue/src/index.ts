export {
  useView,
  useOps,
  useOpStage,
  useMembers,
  usePositions,
  useStatus,
  useOthers,
  usePresence,
  useSeenBy,
  useMemberPositions,
  useUndo,
} from './composables.ts';
