/**
 * A room's history as the backend API reads it (issue 39, item 2; docs/history.md): the state at
 * a retained position, rebuilt from the newest state the store kept at or before it by applying
 * the ops after it, and a page of the retained log. Pure but for the store read: the replay is
 * the room engine's (an op that threw or was refused has no effect), so `stateAt(p)` is the state
 * every replica had after position p (HIST-REPLAY in docs/spec.md).
 */
import { HerculesError, applyOp, deepFreeze, readLegacyRefusal, type LogEntry, type Machine } from '@hercules/core';
import type { HistoryEntry, RoomHistory, RoomStore } from './store/room-store.ts';

/** How many entries a page of `log()` holds at most. */
export const LOG_PAGE_MAX = 1000;

/** A page of a room's retained log (`ServerRoom.log`). */
export interface LogPage {
  /** The first retained position: the state at `start` can be read, and the entries from `start + 1` on. */
  start: number;
  /** The position of the room's last stored entry. */
  head: number;
  /** The retained entries of the range asked, in order, each with its position, op, args, author, client and commit time. */
  entries: HistoryEntry[];
  /** The `from` of the next page, when the range asked holds more than one page. */
  next?: number;
}

/** The state after `entries` (consecutive, from base.pos + 1) are applied to `base`: what the room engine computes. */
export function replayFrom<S>(machine: Machine<S>, base: { pos: number; state: unknown }, entries: readonly LogEntry[]): S {
  let s = deepFreeze(base.state as S);
  let pos = base.pos;
  for (const stored of entries) {
    const e = readLegacyRefusal(stored);
    if (e.pos !== pos + 1) throw new HerculesError('internal', `history: entry ${e.pos} does not follow position ${pos} (a store bug); report it`);
    pos = e.pos;
    if (e.error === undefined) s = applyOp(machine, s, e, e.pos).state;
  }
  return s;
}

/** Check a position of a history read: throws `bad-argument`. */
export function checkPosition(call: string, what: string, p: unknown): number {
  if (!Number.isSafeInteger(p) || (p as number) < 0)
    throw new HerculesError('bad-argument', `${call}: ${what} must be a log position (an integer >= 0), got ${String(p)}`);
  return p as number;
}

/** The store's history read, or the errors a reader gets: no history kept (`bad-argument`), no room (`bad-room`). */
export async function readHistory(store: RoomStore, room: string, q: Parameters<NonNullable<RoomStore['history']>>[1]): Promise<RoomHistory> {
  if (!store.history) throw new HerculesError('bad-argument', 'this room store keeps no history (no history method): stateAt and log need one that does');
  const h = await store.history(room, q);
  if (!h) throw new HerculesError('bad-room', `room ${room} does not exist`);
  return h;
}

/** The error of a position outside what is kept: older (`not-retained`) or past the head (`bad-argument`). */
export function outOfRange(room: string, p: number, h: RoomHistory): HerculesError {
  return p > h.head
    ? new HerculesError('bad-argument', `room ${room}: position ${p} is past its head ${h.head}; positions ${h.start}..${h.head} can be read`)
    : new HerculesError(
        'not-retained',
        `room ${room}: position ${p} is no longer kept (checkpoints pruned it; the server keeps its history from ${h.start} to ${h.head}); read from ${h.start} on, or keep more history (history: { ops, days })`,
      );
}

/** The state of `room` at position `p`, rebuilt from its retained history. */
export async function stateAt(store: RoomStore, machines: ReadonlyMap<string, Machine<any, any>>, room: string, position: unknown): Promise<unknown> {
  const p = checkPosition(`room(${room}).stateAt(position)`, 'position', position);
  const h = await readHistory(store, room, { stateAt: p });
  if (!h.base) throw outOfRange(room, p, h);
  const machine = machines.get(h.meta.machine);
  if (!machine) throw new HerculesError('machine-mismatch', `room ${room} runs ${h.meta.machine}, which this server does not serve; deploy that machine`);
  return replayFrom(machine, h.base, h.entries);
}

/** A page of the retained log of `room`: from `from` (default: the first retained) to `to` (default: the head), at most LOG_PAGE_MAX entries. */
export async function logPage(store: RoomStore, room: string, range: { from?: number; to?: number } = {}): Promise<LogPage> {
  const call = `room(${room}).log({ from, to })`;
  if (range === null || typeof range !== 'object') throw new HerculesError('bad-argument', `${call}: the range must be an object`);
  const from = range.from === undefined ? undefined : checkPosition(call, 'from', range.from);
  if (from === 0) throw new HerculesError('bad-argument', `${call}: from must be an entry's position (>= 1), got 0`);
  const to = range.to === undefined ? undefined : checkPosition(call, 'to', range.to);
  if (from !== undefined && to !== undefined && to < from - 1) throw new HerculesError('bad-argument', `${call}: to (${to}) is before from (${from})`);
  // The range's bounds first (one small read), then the page itself.
  const first = from ?? (await readHistory(store, room, { from: 1, to: 0 })).start + 1;
  const last = to === undefined ? first + LOG_PAGE_MAX - 1 : Math.min(to, first + LOG_PAGE_MAX - 1);
  const h = await readHistory(store, room, { from: first, to: last });
  if (first <= h.start) throw outOfRange(room, first, h);
  const end = Math.min(to ?? h.head, h.head);
  return { start: h.start, head: h.head, entries: h.entries, ...(last < end ? { next: last + 1 } : {}) };
}
