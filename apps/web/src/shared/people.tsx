/**
 * Who is here: each client publishes `{ name, color }` in its presence (next to what the app
 * adds: a cursor, a drag, typing), and shows everyone else's from `useOthers`. The tabs of one
 * browser are one client, and each tab shows its own presence: one peer per tab, with the
 * client's id and the tab's key (docs/tabs.md). The name is kept in
 * localStorage, so every demo on this origin shares it; the colour comes from the client id.
 * Presence values come from other clients: they are checked before use, never trusted.
 */
import { useEffect, useState } from 'react';
import { useOthers, useStatus } from '@hercules/react';
import type { AppRoom, Machine, PeerPresence } from '@hercules/core';
import { shortName } from './room.ts';

type AnyRoom = AppRoom<Machine<any, any>>;

/** Hues far apart, readable on white; no red, which the apps use for "not yet visible". */
const PALETTE = ['#2563eb', '#059669', '#7c3aed', '#d97706', '#db2777', '#0891b2', '#65a30d', '#854d0e'];
const HEX_COLOR = /^#[0-9a-f]{6}$/i;
export const MAX_NAME = 40;

const hashOf = (client: string) => {
  let h = 2166136261;
  for (let i = 0; i < client.length; i++) h = Math.imul(h ^ client.charCodeAt(i), 16777619);
  return h >>> 0;
};
/** The same colour for a client id everywhere, without asking anyone (for authors who are not here). */
export const colorOf = (client: string) => PALETTE[hashOf(client) % PALETTE.length];

/** Another connection, as the apps draw it, with its presence value as an object (maybe empty). */
export interface Peer {
  client: string;
  /** One per peer: the client id, and the tab's key for a tab of a shared client (docs/tabs.md). */
  id: string;
  /** Who wrote its ops: the user when authenticated, else the client id (an op's `author`). */
  author: string;
  name: string;
  color: string;
  value: Record<string, unknown>;
}

const peers = new WeakMap<PeerPresence, Peer>();
/** `others()` keeps a peer's entry while its value is unchanged, so this keeps its Peer too. */
export function peerOf(p: PeerPresence): Peer {
  let peer = peers.get(p);
  if (!peer) {
    const value = p.value !== null && typeof p.value === 'object' && !Array.isArray(p.value) ? (p.value as Record<string, unknown>) : {};
    const name = typeof value.name === 'string' && value.name.trim() ? value.name.trim().slice(0, MAX_NAME) : shortName(p.client);
    // Only a plain hex colour: a style value from someone else must not load or draw anything else.
    const color = typeof value.color === 'string' && HEX_COLOR.test(value.color) ? value.color : colorOf(p.client);
    const id = p.key === undefined ? p.client : `${p.client}/${p.key}`;
    peers.set(p, (peer = { client: p.client, id, author: p.user ?? p.client, name, color, value }));
  }
  return peer;
}

/**
 * Your colour: your id's, unless someone here already shows it; then the next free one. Only
 * peers with a smaller client id count, so of two who clash the same one moves, on every screen.
 */
