/**
 * Time for the server's pipeline, injected: the room host, the registry and the room service
 * read the time and set timers only through a `Clock`, so the simulator can run them on its
 * simulated clock (deterministically, without real timers) and tests can step time by hand.
 */

/** A timer set by `Clock.setTimeout`, for `clearTimeout`. */
export type TimerHandle = object;

export interface Clock {
  /** Milliseconds on a monotonic clock (not the wall clock: only differences mean anything). */
  now(): number;
  /**
   * Call `fn` once after `ms` milliseconds. 0 means as soon as the work in hand is done (after
   * the current event: other I/O callbacks may run first), not "at once".
   */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/**
 * The real clock: `performance.now()`, Node timers. A 0 ms timer is `setImmediate` (Node's
 * setTimeout(0) waits a millisecond, too long for a group commit). Timers do not keep the
 * process alive: a server is kept alive by its listening socket.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout(fn, ms) {
    if (ms <= 0) return { immediate: setImmediate(fn) };
    const t = setTimeout(fn, ms);
    t.unref?.();
    return { timeout: t };
  },
  clearTimeout(handle) {
    const h = handle as { immediate?: ReturnType<typeof setImmediate>; timeout?: ReturnType<typeof setTimeout> };
    if (h.immediate) clearImmediate(h.immediate);
    if (h.timeout) clearTimeout(h.timeout);
  },
};

/**
 * A clock that moves only when told: `advance(ms)` runs the timers that fall due, in time order
 * (ties in the order they were set). For tests.
 */
export class ManualClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers: { at: number; seq: number; fn: () => void; cancelled: boolean }[] = [];

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return timer;
  }

  clearTimeout(handle: TimerHandle): void {
    (handle as { cancelled: boolean }).cancelled = true;
  }

  /** Timers set and not yet run or cleared. */
  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /** Move time forward by `ms`, running each timer due on the way at its own time. */
  advance(ms = 0): void {
    const end = this.t + ms;
    for (;;) {
      let next: (typeof this.timers)[number] | undefined;
      for (const t of this.timers) if (!t.cancelled && t.at <= end && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
      if (!next) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.t = Math.max(this.t, next.at);
      next.fn();
    }
    this.t = end;
    this.timers = this.timers.filter((t) => !t.cancelled);
  }
}
