/**
 * The hercules command:
 *   hercules serve     run a Hercules server (embedded SQLite, in memory, or a cluster node with --nats)
 *   hercules rooms     list, show, export, import or delete a running server's rooms (admin API)
 *   hercules revoke    close a user's connections on a running server (admin API)
 *   hercules nats-dev  run a local NATS cluster for trying cluster mode
 *   hercules audit     check a room's history in a cluster's NATS streams
 *   hercules replay    run a room export's log again and check it reproduces the recorded states
 * Every option has an environment variable (options.ts); `hercules --help` lists both.
 */
import { readFileSync } from 'node:fs';
import { audit, natsDev } from './cli/cluster-commands.ts';
import { fail } from './cli/common.ts';
import { type OptionGroup, parseOptions, renderOptions } from './cli/options.ts';
import { REPLAY_OPTIONS, replay } from './cli/replay.ts';
import { ADMIN_OPTIONS, revoke, rooms } from './cli/rooms.ts';
import { serve } from './cli/serve.ts';
import { SERVE_OPTIONS } from './cli/serve-options.ts';

const CLUSTER_TOOLS: readonly OptionGroup[] = [
  {
    title: 'nats-dev and audit',
    options: [
      { name: 'nodes', noEnv: true, arg: 'n', help: 'nats-dev: how many nats-server processes (default 3)' },
      { name: 'dir', noEnv: true, arg: 'dir', help: 'nats-dev: where their data and logs go (default: a temp directory)' },
      { name: 'nats', arg: 'urls', help: "audit: the cluster's NATS URLs, comma-separated" },
      { name: 'room', noEnv: true, arg: 'name', help: 'audit: the room to check' },
      { name: 'shards', arg: 'n', help: 'audit: shards rooms hash to (default 64)' },
      { name: 'nats-prefix', arg: 'name', help: 'audit: subject and stream prefix (default hc)' },
    ],
  },
];

const GENERAL: readonly OptionGroup[] = [
  {
    title: 'General',
    options: [
      { name: 'version', short: 'v', noEnv: true, help: 'the version' },
      { name: 'help', short: 'h', noEnv: true, help: 'this text' },
    ],
  },
];

const COMMANDS: Record<
  string,
  { groups: readonly OptionGroup[]; run: (values: Record<string, string | boolean | undefined>, positionals: string[]) => Promise<void> }
> = {
  serve: { groups: SERVE_OPTIONS, run: serve },
  rooms: { groups: ADMIN_OPTIONS, run: rooms },
  revoke: { groups: ADMIN_OPTIONS, run: revoke },
  'nats-dev': { groups: CLUSTER_TOOLS, run: (v) => natsDev(v) },
  audit: { groups: CLUSTER_TOOLS, run: (v) => audit(v) },
  replay: { groups: REPLAY_OPTIONS, run: replay },
};

function help(): string {
  return `Usage: hercules serve --machines <module> [options]
       hercules rooms list|show <room>|export <room> [--out file]|import <room> <file>|delete <room> [--url url]
       hercules revoke --user <id> [--room name] [--reason text] [--url url]
       hercules nats-dev [--nodes 3] [--dir <dir>]
       hercules audit --nats <urls> --room <name> [--shards 64] [--nats-prefix hc]
       hercules replay <file> --machines <module> [--json]
       hercules --version

serve runs a Hercules sync server: WebSocket on /?room=NAME, /healthz, /metrics, and with
--admin-token-file the admin API under /admin/ that rooms and revoke call.

hercules audit reads a room's claims, checkpoints and log records from the cluster's streams
(read-only), applies the replay rule and walks the chain; prints a JSON report and exits 1 if it
finds a problem (a log without a checkpoint, a broken chain, an op in the room twice).

hercules replay runs a room export's log (hercules rooms export) again through the machines
module's machine and compares the state's digest at every checkpoint the export recorded and at
its head, and each op's outcome (applied or threw). Exit 0: all match; 1: they differ (it prints
the first position where, the op there and its author); 2: the file or module cannot be replayed.
To attach a room to a bug report: hercules rooms export <room> --out room.json, then whoever
reproduces it runs hercules replay room.json --machines <module> (docs/replay.md).

hercules nats-dev starts <nodes> nats-server processes (the machine's binary) on free ports with
their data in <dir> (default: a temp directory) and prints the --nats value; Ctrl-C stops them.

Every option can be set in its environment variable instead (twelve-factor; a flag wins over
its variable), listed under each option as env NAME.
${renderOptions([...SERVE_OPTIONS, ...ADMIN_OPTIONS.map((g) => ({ ...g, options: g.options.filter((o) => o.name !== 'admin-token-file') })), ...CLUSTER_TOOLS.map((g) => ({ ...g, options: g.options.filter((o) => o.name !== 'nats' && o.name !== 'nats-prefix') })), ...REPLAY_OPTIONS.map((g) => ({ ...g, options: g.options.filter((o) => o.name !== 'machines') })), ...GENERAL])}
`;
}

function version(): string {
  // package.json is one level above both src/cli.ts and dist/cli.js.
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export async function main(argv: string[]): Promise<void> {
  const all = [...Object.values(COMMANDS).flatMap((c) => c.groups), ...GENERAL];
  const groupsOf = (name: string | undefined) => [...((name !== undefined && COMMANDS[name]?.groups) || []), ...GENERAL];
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv, all, groupsOf, process.env);
  } catch (e) {
    return fail((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.version) return console.log(version());
  if (values.help || positionals[0] === 'help') return console.log(help());
  if (positionals.length === 0) {
    console.error(help());
    process.exit(2);
  }
  const command = COMMANDS[positionals[0]];
  if (!command) fail(`unknown command ${JSON.stringify(positionals[0])}`);
  await command.run(values, positionals);
}

await main(process.argv.slice(2));
