/**
 * Open a room from a browser page: the server is the page's own host, the room comes from
 * ?room= (default "demo"), durable ops live in IndexedDB. Each tab is its own client: its id
 * is kept in sessionStorage, so a reload is the same client (and its durable ops survive it),
 * while a second tab is another user. A duplicated tab inherits the sessionStorage, and with
 * it the id; its store is then held by the original tab (store-in-use), so it takes a new id.
 */
import { connect, indexedDbStorage, type ConnectedRoom } from '@hercules/client';
import type { Machine } from '@hercules/core';

export async function openRoom<M extends Machine<any, any>>(machine: M): Promise<ConnectedRoom<M>> {
  const params = new URLSearchParams(location.search);
  const room = params.get('room') ?? 'demo';
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`;
  const open = (tab: string) =>
    connect({ url, room, machine, storage: indexedDbStorage(`hercules-${tab}`), clientId: tab, onError: (e) => console.warn('[hercules]', e.message) });
  let tab = sessionStorage.getItem('hercules-tab');
  if (!tab) sessionStorage.setItem('hercules-tab', (tab = crypto.randomUUID()));
  let r: ConnectedRoom<M>;
  try {
    r = await open(tab);
  } catch (e) {
    if ((e as { code?: string }).code !== 'store-in-use') throw e;
    sessionStorage.setItem('hercules-tab', (tab = crypto.randomUUID()));
    r = await open(tab);
  }
  (window as unknown as { hercules: unknown }).hercules = r; // for the console and for tests
  return r;
}

/** A short, stable display name for a client id. */
export const shortName = (id: string) => id.slice(0, 4);
