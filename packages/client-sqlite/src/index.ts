export { sqliteStorage } from './sqlite-storage.ts';
export { sqliteDirectory } from './sqlite-directory.ts';
