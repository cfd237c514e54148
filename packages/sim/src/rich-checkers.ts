/**
 * The checkers of the rich text (issue 38; docs/spec.md, RICH-*). The simulator's machine holds
 * a rich text, `rich` (@hercules/prosemirror's model), that clients edit as the ProseMirror
 * binding does (rich-edits.ts). These read it as the binding reads it (`flatOf`, then
 * `flatToDoc` for the document the editor would show) in the reference fold of the global log
 * and in every live client's views, and hold the reading to references of their own built from
 * the ordered ops: every block op and every span ever ordered, none dropped.
 *
 * The references read the text through its public readers only (textToString, textIndexOf,
 * textPlaceIndex, textPlaceAt), never its chunks, so a change of the text's layout in the state
 * (TEXT-LAYOUT) leaves them as they are.
 */
import { VIEWS, textIndexOf, textPlaceAt, textPlaceIndex, textToString, type LogEntry, type Text } from '@hercules/core';
import { docToFlat, flatOf, flatToDoc, schema, type Flat, type MarkValue } from '@hercules/prosemirror';
import type { BlockAttrs, CharId, RichBlockArgs, RichFormatArgs, RichText } from '@hercules/prosemirror/ops';
import type { Checker, SimState } from './checkers.ts';

/** The rich text of a state, if it holds one. */
export const richOf = (st: unknown): RichText | undefined => (st as { rich?: RichText } | undefined)?.rich;

/**
 * A value compared by content, keys sorted: a block's attributes or a mark's value (null, absent
 * and `{}` for a block alike). Read per character of every snapshot: the key of an object is kept
 * per object (the states' values are frozen and shared between snapshots).
 */
const canons = new WeakMap<object, string>();
function canon(v: unknown, emptyIsNull = false): string {
  if (v === null || v === undefined) return 'null';
  if (v === true) return 'true';
  if (typeof v !== 'object') return JSON.stringify(v);
  if (emptyIsNull && Object.keys(v).length === 0) return 'null';
  let k = canons.get(v);
  if (k === undefined) canons.set(v, (k = JSON.stringify(sorted(v))));
  return k;
}
function sorted(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, sorted(o[k])]),
  );
}
const blockKey = (a: BlockAttrs | null | undefined): string => canon(a, true);

/** Each mark's non-null runs `[from, to, value]`, by mark name (sorted); a mark on no character has none. */
function markRuns(flat: Flat): string {
  const out: [string, [number, number, string][]][] = [];
  for (const m of [...flat.marks.keys()].sort()) {
    const vals = flat.marks.get(m)!;
    const runs: [number, number, string][] = [];
    for (let i = 0; i < flat.text.length; i++) {
      const k = canon(vals[i]);
      if (k === 'null') continue;
      const r = runs.at(-1);
      if (r && r[1] === i && r[2] === k) r[1] = i + 1;
      else runs.push([i, i + 1, k]);
    }
    if (runs.length > 0) out.push([m, runs]);
  }
  return JSON.stringify(out);
}

/** A rich text as the binding reads it, and a key equal exactly for equal readings. */
interface Reading {
  readonly flat: Flat;
  readonly key: string;
}
const readings = new WeakMap<object, Reading>();
export function readingOf(rich: RichText): Reading {
  const hit = readings.get(rich);
  if (hit !== undefined) return hit;
  const flat = flatOf(rich);
  const r = { flat, key: JSON.stringify([flat.text, flat.blocks.map((b) => blockKey(b))]) + markRuns(flat) };
  if (Object.isFrozen(rich)) readings.set(rich, r);
  return r;
}

/**
 * What makes a reading no valid document, or undefined: the text opens with the first block's
 * separator, a block per separator, and the document the binding builds from it (`flatToDoc`)
 * passes the schema's check, shows the same characters and marks, and reads back as itself.
 * (Its blocks may read back otherwise: concurrent block ops can leave attributes no document
 * has, such as a list item's continuation whose list went; the document shows them as it can.)
 */
