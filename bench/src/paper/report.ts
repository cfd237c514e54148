/**
 * Results of the paper's experiments: merged into docs/benchmarks/paper.json (one section per
 * experiment, with machine and commit) and an SVG plot per experiment in docs/benchmarks/.
 */
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..');
const out = resolve(root, 'docs', 'benchmarks');

function commit(): string {
  try {
    const head = execSync('git rev-parse --short HEAD', { cwd: root }).toString().trim();
    const dirty = execSync('git status --porcelain -- packages bench apps', { cwd: root }).toString().trim() !== '';
    return dirty ? `${head}+uncommitted` : head;
  } catch {
    return 'unknown';
  }
}

export function writePaperSection(id: string, data: unknown, svg?: string): void {
  mkdirSync(out, { recursive: true });
  const file = resolve(out, 'paper.json');
  const all = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
  all[id] = {
    date: new Date().toISOString(),
    commit: commit(),
    node: process.version,
    machine: { cpu: cpus()[0]?.model, cpus: cpus().length, memGiB: +(totalmem() / 2 ** 30).toFixed(1), loadavg1: +loadavg()[0].toFixed(2) },
    ...(data as object),
  };
  writeFileSync(file, JSON.stringify(all, null, 2) + '\n');
  if (svg) writeFileSync(resolve(out, `${id}.svg`), svg);
  console.log(`wrote docs/benchmarks/paper.json#${id}${svg ? ` and docs/benchmarks/${id}.svg` : ''}`);
}

export interface Series {
  name: string;
  points: [number, number][];
}

/** A small dependency-free line chart. */
export function svgLineChart(o: { title: string; xLabel: string; yLabel: string; series: Series[]; logX?: boolean; yMin?: number }): string {
  const W = 720,
    H = 420,
    L = 70,
    R = 150,
    T = 40,
    B = 50;
  const xs = o.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = o.series.flatMap((s) => s.points.map((p) => p[1]));
  if (!xs.length) return '';
  const fx = (x: number) => (o.logX ? Math.log2(x) : x);
  const x0 = Math.min(...xs.map(fx)),
    x1 = Math.max(...xs.map(fx));
  const y0 = o.yMin ?? 0,
    y1 = Math.max(...ys) * 1.08 || 1;
  const px = (x: number) => L + ((fx(x) - x0) / (x1 - x0 || 1)) * (W - L - R);
  const py = (y: number) => H - B - ((y - y0) / (y1 - y0 || 1)) * (H - T - B);
  const colors = ['#dc2626', '#2563eb', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];
  const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(o.title)}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#333"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#333"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text x="18" y="${(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 ${(T + H - B) / 2})">${esc(o.yLabel)}</text>`,
  ];
  const ticks = [...new Set(xs)].sort((a, b) => a - b);
  const every = Math.ceil(ticks.length / 12);
  for (const x of ticks.filter((_, i) => i % every === 0)) parts.push(`<text x="${px(x)}" y="${H - B + 16}" text-anchor="middle">${x}</text>`);
  for (let i = 0; i <= 5; i++) {
    const y = y0 + ((y1 - y0) * i) / 5;
    parts.push(
      `<line x1="${L}" y1="${py(y)}" x2="${W - R}" y2="${py(y)}" stroke="#eee"/><text x="${L - 6}" y="${py(y) + 4}" text-anchor="end">${+y.toFixed(y1 < 10 ? 2 : 0)}</text>`,
    );
  }
  o.series.forEach((s, i) => {
    const c = colors[i % colors.length];
    const pts = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${c}" stroke-width="2" points="${pts}"/>`);
    for (const [x, y] of s.points) parts.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${c}"/>`);
    parts.push(
      `<rect x="${W - R + 14}" y="${T + i * 20}" width="12" height="4" fill="${c}"/><text x="${W - R + 32}" y="${T + i * 20 + 6}">${esc(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/** A small dependency-free horizontal bar chart; `refs` draws labelled vertical lines (limits, goals). */
export function svgBarChart(o: { title: string; xLabel: string; bars: { label: string; value: number }[]; refs?: { value: number; label: string }[] }): string {
  const bars = o.bars.filter((b) => Number.isFinite(b.value));
  if (!bars.length) return '';
  const W = 720,
    L = 230,
    R = 40,
    T = 40,
    B = 50,
    row = 28;
  const H = T + B + bars.length * row;
  const max = Math.max(...bars.map((b) => b.value), ...(o.refs ?? []).map((r) => r.value)) * 1.1 || 1;
  const px = (v: number) => L + (v / max) * (W - L - R);
  const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const fmt = (v: number) => (v >= 100 ? Math.round(v).toLocaleString('en-US') : +v.toFixed(3) + '');
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(o.title)}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#333"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`,
  ];
  bars.forEach((b, i) => {
    const y = T + i * row;
    const label = b.label.length > 34 ? `${b.label.slice(0, 33)}…` : b.label;
    parts.push(
      `<text x="${L - 8}" y="${y + row / 2 + 4}" text-anchor="end">${esc(label)}</text>`,
      `<rect x="${L}" y="${y + 4}" width="${(px(b.value) - L).toFixed(1)}" height="${row - 8}" fill="${i === 0 ? '#dc2626' : '#2563eb'}"/>`,
      `<text x="${(px(b.value) + 4).toFixed(1)}" y="${y + row / 2 + 4}">${fmt(b.value)}</text>`,
    );
  });
  for (const r of o.refs ?? []) {
    parts.push(
      `<line x1="${px(r.value).toFixed(1)}" y1="${T - 4}" x2="${px(r.value).toFixed(1)}" y2="${H - B}" stroke="#16a34a" stroke-dasharray="4 3"/>`,
      `<text x="${px(r.value).toFixed(1)}" y="${H - B + 16}" text-anchor="middle" fill="#16a34a">${esc(r.label)}</text>`,
    );
  }
  parts.push('</svg>');
  return parts.join('\n');
}
