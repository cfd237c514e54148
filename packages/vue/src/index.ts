export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useOthers, usePresence, useSeenBy, useMemberPositions } from './composables.ts';
