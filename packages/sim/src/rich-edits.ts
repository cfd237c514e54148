/**
 * The simulator's rich-text workload (issue 38; docs/spec.md, RICH-*): the ops a ProseMirror
 * editor bound by @hercules/prosemirror sends, without the editor. Typing, block splits (a `\n`,
 * sometimes with the new block's attributes, as splitting a heading or a list item gives) and
 * joins (a separator deleted), deletes across blocks, block types (paragraph, heading, lists)
 * and marks (bold, italic, links, and their removal) over random spans, from several clients
 * against their Submitted view, under every fault the simulator makes.
 *
 * As the binding does (ops.ts): characters through `room.text()` at `['rich', 'text']`, indexes
 * from 1 (the first block's separator, index 0, is never deleted nor typed before), marks and
 * blocks naming characters by id. Ids are read with the text's public readers (textPlaceAt),
 * never its chunks, whose layout may change.
 */
import { textIndexOf, textNextClock, textPlaceAt, textToString, type OpHandle, type Text } from '@hercules/core';
import { RICH_BLOCK, RICH_FORMAT, type BlockAttrs, type CharId, type MarkSpan, type RichText } from '@hercules/prosemirror/ops';
import type { Rng } from './rng.ts';

/** Where the rich text is in the state, and its characters. */
export const RICH_PATH = 'rich';
export const RICH_TEXT_PATH = ['rich', 'text'] as const;

/** What the workload needs of a client's room. */
export interface RichRoom {
  readonly clientId: string;
  getState(view: 'submitted'): { rich: RichText };
  submit(name: string, args?: unknown): OpHandle;
  text(path: readonly (string | number)[]): {
    insert(index: number, s: string): OpHandle | undefined;
    delete(index: number, length: number): OpHandle | undefined;
  };
  textClockFloor(): number;
}

/** Block attributes as the binding writes them (convert.ts): heading level, lists, a list item's continuation. */
const BLOCKS: readonly (BlockAttrs | null)[] = [null, { h: 1 }, { h: 2 }, { l: 'b' }, { l: 'o' }, { l: 'bo' }, { l: 'b', c: true }, { h: 3, l: 'o' }];

/** The id of the character at visible index `i` (the place after it names it). */
const idAt = (t: Text, i: number): CharId => textPlaceAt(t, i + 1) as CharId;

/**
 * One client's editor. A test replaces a method on the prototype to plant a binding's bug
 * (sim.test.ts), as other tests patch the engine's.
 */
export class RichEditor {
  /** The id of the last character each client typed: typing goes on after it (TEXT-NO-INTERLEAVE). */
  private readonly typed = new Map<string, number>();
  private links = 0;

  constructor(private readonly r: Rng) {}

  /** The first visible index an edit may touch: the binding never deletes or types before the first block's separator. */
  first(): number {
    return 1;
  }

  /**
   * One random edit by `room`'s client: what kind of edit it was. `submitted` hears of each op
   * right after its submit returns (VIEW-SUBMIT-NOW reads the Submitted view then).
   */
  edit(room: RichRoom, submitted: (h: OpHandle) => void): string {
    const roll = this.r.int(0, 99);
    const done = (h: OpHandle | undefined) => {
      if (h) submitted(h);
      return h;
    };
    if (roll < 35) return this.type(room, done);
    if (roll < 45) return this.split(room, done);
    if (roll < 60) return this.remove(room, done);
    if (roll < 65) return this.join(room, done);
    if (roll < 78) return this.block(room, done);
    return this.format(room, done);
  }

  private t(room: RichRoom): Text {
    return room.getState('submitted').rich.text;
  }

  /** Insert `s` at `at`; the clock its first character takes (read before: the insert moves the floor past it). */
  private insert(room: RichRoom, at: number, s: string): { h: OpHandle | undefined; k: number } {
    const k = Math.max(textNextClock(this.t(room), room.clientId), room.textClockFloor());
    const h = room.text([...RICH_TEXT_PATH]).insert(at, s);
    return { h, k };
  }

  private type(room: RichRoom, done: Done): string {
    const t = this.t(room);
    const last = this.typed.get(room.clientId);
    const after = last !== undefined && this.r.chance(0.6) ? textIndexOf(t, room.clientId, last) : -1;
    const at = after >= 0 ? after + 1 : this.r.int(this.first(), t.len);
    const word = `${room.clientId.slice(1)}${'xyzw'.slice(0, this.r.int(1, 3))}`;
    const { h, k } = this.insert(room, at, word);
    done(h);
    this.typed.set(room.clientId, k + word.length - 1);
    return 'rich-type';
  }

  /** A block split: a separator, and now and then the new block's attributes (a heading split, a new list item). */
  private split(room: RichRoom, done: Done): string {
    const at = this.r.int(this.first(), this.t(room).len);
    const { h, k } = this.insert(room, at, '\n');
    if (done(h) && this.r.chance(0.5)) done(room.submit(RICH_BLOCK, { p: RICH_PATH, b: [room.clientId, k], a: this.r.pick(BLOCKS) }));
    return 'rich-split';
  }

  /** A delete of 1 to 4 characters, separators among them or not (a join when one is). */
  private remove(room: RichRoom, done: Done): string {
    const len = this.t(room).len;
    if (len <= this.first()) return this.type(room, done);
    const at = this.r.int(this.first(), len - 1);
    done(room.text([...RICH_TEXT_PATH]).delete(at, Math.min(len - at, this.r.int(1, 4))));
    return 'rich-delete';
  }

  /** Two blocks joined: a separator other than the first deleted. */
  private join(room: RichRoom, done: Done): string {
    const seps = separatorIndexes(this.t(room), this.first());
    if (seps.length === 0) return this.split(room, done);
    done(room.text([...RICH_TEXT_PATH]).delete(this.r.pick(seps), 1));
    return 'rich-join';
  }

  /** A block's type: the attributes of a random block (the first one's too). */
  private block(room: RichRoom, done: Done): string {
    const t = this.t(room);
    const seps = separatorIndexes(t, 0);
    if (seps.length === 0) return this.split(room, done);
    done(room.submit(RICH_BLOCK, { p: RICH_PATH, b: idAt(t, this.r.pick(seps)), a: this.r.pick(BLOCKS) }));
    return 'rich-block';
  }

  /** A mark set or removed over a random span (within a block or across several). */
  private format(room: RichRoom, done: Done): string {
    const t = this.t(room);
    if (t.len <= this.first()) return this.type(room, done);
    const i = this.r.int(this.first(), t.len - 1);
    const j = Math.min(t.len - 1, i + this.r.int(0, 12));
    const m = this.r.pick(['strong', 'strong', 'em', 'link']);
    // A link's attributes as the schema reads them back (convert.ts: markValue), so it round-trips.
    const v: MarkSpan['v'] = this.r.chance(0.3) ? null : m === 'link' ? { href: `https://x.test/${++this.links}`, title: null } : true;
    const args = { p: RICH_PATH, m, v, s: [...idAt(t, i), i], e: [...idAt(t, j), j] };
    done(room.submit(RICH_FORMAT, args));
    return v === null ? 'rich-unmark' : 'rich-mark';
  }
}

/** Hears of one op just submitted (none: the edit submitted nothing); gives it back. */
type Done = (h: OpHandle | undefined) => OpHandle | undefined;

/** The visible indexes of the separators from `from` on. */
function separatorIndexes(t: Text, from: number): number[] {
  const s = textToString(t);
  const out: number[] = [];
  for (let i = s.indexOf('\n', from); i >= 0; i = s.indexOf('\n', i + 1)) out.push(i);
  return out;
}
