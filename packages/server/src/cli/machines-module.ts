/** Loading the user's machines module for `hercules serve`, with its errors as its author should see them. */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Machine } from '@hercules/core';

/** Is this file an ES module as Node sees it: .mts/.mjs, or .ts/.js under "type": "module"? */
function isEsm(file: string): boolean {
  if (/\.m[jt]s$/.test(file)) return true;
  if (/\.c[jt]s$/.test(file)) return false;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        return (JSON.parse(readFileSync(pkg, 'utf8')) as { type?: string }).type === 'module';
      } catch {
        return false;
      }
    }
    if (dirname(dir) === dir) return false;
  }
}

/**
 * Imports the user's machines module. JavaScript is imported as it is. TypeScript goes through
 * tsx, loaded only then, with its loader scoped to this module and its imports (nothing else in
 * the process changes): tsImport for an ES module; tsx's require for a CommonJS one (a .ts file
 * in a default `npm init` project), which keeps the module's own errors and their locations
 * readable. (In the CommonJS case tsx gives that module a CommonJS copy of @hercules/core; a
 * machine is plain data and functions, so the server's copy runs it the same.)
 */
async function loadModule(file: string): Promise<Record<string, unknown>> {
  if (!/\.[cm]?tsx?$/.test(file)) return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  process.setSourceMapsEnabled(true); // stack traces point into the .ts source
  if (isEsm(file)) {
    const { tsImport } = await import('tsx/esm/api');
    return (await tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
  }
  const tsx = await import('tsx/cjs/api');
  return tsx.require(file, import.meta.url) as Record<string, unknown>;
}

/** A load error as the module's author should see it: where it is, then what. */
export function loadError(e: unknown, file: string): string {
  if (!(e instanceof Error)) return String(e);
  // A TypeScript syntax error: esbuild's message names the file, line and column; its stack is
  // esbuild's own internals.
  if (e.name === 'TransformError' || /^Transform failed with/.test(e.message)) return e.message;
  // A JavaScript syntax error in an ES module: Node's stack names only its own loader, so ask
  // `node --check` for the file, line and caret (the error may also be in a module it imports).
  if (e.name === 'SyntaxError' && !/\.[cm]?tsx?$/.test(file)) {
    const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 });
    if (check.status !== 0 && check.stderr.trim()) return check.stderr.trim();
    return `${e.stack ?? e.message}\n(not in ${file} itself: in a module it imports)`;
  }
  return e.stack ?? e.message;
}

/** The machines a loaded module exports (made with defineMachine). */
export function machinesOf(mod: Record<string, unknown>): Machine<any, any>[] {
  return Object.values(mod).filter((m): m is Machine<any, any> => !!m && typeof m === 'object' && (m as Machine).opNames instanceof Set);
}

export { loadModule };
