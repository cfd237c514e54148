/**
 * A place in a collaborative text that stays on the right character: the id of the character
 * before it (`[client, clock]`), or null for the start. Text typed before it moves it along;
 * text typed right at it goes after it (a caret stays behind the character it follows). When
 * that character is deleted, the place is where its tombstone lies.
 */
import type { Text } from '@hercules/core';

export type TextPlace = readonly [client: string, clock: number] | null;

/** The place at visible index `index` of `t` (clamped to 0..len). */
export function placeAt(t: Text, index: number): TextPlace {
  let left = Math.min(Math.max(0, index), t.len);
  if (left === 0) return null;
  for (const ch of t.chunks) {
    if (left > ch.v) {
      left -= ch.v;
      continue;
    }
    for (const r of ch.runs) {
      if (r.t === undefined) continue;
      if (left <= r.t.length) return [t.clients[r.c], r.k + left - 1];
      left -= r.t.length;
    }
  }
  return null;
}

/** The visible index of `place` in `t`, or -1 when `t` does not hold its character (not arrived yet). */
export function indexOf(t: Text, place: TextPlace): number {
  if (place === null) return 0;
  const c = t.clients.indexOf(place[0]);
  if (c < 0) return -1;
  const k = place[1];
  let i = 0;
  for (const ch of t.chunks)
    for (const r of ch.runs) {
      const n = r.t !== undefined ? r.t.length : r.d!;
      if (r.c === c && k >= r.k && k < r.k + n) return r.t !== undefined ? i + k - r.k + 1 : i;
      if (r.t !== undefined) i += n;
    }
  return -1;
}

/** A place as presence carries it: checked, since a peer's presence is its own to shape. */
export function isPlace(v: unknown): v is TextPlace {
  return v === null || (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && Number.isSafeInteger(v[1]));
}
