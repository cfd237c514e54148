/** @hercules/vue in an app: a composable live in an effect scope, then in a server render, with the installed Vue. */
import { createSSRApp, effectScope, h, version } from 'vue';
import { renderToString } from 'vue/server-renderer';
import { useView } from '@hercules/vue';
import { twoClients } from './machine.js';

const { a, b, close } = await twoClients('vue');
const scope = effectScope();
const n = scope.run(() => useView(a, 'visible', (s) => s.n))!;
const seen = [n.value];
await a.ops.add({ by: 'a' }).visible;
await a.until('visible', (s) => s.n === 1, { timeoutMs: 10_000 });
seen.push(n.value);
await b.ops.add({ by: 'b' }).visible;
await a.until('visible', (s) => s.n === 2, { timeoutMs: 10_000 });
seen.push(n.value);
scope.stop(); // unsubscribed: the next op leaves the ref as it was
await b.ops.add({ by: 'b' }).visible;
await a.until('visible', (s) => s.n === 3, { timeoutMs: 10_000 });
seen.push(n.value);
// A server render reads once and leaves nothing subscribed (Vue before 3.5 would keep a watcher's subscription).
let subscribed = 0;
const subscribe = a.subscribe.bind(a);
a.subscribe = (view, fn, opts) => {
  subscribed++;
  const off = subscribe(view, fn, opts);
  return () => {
    subscribed--;
    off();
  };
};
const app = createSSRApp({
  setup() {
    const by = useView(a, 'visible', (s) => s.by);
    return () => h('p', `by ${by.value.join(',')}`);
  },
});
const html = await renderToString(app);
console.log(JSON.stringify({ version, seen, html, subscribedAfterRender: subscribed }));
await close();
