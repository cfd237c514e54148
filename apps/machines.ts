/**
 * The demo apps' state machines (paper §6), shared by server and clients. Argument schemas
 * (ArkType, chosen by measurement: docs/benchmarks.md, "Op-argument validators") let the server
 * refuse malformed ops before they are ordered and make a bad stub call throw at once.
 */
import { current, defineMachine, textOps } from '@hercules/core';
import { createRichText, richTextOps } from '@hercules/prosemirror/ops';
import { type } from 'arktype';

/**
 * What each demo tab shows the others through room.presence (never logged): a name and colour,
 * and the app's own part (a sheet cursor, a drag in progress, typing). Checked on both sides: a
 * value outside it throws at presence.set and the server refuses it.
 */
const presence = type({
  'name?': '0 < string <= 64',
  'color?': '0 < string <= 32',
  'cursor?': { row: 'number.integer >= 0', col: 'number.integer >= 0' },
  'drag?': type({ id: '0 < string <= 64', x: 'number', y: 'number' }).or('null'),
  'typing?': 'boolean',
});

/** Interior design: furniture in a 2-D room. */
export const interiorDesign = defineMachine({
  name: 'interior-design',
  version: 1,
  initial: {
    items: {
      'sofa': { kind: 'sofa', x: 60, y: 60, w: 160, h: 70 },
      'table': { kind: 'table', x: 260, y: 180, w: 110, h: 110 },
      'chair-1': { kind: 'chair', x: 230, y: 320, w: 50, h: 50 },
      'chair-2': { kind: 'chair', x: 400, y: 200, w: 50, h: 50 },
      'lamp': { kind: 'lamp', x: 480, y: 60, w: 40, h: 40 },
    } as Record<string, { kind: string; x: number; y: number; w: number; h: number }>,
  },
  ops: {
    move(s, a: { id: string; x: number; y: number }) {
      const it = s.items[a.id];
      if (!it) throw new Error(`no item ${a.id}`);
      it.x = Math.round(a.x);
      it.y = Math.round(a.y);
    },
  },
  schemas: {
    move: type({ id: '0 < string <= 64', x: '-100000 <= number <= 100000', y: '-100000 <= number <= 100000' }),
  },
  presence,
});

/** Chat: a shared log of messages. */
export const chat = defineMachine({
  name: 'chat',
  version: 1,
  initial: { messages: [] as { id: string; author: string; text: string }[] },
  ops: {
    say(s, a: { text: string }, ctx) {
      const text = String(a.text ?? '').slice(0, 2000);
      if (text.trim() === '') throw new Error('empty message');
      s.messages.push({ id: `${ctx.client}:${ctx.seq}`, author: ctx.author, text });
    },
  },
  schemas: {
    say: type({ text: '0 < string <= 2000' }),
  },
  presence,
});

/**
 * Spreadsheet: a grid of cells. `cursors` and `moveCursor` are no longer used: the web app shows
 * cursors through presence (no log entry, no fsync, gone when the user goes). They stay because
 * rooms stored at version 1 hold moveCursor entries and this shape; dropping them means a new
 * version and a migration (issue 16).
 */
const ROWS = 12,
  COLS = 6;
export const spreadsheet = defineMachine({
  name: 'spreadsheet',
  version: 1,
  initial: {
    cells: Array.from({ length: ROWS }, () => Array.from({ length: COLS }, () => '')),
    cursors: {} as Record<string, { row: number; col: number }>,
  },
  ops: {
    setCell(s, a: { row: number; col: number; text: string }) {
      if (!(a.row >= 0 && a.row < ROWS && a.col >= 0 && a.col < COLS)) throw new Error(`no cell ${a.row},${a.col}`);
      s.cells[a.row][a.col] = String(a.text).slice(0, 200);
    },
    moveCursor(s, a: { row: number; col: number }, ctx) {
      s.cursors[ctx.author] = { row: Math.max(0, Math.min(ROWS - 1, a.row)), col: Math.max(0, Math.min(COLS - 1, a.col)) };
    },
  },
  schemas: {
    setCell: type({ row: `0 <= number.integer < ${ROWS}`, col: `0 <= number.integer < ${COLS}`, text: 'string <= 10000' }),
    moveCursor: type({ row: `0 <= number.integer < ${ROWS}`, col: `0 <= number.integer < ${COLS}` }),
  },
  presence,
});

/** A character of the document as a caret's end: `[client, clock]`, or null for the start. */
const place = type(['string <= 64', 'number.integer >= 0']).or('null');

/**
 * Document: a rich text (issue 38) that everyone edits at once, through @hercules/prosemirror.
 * Its presence holds the name and colour and the caret (`@hercules/prosemirror`'s cursor, under
 * `caret`: the sheet's `cursor` is a cell).
 */
export const notesDoc = defineMachine({
  name: 'document',
  version: 1,
  initial: { doc: createRichText() },
  ops: { ...textOps(), ...richTextOps() },
  presence: type({
    'name?': '0 < string <= 64',
    'color?': '0 < string <= 32',
    'caret?': type({ path: 'string <= 256', anchor: place, head: place, 'name?': 'string <= 64', 'color?': 'string <= 32' }).or('null'),
  }),
});

/** The paper's benchmark app (§7): a byte array, an op increments some of its elements. */
export const byteArray = defineMachine({
  name: 'byte-array',
  version: 1,
  initial: { chunks: Array.from({ length: 100 }, () => Array.from({ length: 1000 }, () => 0)) },
  ops: {
    increment(s, a: { offset: number; count: number }) {
      // Each touched chunk is copied once and written back whole: 500 element writes through the
      // draft's proxies cost about 0.5 ms, this about 12 µs (see `current`).
      const n = s.chunks.length;
      const total = n * 1000;
      const copies = new Map<number, number[]>();
      for (let i = 0; i < a.count; ) {
        const k = (a.offset + i) % total;
        const j = Math.floor(k / 1000);
        let c = copies.get(j);
        if (!c) copies.set(j, (c = Array.from(current(s.chunks[j]))));
        // The run of increments that stays inside chunk j.
        const end = Math.min(1000, (k % 1000) + (a.count - i));
        for (let e = k % 1000; e < end; e++, i++) c[e] = (c[e] + 1) & 0xff;
      }
      for (const [j, c] of copies) s.chunks[j] = Object.freeze(c) as number[];
    },
  },
  // Without the bound on count, one op could keep the server busy for hours.
  schemas: {
    increment: type({ offset: '0 <= number.integer < 100000', count: '0 <= number.integer <= 100000' }),
  },
});
