import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryStore, type RoomExport } from '@hercules/server';
import { FuzzFailure } from '../src/fuzz.ts';
import { runImportFuzz } from '../src/import-fuzz.ts';

// spec: SEC-IMPORT
test('import fuzz: 300 room files with hostile values, each imported in process and over HTTP: refused exactly when outside the domain, without a trace; the rest round-trip', async () => {
  const s = await runImportFuzz(1, 300);
  assert.equal(s.files, 600);
  // Both verdicts are reached, often.
  assert.ok(s.refused > 200, `refused ${s.refused}`);
  assert.ok(s.accepted > 100, `accepted ${s.accepted}`);
});

test('import fuzz: notices a store that does not keep what it imported (planted bug)', async () => {
  /** Drops the rejected ops of every client record it imports. */
  class Lossy extends MemoryStore {
    override importRoom(room: string, data: RoomExport): Promise<void> {
      const clients = Object.fromEntries(Object.entries(data.durable.clients).map(([id, { rejected: _dropped, ...rec }]) => [id, rec]));
      return super.importRoom(room, { ...data, durable: { ...data.durable, clients } });
    }
  }
  await assert.rejects(
    runImportFuzz(2, 50, new Lossy()),
    (e: unknown) =>
      e instanceof FuzzFailure &&
      e.rule === 'SEC-IMPORT' &&
      /\[SEC-IMPORT\] the export of an imported room differs from the import/.test(e.message) &&
      /npm run fuzz -- --imports 50 --seed 2/.test(e.message),
  );
});
