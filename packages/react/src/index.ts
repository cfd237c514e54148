export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useTick, useOthers, usePresence, useUndo } from './hooks.ts';
export { Inspector, trackOp } from './inspector.tsx';
