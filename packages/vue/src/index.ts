export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useOthers, usePresence } from './composables.ts';
