export { viewStore, opStageStore, othersStore, presenceStore, membersStore, positionsStore, statusStore, seenByStore, memberPositionsStore } from './stores.ts';
