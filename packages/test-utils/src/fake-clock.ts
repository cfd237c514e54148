/**
 * The fake clock of every test (the shape of @hercules/core's `Clock`): time moves only when the
 * test says, timers fire in order of their due time (ties in the order they were set), and
 * deferred work (what would be a microtask) runs at `settle()` or before any timer, or, with
 * `microtasks: true`, as a real microtask (for code whose test awaits promises between steps, as
 * the server's room host appending a task's writes).
 */
export class FakeClock {
  t: number;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  private deferred: (() => void)[] = [];
  private readonly microtasks: boolean;
  constructor(opts: { start?: number; microtasks?: boolean } = {}) {
    this.t = opts.start ?? 0;
    this.microtasks = opts.microtasks ?? false;
  }
  now = () => this.t;
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + Math.max(0, ms), fn, live: true };
    this.timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  defer(fn: () => void): void {
    if (this.microtasks) queueMicrotask(fn);
    else this.deferred.push(fn);
  }
  /** Deferred work, as microtasks would run it. */
  settle(): void {
    while (this.deferred.length) this.deferred.shift()!();
  }
  /** Move time forward by `ms`, running what falls due in order. */
  advance(ms = 0): void {
    const end = this.t + ms;
    this.settle();
    for (;;) {
      const due = this.timers.filter((x) => x.live && x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      due.live = false;
      this.t = due.at;
      due.fn();
      this.settle();
    }
    this.t = end;
    this.timers = this.timers.filter((x) => x.live);
  }
  /** One event-loop turn: the timers due now run, oldest first; those they set wait for the next. */
  turn(): void {
    this.settle();
    const due = this.timers.filter((x) => x.live && x.at <= this.t);
    this.timers = this.timers.filter((x) => !due.includes(x));
    for (const x of due) {
      if (!x.live) continue;
      x.live = false;
      x.fn();
      this.settle();
    }
  }
  /** Timers set and not yet run or cancelled. */
  pending(): number {
    return this.timers.filter((x) => x.live).length;
  }
}
