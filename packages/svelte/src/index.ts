export { viewStore, opStageStore, othersStore, presenceStore, membersStore, positionsStore, statusStore, undoStore } from './stores.ts';
