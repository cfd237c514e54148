/**
 * The page of the browser test (bundled by it with esbuild): a ProseMirror editor bound to the
 * room's rich text, with the marks on, the usual keymaps (Enter splits, Mod-b bolds), its name
 * from `?name=`, and every frame it sends held back `?rtt=` ms (a round trip to a far server, in
 * one direction: the ops reach the server that much later).
 */
import { baseKeymap, toggleMark } from 'prosemirror-commands';
import { history, redo, undo } from 'prosemirror-history';
import { keymap } from 'prosemirror-keymap';
import { EditorState } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { connect } from '@hercules/client';
import { docOf, hercules, schema } from '../src/index.ts';
import { doc } from './browser-machine.ts';

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

const room = await connect({ url: `ws://${location.host}`, room: 'doc', machine: doc });
await room.whenOnline({ timeoutMs: 10_000 });
const view = new EditorView(document.querySelector('#editor')!, {
  state: EditorState.create({
    doc: docOf(room, 'doc'),
    plugins: [
      hercules({ room, path: 'doc', cursors: { name: params.get('name') ?? 'anon' }, marks: { authoritative: true, visible: true } }),
      history(),
      keymap({ 'Mod-z': undo, 'Mod-Shift-z': redo, 'Mod-b': toggleMark(schema.marks.strong), 'Mod-i': toggleMark(schema.marks.em) }),
      keymap(baseKeymap),
    ],
  }),
});
Object.assign(globalThis, { view, room, ready: true });
