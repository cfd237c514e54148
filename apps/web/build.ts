/**
 * Bundle the web apps for the browser with esbuild (one ESM file per app).
 * Run on every server start: about a second; no separate build step to forget.
 */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

export const APPS = [
  { id: 'design', title: 'Interior design', blurb: 'Drag furniture; others see it move live; red until everyone sees it.' },
  { id: 'chat', title: 'Chat', blurb: 'A tick per stage: submitted, durable, authoritative, visible; who is typing.' },
  { id: 'sheet', title: 'Spreadsheet', blurb: 'Live cursors with names; red text until the edit is visible.' },
  { id: 'doc', title: 'Document', blurb: 'Rich text typed together: everyone’s caret and name; text underlined until ordered, faded until everyone has it.' },
] as const;

const here = dirname(fileURLToPath(import.meta.url));
export const DIST = join(here, 'dist');

export async function buildApps(opts: { minify?: boolean } = {}): Promise<void> {
  await build({
    entryPoints: Object.fromEntries(APPS.map((a) => [a.id, join(here, 'src', a.id, 'main.tsx')])),
    outdir: DIST,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    jsx: 'automatic',
    minify: opts.minify ?? true,
    sourcemap: true,
    define: { 'process.env.NODE_ENV': '"production"' },
    // The apps bundle the @hercules/* TypeScript sources (their "@hercules/source" export
    // condition), so the demo needs no build of the packages first.
    conditions: ['@hercules/source'],
    logLevel: 'warning',
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildApps();
