/**
 * Files served beside the WebSocket (`hercules serve --static <dir>`, `createServer({ http:
 * staticFiles(dir) })`): an app's page and bundle on the server's own origin, so the browser
 * client's `ws://${location.host}` reaches the server that served it. GET and HEAD only, inside
 * `dir` only (no `..`, no symlink out of it), `index.html` for a directory; anything else falls
 * through to the server's 404.
 */
import { createReadStream, realpathSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { HerculesError } from '@hercules/core';

/** The types a web app's files need; anything else goes as bytes. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/** A handler serving the files under `dir`; throws bad-argument at once if `dir` is not a directory. */
export function staticFiles(dir: string): HttpHandler {
  let root: string;
  try {
    root = realpathSync(resolve(dir));
  } catch (e) {
    throw new HerculesError('bad-argument', `static files: ${dir} is not a directory (${(e as Error).message}); give the directory of the built app`);
  }
  if (!statSync(root).isDirectory()) throw new HerculesError('bad-argument', `static files: ${dir} is not a directory; give the directory of the built app`);
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const file = fileFor(root, req.url ?? '/');
    if (file === undefined) return false;
    res.writeHead(200, {
      'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
      'content-length': statSync(file).size,
      'x-content-type-options': 'nosniff',
      // Revalidated on every load: an app served here is the one the server runs with.
      'cache-control': 'no-cache',
    });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
    return true;
  };
}

/** The regular file under `root` a request path names, or undefined (outside root, missing, malformed). */
function fileFor(root: string, url: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(url.split('?')[0]);
  } catch {
    return undefined; // a malformed escape
  }
  if (path.includes('\0') || !path.startsWith('/')) return undefined;
  let file = resolve(root, `.${path}`);
  try {
    if (statSync(file).isDirectory()) file = join(file, 'index.html');
    file = realpathSync(file);
    if (file !== root && !file.startsWith(root + sep)) return undefined;
    return statSync(file).isFile() ? file : undefined;
  } catch {
    return undefined;
  }
}
