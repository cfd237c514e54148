/**
 * The embedded Hercules server: the front door (front-door.ts: HTTP, /healthz, /metrics, the
 * admin API, webhooks, the room service) over a SQLite file in `dataDir`, or over a store given.
 * `@hercules/server/core` has the same `createServer` without SQLite (a store or a deployment
 * must be given). docs/architecture.md draws the pipeline and its seams.
 */
import { HerculesError } from '@hercules/core';
import { SqliteStore } from './store/sqlite.ts';
import { retentionSetting, type HistoryOption, type RetentionSetting, type RoomStore } from './store/room-store.ts';
import { createServer as createFrontDoor, type Deployment, type FrontDoorOptions, type HerculesServer as FrontDoor } from './front-door.ts';
import { sqliteCursors } from './webhook-cursors-sqlite.ts';
import type { Limits } from './room-service.ts';

export type { Limits };

export interface ServerOptions<Store extends RoomStore = SqliteStore> extends FrontDoorOptions<Store> {
  /**
   * Directory for the SQLite file and the webhooks' positions (`webhooks.sqlite`). Required
   * unless `store` or `deployment` is given; with a `store`, only the webhooks' positions go there.
   */
  dataDir?: string;
  /**
   * How much history the SQLite store keeps behind checkpoints for `room(name).stateAt` and
   * `log` (docs/history.md): the last `ops` ops and/or those of the last `days` days, for every
   * room, and per machine (by name) in `machines`. Default the last 10,000 ops. A store given
   * (`store`) is configured where it is made (MemoryStoreOptions.retention).
   */
  history?: HistoryOption;
}

export type HerculesServer<Store extends RoomStore = SqliteStore> = FrontDoor<Store>;

export async function createServer<Store extends RoomStore = SqliteStore>(opts: ServerOptions<Store>): Promise<HerculesServer<Store>> {
  const dataDir = typeof opts?.dataDir === 'string' && opts.dataDir.length > 0 ? opts.dataDir : undefined;
  if (opts && (opts.store !== undefined || opts.deployment !== undefined)) {
    // A given store keeps the rooms; the webhooks' positions go to `dataDir` if there is one.
    if (dataDir === undefined || !opts.webhooks?.length || opts.deployment !== undefined) return createFrontDoor(opts);
    const store = opts.store!;
    const { store: _, ...rest } = opts;
    return createFrontDoor({
      ...rest,
      deployment: {
        open: async () => ({
          store,
          describe: { store: store.constructor?.name ?? 'given' },
          webhookCursors: () => sqliteCursors(dataDir),
          close: async () => {},
        }),
      },
    });
  }
  if (dataDir === undefined)
    throw new HerculesError('bad-argument', 'createServer: `dataDir` is required (a directory for the SQLite file), unless you give a `store`');
  const retention = retentionSetting('createServer', opts.history);
  return createFrontDoor({ ...opts, deployment: sqliteDeployment(dataDir, (opts.webhooks?.length ?? 0) > 0, retention) as unknown as Deployment<Store> });
}

/** Rooms in a SQLite file in `dataDir`, which the server opens and closes; the webhooks' positions beside it. */
function sqliteDeployment(dataDir: string, webhooks: boolean, retention: RetentionSetting): Deployment<SqliteStore> {
  return {
    async open({ metrics, undelivered }) {
      // Checkpoints are timed by the rooms (apart from their commits): the store writes each one it is given.
      const store = new SqliteStore(dataDir, {
        checkpointEvery: 1,
        retention,
        // What webhooks have not delivered stays in the log past a checkpoint.
        ...(webhooks ? { retainFrom: (room: string) => undelivered(room) ?? Number.POSITIVE_INFINITY } : {}),
        onCommit: (c) => {
          if (c.appends > 0) {
            metrics.commitSeconds.observe(c.seconds);
            metrics.commitOps.observe(c.ops);
          }
          // Appends the database refused after their group's transaction failed: each room fails alone.
          if (c.failed > 0 && c.transactions > 1) metrics.outputFailures.inc({ stage: 'commit' }, c.failed);
        },
        onSync: (s) => metrics.commitSyncSeconds.observe(s.seconds),
      });
      return {
        store,
        describe: { dataDir },
        webhookCursors: () => sqliteCursors(dataDir),
        // The SQLite file answers a query.
        health() {
          try {
            store.roomCount();
            return {};
          } catch {
            return { reason: 'the SQLite file does not answer a query' };
          }
        },
        close: () => store.close(),
      };
    },
  };
}
