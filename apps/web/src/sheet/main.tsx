/**
 * Spreadsheet (paper §6.3, Fig. 12): the cells of the Submitted view, a cell's text red while it
 * differs from the Visible view (not yet seen by everyone). Cursors are presence, not ops: yours
 * is local state published with `presence.update`, the others' come from `useOthers`, each
 * framed in its user's colour with their name; they cost no log entry, and a user's cursor goes
 * when their connection does.
 */
import { useEffect, useRef, useState, type CSSProperties, type KeyboardEvent } from 'react';
import { trackOp, useView } from '@hercules/react';
import type { ConnectedRoom } from '@hercules/client';
import { spreadsheet } from '../../../machines.ts';
import { useMyColor, usePeers, type Peer } from '../shared/people.tsx';
import { Scroll, Shell, hint } from '../shared/Shell.tsx';
import { startApp } from '../shared/start.tsx';

type Pos = { row: number; col: number };
type Cursor = Pos & { name: string; color: string; client: string };
const ARROWS: Record<string, [number, number]> = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, v));
const head: CSSProperties = { background: '#f3f4f6', color: '#6b7280', fontWeight: 'normal', fontSize: 12, border: '1px solid #e5e7eb', padding: '2px 6px' };

/** A peer's cursor, if its presence holds one inside the grid. */
function cursorOf(p: Peer, rows: number, cols: number): Cursor | null {
  const c = p.value.cursor as Partial<Pos> | null | undefined;
  if (!c || typeof c !== 'object' || !Number.isInteger(c.row) || !Number.isInteger(c.col)) return null;
  const row = c.row!,
    col = c.col!;
  return row >= 0 && row < rows && col >= 0 && col < cols ? { row, col, name: p.name, color: p.color, client: p.client } : null;
}

