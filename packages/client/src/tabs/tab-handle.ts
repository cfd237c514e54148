/**
 * The handle of an op a follower tab submitted through the leader tab (tabs.ts): the same
 * OpHandle an app gets from a single tab's room, moved on by the leader's stage messages. Its
 * seq is 0 until the leader has submitted the request to its room.
 */
import { OpRejectedError, type OpHandle, type Stage } from '@hercules/core';
import type { StageMessage } from './messages.ts';

const ORDER: Record<Stage | 'stable', number> = { submitted: 0, durable: 1, authoritative: 2, visible: 3, rejected: 2, stable: 4 };

function deferred() {
  let resolve!: (h: OpHandle) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<OpHandle>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A rejection the app does not wait for is not an unhandled one (as in a single tab's handles).
  promise.catch(() => {});
  return { promise, resolve, reject };
}

export class TabHandle implements OpHandle {
  seq = 0;
  stage: Stage = 'submitted';
  error?: string;
  refused?: boolean;
  position?: number;
  /** The tab's highest request its view reflected when this one was made (text-clocks.ts). */
  seen = 0;
  /** This tab's requests whose run failed in the view this one was made on (text-clocks.ts). */
  failed: number[] | undefined;
  /** 'stable' reached (or rejected): the handle is done. */
  settled = false;
  readonly times: Partial<Record<Stage | 'stable', number>>;
  readonly #clientId: () => string;
  readonly #now: () => number;
  readonly #d = { durable: deferred(), authoritative: deferred(), visible: deferred(), stable: deferred() };

  constructor(
    readonly req: number,
    readonly name: string,
    readonly args: unknown,
    clientId: () => string,
    now: () => number,
  ) {
    this.#clientId = clientId;
    this.#now = now;
    this.times = { submitted: now() };
  }

  get id(): string {
    return `${this.#clientId()}:${this.seq}`;
  }
  get delays() {
    const t0 = this.times.submitted ?? 0;
    const out: Partial<Record<Exclude<Stage, 'submitted'> | 'stable', number>> = {};
    for (const k of ['durable', 'authoritative', 'visible', 'stable', 'rejected'] as const) if (this.times[k] !== undefined) out[k] = this.times[k]! - t0;
    return out;
  }
  get durable() {
    return this.#d.durable.promise;
  }
  get authoritative() {
    return this.#d.authoritative.promise;
  }
  get visible() {
    return this.#d.visible.promise;
  }
  get stable() {
    return this.#d.stable.promise;
  }

  /** A stage message for this request: every stage up to it is reached (they never go back). */
  moved(m: StageMessage): void {
    if (m.seq) this.seq = m.seq;
    if (this.settled || ORDER[m.stage] < ORDER[this.stage]) return;
    const now = this.#now();
    if (m.stage === 'rejected') return this.#rejected(m, now);
    const reached = ORDER[m.stage];
    if (m.position !== undefined) this.position = m.position;
    for (const k of ['durable', 'authoritative', 'visible', 'stable'] as const) {
      if (ORDER[k] > reached) break;
      this.times[k] ??= now;
      this.#d[k].resolve(this);
    }
    if (m.stage !== 'stable') this.stage = m.stage;
    else {
      this.stage = 'visible';
      this.settled = true;
    }
  }

  #rejected(m: StageMessage, now: number): void {
    this.stage = 'rejected';
    this.settled = true;
    this.error = m.error ?? 'rejected';
    this.refused = m.refused ?? false;
    this.times.rejected = now;
    this.times.durable ??= now;
    this.#d.durable.resolve(this);
    const e = new OpRejectedError(this.id, this.error, this.refused);
    for (const k of ['authoritative', 'visible', 'stable'] as const) this.#d[k].reject(e);
  }
}
