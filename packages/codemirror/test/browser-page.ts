/**
 * The page of the browser test (bundled by it with esbuild): an editor bound to the room's text,
 * with the marks on, its name from `?name=`, and every frame it sends held back `?rtt=` ms (a
 * round trip to a far server, in one direction: the ops reach the server that much later).
 */
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { connect } from '@hercules/client';
import { hercules, viewMarks } from '../src/index.ts';
import { pad } from './browser-machine.ts';

const params = new URLSearchParams(location.search);
const rtt = Number(params.get('rtt') ?? 0);

class SlowSocket extends WebSocket {
  override send(data: string | ArrayBufferLike | Blob | ArrayBufferView): void {
    // Equal delays keep the order (timers of one delay run in the order they were set).
    setTimeout(() => {
      if (this.readyState === WebSocket.OPEN) super.send(data);
    }, rtt);
  }
}
globalThis.WebSocket = SlowSocket;

const room = await connect({ url: `ws://${location.host}`, room: 'pad', machine: pad });
await room.whenOnline({ timeoutMs: 10_000 });
const view = new EditorView({
  parent: document.querySelector('#editor')!,
  state: EditorState.create({
    doc: room.text('doc').toString(),
    extensions: [hercules({ room, path: 'doc', cursors: { name: params.get('name') ?? 'anon' } }), viewMarks({ authoritative: true, visible: true })],
  }),
});
Object.assign(globalThis, { view, room, ready: true });
