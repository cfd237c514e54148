/**
 * Interior design (paper §6.1, Fig. 8): furniture of the Submitted view, each item red while its
 * position differs from the comparison view (Visible by default: "everyone sees it"). A drag
 * shows a dashed outline under the pointer and submits one move op when the item is dropped.
 * While it lasts, the dragger's presence says where the item is going (`drag: { id, x, y }`),
 * so everyone else sees a ghost of it in the dragger's colour, with their name, before any op.
 */
import { useEffect, useRef, useState } from 'react';
import { trackOp, useView } from '@hercules/react';
import type { ConnectedRoom } from '@hercules/client';
import type { ViewName } from '@hercules/core';
import { interiorDesign } from '../../../machines.ts';
import { useMyColor, usePeers, type Peer } from '../shared/people.tsx';
import { Scroll, Shell, hint } from '../shared/Shell.tsx';
import { startApp } from '../shared/start.tsx';

type Room = ConnectedRoom<typeof interiorDesign>;
type Items = ReturnType<Room['getState']>['items'];
const W = 600,
  H = 420;
const COMPARE = ['visible', 'authoritative', 'durable', 'stable'] as const;
const radius = (kind: string) => (kind === 'lamp' ? '50%' : 6);
const clamp = (v: number, lo: number, hi: number) => Math.round(Math.max(lo, Math.min(hi, v)));
type Drag = { id: string; dx: number; dy: number; x: number; y: number };
type Ghost = { id: string; x: number; y: number; name: string; color: string; peer: string };

/** Where an item would land: inside the room, in whole pixels (what the move op stores). */
const landing = (it: Items[string], x: number, y: number) => ({ x: clamp(x, 0, W - it.w), y: clamp(y, 0, H - it.h) });

/** A peer's drag in progress, if its presence holds one of an item we have. */
function ghostOf(p: Peer, items: Items): Ghost | null {
  const d = p.value.drag as { id?: unknown; x?: unknown; y?: unknown } | null | undefined;
  if (!d || typeof d !== 'object' || typeof d.id !== 'string' || !Object.hasOwn(items, d.id)) return null;
  if (typeof d.x !== 'number' || typeof d.y !== 'number' || !Number.isFinite(d.x) || !Number.isFinite(d.y)) return null;
  return { id: d.id, ...landing(items[d.id], d.x, d.y), name: p.name, color: p.color, peer: p.id };
}

