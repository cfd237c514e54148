/**
 * What a view binding (@hercules/react, vue, svelte) leaves subscribed: the Vue and Svelte tests
 * count a room's live view subscriptions to check that a stopped scope or a store without
 * subscribers lets go of the room.
 */

/** Wraps `room.subscribe` to count the subscriptions not yet undone; returns the count's reader. */
export function countSubscriptions(room: { subscribe(...args: any[]): () => void }): () => number {
  let active = 0;
  const subscribe = room.subscribe.bind(room);
  room.subscribe = (...args: any[]) => {
    active++;
    const off = subscribe(...args);
    return () => {
      active--;
      off();
    };
  };
  return () => active;
}
