/**
 * Open a room from a browser page: the server is the page's own host, the room comes from
 * ?room= (default: the app's own demo room), durable ops live in IndexedDB. Each tab is its own
 * client: its id is kept in sessionStorage, so a reload is the same client (and its durable ops
 * survive it), while a second tab is another user. A duplicated tab inherits the sessionStorage,
 * and with it the id; its store is then held by the original tab (store-in-use), so it takes a
 * new id. A tab closed while offline leaves its store behind with ops the server never had: the
 * next page of the room finds it and sends them under that tab's id (connect's `recover`, on by
 * default), then deletes it.
 */
import { connect, indexedDbStorage, type ConnectedRoom } from '@hercules/client';
import type { Machine } from '@hercules/core';

/** The server's rule for room names (docs/errors.md, bad-room): checked here to explain it before connecting. */
export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,128}$/;

/** A room serves one machine, so each app needs its own default room. */
export const defaultRoom = (machine: Machine<any, any>) => `demo-${machine.name}`;

/**
 * The nearest valid name to a bad one (for the link on the error page), else the app's default.
 * Accents come off their letters first (NFKD, then the combining marks dropped), so `ünïcode`
 * is offered as `unicode`, not `n-code`.
 */
export function suggestRoom(bad: string, machine: Machine<any, any>): string {
  const fixed = bad
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9._~-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 128);
  return fixed || defaultRoom(machine);
}

/** The room ?room= names: absent means the default; present but bad is a `BadRoomName`. */
export function roomFromUrl(machine: Machine<any, any>): string | BadRoomName {
  const room = new URLSearchParams(location.search).get('room');
  if (room === null) return defaultRoom(machine);
  return ROOM_NAME.test(room) ? room : { bad: room };
}
export type BadRoomName = { bad: string };

export async function openRoom<M extends Machine<any, any>>(machine: M, room: string): Promise<ConnectedRoom<M>> {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`;
  const open = (tab: string) =>
    connect({
      url,
      room,
      machine,
      storage: indexedDbStorage(`hercules-${tab}`),
      clientId: tab,
      onError: (e) => console.warn('[hercules]', e.message),
      onRecovered: (r) =>
        console.info(
          `[hercules] store ${r.store} of a closed tab: ${r.ops} op(s) of client ${r.clientId} confirmed by the server; store deleted: ${r.removed}`,
        ),
    });
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
