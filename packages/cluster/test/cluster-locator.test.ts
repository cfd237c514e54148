/**
 * The cluster's room locator (cluster-locator.ts) with doubles of the store and the peers: a room
 * whose shard this node can take is served here; one whose shard a live node owns is at that
 * node; an owner that is not alive is waited out, then refused. And a cluster node's code never
 * loads better-sqlite3 (it runs on `@hercules/server/core`), which `@hercules/server` does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FakeClock } from '@hercules/test-utils';
import { clusterLocator } from '../src/cluster-locator.ts';
import { NotOwnerError } from '../src/cluster-store.ts';

function locator(owner: (shard: number) => string | undefined, alive: Set<string>, clock = new FakeClock({ microtasks: true })) {
  return clusterLocator({
    store: {
      shardOf: (room) => Number(room.split('-')[1]),
      acquire: async (k) => {
        const o = owner(k);
        if (o !== 'me') throw new NotOwnerError(k, o, `room-${k}`);
      },
    },
    nodeId: 'me',
    alive: (n) => alive.has(n),
    waitMs: 1000,
    clock,
    rerouteMs: 500,
    relay: () => Promise.reject(new Error('unused')),
    call: () => Promise.reject(new Error('unused')),
    peers: () => [...alive],
  });
}

test('cluster locator: here if this node takes the shard, at the live owner otherwise', async () => {
  const l = locator((k) => (k === 1 ? 'me' : 'other'), new Set(['other']));
  assert.deepEqual(await l.locate('room-1'), { here: true });
  assert.deepEqual(await l.locate('room-2'), { here: false, node: 'other' });
  assert.equal(l.remote.rerouteMs, 500);
  assert.deepEqual(l.remote.peers(), ['other']);
});

test('cluster locator: an owner that is not alive is waited for (its lease expires), then refused past waitMs', async () => {
  const clock = new FakeClock({ microtasks: true });
  let owner = 'dead';
  const l = locator(() => owner, new Set(), clock);
  const first = l.locate('room-3');
  await clock.advance(300);
  owner = 'me'; // the dead owner's lease expired: this node takes the shard
  await clock.advance(200);
  assert.deepEqual(await first, { here: true });
  owner = 'dead';
  const second = l.locate('room-3');
  const refused = assert.rejects(second, (e: unknown) => e instanceof NotOwnerError);
  await clock.advance(1200);
  await refused;
});

test("a cluster node's modules never load better-sqlite3; @hercules/server's do (the check can fail)", () => {
  const loaded = (entry: string) =>
    JSON.parse(
      execFileSync(
        process.execPath,
        [
          '--conditions=@hercules/source',
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          `await import(${JSON.stringify(entry)}); const { createRequire } = await import('node:module'); console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache).filter((k) => k.includes('better-sqlite3'))));`,
        ],
        { cwd: dirname(fileURLToPath(import.meta.url)), encoding: 'utf8' },
      ).trim(),
    ) as string[];
  assert.deepEqual(loaded('@hercules/cluster'), [], '@hercules/cluster');
  assert.deepEqual(loaded('@hercules/server/core'), [], '@hercules/server/core');
  assert.ok(loaded('@hercules/server').length > 0, '@hercules/server loads it (the SQLite store)');
});
