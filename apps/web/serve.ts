/**
 * The main job: the Hercules server with the demo apps, on the embedded storage (SQLite).
 *   npm start [-- --port 8787 --data-dir data --simulate-rtt 150 --ack-timeout 2000 --log-level info]
 */
import { readFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createServer } from '@hercules/server';
import { chat, interiorDesign, spreadsheet, byteArray, notesDoc } from '../machines.ts';
import { APPS, DIST, buildApps } from './build.ts';

const HELP = `Usage: npm start -- [options]

Builds the demo apps and serves them with a Hercules server on embedded SQLite storage.

  --port <n>           HTTP + WebSocket port (default 8787)
  --host <addr>        interface (default 127.0.0.1)
  --data-dir <dir>     SQLite directory (default ./data)
  --simulate-rtt <ms>  delay each frame by half this each way, so the views visibly differ (default 0)
  --ack-timeout <ms>   visibility-set ack timeout (default 2000)
  --log-level <lvl>    pino level (default info)
`;

/** A bad option or value: one line, exit 2. */
function fail(msg: string): never {
  console.error(`npm start: ${msg} (npm start -- --help lists the options)`);
  process.exit(2);
}

/** The options were fine but the server cannot start (port taken, data directory in use): one line, exit 1. */
function cannotStart(msg: string): never {
  console.error(`npm start: ${msg}`);
  process.exit(1);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'data-dir': { type: 'string' },
      'simulate-rtt': { type: 'string' },
      'ack-timeout': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (e) {
  const unknown = /^Unknown option '([^']+)'/.exec((e as Error).message);
  fail(unknown ? `unknown option ${unknown[1]}` : (e as Error).message);
}
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const num = (name: string, v: string | undefined, d: number) => {
  if (v === undefined) return d;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) fail(`--${name} must be a non-negative number, got ${JSON.stringify(v)}`);
  return n;
};
const port = num('port', values.port, 8787);
if (!Number.isInteger(port) || port > 65535) fail(`--port must be an integer from 0 to 65535, got ${JSON.stringify(values.port)}`);
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
if (values['log-level'] !== undefined && !LOG_LEVELS.includes(values['log-level']))
  fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(values['log-level'])}`);
const simulateRttMs = num('simulate-rtt', values['simulate-rtt'], 0);
const ackTimeoutMs = num('ack-timeout', values['ack-timeout'], 2000) || 2000;

process.env.NODE_ENV ??= 'production';
await buildApps();

const page = (
  title: string,
  body: string,
) => `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title} · Hercules</title>
<style>body{margin:0;background:#f9fafb;color:#111827}a{color:#2563eb}</style></head><body>${body}</body></html>`;
const index = page(
  'Hercules demo apps',
  `<div style="font-family:system-ui;padding:24px;max-width:640px">
<h1>Hercules demo apps</h1><p>Open an app in two windows (or two browsers) to see the views differ and converge.</p><ul>
${APPS.map((a) => `<li><a href="/${a.id}">${a.title}</a> — ${a.blurb}</li>`).join('\n')}</ul></div>`,
);

const host = values.host ?? '127.0.0.1';
let server;
try {
  server = await createServer({
    machines: [chat, interiorDesign, spreadsheet, byteArray, notesDoc],
    port,
    host,
    dataDir: resolve(values['data-dir'] ?? 'data'),
    simulateRttMs,
    ackTimeoutMs,
    log: values['log-level'] ?? 'info',
    http: (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/favicon.ico') {
        res.writeHead(204);
        res.end();
        return true;
      }
      if (path === '/') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(index);
        return true;
      }
      const app = APPS.find((a) => path === `/${a.id}`);
      if (app) {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
        res.end(page(app.title, `<div id="root"></div><script type="module" src="/assets/${app.id}.js"></script>`));
        return true;
      }
      const m = /^\/assets\/([a-z]+\.js(?:\.map)?)$/.exec(path);
      if (m && existsSync(join(DIST, m[1]))) {
        res.writeHead(200, { 'content-type': m[1].endsWith('.map') ? 'application/json' : 'text/javascript', 'cache-control': 'no-store' });
        res.end(readFileSync(join(DIST, m[1])));
        return true;
      }
      return false;
    },
  });
} catch (e) {
  const err = e as NodeJS.ErrnoException;
  if (err.code === 'EADDRINUSE') cannotStart(`port ${port} on ${host} is already in use; stop what holds it or pick another with --port`);
  if (err.code === 'EADDRNOTAVAIL') cannotStart(`cannot listen on ${host}: no such local address (--host)`);
  cannotStart(err.message);
}
const http = server.url.replace('ws://', 'http://');
console.log(`\nHercules demo apps: ${http}/\n${APPS.map((a) => `  ${a.title.padEnd(16)} ${http}/${a.id}`).join('\n')}\n`);
const stop = async () => {
  await server.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
