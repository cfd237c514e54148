export { useView, useOps, useOpStage, useMembers, usePositions, useStatus, useTick, useOthers, usePresence, useSeenBy, useMemberPositions } from './hooks.ts';
export { Inspector, trackOp } from './inspector.tsx';
