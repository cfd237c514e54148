export { useView, useOps, useOpStage, useMembers, useStatus, useTick } from './hooks.ts';
export { Inspector, trackOp } from './inspector.tsx';
