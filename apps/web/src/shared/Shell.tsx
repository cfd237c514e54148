import { useEffect, useState, type ReactNode } from 'react';
import { Inspector, useUndo } from '@hercules/react';
import type { ConnectedRoom } from '@hercules/client';
import type { Machine } from '@hercules/core';
import { PeopleBar, StatusDot } from './people.tsx';
import { defaultRoom } from './room.ts';

export const page = { fontFamily: 'system-ui, sans-serif', padding: 16 } as const;
export const hint = { fontSize: 12, color: '#6b7280', maxWidth: 640 } as const;

/**
 * The page around every demo app: a title bar with the connection and the people here, the app,
 * and the inspector beside it, or below it when the window is narrow (the row wraps).
 */
export function Shell({
  title,
  room,
  children,
  controls,
  undo,
}: {
  title: string;
  room: ConnectedRoom<Machine<any, any>>;
  children: ReactNode;
  controls?: ReactNode;
  /** In place of the room's Undo and Redo (an app whose undo is its editor's). */
  undo?: ReactNode;
}) {
  return (
    <div style={{ ...page, display: 'flex', flexWrap: 'wrap', gap: 16, alignItems: 'flex-start' }}>
      <main style={{ flex: '1 1 560px', minWidth: 0 }}>
        <header style={{ display: 'flex', flexWrap: 'wrap', alignItems: 'center', gap: '6px 12px', marginBottom: 8 }}>
          <h1 style={{ fontSize: 20, margin: 0 }}>{title}</h1>
          <nav style={{ fontSize: 13 }}>
            <a href="/">all apps</a>
          </nav>
          <StatusDot room={room} />
          {undo ?? <UndoButtons room={room} />}
          {controls}
        </header>
        <div style={{ marginBottom: 12 }}>
          <PeopleBar room={room} />
        </div>
        <Stopped room={room} />
        {children}
      </main>
      <div style={{ flex: 'none', maxWidth: '100%' }}>
        <Inspector room={room} />
      </div>
    </div>
  );
}

/** Wide content (the grid, the room) scrolls sideways in a narrow window instead of widening the page. */
export const Scroll = ({ children }: { children: ReactNode }) => (
  <div data-testid="scroll" style={{ overflowX: 'auto', maxWidth: '100%', paddingBottom: 4 }}>
    {children}
  </div>
);

/** A room the server refused for good (e.g. it holds another app's data): say so, and where to go. */
function Stopped({ room }: { room: ConnectedRoom<Machine<any, any>> }) {
  const [error, setError] = useState<Error | null>(null);
  useEffect(() => {
    let live = true;
    room.whenOnline().catch((e: Error) => live && setError(e));
    return () => {
      live = false;
    };
  }, [room]);
  if (!error) return null;
  const mine = defaultRoom(room.machine);
  const elsewhere = room.room === mine ? `${mine}-${Date.now().toString(36)}` : mine;
  return (
    <div
      role="alert"
      data-testid="stopped"
      style={{ background: '#fef2f2', border: '1px solid #fecaca', color: '#991b1b', borderRadius: 8, padding: '8px 12px', marginBottom: 12 }}
    >
      This page stopped syncing: {error.message}. Your changes here will not reach anyone. <a href={`?room=${elsewhere}`}>Open room “{elsewhere}”</a>
    </div>
  );
}

/**
 * Undo and redo of this client's own changes (docs/undo.md), with Ctrl+Z / Ctrl+Shift+Z (Cmd on a
 * Mac; Ctrl+Y too). A key pressed in a text field is the field's own undo, not the room's. The
 * tabs of a browser share one client (connectTabs): the leader tab undoes its last step, whichever
 * tab made it, and a follower tab has none, so its buttons stay disabled (docs/tabs.md).
 */
function UndoButtons({ room }: { room: ConnectedRoom<Machine<any, any>> }) {
  const { canUndo, canRedo, undo, redo } = useUndo(room);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || e.altKey) return;
      const t = e.target as HTMLElement | null;
      if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable)) return;
      const key = e.key.toLowerCase();
      if (key === 'z' && !e.shiftKey) undo();
      else if ((key === 'z' && e.shiftKey) || key === 'y') redo();
      else return;
      e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [undo, redo]);
  const button = { fontSize: 12, padding: '1px 8px' } as const;
  return (
    <span style={{ display: 'inline-flex', gap: 4 }}>
      <button type="button" data-testid="undo" style={button} disabled={!canUndo} onClick={undo} title="Undo your last change (Ctrl+Z)">
        Undo
      </button>
      <button type="button" data-testid="redo" style={button} disabled={!canRedo} onClick={redo} title="Redo (Ctrl+Shift+Z)">
        Redo
      </button>
    </span>
  );
}
