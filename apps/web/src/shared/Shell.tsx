import type { ReactNode } from 'react';
import { Inspector } from '@hercules/react';
import type { AppRoom, Machine } from '@hercules/core';

/** The page around every demo app: a title bar, the app, and the inspector beside it. */
export function Shell({ title, room, children, controls }: { title: string; room: AppRoom<Machine<any, any>>; children: ReactNode; controls?: ReactNode }) {
  return (
    <div style={{ fontFamily: 'system-ui, sans-serif', padding: 16, display: 'flex', gap: 16, alignItems: 'flex-start' }}>
      <main style={{ flex: 1 }}>
        <header style={{ display: 'flex', alignItems: 'baseline', gap: 12, marginBottom: 12 }}>
          <h1 style={{ fontSize: 20, margin: 0 }}>{title}</h1>
          <nav style={{ fontSize: 13 }}>
            <a href="/">all apps</a>
          </nav>
          {controls}
        </header>
        {children}
      </main>
      <Inspector room={room} />
    </div>
  );
}
