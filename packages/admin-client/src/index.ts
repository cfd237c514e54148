/**
 * A typed client for the Hercules admin HTTP API (docs/admin-api.md). The types are generated
 * from docs/admin-api.openapi.json by openapi-typescript (src/schema.ts; `npm run generate -w
 * packages/admin-client`, and a test fails when it is out of date); requests go through
 * openapi-fetch. Every method resolves with the response's body or rejects with a HerculesError
 * whose code is the server's (`unauthenticated`, `bad-room`, `not-found`, ...), or `unreachable`
 * when no server answered.
 *
 *   const admin = createAdminClient({ url: 'http://127.0.0.1:8787', token });
 *   for await (const room of admin.allRooms()) console.log(room.name, room.ops);
 */
import createClient, { type Client } from 'openapi-fetch';
import { HerculesError, isErrorCode } from '@hercules/core';
import type { components, paths } from './schema.ts';

export type { components, paths } from './schema.ts';
export type RoomSummary = components['schemas']['RoomSummary'];
export type RoomFile = components['schemas']['RoomFile'];
export type SubmitResult = components['schemas']['SubmitResult'];
export type LogPage = components['schemas']['LogPage'];
export type HistoryEntry = components['schemas']['HistoryEntry'];
export type RoomsPage = { rooms: RoomSummary[]; next?: string };
export type SubmitRequest = paths['/admin/rooms/{room}/ops']['post']['requestBody']['content']['application/json'];
export type RevokeRequest = paths['/admin/revoke']['post']['requestBody']['content']['application/json'];

export interface AdminClientOptions {
  /** The server's HTTP address: `http://host:port` (a `ws://` URL is taken as its `http://` twin). */
  url: string;
  /** The server's admin token (`createServer({ admin: { token } })`, `--admin-token-file`). */
  token: string;
  /** Another fetch (a test double, a proxy agent's); default the global one. */
  fetch?: typeof fetch;
}

export interface AdminClient {
  /** One page of the stored rooms, in name order; pass the page's `next` as `after` for the next. */
  rooms(query?: { after?: string; limit?: number }): Promise<RoomsPage>;
  /** Every stored room, page by page. */
  allRooms(pageSize?: number): AsyncGenerator<RoomSummary>;
  /** The room's state after the last op it ordered. */
  state(room: string): Promise<unknown>;
  /** The room's state after the op at `position`, rebuilt from the history the server keeps (docs/history.md); `not-retained` if it was pruned. */
  stateAt(room: string, position: number): Promise<unknown>;
  /** A page of the room's retained log (at most 1,000 entries; `next` is the following page's `from`). */
  log(room: string, range?: { from?: number; to?: number }): Promise<LogPage>;
  /** The room as a file another server imports (`importRoom`), or a bug report carries. */
  exportRoom(room: string): Promise<RoomFile>;
  /** Create a room from an export; refused if the room exists. */
  importRoom(room: string, file: RoomFile): Promise<void>;
  /** Delete a room: its connections are closed and its data removed; false if there was none. */
  deleteRoom(room: string): Promise<boolean>;
  /** Submit an op as the server (a backend's write), ordered like any client's. */
  submit(room: string, op: SubmitRequest): Promise<SubmitResult>;
  /** Close a user's connections (in one room, or all) with the fatal `revoked`; resolves with how many. */
  revoke(target: RevokeRequest): Promise<{ closed: number }>;
  /**
   * Drain a cluster node (this client's `url`): it hands its rooms over to the other nodes, as on
   * SIGTERM, and takes no new ones; resolves once it holds no shard, or after 30 s with the shards
   * it still holds. Rejects (`bad-argument`) on a server that is not a cluster node.
   */
  drain(): Promise<{ draining: boolean; shards: number[] }>;
  /** The openapi-fetch client under these methods, for a call they do not cover. */
  readonly raw: Client<paths>;
}

export function createAdminClient(opts: AdminClientOptions): AdminClient {
  if (!opts || typeof opts.url !== 'string' || !/^(https?|wss?):\/\//.test(opts.url))
    throw new HerculesError('bad-argument', 'createAdminClient: `url` must be the server address, http://host:port');
  if (typeof opts.token !== 'string' || opts.token.length === 0)
    throw new HerculesError('bad-argument', 'createAdminClient: `token` is the server admin token');
  const baseUrl = opts.url.replace(/^ws/, 'http').replace(/\/+$/, '');
  const raw = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${opts.token}` }, ...(opts.fetch ? { fetch: opts.fetch } : {}) });
  const room = (name: string) => ({ params: { path: { room: name } } });
  const client: AdminClient = {
    raw,
    rooms: async (query = {}) => answer(await send(() => raw.GET('/admin/rooms', { params: { query } }))) as RoomsPage,
    allRooms: (pageSize) => pages(client, pageSize),
    state: async (name) => (answer(await send(() => raw.GET('/admin/rooms/{room}/state', room(name)))) as { state: unknown }).state,
    stateAt: async (name, at) =>
      (answer(await send(() => raw.GET('/admin/rooms/{room}/state', { params: { path: { room: name }, query: { at } } }))) as { state: unknown }).state,
    log: async (name, range = {}) =>
      answer(await send(() => raw.GET('/admin/rooms/{room}/log', { params: { path: { room: name }, query: range } }))) as LogPage,
    exportRoom: async (name) => answer(await send(() => raw.GET('/admin/rooms/{room}/export', room(name)))) as RoomFile,
    importRoom: async (name, file) => {
      answer(await send(() => raw.PUT('/admin/rooms/{room}', { ...room(name), body: file })));
    },
    deleteRoom: async (name) => (answer(await send(() => raw.DELETE('/admin/rooms/{room}', room(name)))) as { deleted: boolean }).deleted,
    submit: async (name, op) => answer(await send(() => raw.POST('/admin/rooms/{room}/ops', { ...room(name), body: op }))) as SubmitResult,
    revoke: async (target) => answer(await send(() => raw.POST('/admin/revoke', { body: target }))) as { closed: number },
    drain: async () => answer(await send(() => raw.POST('/admin/drain', {}))) as { draining: boolean; shards: number[] },
  };
  return client;
}

async function* pages(client: AdminClient, pageSize = 100): AsyncGenerator<RoomSummary> {
  let after: string | undefined;
  do {
    const page = await client.rooms({ limit: pageSize, ...(after !== undefined ? { after } : {}) });
    yield* page.rooms;
    after = page.next;
  } while (after !== undefined);
}

type Answer = { data?: unknown; error?: unknown; response: Response };

/** The request, with a network failure as `unreachable`. */
async function send(request: () => Promise<Answer>): Promise<Answer> {
  try {
    return await request();
  } catch (e) {
    throw new HerculesError('unreachable', `the admin API did not answer: ${(e as Error).message}`, { cause: e });
  }
}

/** The body of a 2xx answer, or the server's error as a HerculesError of its code. */
function answer(r: Answer): unknown {
  if (r.response.ok) return r.data;
  const body = r.error as { error?: unknown; message?: unknown } | undefined;
  const code = isErrorCode(body?.error) ? body.error : 'internal';
  const message = typeof body?.message === 'string' ? body.message : `HTTP ${r.response.status}`;
  throw new HerculesError(code, `${message} (HTTP ${r.response.status}${code === 'internal' && body?.error ? `, ${String(body.error)}` : ''})`);
}
