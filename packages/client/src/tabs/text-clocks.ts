/**
 * The tabs of a shared client type with one client id, so their text inserts draw clocks from
 * one counter per text (core/text.ts: the characters `[client, k]`, `k` at least the text's
 * `next` of that client). A follower computes an insert's clock on its own Submitted view; if
 * the leader or another tab typed meanwhile, the leader's view has taken those clocks, and the
 * insert would be rejected ("clock was used already"). So the leader moves a follower's insert
 * to the next free clock, and remembers the move, per tab and text, to translate the follower's
 * later ops that name those characters by their old clocks: the ops it computed before it saw
 * the moved insert (requests above the `seen` it sends with each, its view's highest reflected
 * request). Ops computed after that name the characters as the leader's view has them. An
 * insert whose clock was taken fails in the follower's own view until it comes back moved, so
 * an op made meanwhile cannot name its characters: a clock of its old range there is another
 * character's, and is left as it is (the request says which of its tab's requests failed).
 *
 * The next free clock is also at least the leader room's textClockFloor() (TEXT-ID-ONCE): a
 * leader that took over opens the store as a restarted client does, and its view (and so a
 * follower's) may lack inserts the store holds or an earlier leader sent; a follower's insert
 * moves past every clock those can hold, as above.
 */
import { TEXT_DELETE, TEXT_INSERT, textAt, textLongArgs, textNextClock, type TextAnchor, type TextDeleteArgs, type TextInsertArgs } from '@hercules/core';
import type { TabRequest } from './messages.ts';

/** Old clocks `from` to `to` (exclusive) of the characters request `req` inserted are now `+ by`. */
interface Move {
  req: number;
  from: number;
  to: number;
  by: number;
}

export class TextClocks {
  /** By tab, then by the text's path (JSON). */
  readonly #moves = new Map<string, Map<string, Move[]>>();

  /**
   * The arguments to submit for request `r` of `tab`, made on a view that reflected its requests
   * up to `r.seen` and in which those of `r.failed` did not run (so their characters, and their
   * old clocks, were not in it); `state` reads the leader's Submitted view now, `client` is the
   * shared id, `floor` the leader room's textClockFloor().
   */
  rewrite(tab: string, r: TabRequest, state: () => unknown, client: string, floor = 0): unknown {
    const { req, name, args } = r;
    const seen = r.seen ?? 0;
    if (name !== TEXT_INSERT && name !== TEXT_DELETE) return args;
    if (args === null || typeof args !== 'object') return args;
    const key = JSON.stringify((args as { p?: unknown }).p);
    // A tab's requests come in order with `seen` never lower: a move it has seen is done with.
    const live = (this.#moves.get(tab)?.get(key) ?? []).filter((m) => m.req > seen);
    this.#moves.get(tab)?.set(key, live);
    const moves = r.failed ? live.filter((m) => !r.failed!.includes(m.req)) : live;
    // Ids named in full (an own character's may be short, TEXT-OWN-ID), so a moved one is found.
    const long = textLongArgs(name, args, client);
    if (name === TEXT_DELETE) return this.#delete(long as TextDeleteArgs, moves, client);
    const a = long as TextInsertArgs;
    const anchor = (x: TextAnchor | null): TextAnchor | null => (x && x[0] === client ? [client, shift(moves, x[1]), x[2]] : x);
    const out = { ...a, l: anchor(a.l as TextAnchor | null), r: anchor(a.r as TextAnchor | null) };
    const next = nextClock(state(), a, client, floor);
    if (next === undefined || !Number.isSafeInteger(a.k) || typeof a.t !== 'string' || a.k >= next) return out;
    this.#remember(tab, key, { req, from: a.k, to: a.k + a.t.length, by: next - a.k });
    return { ...out, k: next };
  }

  #remember(tab: string, key: string, m: Move): void {
    let byText = this.#moves.get(tab);
    if (!byText) this.#moves.set(tab, (byText = new Map()));
    byText.set(key, [...(byText.get(key) ?? []), m]);
  }

  /** Each range of the follower's own characters, split where its parts moved by different amounts. */
  #delete(a: TextDeleteArgs, moves: readonly Move[], client: string): TextDeleteArgs {
    if (!Array.isArray(a.d) || moves.length === 0) return a;
    const d: (readonly [string, number, number, number])[] = [];
    for (const r of a.d) {
      const range = r as readonly [string, number, number, number];
      const [c, k, n, hint] = range;
      if (c !== client || !Number.isSafeInteger(k) || !Number.isSafeInteger(n)) {
        d.push(range);
        continue;
      }
      for (let at = k, left = n; left > 0; ) {
        const m = moves.find((x) => x.from <= at && at < x.to);
        const end = m ? m.to : Math.min(...moves.map((x) => (x.from > at ? x.from : Number.POSITIVE_INFINITY)));
        const len = Math.min(left, end - at);
        d.push([c, at + (m?.by ?? 0), len, hint]);
        at += len;
        left -= len;
      }
    }
    return { ...a, d };
  }
}

/** Clock `k` of the follower's view, in the leader's. */
function shift(moves: readonly Move[], k: number): number {
  const m = moves.find((x) => x.from <= k && k < x.to);
  return m ? k + m.by : k;
}

/** The text's next free clock of `client` in `state`, at least `floor`; undefined if there is no such text (the op fails as it would). */
function nextClock(state: unknown, a: TextInsertArgs, client: string, floor: number): number | undefined {
  try {
    return Math.max(textNextClock(textAt(state, a.p), client), floor);
  } catch {
    return undefined;
  }
}
