/**
 * Plots of the experiments whose scripts print tables (Fig. 13, the peers, saturation), drawn
 * from their paper.json sections, so a plot always shows exactly the numbers the JSON holds.
 * The scripts call these when they write their section; to redraw from the JSON alone:
 *
 *   node --import tsx bench/src/paper/charts.ts
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { svgBarChart } from './report.ts';

type Fig13 = { params: { rttMs: number; storage: string }; rows: { view: string; medianMs: number }[]; breakdown: { proxyRttMedianMs: number } };
type Peers = { params: { rttMs: number }; results: { system: string; deliveryMedianMs: number }[] };
type Saturation = { results: { system: string; deliveredPerS: number; serverUsPerEdit: number; limit: string }[] };

/** A system's name without its parenthesised details. */
export const short = (system: string) => system.split(' (')[0];

export function fig13Chart(s: Fig13): string {
  const med = (v: string) => s.rows.find((r) => r.view === v)?.medianMs ?? NaN;
  return svgBarChart({
    title: `Fig. 13: median delay to each view, ${s.params.storage} (RTT ${s.params.rttMs} ms)`,
    xLabel: 'ms from submit (dashed: the physical limits)',
    bars: [
      { label: 'Durable', value: med('durable') },
      { label: 'network round trip (probe)', value: s.breakdown.proxyRttMedianMs },
      { label: 'Authoritative', value: med('authoritative') },
      { label: 'Visible', value: med('visible') },
    ],
    refs: [
      { value: s.params.rttMs, label: 'RTT' },
      { value: 2 * s.params.rttMs, label: '2·RTT' },
    ],
  });
}

export function peersChart(s: Peers): string {
  return svgBarChart({
    title: `Delivery at the other client, median (RTT ${s.params.rttMs} ms, same proxy)`,
    xLabel: 'ms from the edit (dashed: one RTT)',
    bars: s.results.map((r) => ({ label: short(r.system), value: r.deliveryMedianMs })),
    refs: [{ value: s.params.rttMs, label: 'RTT' }],
  });
}

export function saturationChart(s: Saturation): string {
  return svgBarChart({
    title: 'Server saturation: edits per second delivered (clients in their own processes)',
    xLabel: 'edits/s at the observer (* limited by its clients, not its server: a lower bound)',
    bars: s.results.map((r) => ({ label: `${r.limit.startsWith('server') ? '' : '* '}${short(r.system)}`, value: r.deliveredPerS })),
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..', 'docs', 'benchmarks');
  const all = JSON.parse(readFileSync(resolve(dir, 'paper.json'), 'utf8')) as Record<string, unknown>;
  const draw: Record<string, (s: never) => string> = { fig13: fig13Chart, 'fig13-tmpfs': fig13Chart, peers: peersChart, saturation: saturationChart };
  for (const [id, f] of Object.entries(draw)) {
    if (!all[id]) continue;
    writeFileSync(resolve(dir, `${id}.svg`), f(all[id] as never));
    console.log(`wrote docs/benchmarks/${id}.svg`);
  }
}
