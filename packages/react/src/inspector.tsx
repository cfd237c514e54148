/**
 * The inspector: what Hercules is doing for this client, per view. Log positions, pending ops
 * with stage and age, the visibility set, the connection, and recent per-view delays.
 */
import { useEffect, useState, type CSSProperties } from 'react';
import { VIEWS, type AppRoom, type Machine, type OpHandle, type Stage } from '@hercules/core';
import { useMembers, usePositions, useStatus, useTick } from './hooks.ts';
import { TimeTravel, type HistorySource } from './time-travel.tsx';

const STAGES: Stage[] = ['durable', 'authoritative', 'visible'];
const box: CSSProperties = { font: '12px/1.4 ui-monospace, monospace', background: '#111827', color: '#e5e7eb', padding: 10, borderRadius: 8, minWidth: 300 };
const th: CSSProperties = { textAlign: 'left', color: '#9ca3af', fontWeight: 'normal', paddingRight: 8 };

/**
 * Recent handles of each room, for per-view delays. The inspector gathers them itself (every
 * progress batch, from `room.pending()`: an op is pending from its submit on, so each is seen),
 * so an app need not call trackOp; it remains for handles the app wants counted anyway.
 */
const recent = new WeakMap<object, OpHandle[]>();
export function trackOp(room: object, h: OpHandle): OpHandle {
  let list = recent.get(room);
  if (!list) recent.set(room, (list = []));
  if (list.includes(h)) return h;
  list.push(h);
  if (list.length > 50) list.shift();
  return h;
}

/** The handles the inspector counts for a room (newest last, at most 50). */
export function recentOps(room: object): readonly OpHandle[] {
  return recent.get(room) ?? [];
}

/** Count every op of the room from its submit on, while an inspector shows it. */
function useTrackedOps(room: AppRoom<Machine<any, any>>): void {
  useEffect(() => {
    const track = () => {
      for (const h of room.pending().slice(-50)) trackOp(room, h);
    };
    track();
    return room.onProgress(track);
  }, [room]);
}

function pct(xs: number[], p: number): string {
  if (xs.length === 0) return '–';
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1);
}

/**
 * `history`: where to read the room's retained log on the server (docs/history.md); with it, the
 * inspector shows a time-travel slider over it (the state at any position, who wrote each op, the
 * five views' positions on it).
 */
export function Inspector({ room, title = 'Hercules inspector', history }: { room: AppRoom<Machine<any, any>>; title?: string; history?: HistorySource }) {
  useTick(250);
  useTrackedOps(room);
  const [open, setOpen] = useState(true);
  const members = useMembers(room);
  const status = useStatus(room);
  // Re-renders on every progress: a view's log grew or one of our ops moved a stage.
  const pos = usePositions(room);
  const pending = room.pending();
  const now = performance.now();
  const done = (recent.get(room) ?? []).filter((h) => h.stage === 'visible');
  return (
    <aside style={box} data-testid="inspector">
      <div style={{ display: 'flex', justifyContent: 'space-between', marginBottom: 6 }}>
        <strong>{title}</strong>
        <button type="button" onClick={() => setOpen(!open)} style={{ fontSize: 11 }}>
          {open ? 'hide' : 'show'}
        </button>
      </div>
      {open && (
        <>
          <div>
            client <code data-testid="client-id">{room.clientId.slice(0, 8)}</code> · <span data-testid="status">{status}</span>
          </div>
          <table style={{ marginTop: 6 }}>
            <thead>
              <tr>
                <th style={th}>view</th>
                <th style={th}>log length</th>
              </tr>
            </thead>
            <tbody>
              {VIEWS.map((v) => (
                <tr key={v}>
                  <td>{v}</td>
                  <td data-testid={`pos-${v}`}>{pos[v]}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div style={{ marginTop: 6 }}>
            visibility set (<span data-testid="member-count">{members.length}</span>):{' '}
            {members.map((m) => (
              <code key={m} style={{ marginRight: 4, color: m === room.clientId ? '#f87171' : '#93c5fd' }}>
                {m.slice(0, 8)}
              </code>
            ))}
          </div>
          <div style={{ marginTop: 6 }}>
            pending ops (<span data-testid="pending-count">{pending.length}</span>)
          </div>
          <table>
            <tbody>
              {pending.slice(0, 8).map((h) => (
                <tr key={h.id}>
                  <td>
                    {h.name}#{h.seq}
                  </td>
                  <td>{h.stage}</td>
                  <td>{(now - (h.times.submitted ?? now)).toFixed(0)} ms</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div style={{ marginTop: 6 }}>delay after submit, last {done.length} ops (p50 / p99 ms)</div>
          <table>
            <tbody>
              {STAGES.map((s) => {
                const xs = done.map((h) => (h.times[s] ?? NaN) - (h.times.submitted ?? NaN)).filter((x) => Number.isFinite(x));
                return (
                  <tr key={s}>
                    <td>{s}</td>
                    <td data-testid={`delay-${s}`}>
                      {pct(xs, 0.5)} / {pct(xs, 0.99)}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {history && <TimeTravel source={history} positions={pos} />}
        </>
      )}
    </aside>
  );
}
