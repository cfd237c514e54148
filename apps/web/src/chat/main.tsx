/**
 * Chat (paper §6.2, Fig. 10): every message of the Submitted view, each marked with the oldest
 * view that already contains it. The views are prefixes of one another, so message i is in
 * Visible iff i < visible.length, and so on: no per-message bookkeeping. Who is typing is
 * presence (`typing: true` while the box holds recently edited text), never a message. Under
 * one's latest message, "seen by" names the members that hold it (delivery receipts: acks are
 * cumulative, so whoever holds the latest holds every earlier one too).
 */
import { memo, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { trackOp, useSeenBy, useView } from '@hercules/react';
import type { ConnectedRoom, OpHandle } from '@hercules/client';
import { chat } from '../../../machines.ts';
import { colorOf, usePeers } from '../shared/people.tsx';
import { shortName } from '../shared/room.ts';
import { Shell, hint } from '../shared/Shell.tsx';
import { startApp } from '../shared/start.tsx';

const MARKS = [
  { view: 'visible', mark: '✓✓', title: 'visible: every other client has it' },
  { view: 'authoritative', mark: '✓', title: 'authoritative: ordered by the server' },
  { view: 'durable', mark: '●', title: 'durable: saved on this device' },
  { view: 'submitted', mark: '○', title: 'submitted: only in memory' },
] as const;
/** Typing stops counting this long after the last edit, sent or not. */
const TYPING_IDLE_MS = 3000;
/** Closer than this to the bottom is "at the bottom": new messages scroll into view. */
const STICKY_PX = 40;

function Chat({ room }: { room: ConnectedRoom<typeof chat> }) {
  const submitted = useView(room, 'submitted', (s) => s.messages);
  const lengths = {
    durable: useView(room, 'durable', (s) => s.messages.length),
    authoritative: useView(room, 'authoritative', (s) => s.messages.length),
    visible: useView(room, 'visible', (s) => s.messages.length),
    submitted: submitted.length,
  };
  // Authors are client ids (or users) in the log; those online have a name in their presence.
  const names = usePeers(room, (ps) => Object.fromEntries(ps.map((p) => [p.author, { name: p.name, color: p.color }])));
  const typing = usePeers(room, (ps) => ps.filter((p) => p.value.typing === true).map((p) => p.name));
  // Receipts name members, which are client ids: the name each shows in its presence.
  const clientNames = usePeers(room, (ps) => Object.fromEntries(ps.map((p) => [p.client, p.name])));
  const [latest, setLatest] = useState<OpHandle>();
  const seenBy = useSeenBy(room, latest);
  const [text, setText] = useState('');
  const typingTimer = useRef<ReturnType<typeof setTimeout>>(undefined);

  const setTyping = (on: boolean) => {
    clearTimeout(typingTimer.current);
    if (on) typingTimer.current = setTimeout(() => room.presence.update({ typing: false }), TYPING_IDLE_MS);
    if ((room.presence.get() as { typing?: boolean } | undefined)?.typing !== on) room.presence.update({ typing: on });
  };
  useEffect(() => () => clearTimeout(typingTimer.current), []);
  const edit = (t: string) => {
    setText(t);
    setTyping(t.trim() !== '');
  };
  const send = () => {
    if (!text.trim()) return;
    const op = room.ops.say({ text: text.slice(0, 2000) });
    trackOp(room, op);
    setLatest(op);
    setText('');
    setTyping(false);
  };

  // Stick to the bottom as messages arrive, unless the reader scrolled up; one's own message always shows.
  const list = useRef<HTMLOListElement>(null);
  const atBottom = useRef(true);
  const last = submitted.at(-1);
  // Scrolled in the next frame's callback (before that frame paints), not in the layout effect
  // itself: reading scrollHeight there forced the page's style and layout inside the submit's
  // own turn (7-8 ms of a 10 ms render of 340 messages, a Chromium trace), and a tab's op waits
  // for that turn to end before its IndexedDB write completes and it is sent (docs/tabs.md). The
  // frame lays the page out anyway.
  useLayoutEffect(() => {
    const el = list.current;
    if (!el || !last || !(atBottom.current || last.author === room.clientId)) return;
    const frame = requestAnimationFrame(() => {
      el.scrollTop = el.scrollHeight;
    });
    return () => cancelAnimationFrame(frame);
  }, [room, last]);

  return (
    <Shell title="Chat" room={room}>
      <div style={{ maxWidth: 560 }}>
        <ol
          data-testid="messages"
          ref={list}
          onScroll={(e) => {
            const el = e.currentTarget;
            atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < STICKY_PX;
          }}
          style={{
            // A column whose first entry takes the free space: few messages sit at the bottom, by the box.
            display: 'flex',
            flexDirection: 'column',
            listStyle: 'none',
            padding: '4px 0',
            margin: 0,
            height: 'min(60vh, 420px)',
            minHeight: 200,
            overflowY: 'auto',
            background: 'white',
            border: '1px solid #e5e7eb',
            borderRadius: 8,
          }}
        >
          <li aria-hidden style={{ marginTop: 'auto' }} />
          {submitted.length === 0 && <li style={{ color: '#9ca3af', padding: '8px 12px', fontSize: 14 }}>No messages yet. Say hello!</li>}
          {submitted.map((m, i) => {
            const who = names[m.author] ?? { name: shortName(m.author), color: colorOf(m.author) };
            return (
              <Message
                key={m.id}
                text={m.text}
                // The oldest view that contains message i (prefix property).
                stage={MARKS.find((s) => i < lengths[s.view])!}
                mine={m.author === room.clientId}
                name={who.name}
                color={who.color}
                seenBy={m.id === latest?.id && seenBy.length > 0 ? nameList(seenBy.map((c) => clientNames[c] ?? shortName(c))) : undefined}
              />
            );
          })}
        </ol>
        <div data-testid="typing" aria-live="polite" style={{ height: 18, fontSize: 12, color: '#6b7280', padding: '2px 4px' }}>
          {typingLine(typing)}
        </div>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
          style={{ display: 'flex', gap: 8 }}
        >
          <input
            data-testid="input"
            value={text}
            maxLength={2000}
            onChange={(e) => edit(e.target.value)}
            onBlur={() => setTyping(false)}
            placeholder="Say something"
            style={{ flex: 1, minWidth: 0, padding: 6 }}
          />
          <button data-testid="send" type="submit">
            Send
          </button>
        </form>
        <p style={hint}>{MARKS.map((s) => `${s.mark} ${s.title}`).join(' · ')}</p>
      </div>
    </Shell>
  );
}

/**
 * One message, memoized: a change re-renders only the rows whose props it changes (a submit:
 * the new one, and the rows whose mark moves), not the whole list in the submit's own turn,
 * which a tab's op waits for before it is sent (docs/tabs.md).
 */
const Message = memo(function Message(p: {
  text: string;
  stage: (typeof MARKS)[number];
  mine: boolean;
  name: string;
  color: string;
  seenBy: string | undefined;
}) {
  const { text, stage, mine, name, color, seenBy } = p;
  return (
    <li
      data-testid="message"
      data-stage={stage.view}
      style={{ display: 'flex', flexDirection: 'column', alignItems: mine ? 'flex-end' : 'flex-start', padding: '3px 8px' }}
    >
      <span style={{ background: mine ? '#dbeafe' : '#f3f4f6', borderRadius: 8, padding: '4px 8px', maxWidth: '80%', overflowWrap: 'anywhere' }}>
        {!mine && (
          <small data-testid="author" style={{ color, fontWeight: 600, marginRight: 6 }}>
            {name}
          </small>
        )}
        <span data-testid="text">{text}</span>
        <span title={stage.title} data-testid="mark" style={{ marginLeft: 6, color: stage.view === 'visible' ? '#059669' : '#9ca3af' }}>
          {stage.mark}
        </span>
      </span>
      {seenBy && (
        <small data-testid="seen-by" style={{ color: '#6b7280', fontSize: 11, padding: '1px 4px' }}>
          seen by {seenBy}
        </small>
      )}
    </li>
  );
});

function nameList(names: string[]): string {
  if (names.length <= 3) return names.join(', ');
  return `${names.slice(0, 2).join(', ')} and ${names.length - 2} others`;
}

function typingLine(names: string[]): string {
  if (names.length === 0) return '';
  if (names.length === 1) return `${names[0]} is typing…`;
  if (names.length === 2) return `${names[0]} and ${names[1]} are typing…`;
  return `${names.length} people are typing…`;
}

void startApp(chat, 'Chat', Chat);
