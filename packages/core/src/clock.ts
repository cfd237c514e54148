/**
 * Time, injected: the one clock interface of Hercules. The client driver, the server's room
 * host, registry and room service, and a cluster node read the time and set timers only through
 * a `Clock`, so the simulator runs them on its event queue (deterministically, without real
 * timers) and tests step time by hand (@hercules/test-utils' FakeClock). Real implementations
 * are the adapters': `connect()`'s and the server's `systemClock`.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock (only differences mean anything). */
  now(): number;
  /**
   * Call `fn` once, `ms` from now; the returned function cancels it. 0 means as soon as the
   * work in hand is done (after the current event: other I/O callbacks may run first).
   */
  after(ms: number, fn: () => void): () => void;
  /**
   * Call `fn` once the current input is handled (a microtask with real timers), before any
   * later event: so the ops submitted in one turn go to the store in one write.
   */
  defer(fn: () => void): void;
}
