export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useTick } from './hooks.ts';
export { Inspector, trackOp } from './inspector.tsx';
