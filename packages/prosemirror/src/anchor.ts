/**
 * The ranges of a text one view has and another lacks, found by ids (the view marks). A place
 * from an index and an index from a place (cursors and selections) are core's: `textPlaceAt`,
 * `textPlaceIndex` in @hercules/core, shared with @hercules/codemirror.
 */
import { compactText, textRunText, type Text } from '@hercules/core';

/** Each client's visible clocks in `t` (by its index in `t.clients`), as sorted [from, to) intervals. */
function visibleIds(t: Text): Map<number, [number, number][]> {
  const by = new Map<number, [number, number][]>();
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (s === undefined) continue;
      const list = by.get(r[0]) ?? [];
      list.push([r[1], r[1] + s.length]);
      by.set(r[0], list);
    }
  for (const list of by.values()) list.sort((x, y) => x[0] - y[0]);
  return by;
}

/** The first interval of `list` that ends after `k` (list.length when none). */
function firstAfter(list: readonly [number, number][], k: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid][1] <= k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Append the visible range `[from, to)` to `out`, joined to the last one when they touch. */
function push(out: { from: number; to: number }[], from: number, to: number): void {
  const last = out[out.length - 1];
  if (last !== undefined && last.to === from) last.to = to;
  else out.push({ from, to });
}

/**
 * The visible ranges of `b` whose characters `a` does not show (null `a`: all of `b`): in the
 * binding, the text of the Submitted view not yet in the Authoritative (or Visible) one.
 * O(runs x log runs), by intervals of clocks, not by character: a long pending run costs one step.
 */
export function newRanges(a: Text | null, b: Text): { from: number; to: number }[] {
  if (a === null) return b.len > 0 ? [{ from: 0, to: b.len }] : [];
  const inA = visibleIds(a);
  const out: { from: number; to: number }[] = [];
  let i = 0;
  for (const ch of compactText(b).chunks)
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (s === undefined) continue;
      const list = inA.get(a.clients.indexOf(b.clients[r[0]])) ?? [];
      const k0 = r[1];
      const end = k0 + s.length;
      let k = k0;
      // Walk the intervals of `a` that overlap the run: the gaps between them are new.
      for (let j = firstAfter(list, k); k < end; j++) {
        const [from, to] = j < list.length ? list[j] : [end, end];
        if (from > k) push(out, i + k - k0, i + Math.min(from, end) - k0);
        k = Math.max(k, Math.min(to, end));
        if (from >= end) break;
      }
      i += s.length;
    }
  return out;
}
