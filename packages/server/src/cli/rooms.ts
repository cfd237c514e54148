/**
 * `hercules rooms list|show|export|import|delete` and `hercules revoke`: a running server's
 * admin HTTP API from a shell, through @hercules/admin-client. The server is --url (or
 * HERCULES_URL), the token --admin-token-file (or HERCULES_ADMIN_TOKEN), as `serve` takes them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { type AdminClient, createAdminClient, type RoomFile } from '@hercules/admin-client';
import { HerculesError } from '@hercules/core';
import { cannotStart, fail, num } from './common.ts';
import type { OptionGroup, Values } from './options.ts';

export const ADMIN_OPTIONS: readonly OptionGroup[] = [
  {
    title: 'Rooms and revoke (a running server with the admin API on)',
    options: [
      { name: 'url', arg: 'url', help: "the server's address (default http://127.0.0.1:8787)" },
      { name: 'admin-token-file', arg: 'path', help: 'the admin token, read from this file; or give it in HERCULES_ADMIN_TOKEN' },
      { name: 'limit', noEnv: true, arg: 'n', help: 'rooms list: at most this many rooms (default: all)' },
      { name: 'out', noEnv: true, arg: 'file', help: 'rooms export: write the export here (default: standard output)' },
      { name: 'user', noEnv: true, arg: 'id', help: 'revoke: the user whose connections close' },
      { name: 'room', noEnv: true, arg: 'name', help: 'revoke: only in this room' },
      { name: 'reason', noEnv: true, arg: 'text', help: 'revoke: the reason the clients are told' },
    ],
  },
];

function client(values: Values): AdminClient {
  const file = values['admin-token-file'] as string | undefined;
  let token = process.env.HERCULES_ADMIN_TOKEN;
  if (file !== undefined) {
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch (e) {
      fail(`--admin-token-file ${file}: ${(e as Error).message}`);
    }
  }
  if (!token) fail('the admin API needs its token: --admin-token-file <path> or HERCULES_ADMIN_TOKEN');
  const url = (values.url as string | undefined) ?? 'http://127.0.0.1:8787';
  try {
    return createAdminClient({ url, token });
  } catch (e) {
    return fail(`--url ${url}: ${(e as Error).message}`);
  }
}

/** A failed request: the server's code and message on one line, exit 1. */
async function run<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof HerculesError) cannotStart(`${what}: ${e.code}: ${e.message}`);
    throw e;
  }
}

async function list(admin: AdminClient, values: Values): Promise<void> {
  const limit = values.limit === undefined ? Number.POSITIVE_INFINITY : num('limit', values.limit as string, 0) || fail('--limit must be positive');
  const rows: string[] = [];
  await run('rooms list', async () => {
    for await (const r of admin.allRooms()) {
      if (rows.length >= limit) break;
      rows.push(JSON.stringify(r));
    }
  });
  // One JSON object per line: for jq, grep and wc -l.
  if (rows.length) console.log(rows.join('\n'));
}

function roomArg(positionals: string[], sub: string): string {
  const room = positionals[2];
  if (room === undefined) fail(`rooms ${sub} needs a room name: hercules rooms ${sub} <room>`);
  return room;
}

export async function rooms(values: Values, positionals: string[]): Promise<void> {
  const sub = positionals[1];
  const subs = ['list', 'show', 'export', 'import', 'delete'];
  if (sub === undefined || !subs.includes(sub)) fail(`rooms needs one of ${subs.join(', ')}${sub === undefined ? '' : `, got ${JSON.stringify(sub)}`}`);
  const extra = positionals.slice(sub === 'list' ? 2 : sub === 'import' ? 4 : 3);
  if (extra.length) fail(`unexpected argument ${JSON.stringify(extra[0])}`);
  const admin = client(values);
  if (sub === 'list') return list(admin, values);
  const room = roomArg(positionals, sub);
  if (sub === 'show') return console.log(JSON.stringify(await run(`rooms show ${room}`, () => admin.state(room)), null, 2));
  if (sub === 'delete') {
    const deleted = await run(`rooms delete ${room}`, () => admin.deleteRoom(room));
    return console.log(deleted ? `deleted ${room}` : `no room ${room}`);
  }
  if (sub === 'export') {
    const file = await run(`rooms export ${room}`, () => admin.exportRoom(room));
    if (values.out) writeFileSync(values.out as string, `${JSON.stringify(file)}\n`);
    else console.log(JSON.stringify(file));
    return;
  }
  await importRoom(admin, room, positionals[3]);
}

async function importRoom(admin: AdminClient, room: string, path: string | undefined): Promise<void> {
  if (path === undefined) fail('rooms import needs a room name and a file: hercules rooms import <room> <file>');
  let file: RoomFile;
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as RoomFile;
  } catch (e) {
    fail(`${path}: ${(e as Error).message}`);
  }
  await run(`rooms import ${room}`, () => admin.importRoom(room, file));
  console.log(`imported ${room}`);
}

export async function revoke(values: Values, positionals: string[]): Promise<void> {
  if (positionals.length > 1) fail(`unexpected argument ${JSON.stringify(positionals[1])}`);
  const user = values.user as string | undefined;
  if (!user) fail('revoke needs --user <id>');
  const admin = client(values);
  const room = values.room as string | undefined;
  const reason = values.reason as string | undefined;
  const { closed } = await run('revoke', () => admin.revoke({ user, ...(room ? { room } : {}), ...(reason ? { reason } : {}) }));
  console.log(`closed ${closed} connection${closed === 1 ? '' : 's'} of ${user}`);
}
