/** `hercules serve`'s options, grouped as --help shows them (options.ts reads them from argv and the environment). */
import type { OptionGroup } from './options.ts';

export const SERVE_OPTIONS: readonly OptionGroup[] = [
  {
    title: 'Server',
    options: [
      {
        name: 'machines',
        arg: 'module',
        help: 'module exporting the state machines (defineMachine); required.\nJavaScript (.js, .mjs, .cjs) or TypeScript (.ts, .mts, .cts, run through tsx)',
      },
      { name: 'port', arg: 'n', help: 'TCP port (default 8787; 0 picks a free one)' },
      { name: 'host', arg: 'addr', help: 'interface to listen on (default 127.0.0.1; 0.0.0.0 in a container)' },
      { name: 'data-dir', arg: 'dir', help: 'where the SQLite file lives (default ./data)' },
      {
        name: 'memory',
        help: 'keep the rooms in memory, not on disk: nothing is written, and every room\nis gone when the server stops (for trying things out and tests)',
      },
      {
        name: 'static',
        arg: 'dir',
        help: "serve the files under <dir> over HTTP on the server's port (index.html for /),\nso a browser app's ws://<location.host> reaches this server",
      },
      { name: 'ack-timeout', arg: 'ms', help: 'drop a member from the visibility set after this long without an ack (default 2000)' },
      { name: 'heartbeat', arg: 'ms', help: 'ping interval; silent connections are dropped after two (default 5000; 1000 with --nats)' },
      { name: 'simulate-rtt', arg: 'ms', help: 'delay every frame by half this each way, to see the views differ locally (default 0)' },
      { name: 'checkpoint-every', arg: 'n', help: "write a room's checkpoint state at most every n ops (default 1000)" },
      {
        name: 'history-ops',
        arg: 'n',
        help: 'keep the last n ops of each room behind its checkpoint, for stateAt and log\n(docs/history.md; default 10000 unless --history-days is given)',
      },
      { name: 'history-days', arg: 'days', help: 'keep the ops of the last <days> days behind the checkpoint (with --history-ops: both limits)' },
      {
        name: 'commit-window',
        arg: 'ms',
        help: 'group-commit batching: gather writes this long into one transaction\n(default 0: one commit per event-loop turn)',
      },
      { name: 'log-level', arg: 'level', help: 'trace|debug|info|warn|error|silent (default info)' },
    ],
  },
  {
    title: 'Admin HTTP API and webhooks (docs/admin-api.md)',
    options: [
      {
        name: 'admin-token-file',
        arg: 'path',
        help: 'turn on the admin API under /admin/ for a bearer token read from this file\n(at least 32 characters); or give the token itself in HERCULES_ADMIN_TOKEN',
      },
      { name: 'webhook-url', arg: 'url', help: "POST each room's commits to this URL, signed the Standard Webhooks way" },
      {
        name: 'webhook-secret-file',
        arg: 'path',
        help: 'the signing secret (whsec_..., see newWebhookSecret) read from this file;\nor give it in HERCULES_WEBHOOK_SECRET',
      },
    ],
  },
  {
    title: 'Cluster mode (needs @hercules/cluster installed; see docs/deployment.md)',
    options: [
      {
        name: 'nats',
        arg: 'urls',
        help: 'comma-separated NATS server URLs: run as a node of a cluster, rooms in\nJetStream instead of SQLite (--data-dir is then unused)',
      },
      { name: 'node-id', arg: 'id', help: "this node's id in the cluster (default host:port)" },
      { name: 'shards', arg: 'n', help: 'shards rooms hash to; every node and every restart must agree (default 64)' },
      { name: 'lease-ms', arg: 'ms', help: "how long a dead node's rooms wait before another takes them (default 2000)" },
      { name: 'nats-replicas', arg: 'n', help: 'replicas of each stream (default 3; 1 for a single NATS server)' },
      { name: 'nats-prefix', arg: 'name', help: 'subject and stream prefix, for several clusters on one NATS (default hc)' },
      {
        name: 'nats-batch',
        arg: 'on|off',
        help: "a shard's appends of one turn as one message (default on); off while a rolling\nupgrade runs nodes that do not read batches",
      },
    ],
  },
  {
    title: "Authentication (JWT; the user is the token's sub; one key source; see docs/security.md)",
    options: [
      { name: 'jwt-secret-file', arg: 'path', help: 'HMAC secret (at least 32 bytes) read from a file, never from argv' },
      { name: 'jwt-public-key', arg: 'path', help: 'PEM public key file (RS*, PS*, ES*, EdDSA)' },
      { name: 'jwks-file', arg: 'path', help: 'JWKS file ({ "keys": [...] }), keys picked by kid' },
      { name: 'jwt-issuer', arg: 'iss', help: 'required issuer' },
      { name: 'jwt-audience', arg: 'aud', help: 'required audience' },
      {
        name: 'jwt-clock-tolerance',
        arg: 's',
        help: 'seconds a token is still taken past its exp (and before its nbf), for clocks\nthat disagree; a connection closes at exp plus this (default 30)',
      },
    ],
  },
  {
    title: 'Limits (defaults in docs/security.md)',
    options: [
      { name: 'max-frame-bytes', arg: 'n', help: 'largest frame accepted (default 1048576)' },
      { name: 'ops-per-second', arg: 'n', help: 'sustained ops per second per connection (default 1000)' },
      { name: 'user-ops-per-second', arg: 'n', help: 'sustained ops per second per authenticated user, all connections (default 2000)' },
      { name: 'bytes-per-second', arg: 'n', help: 'sustained bytes per second per connection (default 1048576)' },
      { name: 'max-connections', arg: 'n', help: 'connections per server (default 10000)' },
      { name: 'max-clients-per-room', arg: 'n', help: 'connections per room (default 256)' },
      { name: 'hello-timeout', arg: 'ms', help: 'close a connection that has not said hello within this (default 10000)' },
      { name: 'upgrade-timeout', arg: 'ms', help: 'close a connection whose upgrade request is not in within this of connecting (default 10000)' },
      { name: 'max-pending-connections', arg: 'n', help: 'connections without a complete request at once; past it the oldest is closed (default 1000)' },
    ],
  },
];
