/**
 * The backend API through the room locator: what the admin HTTP API calls. A call on a room
 * served here goes to this node's service; one on a room served by another node is forwarded
 * there (`RemoteRooms.call`) and answered as that node answers it, so the admin API gives the
 * same answers on any node of a cluster as on an embedded server. `rooms` and `revoke` concern
 * every node: the page is this node's (the store lists every room) with the live figures of the
 * rooms other nodes have loaded, and a revocation closes the user's connections on every node.
 */
import { HerculesError } from '@hercules/core';
import type { RoomFile, RoomsPage, RoomsQuery, RoomSummary, ServerRoom } from './backend-api.ts';
import type { RoomService } from './room-service.ts';
import type { BackendCall, RemoteRooms, RoomLocator } from './room-locator.ts';

/** The backend calls of a service, as the admin HTTP API uses them. */
export interface Backend {
  room(name: string, machine?: string): ServerRoom;
  rooms(query?: RoomsQuery): Promise<RoomsPage>;
  importRoom(name: string, file: RoomFile): Promise<void>;
  /** How many connections closed, on every node. */
  revoke(target: { user: string; room?: string; reason?: string }): Promise<number>;
}

type Local = Pick<RoomService, 'room' | 'rooms' | 'importRoom' | 'revoke'>;

/** Run a call forwarded from another node on this node's service (never forwarded again: no loops). */
export async function runBackendCall(local: Local, c: BackendCall): Promise<unknown> {
  switch (c.call) {
    case 'submit':
      return local.room(c.room, c.machine).submit(c.op, c.args, { author: c.author, ...(c.key !== undefined ? { key: c.key } : {}) });
    case 'state':
      return local.room(c.room, c.machine).state();
    case 'stateAt':
      return local.room(c.room).stateAt(c.position);
    case 'log':
      return local.room(c.room).log({ ...(c.from !== undefined ? { from: c.from } : {}), ...(c.to !== undefined ? { to: c.to } : {}) });
    case 'export':
      return local.room(c.room).export();
    case 'delete':
      return local.room(c.room).delete();
    case 'import':
      await local.importRoom(c.room, c.file);
      return null;
    case 'rooms':
      return local.rooms(c.query);
    case 'revoke':
      return local.revoke({ user: c.user, ...(c.room !== undefined ? { room: c.room } : {}), ...(c.reason !== undefined ? { reason: c.reason } : {}) });
    default:
      throw new HerculesError('bad-argument', `unknown backend call ${JSON.stringify((c as { call?: unknown }).call)}`);
  }
}

/** The service's backend calls, each on the node that serves its room. */
export function locatedBackend(local: Local, locator: RoomLocator): Backend {
  const remote = locator.remote;
  /** `here` on this node's service, else the call at the node serving `room`. */
  const at = async <T>(room: string, here: () => Promise<T>, call: BackendCall): Promise<T> => {
    const where = await locator.locate(room);
    return where.here || !remote ? here() : ((await remote.call(where.node, call)) as T);
  };
  return {
    room(name, machine) {
      const r = local.room(name, machine); // checks the name and machine here, as an embedded server does
      const m = machine !== undefined ? { machine } : {};
      return {
        name: r.name,
        submit: (op, args, o) => {
          if (!o || typeof o !== 'object') return r.submit(op, args, o); // its own error
          const key = o.key !== undefined ? { key: o.key } : {};
          return at(name, () => r.submit(op, args, o), { call: 'submit', room: name, ...m, op, args, author: o.author, ...key });
        },
        state: () => at(name, () => r.state(), { call: 'state', room: name, ...m }),
        // History is read from the store, where the room is served (a cluster node's store may hold only its shards').
        stateAt: (position) => at(name, () => r.stateAt(position), { call: 'stateAt', room: name, position }),
        log: (range) =>
          at(name, () => r.log(range), {
            call: 'log',
            room: name,
            ...(range?.from !== undefined ? { from: range.from } : {}),
            ...(range?.to !== undefined ? { to: range.to } : {}),
          }),
        export: () => at(name, () => r.export(), { call: 'export', room: name }),
        delete: () => at(name, () => r.delete(), { call: 'delete', room: name }),
        // Commits reach the node that serves the room: a listener hears those of the rooms served here.
        subscribe: (listener) => r.subscribe(listener),
      };
    },
    importRoom: (name, file) => at(name, () => local.importRoom(name, file), { call: 'import', room: name, file }),
    rooms: async (query) => (remote ? withPeersLoaded(await local.rooms(query), remote, query ?? {}) : local.rooms(query)),
    revoke: async (target) => {
      const here = local.revoke(target); // checks the target, and closes this node's connections first
      return remote ? here + (await revokeAtPeers(remote, target)) : here;
    },
  };
}

/** This node's page, with the live figures (loaded, members) of the rooms another node has loaded. */
async function withPeersLoaded(page: RoomsPage, remote: RemoteRooms, query: RoomsQuery): Promise<RoomsPage> {
  const loaded = new Map<string, RoomSummary>();
  const answers = await Promise.allSettled(remote.peers().map((node) => remote.call(node, { call: 'rooms', query })));
  // A peer that does not answer leaves its rooms as the store lists them (loaded: false).
  for (const a of answers) if (a.status === 'fulfilled') for (const r of (a.value as RoomsPage).rooms ?? []) if (r.loaded) loaded.set(r.name, r);
  return { ...page, rooms: page.rooms.map((r) => (r.loaded ? r : (loaded.get(r.name) ?? r))) };
}

/** Revoke on every other live node; rejects with `unreachable` if one did not answer (its connections may be open: retry). */
async function revokeAtPeers(remote: RemoteRooms, target: { user: string; room?: string; reason?: string }): Promise<number> {
  const peers = remote.peers();
  const call: BackendCall = {
    call: 'revoke',
    user: target.user,
    ...(target.room !== undefined ? { room: target.room } : {}),
    ...(target.reason !== undefined ? { reason: target.reason } : {}),
  };
  const answers = await Promise.allSettled(peers.map((node) => remote.call(node, call)));
  const failed = peers.filter((_, i) => answers[i].status === 'rejected');
  if (failed.length)
    throw new HerculesError(
      'unreachable',
      `revoke: node ${failed.join(', ')} did not answer; the user's connections there may still be open: send the revocation again`,
    );
  return answers.reduce((n, a) => n + (a.status === 'fulfilled' ? Number(a.value) || 0 : 0), 0);
}
