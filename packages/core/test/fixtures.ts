import { defineMachine } from '../src/index.ts';

export interface Furniture {
  x: number;
  y: number;
}
export const room = defineMachine({
  name: 'test-room',
  version: 1,
  initial: { items: {} as Record<string, Furniture>, notes: [] as string[] },
  ops: {
    add(s, a: { id: string; x: number; y: number }) {
      if (s.items[a.id]) throw new Error(`item ${a.id} exists`);
      s.items[a.id] = { x: a.x, y: a.y };
    },
    move(s, a: { id: string; x: number; y: number }) {
      const it = s.items[a.id];
      if (!it) throw new Error(`no item ${a.id}`);
      it.x = a.x;
      it.y = a.y;
    },
    note(s, a: { text: string }, ctx) {
      s.notes.push(`${ctx.author}@${ctx.position}: ${a.text}`);
    },
    clear(s) {
      s.notes = [];
    },
  },
});
