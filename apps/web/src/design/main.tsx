/**
 * Interior design (paper §6.1, Fig. 8): furniture of the Submitted view, each item red while its
 * position differs from the comparison view (Visible by default: "everyone sees it"). A drag
 * shows a dashed outline under the pointer and submits one move op when the item is dropped.
 */
import { useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { trackOp, useView } from '@hercules/react';
import type { ViewName } from '@hercules/core';
import { interiorDesign } from '../../../machines.ts';
import { openRoom } from '../shared/room.ts';
import { Shell } from '../shared/Shell.tsx';

const room = await openRoom(interiorDesign);
const W = 600,
  H = 420;
const COMPARE = ['visible', 'authoritative', 'durable', 'stable'] as const;
const radius = (kind: string) => (kind === 'lamp' ? '50%' : 6);
const clamp = (v: number, lo: number, hi: number) => Math.round(Math.max(lo, Math.min(hi, v)));
type Drag = { id: string; dx: number; dy: number; x: number; y: number };

function Design() {
  const [compare, setCompare] = useState<ViewName>('visible');
  const items = useView(room, 'submitted', (s) => s.items);
  const other = useView(room, compare, (s) => s.items);
  const [drag, setDrag] = useState<Drag | null>(null);
  const box = useRef<HTMLDivElement>(null);

  // While dragging, follow the pointer on the window; on release, submit one move op.
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
    const move = (e: PointerEvent) => setDrag(at(e));
    const up = (e: PointerEvent) => {
      const d = at(e),
        it = room.getState('submitted').items[d.id];
      setDrag(null);
      const x = clamp(d.x, 0, W - it.w),
        y = clamp(d.y, 0, H - it.h);
      if (x !== it.x || y !== it.y) trackOp(room, room.ops.move({ id: d.id, x, y }));
    };
    window.addEventListener('pointermove', move);
    window.addEventListener('pointerup', up);
    return () => {
      window.removeEventListener('pointermove', move);
      window.removeEventListener('pointerup', up);
    };
  }, [dragging]);

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
  const ghost = drag && items[drag.id];
  return (
    <Shell title="Interior design" room={room} controls={controls}>
      <div
        data-testid="room"
        ref={box}
        style={{
          position: 'relative',
          width: W,
          height: H,
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
        {drag && ghost && (
          <div
            style={{
              position: 'absolute',
              left: clamp(drag.x, 0, W - ghost.w),
              top: clamp(drag.y, 0, H - ghost.h),
              width: ghost.w,
              height: ghost.h,
              boxSizing: 'border-box',
              border: '2px dashed #2563eb',
              borderRadius: radius(ghost.kind),
              pointerEvents: 'none',
              zIndex: 2,
            }}
          />
        )}
      </div>
      <p style={{ fontSize: 12, color: '#6b7280', width: W }}>
        Drag furniture to move it. <span style={{ color: '#b91c1c' }}>Red</span>: its position here (Submitted) differs from the {compare} view.
      </p>
    </Shell>
  );
}

createRoot(document.getElementById('root')!).render(<Design />);
