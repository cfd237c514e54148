/**
 * Spreadsheet (paper §6.3, Fig. 12): the cells of the Submitted view. Own cursor: thick red in
 * Submitted, thin red where the Visible view still has it; other users' Visible cursors blue.
 * A cell's text is red while it differs from the Visible view. Cursors are keyed by author.
 */
import { useRef, useState, type CSSProperties, type KeyboardEvent } from 'react';
import { createRoot } from 'react-dom/client';
import { trackOp, useView } from '@hercules/react';
import { spreadsheet } from '../../../machines.ts';
import { openRoom, shortName } from '../shared/room.ts';
import { Shell } from '../shared/Shell.tsx';

const room = await openRoom(spreadsheet);
const me = room.clientId;
type Pos = { row: number; col: number };
const ARROWS: Record<string, [number, number]> = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
const same = (a: Pos | undefined, r: number, c: number) => !!a && a.row === r && a.col === c;
const head: CSSProperties = { background: '#f3f4f6', color: '#6b7280', fontWeight: 'normal', fontSize: 12, border: '1px solid #e5e7eb', padding: '2px 6px' };
const BORDERS = { mine: 'inset 0 0 0 3px #dc2626', 'mine-old': 'inset 0 0 0 1px #dc2626', other: 'inset 0 0 0 3px #2563eb', none: 'none' };

function Sheet() {
  const cells = useView(room, 'submitted', (s) => s.cells);
  const visCells = useView(room, 'visible', (s) => s.cells);
  const mine = useView(room, 'submitted', (s) => s.cursors[me]);
  const visCursors = useView(room, 'visible', (s) => s.cursors);
  const [edit, setEdit] = useState<(Pos & { text: string }) | null>(null);
  const editing = useRef(edit);
  editing.current = edit;
  const grid = useRef<HTMLDivElement>(null);
  const rows = cells.length,
    cols = cells[0].length;
  const at = mine ?? { row: 0, col: 0 };

  const moveTo = (row: number, col: number) => {
    row = Math.max(0, Math.min(rows - 1, row));
    col = Math.max(0, Math.min(cols - 1, col));
    if (!same(mine, row, col)) trackOp(room, room.ops.moveCursor({ row, col }));
  };
  // Commit (Enter, or leaving the editor) or cancel (Escape) the edit; at most once per edit.
  const finish = (commit: boolean, down: boolean) => {
    const e = editing.current;
    if (!e) return;
    editing.current = null;
    setEdit(null);
    if (commit) trackOp(room, room.ops.setCell(e));
    if (commit && down) moveTo(e.row + 1, e.col);
    if (down || !commit) grid.current?.focus();
  };
  const onKey = (e: KeyboardEvent) => {
    if (edit || e.ctrlKey || e.metaKey || e.altKey) return;
    const d = ARROWS[e.key];
    if (d) moveTo(at.row + d[0], at.col + d[1]);
    else if (e.key.length === 1) setEdit({ ...at, text: e.key });
    else if (e.key === 'Enter' || e.key === 'F2') setEdit({ ...at, text: cells[at.row][at.col] });
    else if (e.key === 'Delete' || e.key === 'Backspace') trackOp(room, room.ops.setCell({ ...at, text: '' }));
    else return;
    e.preventDefault();
  };

  return (
    <Shell title="Spreadsheet" room={room}>
      {/* biome-ignore lint/a11y/useSemanticElements: the table inside draws the cells; this focusable wrapper is the grid that takes the keyboard (arrows, Enter, typing) */}
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
                  // Fig. 12: border from the cursors, text colour from Submitted vs Visible.
                  const others = Object.keys(visCursors).filter((a) => a !== me && same(visCursors[a], r, c));
                  const cursor = same(mine, r, c) ? 'mine' : same(visCursors[me], r, c) ? 'mine-old' : others.length ? 'other' : 'none';
                  const uncertain = text !== visCells[r][c];
                  return (
                    // biome-ignore lint/a11y/useKeyWithClickEvents: the keyboard moves the cursor through the grid's own handler (arrows, Enter), not per cell
                    <td
                      key={c}
                      data-testid={`cell-${r}-${c}`}
                      data-cursor={cursor}
                      data-uncertain={String(uncertain)}
                      title={others.length ? `cursor of ${others.map(shortName).join(', ')}` : undefined}
                      onClick={() => moveTo(r, c)}
                      style={{
                        position: 'relative',
                        height: 26,
                        padding: '0 6px',
                        border: '1px solid #e5e7eb',
                        boxShadow: BORDERS[cursor],
                        color: uncertain ? '#dc2626' : '#111827',
                        overflow: 'hidden',
                        whiteSpace: 'nowrap',
                        textOverflow: 'ellipsis',
                        cursor: 'cell',
                      }}
                    >
                      {text}
                      {edit && edit.row === r && edit.col === c && (
                        <input
                          data-testid="cell-editor"
                          // biome-ignore lint/a11y/noAutofocus: the editor opens because the user asked to edit this cell; typing goes into it
                          autoFocus
                          value={edit.text}
                          onChange={(e) => setEdit({ ...edit, text: e.target.value })}
                          onKeyDown={(e) => {
                            if (e.key === 'Enter' || e.key === 'Escape') {
                              e.preventDefault();
                              finish(e.key === 'Enter', true);
                            }
                          }}
                          onBlur={() => finish(true, false)}
                          style={{
                            position: 'absolute',
                            inset: 0,
                            width: '100%',
                            boxSizing: 'border-box',
                            border: '3px solid #dc2626',
                            padding: '0 3px',
                            font: 'inherit',
                            outline: 'none',
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
      <p style={{ fontSize: 12, color: '#6b7280' }}>
        Click a cell or use the arrow keys; type to edit, Enter to commit, Escape to cancel. <span style={{ color: '#dc2626' }}>Thick red</span>: your cursor;
        thin red: where others still see it; <span style={{ color: '#2563eb' }}>blue</span>: other users; <span style={{ color: '#dc2626' }}>red text</span>:
        not yet visible to everyone.
      </p>
    </Shell>
  );
}

createRoot(document.getElementById('root')!).render(<Sheet />);