function Sheet({ room }: { room: ConnectedRoom<typeof spreadsheet> }) {
  const cells = useView(room, 'submitted', (s) => s.cells);
  const visCells = useView(room, 'visible', (s) => s.cells);
  const rows = cells.length,
    cols = cells[0].length;
  const [at, setAt] = useState<Pos>({ row: 0, col: 0 });
  const others = usePeers(room, (ps) => ps.map((p) => cursorOf(p, rows, cols)).filter((c) => c !== null));
  const [edit, setEdit] = useState<(Pos & { text: string }) | null>(null);
  const editing = useRef(edit);
  editing.current = edit;
  const grid = useRef<HTMLDivElement>(null);
  const myColor = useMyColor(room);

  useEffect(() => {
    room.presence.update({ cursor: at });
    grid.current?.querySelector(`[data-testid=cell-${at.row}-${at.col}]`)?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }, [room, at]);
  useEffect(() => grid.current?.focus({ preventScroll: true }), []);

  const step = ([dr, dc]: [number, number]) => setAt((a) => ({ row: clamp(a.row + dr, 0, rows - 1), col: clamp(a.col + dc, 0, cols - 1) }));
  /** Tab walks along the row and on to the next; past the last cell (or before the first) it is null, and Tab leaves the grid as it should. */
  const tabFrom = (p: Pos, back: boolean): Pos | null => {
    const i = p.row * cols + p.col + (back ? -1 : 1);
    return i < 0 || i >= rows * cols ? null : { row: Math.floor(i / cols), col: i % cols };
  };
  // Commit (Enter, Tab, or leaving the editor) or cancel (Escape) the edit; at most once per edit.
  const finish = (commit: boolean, next: Pos | null, refocus: boolean) => {
    const e = editing.current;
    if (!e) return;
    editing.current = null;
    setEdit(null);
    if (commit && e.text !== room.getState('submitted').cells[e.row][e.col]) trackOp(room, room.ops.setCell({ row: e.row, col: e.col, text: e.text }));
    if (next) setAt(next);
    // The editor is going away: keep the keyboard in the grid, unless the user clicked elsewhere.
    if (refocus) grid.current?.focus();
  };
  const onKey = (e: KeyboardEvent) => {
    if (edit || e.ctrlKey || e.metaKey || e.altKey) return;
    const d = ARROWS[e.key];
    if (d) step(d);
    else if (e.key === 'Tab') {
      const next = tabFrom(at, e.shiftKey);
      if (!next) return;
      setAt(next);
    } else if (e.key.length === 1) setEdit({ ...at, text: e.key });
    else if (e.key === 'Enter' || e.key === 'F2') setEdit({ ...at, text: cells[at.row][at.col] });
    else if ((e.key === 'Delete' || e.key === 'Backspace') && cells[at.row][at.col] !== '') trackOp(room, room.ops.setCell({ ...at, text: '' }));
    else return;
    e.preventDefault();
  };

  return (
    <Shell title="Spreadsheet" room={room}>
      <Scroll>
        {/* biome-ignore lint/a11y/useSemanticElements: the table inside draws the cells; this focusable wrapper is the grid that takes the keyboard (arrows, Tab, Enter, typing) */}
        <div
          data-testid="grid"
          role="grid"
          aria-label="Spreadsheet"
          ref={grid}
          tabIndex={0}
          onKeyDown={onKey}
          style={{ display: 'inline-block', outline: 'none', background: 'white', border: '1px solid #e5e7eb', borderRadius: 8, padding: 4 }}
        >
          <table style={{ borderCollapse: 'collapse', tableLayout: 'fixed', width: 28 + 96 * cols, fontSize: 14 }}>
            <thead>
              <tr>
                <th style={{ ...head, width: 28 }} />
                {cells[0].map((_, c) => (
                  <th key={c} style={{ ...head, width: 96 }}>
                    {String.fromCharCode(65 + c)}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {cells.map((row, r) => (
                <tr key={r}>
                  <th style={head}>{r + 1}</th>
                  {row.map((text, c) => {
                    const mine = at.row === r && at.col === c;
                    const here = others.filter((o) => o.row === r && o.col === c);
                    const names = here.map((o) => o.name).join(', ');
                    // Fig. 12: text colour from Submitted vs Visible.
                    const uncertain = text !== visCells[r][c];
                    return (
                      // biome-ignore lint/a11y/useKeyWithClickEvents: the keyboard moves the cursor through the grid's own handler (arrows, Tab, Enter), not per cell
                      <td
                        key={c}
                        data-testid={`cell-${r}-${c}`}
                        data-cursor={mine ? 'mine' : here.length ? 'other' : 'none'}
                        data-others={names || undefined}
                        data-uncertain={String(uncertain)}
                        title={names ? `${names} ${here.length > 1 ? 'are' : 'is'} here` : undefined}
                        onClick={() => setAt({ row: r, col: c })}
                        onDoubleClick={() => setEdit({ row: r, col: c, text })}
                        style={{
                          position: 'relative',
                          height: 26,
                          padding: 0,
                          border: '1px solid #e5e7eb',
                          boxShadow: mine ? `inset 0 0 0 3px ${myColor}` : 'none',
                          color: uncertain ? '#dc2626' : '#111827',
                          cursor: 'cell',
                        }}
                      >
                        <div style={{ padding: '0 6px', overflow: 'hidden', whiteSpace: 'nowrap', textOverflow: 'ellipsis' }}>{text}</div>
                        {here.length > 0 && <PeerCursor color={here[0].color} names={names} framed={!mine} />}
                        {edit && edit.row === r && edit.col === c && (
                          <input
                            data-testid="cell-editor"
                            // biome-ignore lint/a11y/noAutofocus: the editor opens because the user asked to edit this cell; typing goes into it
                            autoFocus
                            value={edit.text}
                            onChange={(e) => setEdit({ ...edit, text: e.target.value })}
                            onKeyDown={(e) => {
                              if (e.key === 'Enter') finish(true, { row: Math.min(rows - 1, r + 1), col: c }, true);
                              else if (e.key === 'Tab') finish(true, tabFrom({ row: r, col: c }, e.shiftKey), true);
                              else if (e.key === 'Escape') finish(false, null, true);
                              else return;
                              e.preventDefault();
                            }}
                            onBlur={() => finish(true, null, false)}
                            style={{
                              position: 'absolute',
                              inset: 0,
                              width: '100%',
                              boxSizing: 'border-box',
                              border: `3px solid ${myColor}`,
                              padding: '0 3px',
                              font: 'inherit',
                              outline: 'none',
                              zIndex: 3,
                            }}
                          />
                        )}
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </Scroll>
      <p style={hint}>
        Click a cell or move with the arrow keys and Tab; type to edit, Enter or Tab to commit, Escape to cancel. A frame with a name: where someone else is
        (live, never saved). <span style={{ color: '#dc2626' }}>Red text</span>: your edit is not yet visible to everyone.
      </p>
    </Shell>
  );
}

/** Someone else's cursor: a frame in their colour (unless ours is on the cell too) and a name tag above the cell. */
function PeerCursor({ color, names, framed }: { color: string; names: string; framed: boolean }) {
  return (
    <>
      {framed && <div style={{ position: 'absolute', inset: 0, border: `2px solid ${color}`, pointerEvents: 'none' }} />}
      <div
        data-testid="cursor-tag"
        style={{
          position: 'absolute',
          right: -1,
          bottom: '100%',
          maxWidth: 160,
          overflow: 'hidden',
          textOverflow: 'ellipsis',
          whiteSpace: 'nowrap',
          background: color,
          color: 'white',
          fontSize: 10,
          lineHeight: '14px',
          padding: '0 4px',
          borderRadius: '3px 3px 0 0',
          pointerEvents: 'none',
          zIndex: 2,
        }}
      >
        {names}
      </div>
    </>
  );
}

void startApp(spreadsheet, 'Spreadsheet', Sheet);
