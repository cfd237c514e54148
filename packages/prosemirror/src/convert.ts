/**
 * A ProseMirror document and the flat form (flat.ts), both ways, and positions between them.
 *
 * A block's attributes: `h` its heading level (absent: a paragraph); `l` the lists it is in,
 * outermost first, one letter each (`b` bullet, `o` ordered; absent: in none); `c` true when it
 * continues the list item of the block before it rather than starting an item. Two lists of one
 * kind next to each other read as one (ProseMirror joins them too).
 */
import { Fragment, Mark, type Node, type Schema } from 'prosemirror-model';
import { keyOf, type Flat, type MarkValue } from './flat.ts';
import type { BlockAttrs } from './rich.ts';

const KINDS: Record<string, string> = { bullet_list: 'b', ordered_list: 'o' };
const LISTS: Record<string, string> = { b: 'bullet_list', o: 'ordered_list' };

function attrsOf(block: Node, lists: string, cont: boolean): BlockAttrs {
  const a: Record<string, unknown> = {};
  if (block.type.name === 'heading') a.h = block.attrs.level;
  if (lists !== '') a.l = lists;
  if (cont) a.c = true;
  return a;
}

const markValue = (m: Mark): MarkValue => (Object.keys(m.type.spec.attrs ?? {}).length > 0 ? { ...m.attrs } : true);

/** The flat form of a document (memoised: the document before an edit is the one after the last). */
const flats = new WeakMap<Node, Flat>();
export function docToFlat(doc: Node): Flat {
  const hit = flats.get(doc);
  if (hit !== undefined) return hit;
  const flat = readFlat(doc);
  flats.set(doc, flat);
  return flat;
}

/** The flat form of the document's top-level nodes `from..to` (all by default). */
export function readFlat(doc: Node, from = 0, to = doc.childCount): Flat {
  let text = '';
  const blocks: BlockAttrs[] = [];
  const ranges: [name: string, from: number, to: number, v: MarkValue][] = [];
  const visit = (parent: Node, lists: string, inItem: boolean, start = 0, end = parent.childCount): void => {
    for (let index = start; index < end; index++) {
      const child = parent.child(index);
      const kind = KINDS[child.type.name];
      if (kind !== undefined)
        child.forEach((item) => {
          visit(item, lists + kind, true);
        });
      else if (child.isTextblock) {
        blocks.push(attrsOf(child, lists, inItem && index > 0));
        text += '\n';
        child.forEach((leaf) => {
          // The schema has no inline leaf but text; another's would take one character.
          const s = leaf.isText ? leaf.text! : '\ufffc';
          for (const m of leaf.marks) ranges.push([m.type.name, text.length, text.length + s.length, markValue(m)]);
          text += s;
        });
      }
    }
  };
  visit(doc, '', false, from, to);
  const marks = new Map<string, MarkValue[]>();
  for (const [name, from, to, v] of ranges) {
    let vals = marks.get(name);
    if (vals === undefined) marks.set(name, (vals = new Array<MarkValue>(text.length).fill(null)));
    vals.fill(v, from, to);
  }
  return { text, blocks, marks };
}

/**
 * How many flat characters a node reads as, as `readFlat` reads it: a textblock its separator and
 * its inline content, a list its items' blocks, anything else none. Memoised per node (nodes are
 * immutable and an edit keeps the untouched ones), so the flat index of a top-level node costs
 * O(top-level nodes before it), not O(characters).
 */
const lengths = new WeakMap<Node, number>();
export function flatLength(node: Node): number {
  const hit = lengths.get(node);
  if (hit !== undefined) return hit;
  let n = 0;
  if (KINDS[node.type.name] !== undefined)
    node.forEach((item) => {
      item.forEach((child) => {
        n += flatLength(child);
      });
    });
  else if (node.isTextblock) {
    n = 1;
    node.forEach((leaf) => {
      n += leaf.isText ? leaf.text!.length : 1;
    });
  }
  lengths.set(node, n);
  return n;
}

/** The marks on character `i` of `flat`, as ProseMirror marks (unknown names and bad attributes dropped). */
function marksAt(schema: Schema, flat: Flat, i: number, cache: Map<string, Mark | null>): readonly Mark[] {
  const out: Mark[] = [];
  for (const [name, vals] of flat.marks) {
    const v = vals[i];
    if (v === null || v === undefined) continue;
    const key = `${name} ${keyOf(v)}`;
    let mark = cache.get(key);
    if (mark === undefined) {
      const type = schema.marks[name];
      try {
        mark = type === undefined ? null : type.create(v === true ? null : v);
      } catch {
        mark = null; // attributes the schema refuses (another app's state): shown unmarked
      }
      cache.set(key, mark);
    }
    if (mark !== null) out.push(mark);
  }
  return Mark.setFrom(out);
}