export function invalidity(flat: Flat): string | undefined {
  if (!flat.text.startsWith('\n')) return `its text does not open with a block's separator: ${JSON.stringify(flat.text.slice(0, 24))}`;
  let seps = 0;
  for (let i = flat.text.indexOf('\n'); i >= 0; i = flat.text.indexOf('\n', i + 1)) seps++;
  if (flat.blocks.length !== seps) return `${seps} separators but ${flat.blocks.length} blocks`;
  let doc: ReturnType<typeof flatToDoc>;
  try {
    doc = flatToDoc(schema, flat);
    doc.check();
  } catch (e) {
    return `the document built from it fails the schema: ${(e as Error).message}`;
  }
  const back = docToFlat(doc);
  if (back.text !== flat.text) return `the document shows ${JSON.stringify(back.text)}, the state reads ${JSON.stringify(flat.text)}`;
  if (markRuns(back) !== markRuns(flat)) return `the document shows the marks ${markRuns(back)}, the state reads ${markRuns(flat)}`;
  if (!flatToDoc(schema, back).eq(doc)) return 'the document does not read back as itself';
  return undefined;
}

/** Where two readings first differ, in words. */
function difference(a: Flat, b: Flat): string {
  if (a.text !== b.text) return `the characters ${JSON.stringify(a.text)} against ${JSON.stringify(b.text)}`;
  const j = a.blocks.findIndex((x, i) => blockKey(x) !== blockKey(b.blocks[i]));
  if (j >= 0) return `block ${j}'s attributes ${blockKey(a.blocks[j])} against ${blockKey(b.blocks[j])}`;
  return `the marks ${markRuns(a)} against ${markRuns(b)}`;
}

/** The rich text of the reference fold at its head, checked by `check` once per new head where it changed. */
function onRichHead(check: (s: SimState, rich: RichText, pos: number) => void) {
  let checked = -1;
  let last: RichText | undefined;
  return (s: SimState) => {
    const n = s.global.length;
    if (n === checked) return;
    checked = n;
    const rich = richOf(s.oracle[n]);
    if (rich === undefined || rich === last) return;
    last = rich;
    check(s, rich, n);
  };
}

const idKey = (id: readonly [string, number, ...unknown[]]): string => `${id[0]}:${id[1]}`;

/** The visible separators of `t` in order, each with its id (public readers: the string, then the id at each index). */
function separators(t: Text): string[] {
  const s = textToString(t);
  const out: string[] = [];
  for (let i = s.indexOf('\n'); i >= 0; i = s.indexOf('\n', i + 1)) out.push(idKey(textPlaceAt(t, i + 1)!));
  return out;
}

/**
 * The visible characters `[from, to)` a span from `s` to `e` (in the full order, deleted
 * characters included) lies around: from the first visible character at or after `s` to the last
 * at or before `e`. Null when the text holds either end nowhere.
 */
function spanRange(t: Text, s: CharId, e: CharId): [number, number] | null {
  const si = textIndexOf(t, s[0], s[1]);
  // A deleted end: textPlaceIndex gives the visible characters before its tombstone.
  const from = si >= 0 ? si : textPlaceIndex(t, [s[0], s[1]]);
  const to = textPlaceIndex(t, [e[0], e[1]]);
  return from < 0 || to < 0 ? null : [from, to];
}

/** An ordered span, with its position in the log. */
interface Span {
  readonly m: string;
  readonly v: MarkValue;
  readonly s: CharId;
  readonly e: CharId;
  readonly pos: number;
}

