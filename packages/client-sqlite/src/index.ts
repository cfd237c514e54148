export { sqliteStorage } from './sqlite-storage.ts';
