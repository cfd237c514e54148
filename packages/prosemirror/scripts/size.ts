/**
 * The binding's browser bundle size: esbuild, platform browser, ESM, minified, gzip level 9,
 * from the TypeScript sources; ProseMirror (a peer) always external, @hercules/core external or
 * included (an app has it anyway through @hercules/client).
 *
 *   node --import tsx packages/prosemirror/scripts/size.ts
 */
import { build } from 'esbuild';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url));
const cases: [string, string[]][] = [
  ['@hercules/prosemirror alone (@hercules/core and ProseMirror external)', ['prosemirror-*', '@hercules/core']],
  ['@hercules/prosemirror + the parts of @hercules/core it uses (ProseMirror external)', ['prosemirror-*']],
];
for (const [name, external] of cases) {
  const r = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    external,
    logLevel: 'error',
    define: { 'process.env.NODE_ENV': '"production"' },
    conditions: ['@hercules/source'],
  });
  const code = r.outputFiles[0].contents;
  console.log(`${name}: ${(code.length / 1024).toFixed(2)} KiB minified, ${(gzipSync(code, { level: 9 }).length / 1024).toFixed(2)} KiB gzipped`);
}
