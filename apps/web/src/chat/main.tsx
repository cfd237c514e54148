/**
 * Chat (paper §6.2, Fig. 10): the latest messages of the Submitted view, each marked with the
 * oldest view that already contains it. The views are prefixes of one another, so message i is
 * in Visible iff i < visible.length, and so on: no per-message bookkeeping.
 */
import { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useView } from '@hercules/react';
import { trackOp } from '@hercules/react';
import { chat } from '../../../machines.ts';
import { openRoom, shortName } from '../shared/room.ts';
import { Shell } from '../shared/Shell.tsx';

const room = await openRoom(chat);
const MARKS = [
  { view: 'visible', mark: '✓✓', title: 'visible: every other client has it' },
  { view: 'authoritative', mark: '✓', title: 'authoritative: ordered by the server' },
  { view: 'durable', mark: '●', title: 'durable: saved on this device' },
  { view: 'submitted', mark: '○', title: 'submitted: only in memory' },
] as const;

function Chat() {
  const submitted = useView(room, 'submitted', (s) => s.messages);
  const lengths = {
    durable: useView(room, 'durable', (s) => s.messages.length),
    authoritative: useView(room, 'authoritative', (s) => s.messages.length),
    visible: useView(room, 'visible', (s) => s.messages.length),
    submitted: submitted.length,
  };
  const [text, setText] = useState('');
  const first = Math.max(0, submitted.length - 12);
  const send = () => {
    if (!text.trim()) return;
    trackOp(room, room.ops.say({ text: text.slice(0, 2000) }));
    setText('');
  };
  return (
    <Shell title="Chat" room={room}>
      <ol
        data-testid="messages"
        style={{ listStyle: 'none', padding: 0, margin: 0, width: 520, minHeight: 300, background: 'white', border: '1px solid #e5e7eb', borderRadius: 8 }}
      >
        {submitted.slice(first).map((m, k) => {
          const i = first + k;
          // The oldest view that contains message i (prefix property).
          const stage = MARKS.find((s) => i < lengths[s.view])!;
          const mine = m.author === room.clientId;
          return (
            <li
              key={m.id}
              data-testid="message"
              data-stage={stage.view}
              style={{ display: 'flex', justifyContent: mine ? 'flex-end' : 'flex-start', padding: '4px 8px' }}
            >
              <span style={{ background: mine ? '#dbeafe' : '#f3f4f6', borderRadius: 8, padding: '4px 8px', maxWidth: 380 }}>
                <small style={{ color: '#6b7280', marginRight: 6 }}>{shortName(m.author)}</small>
                <span data-testid="text">{m.text}</span>
                <span title={stage.title} data-testid="mark" style={{ marginLeft: 6, color: stage.view === 'visible' ? '#059669' : '#9ca3af' }}>
                  {stage.mark}
                </span>
              </span>
            </li>
          );
        })}
      </ol>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          send();
        }}
        style={{ marginTop: 8, display: 'flex', gap: 8, width: 520 }}
      >
        <input data-testid="input" value={text} onChange={(e) => setText(e.target.value)} placeholder="Say something" style={{ flex: 1, padding: 6 }} />
        <button data-testid="send" type="submit">
          Send
        </button>
      </form>
      <p style={{ fontSize: 12, color: '#6b7280' }}>{MARKS.map((s) => `${s.mark} ${s.title}`).join(' · ')}</p>
    </Shell>
  );
}

createRoot(document.getElementById('root')!).render(<Chat />);
