/**
 * Browser bundle size of a small client app: Hercules (@hercules/client with IndexedDB storage
 * and a one-op machine, bundled from the TypeScript sources) beside Yjs + y-websocket doing the same
 * (a shared array over a WebSocket provider). esbuild, platform browser, ESM, minified,
 * NODE_ENV=production; gzip level 9. The consumer test (test/consumer) measures the same
 * Hercules entry from the packed tarballs (the built JavaScript: 0.3 KiB more gzipped than from the sources).
 *
 *   npm run bench:size        (about 2 s)
 */
import { build } from 'esbuild';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

const ENTRIES = {
  'Hercules (@hercules/client + IndexedDB storage)': `
import { connect, indexedDbStorage } from '@hercules/client';
import { defineMachine } from '@hercules/core';
const chat = defineMachine({
  name: 'chat', version: 1, initial: { messages: [] },
  ops: { say(state, args, ctx) { state.messages.push({ id: ctx.client + ':' + ctx.seq, text: args.text }); } },
});
const room = await connect({ url: 'ws://' + location.host, room: 'hello', machine: chat, storage: indexedDbStorage('hello') });
room.subscribe('visible', (s) => { document.body.textContent = s.messages.map((m) => m.text).join('\\n'); });
room.ops.say({ text: 'hello from a browser' });
`,
  'Yjs + y-websocket': `
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
const doc = new Y.Doc();
const provider = new WebsocketProvider('ws://' + location.host, 'hello', doc);
const messages = doc.getArray('messages');
messages.observe(() => { document.body.textContent = messages.toArray().join('\\n'); });
messages.push(['hello from a browser']);
globalThis.provider = provider;
`,
};

const kib = (n: number) => (n / 1024).toFixed(1);
console.log('| client | minified KiB | gzipped KiB | largest parts (minified KiB) |\n|---|--:|--:|---|');
for (const [name, contents] of Object.entries(ENTRIES)) {
  const r = await build({
    stdin: { contents, resolveDir: here, loader: 'js', sourcefile: 'entry.js' },
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
  const parts = new Map<string, number>();
  for (const [file, { bytesInOutput }] of Object.entries(Object.values(r.metafile.outputs)[0].inputs)) {
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? /packages\/([^/]+)\//.exec(file)?.[1]?.replace(/^/, '@hercules/') ?? file;
    parts.set(pkg, (parts.get(pkg) ?? 0) + bytesInOutput);
  }
  const largest = [...parts]
    .filter(([, n]) => n >= 512)
    .sort((a, b) => b[1] - a[1])
    .map(([p, n]) => `${p} ${kib(n)}`)
    .join(', ');
  console.log(`| ${name} | ${kib(code.length)} | ${kib(gzipSync(code, { level: 9 }).length)} | ${largest} |`);
}
