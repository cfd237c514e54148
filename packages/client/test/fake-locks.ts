/**
 * The Web Locks semantics the stores rely on, for Node, which has no navigator.locks (the
 * browser test runs the real one): a request waits for the lock until its signal aborts, and
 * holds it until the callback's promise settles; with `ifAvailable`, a held lock calls the
 * callback at once with null.
 */
export function fakeLocks() {
  const held = new Set<string>();
  const waiting = new Map<string, (() => void)[]>();
  return {
    held,
    async request(name: string, o: { signal?: AbortSignal; ifAvailable?: boolean }, cb: (lock: unknown) => Promise<void> | void) {
      if (o.ifAvailable && held.has(name)) return await cb(null);
      while (held.has(name)) {
        await new Promise<void>((wake, fail) => {
          const q = waiting.get(name) ?? [];
          waiting.set(name, q);
          const go = () => {
            o.signal?.removeEventListener('abort', stop);
            wake();
          };
          const stop = () => {
            q.splice(q.indexOf(go), 1);
            fail(o.signal?.reason);
          };
          q.push(go);
          o.signal?.addEventListener('abort', stop, { once: true });
        });
      }
      held.add(name);
      try {
        return await cb({ name });
      } finally {
        held.delete(name);
        waiting.get(name)?.shift()?.();
      }
    },
  };
}
