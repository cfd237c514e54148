/**
 * Child process for Figure 15: one byte-array client that submits an op every `everyMs` until
 * it is SIGKILLed. Prints "online" once it is a member of the room.
 *   node --import tsx fig15-client.ts <url> <room> <clientId> <everyMs>
 */
import { connect } from '@hercules/client';
import { byteArray } from '../../../apps/machines.ts';

const [url, room, clientId, everyMs] = process.argv.slice(2);
const r = await connect({ url, room, machine: byteArray, clientId });
while (r.status() !== 'online') await new Promise((res) => setTimeout(res, 10));
console.log('online');
let k = 0;
setInterval(() => {
  r.ops.increment({ offset: (k++ * 997) % 9000, count: 1000 });
}, Number(everyMs));
