/** @hercules/react in an app: the hooks and the inspector rendered to a string with the installed React. */
import { version } from 'react';
import { renderToString } from 'react-dom/server';
import type { AppRoom } from '@hercules/core';
import { Inspector, useMembers, useView } from '@hercules/react';
import { type counter, twoClients } from './machine.js';

function Count({ room }: { room: AppRoom<typeof counter> }) {
  const n = useView(room, 'visible', (s) => s.n);
  const by = useView(room, 'visible', (s) => s.by);
  const members = useMembers(room);
  return <p>{`count ${n} by ${by.join(',')}, ${members.length} members`}</p>;
}

const { a, b, close } = await twoClients('react');
await a.ops.add({ by: 'a' }).visible;
await b.ops.add({ by: 'b' }).visible;
await a.until('visible', (s) => s.n === 2, { timeoutMs: 10_000 });
const html = renderToString(
  <>
    <Count room={a} />
    <Inspector room={a} />
  </>,
);
console.log(JSON.stringify({ version, html }));
await close();
