/**
 * Each tab of a shared client shows its own presence (docs/tabs.md, PRESENCE-PER-KEY): the
 * leader sets every tab's value on its connection under the tab's id as the key (protocol 8), so
 * other clients see one peer per tab, `{ client, key: tab, value }`. A tab's own others are the
 * server's peers plus its sibling tabs (which the server does not send back to the connection that
 * set them), in the same shape, so two tabs of one profile are two cursors to each other too.
 */
import type { PeerPresence } from '@hercules/core';

/** The tabs' presence values by tab id, as the leader holds them (a new object on each change). */
export type TabPresences = Readonly<Record<string, unknown>>;

/** The others a tab sees: the server's peers, then its sibling tabs' presence (not its own). */
export function othersOfTab(server: readonly PeerPresence[], clientId: string, tabs: TabPresences, self: string): readonly PeerPresence[] {
  const siblings = Object.entries(tabs).filter(([tab]) => tab !== self);
  if (siblings.length === 0) return server;
  return Object.freeze([...server, ...siblings.map(([key, value]) => ({ client: clientId, key, value }))]);
}

/** othersOfTab, the same array until one of its inputs changes (as a single tab's others()). */
export class OthersOfTab {
  #in: [readonly PeerPresence[], string, TabPresences, string] | undefined;
  #out: readonly PeerPresence[] = [];

  of(server: readonly PeerPresence[], clientId: string, tabs: TabPresences, self: string): readonly PeerPresence[] {
    const i = this.#in;
    if (i && i[0] === server && i[1] === clientId && i[2] === tabs && i[3] === self) return this.#out;
    this.#in = [server, clientId, tabs, self];
    this.#out = othersOfTab(server, clientId, tabs, self);
    return this.#out;
  }
}