function Design({ room }: { room: Room }) {
  const [compare, setCompare] = useState<ViewName>('visible');
  const items = useView(room, 'submitted', (s) => s.items);
  const other = useView(room, compare, (s) => s.items);
  const ghosts = usePeers(room, (ps) => ps.map((p) => ghostOf(p, items)).filter((g) => g !== null));
  const [drag, setDrag] = useState<Drag | null>(null);
  const box = useRef<HTMLDivElement>(null);
  const myColor = useMyColor(room);

  // While dragging, follow the pointer on the window and tell the others where the item is going;
  // on release, submit one move op; on cancel (Escape, a lost pointer), nothing.
  const current = useRef(drag);
  current.current = drag;
  const dragging = drag !== null;
  useEffect(() => {
    if (!dragging) return;
    const at = (e: PointerEvent) => {
      const r = box.current!.getBoundingClientRect(),
        d = current.current!;
      return { ...d, x: e.clientX - r.left - d.dx, y: e.clientY - r.top - d.dy };
    };
    const move = (e: PointerEvent) => {
      const d = at(e);
      setDrag(d);
      room.presence.update({ drag: { id: d.id, ...landing(room.getState('submitted').items[d.id], d.x, d.y) } });
    };
    const stop = () => {
      setDrag(null);
      room.presence.update({ drag: null });
    };
    const up = (e: PointerEvent) => {
      const d = at(e),
        it = room.getState('submitted').items[d.id];
      stop();
      const { x, y } = landing(it, d.x, d.y);
      if (x !== it.x || y !== it.y) trackOp(room, room.ops.move({ id: d.id, x, y }));
    };
    const cancelOnEscape = (e: KeyboardEvent) => {
      if (e.key === 'Escape') stop();
    };
    window.addEventListener('pointermove', move);
    window.addEventListener('pointerup', up);
    window.addEventListener('pointercancel', stop);
    window.addEventListener('keydown', cancelOnEscape);
    return () => {
      window.removeEventListener('pointermove', move);
      window.removeEventListener('pointerup', up);
      window.removeEventListener('pointercancel', stop);
      window.removeEventListener('keydown', cancelOnEscape);
    };
  }, [room, dragging]);

  const controls = (
    <label style={{ fontSize: 13 }}>
      compare with{' '}
      <select data-testid="compare-view" value={compare} onChange={(e) => setCompare(e.target.value as ViewName)}>
        {COMPARE.map((v) => (
          <option key={v} value={v}>
            {v}
          </option>
        ))}
      </select>
    </label>
  );
  const dragged = drag && items[drag.id];
  return (
    <Shell title="Interior design" room={room} controls={controls}>
      <Scroll>
        <div
          data-testid="room"
          ref={box}
          style={{
            position: 'relative',
            width: W,
            height: H,
            margin: 2,
            background: '#fffbeb',
            outline: '2px solid #d6d3d1',
            borderRadius: 4,
            userSelect: 'none',
            touchAction: 'none',
          }}
        >
          {Object.entries(items).map(([id, it]) => {
            // Fig. 8: highlight an item whose position differs between the two views.
            const theirs = other[id];
            const uncertain = !theirs || theirs.x !== it.x || theirs.y !== it.y;
            return (
              <div
                key={id}
                data-testid={`item-${id}`}
                data-uncertain={String(uncertain)}
                title={uncertain ? `moved; not yet in the ${compare} view` : id}
                onPointerDown={(e) => {
                  e.preventDefault();
                  const r = box.current!.getBoundingClientRect();
                  const px = e.clientX - r.left,
                    py = e.clientY - r.top;
                  setDrag({ id, dx: px - it.x, dy: py - it.y, x: it.x, y: it.y });
                  room.presence.update({ drag: { id, x: it.x, y: it.y } });
                }}
                style={{
                  position: 'absolute',
                  left: it.x,
                  top: it.y,
                  width: it.w,
                  height: it.h,
                  boxSizing: 'border-box',
                  display: 'flex',
                  alignItems: 'center',
                  justifyContent: 'center',
                  fontSize: 13,
                  cursor: 'grab',
                  borderRadius: radius(it.kind),
                  opacity: drag?.id === id ? 0.5 : 1,
                  zIndex: uncertain ? 1 : 0,
                  border: `2px solid ${uncertain ? '#dc2626' : '#78716c'}`,
                  background: uncertain ? '#fee2e2' : '#e7e5e4',
                  color: uncertain ? '#b91c1c' : '#292524',
                }}
              >
                {it.kind}
              </div>
            );
          })}
          {ghosts.map((g) => (
            <Outline key={g.peer} testid={`ghost-${g.id}`} item={items[g.id]} at={g} color={g.color} label={g.name} />
          ))}
          {drag && dragged && <Outline testid="drag-outline" item={dragged} at={landing(dragged, drag.x, drag.y)} color={myColor} />}
        </div>
      </Scroll>
      <p style={hint}>
        Drag furniture to move it (Escape cancels). <span style={{ color: '#b91c1c' }}>Red</span>: its position here (Submitted) differs from the {compare}{' '}
        view. A dashed outline with a name: someone is dragging that item there right now.
      </p>
    </Shell>
  );
}

/** Where an item is being dragged: a dashed outline in the dragger's colour, with their name when it is someone else. */
function Outline({ testid, item, at, color, label }: { testid: string; item: Items[string]; at: { x: number; y: number }; color: string; label?: string }) {
  return (
    <div
      data-testid={testid}
      data-by={label}
      style={{
        position: 'absolute',
        left: at.x,
        top: at.y,
        width: item.w,
        height: item.h,
        boxSizing: 'border-box',
        border: `2px dashed ${color}`,
        background: `${color}1a`,
        borderRadius: radius(item.kind),
        pointerEvents: 'none',
        zIndex: 2,
      }}
    >
      {label && (
        <span
          style={{
            position: 'absolute',
            left: -2,
            bottom: '100%',
            marginBottom: 2,
            background: color,
            color: 'white',
            fontSize: 11,
            lineHeight: '16px',
            padding: '0 5px',
            borderRadius: 3,
            whiteSpace: 'nowrap',
          }}
        >
          {label}
        </span>
      )}
    </div>
  );
}

void startApp(interiorDesign, 'Interior design', Design);
