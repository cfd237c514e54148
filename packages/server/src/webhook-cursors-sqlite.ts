/**
 * The embedded server's webhook positions: `webhooks.sqlite` in its data directory, beside the
 * rooms, so a restart resumes each webhook where its receiver last answered 2xx. Apart from
 * webhooks.ts so that the service without SQLite (`@hercules/server/core`) never loads better-sqlite3.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { WebhookCursors } from './webhooks.ts';

export function sqliteCursors(dataDir: string): WebhookCursors {
  const db = new Database(join(dataDir, 'webhooks.sqlite'));
  db.pragma('journal_mode = WAL');
  // A cursor lost in a power cut only moves back: those entries are delivered again (at least once).
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE IF NOT EXISTS cursors (hook TEXT NOT NULL, room TEXT NOT NULL, pos INTEGER NOT NULL, PRIMARY KEY (hook, room))');
  const save = db.prepare('INSERT INTO cursors (hook, room, pos) VALUES (?, ?, ?) ON CONFLICT (hook, room) DO UPDATE SET pos = excluded.pos');
  return {
    load: () => db.prepare('SELECT hook, room, pos FROM cursors').all() as { hook: string; room: string; pos: number }[],
    save: (hook, room, pos) => void save.run(hook, room, pos),
    close: () => db.close(),
  };
}
