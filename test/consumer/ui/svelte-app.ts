/** @hercules/svelte in an app: a store live, then a component compiled by the installed Svelte and rendered on the server. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { compile, VERSION } from 'svelte/compiler';
import { viewStore } from '@hercules/svelte';
import { twoClients } from './machine.js';

const { a, b, close } = await twoClients('svelte');
const n = viewStore(a, 'visible', (s) => s.n);
const seen: number[] = [];
const stop = n.subscribe((v) => seen.push(v));
await a.ops.add({ by: 'a' }).visible;
await b.ops.add({ by: 'b' }).visible;
await a.until('visible', (s) => s.n === 2, { timeoutMs: 10_000 });
stop(); // unsubscribed: the next op is not seen
await b.ops.add({ by: 'b' }).visible;
await a.until('visible', (s) => s.n === 3, { timeoutMs: 10_000 });

// Svelte 5 compiles for 'server' and renders with svelte/server; Svelte 4 compiles for 'ssr' and renders with Component.render.
const five = Number(VERSION.split('.')[0]) >= 5;
// Run from the app's folder (its package.json makes the compiled .js an ES module).
const source = readFileSync('Count.svelte', 'utf8');
const { js } = compile(source, { generate: (five ? 'server' : 'ssr') as never, filename: 'Count.svelte' });
const compiled = join(process.cwd(), 'out', 'Count.compiled.js');
writeFileSync(compiled, js.code);
const Count = (await import(pathToFileURL(compiled).href)).default;
const props = { count: n, by: viewStore(a, 'visible', (s) => s.by) };
const serverModule = 'svelte/server'; // Svelte 5 only: not a static import, so Svelte 4's types need not know it
const html: string = five ? (await import(serverModule)).render(Count, { props }).body : Count.render(props).html;
console.log(JSON.stringify({ version: VERSION, seen, html }));
await close();
