/**
 * A narrated run: two clients and a room over a simulated 67 ms round trip (the paper's setup).
 * Prints each view of Alice's chat as her message travels: submitted, durable, authoritative,
 * visible, stable.
 */
import { ClientRoom, RoomEngine, defineMachine, VIEWS, type ClientMessage, type RoomOutput, type ServerMessage } from '@hercules/core';

const chat = defineMachine({
  name: 'chat',
  version: 1,
  initial: { messages: [] as { from: string; text: string }[] },
  ops: {
    say(s, a: { text: string }, ctx) {
      s.messages.push({ from: ctx.author, text: a.text });
    },
  },
});

const ONE_WAY = 33.5;
let now = 0;
const queue: { at: number; run: () => void }[] = [];
const later = (ms: number, run: () => void) => {
  queue.push({ at: now + ms, run });
  queue.sort((a, b) => a.at - b.at);
};
const server = new RoomEngine(chat);
const rooms = new Map<string, ClientRoom<typeof chat>>();

function deliver(o: RoomOutput) {
  for (const { conn, msg } of o.send) later(ONE_WAY, () => rooms.get(conn)!.receive(structuredClone(msg) as ServerMessage));
}
for (const id of ['alice', 'bob']) {
  const room = new ClientRoom(chat, { clientId: id, now: () => now, notify: 'sync' });
  room.attach({
    send: (m: ClientMessage) => later(ONE_WAY, () => deliver(server.message(id, structuredClone(m), now))),
    persist: (ops) => later(2, () => room.durable(ops[ops.length - 1].seq)),
  });
  rooms.set(id, room);
  deliver(server.open(id, now));
  room.connected();
}
const alice = rooms.get('alice')!;
const show = () => {
  const row = VIEWS.map((v) => `${v}=${alice.getState(v).messages.length}`).join('  ');
  console.log(`t=${now.toFixed(1).padStart(6)} ms  alice's views (messages in each): ${row}`);
};
for (const v of VIEWS) alice.subscribe(v, show);
later(200, () => {
  console.log('alice says "hello" (round trip 67 ms)');
  const h = alice.ops.say({ text: 'hello' });
  h.visible.then(() =>
    console.log(
      `stage times (ms after submit): ${Object.entries(h.times)
        .map(([k, t]) => `${k} ${(t! - 200).toFixed(1)}`)
        .join(', ')}`,
    ),
  );
});
while (queue.length) {
  const e = queue.shift()!;
  now = e.at;
  e.run();
  await Promise.resolve();
}
console.log(`bob sees: ${JSON.stringify(rooms.get('bob')!.getState('visible').messages)}`);