export const RICH_CHECKERS: readonly Checker[] = [
  {
    rule: 'RICH-CONVERGE',
    description:
      "every live client's rich text reads, in each view, as a valid document (the ProseMirror document the binding builds passes the schema and reads back as the state), in the Authoritative, Visible and Stable views as the reference fold's at that position, and once the run settles every view of every client reads as the server's",
    create: (fail) => {
      /** Each reading met, by key: what makes it no valid document (undefined: valid). */
      const checked = new Map<string, string | undefined>();
      const valid = (who: string, rich: RichText) => {
        const r = readingOf(rich);
        if (!checked.has(r.key)) checked.set(r.key, invalidity(r.flat));
        const problem = checked.get(r.key);
        if (problem !== undefined) fail(`${who} reads no valid document: ${problem}`);
      };
      const head = onRichHead((_s, rich, pos) => valid(`the log's fold at ${pos}`, rich));
      return {
        step(s, st) {
          head(s);
          for (const l of st.live) {
            if (l.unchanged) continue;
            for (const v of VIEWS) {
              const got = richOf(l.views[v]);
              if (got === undefined) continue;
              valid(`${l.c.id}'s ${v} view`, got);
              if (v === 'submitted' || v === 'durable') continue;
              const want = richOf(s.oracle[l.p[v]]);
              if (want !== undefined && readingOf(got).key !== readingOf(want).key)
                fail(`${l.c.id}'s ${v} view at ${l.p[v]} reads otherwise than the log's fold there: ${difference(readingOf(got).flat, readingOf(want).flat)}`);
            }
          }
        },
        end(s, timedOutMs) {
          if (timedOutMs !== undefined || !s.serverUp) return;
          const want = richOf(s.server.headSnapshot());
          if (want === undefined) return;
          for (const c of s.clients) {
            if (!c.alive || !c.room) continue;
            for (const v of VIEWS) {
              const got = richOf(c.room.getState(v));
              if (got !== undefined && readingOf(got).key !== readingOf(want).key)
                fail(`after the run settled, ${c.id}'s ${v} view reads otherwise than the server's: ${difference(readingOf(got).flat, readingOf(want).flat)}`);
            }
          }
        },
      };
    },
  },
  {
    rule: 'RICH-BLOCK',
    description:
      "in the rich text, the blocks read are the text's visible separators in order, each with the attributes of the last ordered block op naming it (none: a paragraph); a block whose separator was deleted is gone, joined to the one before",
    create: (fail) => {
      /** Each separator's last ordered block op: its attributes and position. */
      const last = new Map<string, { a: BlockAttrs | null; pos: number }>();
      return {
        sequenced(_s, e: LogEntry, reference) {
          if (reference !== undefined || e.name !== 'richBlock') return;
          const a = e.args as RichBlockArgs;
          last.set(idKey(a.b), { a: a.a, pos: e.pos });
        },
        step: onRichHead((_s, rich, pos) => {
          const { flat } = readingOf(rich);
          const text = textToString(rich.text);
          if (flat.text !== text) fail(`at ${pos}, the rich text reads ${JSON.stringify(flat.text)}; its characters are ${JSON.stringify(text)}`);
          const seps = separators(rich.text);
          if (flat.blocks.length !== seps.length) fail(`at ${pos}, the rich text reads ${flat.blocks.length} blocks; it has ${seps.length} separators`);
          seps.forEach((id, j) => {
            const want = last.get(id);
            if (blockKey(flat.blocks[j]) !== blockKey(want?.a))
              fail(
                `at ${pos}, block ${j} (separator ${id}) reads ${blockKey(flat.blocks[j])}; ${want ? `the last block op naming it, at ${want.pos}, set ${blockKey(want.a)}` : 'no block op named it (a paragraph)'}`,
              );
          });
        }),
      };
    },
  },
  {
    rule: 'RICH-MARK',
    description:
      "in the rich text, each character's value for a mark is that of the last ordered span of that mark whose ends lie around it in the text's full order (deleted characters included), whatever was typed between the ends later; separators carry none",
    create: (fail) => {
      /** Every span ordered (none dropped), in log order. */
      const spans: Span[] = [];
      return {
        sequenced(_s, e: LogEntry, reference) {
          if (reference !== undefined || e.name !== 'richFormat') return;
          const a = e.args as RichFormatArgs;
          spans.push({ m: a.m, v: a.v, s: [a.s[0], a.s[1]], e: [a.e[0], a.e[1]], pos: e.pos });
        },
        step: onRichHead((_s, rich, pos) => {
          const t = rich.text;
          const text = textToString(t);
          // Each character's value for each mark, and the position of the span that set it.
          const want = new Map<string, { v: MarkValue; by: number }[]>();
          for (const sp of spans) {
            const r = spanRange(t, sp.s, sp.e);
            if (r === null)
              return fail(`at ${pos}, the span of ${sp.m} ordered at ${sp.pos} names ${idKey(sp.s)}..${idKey(sp.e)}, which the text does not hold`);
            let vals = want.get(sp.m);
            if (vals === undefined) want.set(sp.m, (vals = Array.from({ length: text.length }, () => ({ v: null, by: 0 }))));
            for (let i = r[0]; i < r[1]; i++) if (text[i] !== '\n') vals[i] = { v: sp.v, by: sp.pos };
          }
          const { flat } = readingOf(rich);
          for (const m of new Set([...want.keys(), ...flat.marks.keys()]))
            for (let i = 0; i < text.length; i++) {
              const w = want.get(m)?.[i] ?? { v: null, by: 0 };
              const got = flat.marks.get(m)?.[i] ?? null;
              if (got !== w.v && canon(got) !== canon(w.v))
                fail(
                  `at ${pos}, character ${i} (${idKey(textPlaceAt(t, i + 1)!)}, ${JSON.stringify(text[i])}) reads ${m} ${canon(got)}; ${w.by ? `the last span of ${m} around it, ordered at ${w.by}, set ${canon(w.v)}` : `no span of ${m} lies around it`}`,
                );
            }
        }),
      };
    },
  },
];
