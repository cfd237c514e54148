/**
 * Time for the server's pipeline: the room host, the registry and the room service read the
 * time and set timers only through @hercules/core's `Clock`, so the simulator runs them on its
 * simulated clock and tests step time by hand (@hercules/test-utils' FakeClock).
 */
import type { Clock } from '@hercules/core';

export type { Clock };

/**
 * The real clock: `performance.now()`, Node timers. A 0 ms timer is `setImmediate` (Node's
 * setTimeout(0) waits a millisecond, too long for a group commit); `defer` is a microtask, so the
 * writes of one task are appended before the store's group commit of this event-loop turn.
 * Timers do not keep the process alive: a server is kept alive by its listening socket.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  after(ms, fn) {
    if (ms <= 0) {
      const immediate = setImmediate(fn);
      return () => clearImmediate(immediate);
    }
    const t = setTimeout(fn, ms);
    t.unref?.();
    return () => clearTimeout(t);
  },
  defer: (fn) => queueMicrotask(fn),
};
