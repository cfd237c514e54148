export {
  viewStore,
  opStageStore,
  othersStore,
  presenceStore,
  membersStore,
  positionsStore,
  statusStore,
  seenByStore,
  memberPositionsStore,
  undoStore,
} from './stores.ts';
