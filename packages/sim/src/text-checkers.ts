/**
 * The checkers of the collaborative text (issue 38; docs/spec.md, TEXT-*). The simulator's
 * machine holds a text, `doc`, that clients edit through `room.text('doc')` at random places and
 * in bursts at one place, under every fault the simulator makes; these read its `doc` in the
 * reference fold of the global log and in every live client's views. The rich text's characters
 * (`rich.text`, rich-edits.ts) are a text too: TEXT-INTACT, TEXT-ID-ONCE and TEXT-NO-INTERLEAVE
 * hold each text to them, by its path (a client's clocks are its own in each text).
 */
import {
  VIEWS,
  compactText,
  textLongArgs,
  textRunLeft,
  textRunSize,
  textRunText,
  textToString,
  type LogEntry,
  type Text,
  type TextInsertArgs,
} from '@hercules/core';
import type { Checker, SimState } from './checkers.ts';

/** The characters of `t` in order, tombstones included: id, left origin, and the character or null (deleted). */
function flatten(t: Text): { ids: string[]; left: (string | null)[]; chars: (string | null)[] } {
  const ids: string[] = [];
  const left: (string | null)[] = [];
  const chars: (string | null)[] = [];
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const [c, k] = r;
      const s = textRunText(r);
      const l = textRunLeft(r);
      for (let i = 0; i < textRunSize(r); i++) {
        ids.push(`${t.clients[c]}:${k + i}`);
        left.push(i > 0 ? `${t.clients[c]}:${k + i - 1}` : l === null ? null : `${t.clients[l[0]]}:${l[1]}`);
        chars.push(s !== undefined ? s[i] : null);
      }
    }
  return { ids, left, chars };
}

/** The texts of a state by path key (`doc`, `rich.text`): those it holds. */
function textsOf(st: unknown): [path: string, t: Text][] {
  const s = st as { doc?: Text; rich?: { text?: Text } } | undefined;
  const out: [string, Text][] = [];
  if (s?.doc) out.push(['doc', s.doc]);
  if (s?.rich?.text) out.push(['rich.text', s.rich.text]);
  return out;
}

/** The key of a text op's path (`p`): its keys joined by dots. */
const pathKey = (p: unknown): string => (typeof p === 'string' ? p : Array.isArray(p) ? p.join('.') : String(p));

/**
 * Each text of the reference fold at its head, checked by `check` once per new head; with
 * `changed`, only where it changed (for a check that reads the text alone: a text no op touched
 * is the same snapshot, checked already).
 */
function onNewHead(check: (s: SimState, doc: Text, pos: number, path: string) => void, changed = false) {
  let checked = -1;
  const last = new Map<string, Text>();
  return (s: SimState) => {
    const n = s.global.length;
    if (n === checked) return;
    checked = n;
    for (const [path, t] of textsOf(s.oracle[n])) {
      if (changed && last.get(path) === t) continue;
      last.set(path, t);
      check(s, t, n, path);
    }
  };
}