/** The inline content of the characters `from..to` of `flat`, a text node per run of equal marks. */
function inline(schema: Schema, flat: Flat, from: number, to: number, cache: Map<string, Mark | null>): Node[] {
  const out: Node[] = [];
  let start = from;
  let marks = marksAt(schema, flat, from, cache);
  for (let i = from + 1; i <= to; i++) {
    const next = i < to ? marksAt(schema, flat, i, cache) : null;
    if (next !== null && Mark.sameSet(next, marks)) continue;
    if (i > start) out.push(schema.text(flat.text.slice(start, i), marks));
    start = i;
    if (next !== null) marks = next;
  }
  return out;
}

function textblock(schema: Schema, a: BlockAttrs, content: Node[]): Node {
  const h = a.h;
  if (typeof h === 'number' && Number.isInteger(h) && h >= 1 && h <= 6 && schema.nodes.heading) return schema.nodes.heading.create({ level: h }, content);
  return schema.nodes.paragraph.create(null, content);
}

/** Open lists while building: each with the children of its items, the last item open. */
interface Level {
  kind: string;
  items: Node[][];
}

/** The document of a flat form (blocks grouped into lists by their attributes). */
export function flatToDoc(schema: Schema, flat: Flat): Node {
  const top: Node[] = [];
  const stack: Level[] = [];
  const cache = new Map<string, Mark | null>();
  const close = () => {
    const lvl = stack.pop()!;
    const items = lvl.items.map((children) => schema.nodes.list_item.create(null, children));
    const list = schema.nodes[LISTS[lvl.kind]].create(null, items);
    (stack.length > 0 ? stack[stack.length - 1].items.at(-1)! : top).push(list);
  };
  // A text that does not open with a separator (not one this binding wrote) starts with a paragraph.
  const lead = flat.text.startsWith('\n') ? 0 : 1;
  let from = 1 - lead;
  for (let b = 0; ; b++) {
    const end = flat.text.indexOf('\n', from);
    const to = end < 0 ? flat.text.length : end;
    const a = b < lead ? {} : (flat.blocks[b - lead] ?? {});
    const l = typeof a.l === 'string' ? a.l.replace(/[^bo]/g, '') : '';
    let k = 0;
    while (k < stack.length && k < l.length && stack[k].kind === l[k]) k++;
    while (stack.length > k) close();
    if (k === l.length && k > 0 && a.c !== true) stack[k - 1].items.push([]);
    for (let d = k; d < l.length; d++) stack.push({ kind: l[d], items: [[]] });
    const node = textblock(schema, a, inline(schema, flat, from, to, cache));
    (stack.length > 0 ? stack[stack.length - 1].items.at(-1)! : top).push(node);
    if (end < 0) break;
    from = end + 1;
  }
  while (stack.length > 0) close();
  return schema.nodes.doc.create(null, Fragment.from(top));
}

/** Whether two flat forms are the same document. */
export function sameFlat(a: Flat, b: Flat): boolean {
  if (a.text !== b.text || a.blocks.length !== b.blocks.length) return false;
  for (let i = 0; i < a.blocks.length; i++) if (keyOf(a.blocks[i]) !== keyOf(b.blocks[i])) return false;
  for (const name of new Set([...a.marks.keys(), ...b.marks.keys()])) {
    const x = a.marks.get(name);
    const y = b.marks.get(name);
    for (let i = 0; i < a.text.length; i++) if (keyOf(x?.[i] ?? null) !== keyOf(y?.[i] ?? null)) return false;
  }
  return true;
}

/**
 * Positions of a document and indexes of its flat text: block `j`'s separator is at flat index
 * `seps[j]`, its content starts at document position `starts[j]` and holds `sizes[j]` characters.
 */
export class Positions {
  readonly starts: number[] = [];
  readonly sizes: number[] = [];
  readonly seps: number[] = [];

  constructor(doc: Node) {
    let flat = 0;
    doc.descendants((node, pos) => {
      if (!node.isTextblock) return true;
      this.starts.push(pos + 1);
      this.sizes.push(node.content.size);
      this.seps.push(flat);
      flat += 1 + node.content.size;
      return false;
    });
  }

  /** The last block `j` with `xs[j] <= v` (0 when none). */
  static #last(xs: readonly number[], v: number): number {
    let lo = 0;
    let hi = xs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (xs[mid] <= v) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The document position of flat index `i`: right after the character before it. */
  toPos(i: number): number {
    if (i <= 0 || this.starts.length === 0) return this.starts[0] ?? 0;
    const j = Positions.#last(this.seps, i - 1);
    return this.starts[j] + Math.min(i - 1 - this.seps[j], this.sizes[j]);
  }

  /** The flat index of document position `pos` (a position between blocks: the nearest in a block). */
  toFlat(pos: number): number {
    if (this.starts.length === 0) return 0;
    const j = Positions.#last(this.starts, pos);
    return this.seps[j] + 1 + Math.min(Math.max(pos - this.starts[j], 0), this.sizes[j]);
  }
}
