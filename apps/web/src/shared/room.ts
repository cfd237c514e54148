/**
 * Open a room from a browser page: the server is the page's own host, the room comes from
 * ?room= (default: the app's own demo room), durable ops live in IndexedDB. The tabs of this
 * browser profile that open the same room are one client (connectTabs, docs/tabs.md): one tab
 * leads and holds the WebSocket and the store, the others submit through it and show its views;
 * when it closes another takes over. So a reload or a second tab is the same client, with the
 * same id, and a tab closed while offline leaves its ops in the store the next tab opens. Stores
 * of the per-tab clients of earlier versions are found and drained by the leader (connect's
 * `recover`, on by default).
 */
import { connectTabs, type ConnectedRoom } from '@hercules/client';
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
  const w = window as unknown as { hercules: unknown; herculesClientId?: string };
  const r = await connectTabs({
    url,
    room,
    machine,
    // The id a new client takes (the store keeps it after): tests choose it; apps leave it out.
    ...(w.herculesClientId ? { clientId: w.herculesClientId } : {}),
    onError: (e) => console.warn('[hercules]', e.message),
    onRecovered: (r) =>
      console.info(
        `[hercules] store ${r.store} of an earlier version's tab: ${r.ops} op(s) of client ${r.clientId} confirmed by the server; store deleted: ${r.removed}`,
      ),
  });
  w.hercules = r; // for the console and for tests
  return r;
}

/** A short, stable display name for a client id. */
export const shortName = (id: string) => id.slice(0, 4);
