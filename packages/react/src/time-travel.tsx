/**
 * The inspector's time-travel view (issue 39, item 3): a slider over a room's retained log on the
 * server (docs/history.md) that shows the room's state at any position, who wrote each op and
 * when, and where this client's five views stand on it. The history comes from a `HistorySource`
 * the app gives: the server's `room(name).log` and `stateAt` reached through its own backend (the
 * admin API's token never goes to a browser), or `@hercules/admin-client` in a trusted tool.
 */
import { useCallback, useEffect, useState, type CSSProperties } from 'react';
import { VIEWS, type ViewName } from '@hercules/core';

/** A log entry as the server's history reads it (`server.room(name).log`, `GET /admin/rooms/:room/log`). */
export interface HistoryEntryInfo {
  pos: number;
  name: string;
  args: unknown;
  author: string;
  client: string;
  /** The server's commit time, ms since the epoch (0: unknown). */
  time: number;
  error?: string;
  refused?: boolean;
}

/** Where the time-travel view reads a room's history: the server's `log` and `stateAt`, as the app exposes them. */
export interface HistorySource {
  log(range?: { from?: number; to?: number }): Promise<{ start: number; head: number; entries: HistoryEntryInfo[]; next?: number }>;
  stateAt(position: number): Promise<unknown>;
}

/** How many entries the slider spans at most: the last page of the retained log. */
const SPAN = 1000;
const bar: CSSProperties = { position: 'relative', height: 14, margin: '2px 6px 0' };

/** The last SPAN retained entries: `log()` for the bounds, then the last page. */
async function readTail(source: HistorySource): Promise<{ start: number; head: number; entries: HistoryEntryInfo[] }> {
  const first = await source.log();
  if (first.next === undefined) return first;
  const last = await source.log({ from: Math.max(first.start + 1, first.head - SPAN + 1) });
  return { start: first.start, head: last.head, entries: last.entries };
}

/** The retained log's tail, read on mount and on `reload()`; its error as text. */
function useRetained(source: HistorySource) {
  const [got, setGot] = useState<{ start: number; head: number; entries: HistoryEntryInfo[] } | undefined>();
  const [error, setError] = useState<string | undefined>();
  const reload = useCallback(() => {
    readTail(source).then(
      (t) => {
        setGot(t);
        setError(undefined);
      },
      (e: unknown) => setError(String((e as Error)?.message ?? e)),
    );
  }, [source]);
  useEffect(reload, [reload]);
  return { got, error, reload };
}

/** The state at `at` (undefined until read), read again whenever `at` moves. */
function useStateAt(source: HistorySource, at: number | undefined): { state: unknown; error?: string } | undefined {
  const [state, setState] = useState<{ at: number; state: unknown; error?: string } | undefined>();
  useEffect(() => {
    if (at === undefined) return;
    let live = true;
    source.stateAt(at).then(
      (s) => live && setState({ at, state: s }),
      (e: unknown) => live && setState({ at, state: undefined, error: String((e as Error)?.message ?? e) }),
    );
    return () => {
      live = false;
    };
  }, [source, at]);
  return state && state.at === at ? state : undefined;
}

/** Who wrote an op, and when. */
function byline(e: HistoryEntryInfo): string {
  const when = e.time > 0 ? new Date(e.time).toISOString().slice(11, 19) : 'unknown time';
  return `${e.author} (client ${e.client.slice(0, 8)}) at ${when}${e.error ? `: ${e.refused ? 'refused' : 'threw'}, ${e.error}` : ''}`;
}

/** The five views' positions as marks on the slider's scale (`lo`..`hi`); past its end, at the end. */
function ViewMarks({ positions, lo, hi }: { positions: Record<ViewName, number>; lo: number; hi: number }) {
  const at = (p: number) => `${hi > lo ? ((Math.min(Math.max(p, lo), hi) - lo) / (hi - lo)) * 100 : 0}%`;
  return (
    <div style={bar}>
      {VIEWS.map((v, i) => (
        <span
          key={v}
          title={`${v}: ${positions[v]}`}
          data-testid={`tt-mark-${v}`}
          data-pos={positions[v]}
          style={{ position: 'absolute', left: at(positions[v]), top: (i % 2) * 6, fontSize: 9, color: '#fbbf24', transform: 'translateX(-50%)' }}
        >
          {v[0].toUpperCase()}
        </span>
      ))}
    </div>
  );
}

/** The time-travel view: the slider, the op at the chosen position and its state. */
export function TimeTravel({ source, positions }: { source: HistorySource; positions: Record<ViewName, number> }) {
  const { got, error, reload } = useRetained(source);
  const [picked, setPicked] = useState<number | undefined>();
  const lo = got ? Math.max(got.start, got.head - SPAN) : 0;
  const at = got ? Math.min(Math.max(picked ?? got.head, lo), got.head) : undefined;
  const shown = useStateAt(source, at);
  if (error) return <div data-testid="tt-error">history: {error}</div>;
  if (!got || at === undefined) return <div>history: reading…</div>;
  const entry = got.entries.find((e) => e.pos === at);
  const near = got.entries.filter((e) => e.pos > at - 3 && e.pos <= at + 2);
  return (
    <section data-testid="time-travel" style={{ marginTop: 8 }}>
      <div style={{ display: 'flex', justifyContent: 'space-between' }}>
        <span>
          history {got.start}..{got.head} · at <span data-testid="tt-at">{at}</span>
        </span>
        <button type="button" onClick={reload} style={{ fontSize: 11 }}>
          reload
        </button>
      </div>
      <input
        type="range"
        data-testid="tt-slider"
        min={lo}
        max={got.head}
        value={at}
        onChange={(e) => setPicked(Number(e.currentTarget.value))}
        style={{ width: '100%' }}
      />
      <ViewMarks positions={positions} lo={lo} hi={got.head} />
      <div data-testid="tt-op">{entry ? `#${entry.pos} ${entry.name} by ${byline(entry)}` : at === got.start ? 'the state history starts from' : ''}</div>
      <ol style={{ margin: '4px 0', paddingLeft: 18 }}>
        {near.map((e) => (
          <li key={e.pos} value={e.pos} style={{ color: e.pos === at ? '#f9fafb' : '#9ca3af' }}>
            {e.name} · {e.author}
          </li>
        ))}
      </ol>
      <pre data-testid="tt-state" style={{ maxHeight: 160, overflow: 'auto', margin: 0, whiteSpace: 'pre-wrap' }}>
        {shown ? (shown.error ?? JSON.stringify(shown.state, null, 1).slice(0, 4000)) : 'reading…'}
      </pre>
    </section>
  );
}
