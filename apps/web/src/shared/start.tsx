/**
 * Start a demo app: open the room ?room= names and render the app, or, when that cannot be
 * done (a bad room name, storage the browser refuses, ...), a page that says why and where to
 * go, never a blank one.
 */
import type { ComponentType, ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import type { ConnectedRoom } from '@hercules/client';
import type { Machine } from '@hercules/core';
import { page } from './Shell.tsx';
import { openRoom, roomFromUrl, suggestRoom } from './room.ts';

export async function startApp<M extends Machine<any, any>>(machine: M, title: string, App: ComponentType<{ room: ConnectedRoom<M> }>): Promise<void> {
  const root = createRoot(document.getElementById('root')!);
  const name = roomFromUrl(machine);
  if (typeof name !== 'string') {
    const fix = suggestRoom(name.bad, machine);
    root.render(
      <Problem title={`${title}: this room name won't work`} link={{ href: `?room=${fix}`, text: `Open room “${fix}”` }}>
        {name.bad === '' ? 'The room name in the address (?room=) is empty.' : `“${name.bad}” is not a valid room name.`} A room name is 1 to 128 letters,
        digits, or any of <code>. _ ~ -</code>.
      </Problem>,
    );
    return;
  }
  try {
    const room = await openRoom(machine, name);
    root.render(<App room={room} />);
  } catch (e) {
    const err = e as { code?: string; message?: string };
    root.render(
      <Problem title={`${title}: the room could not be opened`} link={{ href: location.href, text: 'Try again' }}>
        {err.code ? `${err.code}: ` : ''}
        {err.message ?? String(e)}
      </Problem>,
    );
  }
}

function Problem({ title, children, link }: { title: string; children: ReactNode; link: { href: string; text: string } }) {
  return (
    <div role="alert" data-testid="problem" style={{ ...page, maxWidth: 560 }}>
      <h1 style={{ fontSize: 20 }}>{title}</h1>
      <p>{children}</p>
      <p>
        <a data-testid="problem-link" href={link.href}>
          {link.text}
        </a>{' '}
        · <a href="/">all apps</a>
      </p>
    </div>
  );
}