export const TEXT_CHECKERS: readonly Checker[] = [
  {
    rule: 'TEXT-CONVERGE',
    description:
      "every live client's text in its Authoritative, Visible and Stable views is the reference fold's at that position, and once the run settles every view of every client shows the server's text",
    create: (fail) => ({
      step(s, st) {
        for (const l of st.live) {
          if (l.unchanged) continue;
          for (const v of ['authoritative', 'visible', 'stable'] as const) {
            const want = (s.oracle[l.p[v]] as { doc?: Text } | undefined)?.doc;
            const got = (l.views[v] as { doc?: Text }).doc;
            if (want && got && textToString(got) !== textToString(want))
              fail(`${l.c.id}'s ${v} text at ${l.p[v]} is ${JSON.stringify(textToString(got))}; the log's is ${JSON.stringify(textToString(want))}`);
          }
        }
      },
      end(s, timedOutMs) {
        if (timedOutMs !== undefined || !s.serverUp) return;
        const head = (s.server.headSnapshot() as { doc?: Text }).doc;
        if (!head) return;
        const want = textToString(head);
        for (const c of s.clients) {
          if (!c.alive || !c.room) continue;
          for (const v of VIEWS) {
            const got = textToString((c.room.getState(v) as { doc: Text }).doc);
            if (got !== want) fail(`after the run settled, ${c.id}'s ${v} text is ${JSON.stringify(got)}; the server's is ${JSON.stringify(want)}`);
          }
        }
      },
    }),
  },
  {
    rule: 'TEXT-INTACT',
    description:
      'every character an ordered insert put in the text is held exactly once, as itself, visible until an ordered delete names it; nothing else is held',
    create: (fail) => {
      /** Per text, each inserted character by id, with the position of its insert; the ids deleted. */
      const insertedIn = new Map<string, Map<string, { ch: string; pos: number }>>();
      const deletedIn = new Map<string, Set<string>>();
      const of = <T>(m: Map<string, T>, path: string, make: () => T): T => {
        let v = m.get(path);
        if (v === undefined) m.set(path, (v = make()));
        return v;
      };
      /** The text each path was last checked in, and the paths an insert or delete named since. */
      const checkedText = new Map<string, Text>();
      const dirty = new Set<string>();
      const check = onNewHead((_s, doc, pos, path) => {
        // The same snapshot, and no op on it ordered since: the last check's verdict stands.
        if (checkedText.get(path) === doc && !dirty.has(path)) return;
        checkedText.set(path, doc);
        dirty.delete(path);
        const { ids, chars } = flatten(doc);
        const seen = new Set<string>();
        const where = path === 'doc' ? 'the text' : `the text ${path}`;
        const inserted = of(insertedIn, path, () => new Map());
        const deleted = of(deletedIn, path, () => new Set());
        ids.forEach((id, i) => {
          if (seen.has(id)) fail(`character ${id} is held twice in ${where} at ${pos}`);
          seen.add(id);
          const want = inserted.get(id);
          if (!want) {
            if (!id.startsWith(':')) fail(`${where} at ${pos} holds ${id}, which no ordered insert put there`);
            return;
          }
          const gone = deleted.has(id);
          if (chars[i] === null ? !gone : gone || chars[i] !== want.ch)
            fail(
              `character ${id} (inserted at ${want.pos}) is ${chars[i] === null ? 'deleted' : JSON.stringify(chars[i])} at ${pos}; expected ${gone ? 'deleted' : JSON.stringify(want.ch)}`,
            );
        });
        for (const [id, w] of inserted) if (!seen.has(id)) fail(`character ${id}, inserted at ${w.pos}, is missing from ${where} at ${pos}`);
      });
      return {
        sequenced(_s, e: LogEntry, reference) {
          if (reference !== undefined) return;
          if (e.name === 'textInsert') {
            const a = e.args as TextInsertArgs;
            dirty.add(pathKey(a.p));
            const inserted = of(insertedIn, pathKey(a.p), () => new Map());
            for (let i = 0; i < a.t.length; i++) inserted.set(`${e.client}:${a.k + i}`, { ch: a.t[i], pos: e.pos });
          } else if (e.name === 'textDelete') {
            // Every range with its client (TEXT-OWN-ID: an own one may leave it out).
            const long = textLongArgs(e.name, e.args, e.client) as { p: unknown; d: readonly (readonly [string, number, number, number])[] };
            dirty.add(pathKey(long.p));
            const deleted = of(deletedIn, pathKey(long.p), () => new Set());
            for (const [c, k, n] of long.d) for (let i = 0; i < n; i++) deleted.add(`${c}:${k + i}`);
          }
        },
        step: check,
      };
    },
  },
  {
    rule: 'TEXT-ID-ONCE',
    description:
      "no insert takes a character id an earlier ordered insert of its client took, across the client's crashes and restarts (a restarted process that lacks ops its earlier one sent starts its clocks past theirs)",
    create: (fail) => {
      /** Per text and client, the lowest clock none of its inserts that ran has taken. */
      const free = new Map<string, number>();
      return {
        sequenced(_s, e: LogEntry, reference) {
          if (e.name !== 'textInsert' || e.refused) return;
          const a = e.args as TextInsertArgs;
          const key = `${pathKey(a.p)}|${e.client}`;
          const from = free.get(key) ?? 0;
          // Even one that threw: a client takes clocks from a view holding every insert of its own
          // ordered before (TEXT-INTACT), so an honest one is never below `from`.
          if (a.k < from)
            fail(
              `${e.client}:${e.seq} (at ${e.pos}) takes clocks from ${a.k}, but its client's inserts ordered before it took every clock below ${from}${reference !== undefined ? ` (it was rejected: ${reference})` : ''}`,
            );
          if (reference === undefined) free.set(key, Math.max(from, a.k + a.t.length));
        },
      };
    },
  },
  {
    rule: 'TEXT-NO-INTERLEAVE',
    description:
      'in the text, everything between a character and its left origin (the character it was typed after) was typed after that origin, never text typed concurrently at another place',
    create: (fail) => ({
      step: onNewHead((_s, doc, pos) => {
        const { ids, left } = flatten(doc);
        const at = new Map(ids.map((id, i) => [id, i]));
        for (let i = 0; i < ids.length; i++) {
          const l = left[i];
          const j = l === null ? -1 : at.get(l);
          if (j === undefined || j >= i) return fail(`at ${pos}, ${ids[i]}'s left origin ${l} is ${j === undefined ? 'missing' : 'after it'}`);
          // Those between descend from the origin: each one's own left origin is among them or the origin.
          for (let m = j + 1; m < i; m++) {
            const lm = left[m] === null ? -1 : at.get(left[m]!)!;
            if (lm < j) fail(`at ${pos}, ${ids[m]} (typed after ${left[m]}) lies between ${ids[i]} and its left origin ${l}: interleaved`);
          }
        }
      }, true),
    }),
  },
];
