export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useOthers, usePresence, useUndo } from './composables.ts';
