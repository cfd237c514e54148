export { connect } from './connect.ts';
export type { ConnectOptions, ConnectedRoom, ConnectionStatus } from './connect.ts';
export { memoryStorage } from './storage.ts';
export { indexedDbStorage } from './indexeddb-storage.ts';
export type { StoreLocks } from './indexeddb-storage.ts';
export type { ClientStorage, StoredClient } from './storage.ts';
export { VIEWS } from '@hercules/core';
export type { OpHandle, ViewName, Stage } from '@hercules/core';
