/**
 * Delivery receipts on the client (protocol 7): the other members' acked log positions as the
 * server reports them (AcksMessage), and what follows from them: which members hold an op of
 * ours (`seenBy`), and how far behind each member is (`memberPositions`). Asked for only while
 * someone listens (ClientRoom.onReceipts), so a room that never shows receipts pays no frame.
 */
import type { AcksMessage } from './protocol.ts';

/** One other member of the room and how much of the log it holds. */
export interface MemberPosition {
  readonly client: string;
  /** The highest log position it acked: it holds every entry up to here. */
  readonly pos: number;
  /** Entries of the log as this client knows it (its Authoritative view) that it lacks. */
  readonly behind: number;
}

export class ReceiptBook {
  /** Acked position of each member the server told us of, on this connection. */
  readonly #acked = new Map<string, number>();
  readonly #listeners = new Set<() => void>();

  /** Whether anyone listens: only then does the client ask the server for acks. */
  wanted(): boolean {
    return this.#listeners.size > 0;
  }

  /** Adds a listener; whether it was the first (the caller then asks the server). */
  add(fn: () => void): boolean {
    this.#listeners.add(fn);
    return this.#listeners.size === 1;
  }

  /** Removes a listener; whether it was the last (the caller then tells the server to stop). */
  remove(fn: () => void): boolean {
    return this.#listeners.delete(fn) && this.#listeners.size === 0;
  }

  /** A new connection: what the last one said is stale until the server answers the ask again. */
  reset(): void {
    this.#acked.clear();
  }

  /** A member's reported position replaces the one before: a member that rejoined may hold less. */
  apply(msg: AcksMessage): void {
    for (const a of msg.acks) this.#acked.set(a.client, a.pos);
  }

  /** The members (`self` aside) that acked `position`, sorted; none while the op has no position. */
  seenBy(position: number | undefined, members: readonly string[], self: string): string[] {
    if (position === undefined) return [];
    return members.filter((m) => m !== self && (this.#acked.get(m) ?? 0) >= position);
  }

  /** Each other member's position, `head` being the end of the log as this client knows it. */
  positions(members: readonly string[], self: string, head: number): MemberPosition[] {
    const out: MemberPosition[] = [];
    for (const m of members) {
      if (m === self) continue;
      const pos = this.#acked.get(m);
      if (pos !== undefined) out.push({ client: m, pos, behind: Math.max(0, head - pos) });
    }
    return out;
  }

  /** Calls every listener; one that throws is reported through `warn` and the rest still run. */
  notify(warn: (message: string) => void): void {
    for (const fn of [...this.#listeners]) {
      try {
        fn();
      } catch (e) {
        warn(`a receipts listener threw: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }
}
