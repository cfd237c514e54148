/**
 * A clock for the adapters' tests (the shape of @hercules/core's `Clock`): time moves only when
 * the test says, timers fire in order of their due time, and deferred work (what would be a
 * microtask) runs at `settle()` or before any timer.
 */
export class FakeClock {
  t = 0;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  private deferred: (() => void)[] = [];
  now = () => this.t;
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  defer(fn: () => void): void {
    this.deferred.push(fn);
  }
  /** Deferred work, as microtasks would run it. */
  settle(): void {
    while (this.deferred.length) this.deferred.shift()!();
  }
  /** Move time forward by `ms`, running what falls due in order. */
  advance(ms: number): void {
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
  pending(): number {
    return this.timers.filter((x) => x.live).length;
  }
}