export function useMyColor(room: AnyRoom): string {
  const me = room.clientId;
  const taken = usePeers(room, (ps) => ps.filter((p) => p.client < me).map((p) => p.color));
  const first = hashOf(me);
  for (let i = 0; i < PALETTE.length; i++) {
    const c = PALETTE[(first + i) % PALETTE.length];
    if (!taken.includes(c)) return c;
  }
  return PALETTE[first % PALETTE.length];
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
/** The other connections, re-rendering only when `pick` of them changes (compared as JSON: small values). */
export function usePeers<T>(room: AnyRoom, pick: (peers: Peer[]) => T): T {
  return useOthers(room, (others) => pick(others.map(peerOf)), sameJson);
}

// --------------------------------------------------------------------------- your name

const NAME_KEY = 'hercules-name';
const store = {
  get: (): string | null => {
    try {
      return localStorage.getItem(NAME_KEY);
    } catch {
      return null; // storage disabled: a name for this page only
    }
  },
  set: (name: string) => {
    try {
      localStorage.setItem(NAME_KEY, name);
    } catch {
      /* as above */
    }
  },
};
function initialName(): string {
  const saved = store.get();
  if (saved !== null) return saved;
  const name = `Guest ${1000 + Math.floor(Math.random() * 9000)}`;
  store.set(name);
  return name;
}

/** Your name as typed (saved for every demo) and published, with your colour, in presence. */
function useMyName(room: AnyRoom, color: string): [string, (name: string) => void] {
  const [name, setName] = useState(initialName);
  useEffect(() => {
    room.presence.update({ name: name.trim().slice(0, MAX_NAME) || shortName(room.clientId), color });
  }, [room, name, color]);
  // Renamed in another tab of this browser: follow it.
  useEffect(() => {
    const follow = (e: StorageEvent) => {
      if (e.key === NAME_KEY && e.newValue !== null) setName(e.newValue);
    };
    addEventListener('storage', follow);
    return () => removeEventListener('storage', follow);
  }, []);
  return [
    name,
    (n: string) => {
      setName(n);
      store.set(n);
    },
  ];
}

// --------------------------------------------------------------------------- the bar

const chip = { display: 'inline-flex', alignItems: 'center', gap: 4, fontSize: 13, whiteSpace: 'nowrap' } as const;
export const Dot = ({ color, size = 10 }: { color: string; size?: number }) => (
  <span aria-hidden style={{ display: 'inline-block', width: size, height: size, borderRadius: '50%', background: color, flex: 'none' }} />
);

const STATUS: Record<string, [color: string, text: string]> = {
  online: ['#16a34a', 'online'],
  connecting: ['#d97706', 'connecting…'],
  offline: ['#9ca3af', 'offline — changes are saved and will sync'],
  closed: ['#9ca3af', 'closed'],
  failed: ['#dc2626', 'stopped'],
};

/** The connection, as a user needs it: are my changes getting through? */
export function StatusDot({ room }: { room: AnyRoom }) {
  const status = useStatus(room);
  const [color, text] = STATUS[status] ?? ['#9ca3af', status];
  return (
    <span data-testid="connection" data-status={status} style={{ ...chip, color: '#4b5563' }}>
      <Dot color={color} />
      {text}
    </span>
  );
}

/** Your name field and everyone here (you first), each in their colour. */
export function PeopleBar({ room }: { room: AnyRoom }) {
  const color = useMyColor(room);
  const [name, setName] = useMyName(room, color);
  const others = usePeers(room, (ps) => ps.map(({ client, id, name, color }) => ({ client, id, name, color })));
  return (
    <div style={{ display: 'flex', flexWrap: 'wrap', alignItems: 'center', gap: '6px 14px' }}>
      <label data-testid="me" data-color={color} style={chip}>
        <Dot color={color} />
        <span style={{ color: '#4b5563' }}>your name</span>
        <input
          data-testid="name-input"
          value={name}
          maxLength={MAX_NAME}
          onChange={(e) => setName(e.target.value)}
          style={{ font: 'inherit', padding: '2px 6px', width: 130, border: '1px solid #d1d5db', borderRadius: 6 }}
        />
      </label>
      <ul data-testid="people" aria-label="People here" style={{ ...chip, listStyle: 'none', margin: 0, padding: 0, gap: 10, flexWrap: 'wrap' }}>
        <li style={{ color: '#4b5563' }}>here: {others.length === 0 ? 'only you' : `you and ${others.length}`}</li>
        {others.map((p) => (
          <li key={p.id} data-testid="person" data-client={p.client} data-color={p.color} style={chip} title={p.client}>
            <Dot color={p.color} />
            {p.name}
          </li>
        ))}
      </ul>
    </div>
  );
}
