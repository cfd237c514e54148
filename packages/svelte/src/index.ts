export { viewStore, opStageStore, othersStore, presenceStore, membersStore, positionsStore, statusStore } from './stores.ts';
