// Quick start: run the server (npm start), then: npx tsx apps/quickstart/client.ts
import { connect, VIEWS } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { chat } from '../machines.ts';

const room = await connect({
  url: process.env.HERCULES_URL ?? 'ws://127.0.0.1:8787',
  room: 'quickstart',
  machine: chat,
  storage: sqliteStorage('.hercules/quickstart.sqlite'), // durable ops survive restarts
});
// { immediate: true }: also print each view as it is now, not only its later changes.
for (const view of VIEWS) room.subscribe(view, (s) => console.log(`${view.padEnd(13)} ${s.messages.length} messages`), { immediate: true });
const op = room.ops.say({ text: `hello at ${new Date().toISOString()}` });
await op.visible; // delivered to every other client in the room
await op.stable; // every client has every op up to ours
console.log('delays after submit (ms):', op.delays);
await room.close();
