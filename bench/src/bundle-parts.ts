/**
 * Where the bytes of the README's browser bundle go (issue 41, item 5): `browser.mjs` bundled
 * from the TypeScript sources as the consumer test bundles it from dist/ (esbuild, platform
 * browser, ESM, minified, NODE_ENV=production, gzip level 9), once with `@hercules/client` and
 * once with `@hercules/client/lean`; per file, its minified bytes and a gzipped estimate (its
 * share of the minified bundle times the bundle's gzipped size: files do not gzip alone as
 * they do together).
 *
 *   node --import tsx bench/src/bundle-parts.ts        (about 2 s)
 */
import { build } from 'esbuild';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

const app = (from: string) => `
import { connect, indexedDbStorage } from '${from}';
import { defineMachine } from '@hercules/core';
const chat = defineMachine({
  name: 'chat', version: 1, initial: { messages: [] },
  ops: { say(state, args, ctx) { state.messages.push({ id: ctx.client + ':' + ctx.seq, text: args.text }); } },
});
const room = await connect({ url: 'ws://' + location.host, room: 'hello', machine: chat, storage: indexedDbStorage('hello') });
room.subscribe('visible', (s) => { document.body.textContent = s.messages.map((m) => m.text).join('\\n'); });
room.ops.say({ text: 'hello from a browser' });
`;

const kib = (n: number) => (n / 1024).toFixed(2);
for (const from of ['@hercules/client', '@hercules/client/lean']) {
  const r = await build({
    stdin: { contents: app(from), resolveDir: here, loader: 'js', sourcefile: 'browser.mjs' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'error',
    define: { 'process.env.NODE_ENV': '"production"' },
    conditions: ['@hercules/source'],
  });
  const code = r.outputFiles[0].contents;
  const gz = gzipSync(code, { level: 9 }).length;
  console.log(`\n${from}: ${kib(code.length)} KiB minified, ${kib(gz)} KiB gzipped\n`);
  console.log('| file | minified bytes | gzipped KiB (estimate) |\n|---|--:|--:|');
  const files = Object.entries(Object.values(r.metafile.outputs)[0].inputs)
    .filter(([, i]) => i.bytesInOutput > 0)
    .sort((a, b) => b[1].bytesInOutput - a[1].bytesInOutput);
  for (const [file, { bytesInOutput }] of files) {
    const name = file.replace(/.*node_modules\//, '').replace(/^.*packages\//, '');
    console.log(`| ${name} | ${bytesInOutput} | ${kib((bytesInOutput / code.length) * gz)} |`);
  }
}
