/**
 * The record schema the tldraw sync peer uses on both sides: one record type, `cell`, a key per
 * record (`cell:<key>`), the shape tldraw itself gives every shape and binding. tldraw's rooms
 * start from a snapshot with a `document` record of its own schema; ours starts empty.
 */
import { StoreSchema, createRecordType, type BaseRecord, type RecordId } from '@tldraw/store';

export interface CellRecord extends BaseRecord<'cell', RecordId<CellRecord>> {
  value: string;
}

export const Cell = createRecordType<CellRecord>('cell', {
  scope: 'document',
  validator: {
    validate(r: unknown): CellRecord {
      const c = r as CellRecord;
      if (typeof c?.value !== 'string') throw new Error('cell.value must be a string');
      return c;
    },
  },
});

export const cellSchema = StoreSchema.create<CellRecord>({ cell: Cell });

export const emptySnapshot = () => ({ clock: 0, documentClock: 0, documents: [], schema: cellSchema.serialize() });
