/**
 * docs/spec.md and the checks cannot drift apart: every rule ID cited by a test (`// spec: ID`)
 * or named by a checker, the fuzzer or the soak is a rule of the spec; every rule is cited; and
 * each rule's "Checked by" names exactly the files that cite it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHECKERS } from '../src/checkers.ts';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..');
const ID = '[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+';

/** The checkers, the fuzzers and the soak name rules as string literals ('VIS-DELIVERED'). */
const TOOLS = [
  'packages/sim/src/checkers.ts',
  'packages/sim/src/text-checkers.ts',
  'packages/sim/src/rich-checkers.ts',
  'packages/sim/src/receipt-checkers.ts',
  'packages/sim/src/sec-checkers.ts',
  'packages/sim/src/vis-checkers.ts',
  'packages/sim/src/fuzz.ts',
  'packages/sim/src/import-fuzz.ts',
  'packages/sim/src/undo-sim.ts',
  'packages/sim/src/tabs.ts',
  'test/soak/soak.ts',
];

interface Rule {
  id: string;
  checkedBy: string[];
  testsOnly: boolean;
}

function parseSpec(): { rules: Rule[]; areas: Set<string> } {
  const text = readFileSync(join(root, 'docs/spec.md'), 'utf8');
  const areas = new Set([...text.matchAll(/^\| `([A-Z]+)` \|/gm)].map((m) => m[1]));
  const rules: Rule[] = [];
  const sections = text.split(/^(?=#{2,3} )/m);
  for (const sec of sections) {
    const h = new RegExp(`^### (${ID})\\s*\\n`).exec(sec);
    if (!h) continue;
    // The "Checked by" bullet runs to the next bullet or blank line.
    const cb = /^\* \*Checked by:\*([\s\S]*?)(?=\n\* |\n\n|(?![\s\S]))/m.exec(sec);
    assert.ok(cb, `${h[1]} has no "Checked by"`);
    rules.push({ id: h[1], checkedBy: [...cb[1].matchAll(/`([^`]+\.tsx?)`/g)].map((m) => m[1]), testsOnly: /tests only/.test(cb[1]) });
  }
  return { rules, areas };
}

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files(p, out);
    else if (/\.tsx?$/.test(name)) out.push(relative(root, p));
  }
  return out;
}

/** Rule IDs each file cites: `// spec: A, B` comments anywhere, rule-shaped literals in TOOLS. */
function citations(): Map<string, Set<string>> {
  const scanned = [
    ...readdirSync(join(root, 'packages')).flatMap((pkg) => {
      const t = join(root, 'packages', pkg, 'test');
      return statSync(join(root, 'packages', pkg)).isDirectory() && readdirSync(join(root, 'packages', pkg)).includes('test') ? files(t) : [];
    }),
    ...files(join(root, 'test')),
    ...files(join(root, 'apps', 'web', 'test')),
    ...TOOLS,
  ];
  const byFile = new Map<string, Set<string>>();
  for (const f of new Set(scanned)) {
    const src = readFileSync(join(root, f), 'utf8');
    const ids = new Set<string>();
    for (const m of src.matchAll(new RegExp(`//\\s*spec:\\s*(${ID}(?:\\s*,\\s*${ID})*)`, 'g'))) for (const id of m[1].split(/\s*,\s*/)) ids.add(id);
    if (TOOLS.includes(f)) for (const m of src.matchAll(new RegExp(`'(${ID})'`, 'g'))) ids.add(m[1]);
    if (ids.size) byFile.set(f, ids);
  }
  return byFile;
}

test('docs/spec.md: rule IDs are unique, of the form AREA-NAME, in an area the page lists', () => {
  const { rules, areas } = parseSpec();
  assert.ok(rules.length >= 30, `only ${rules.length} rules parsed`);
  assert.ok(areas.size >= 5, `only ${areas.size} areas parsed`);
  const seen = new Set<string>();
  for (const r of rules) {
    assert.ok(!seen.has(r.id), `${r.id} is defined twice`);
    seen.add(r.id);
    assert.ok(
      [...areas].some((a) => r.id.startsWith(`${a}-`)),
      `${r.id} is in no listed area (${[...areas].join(', ')})`,
    );
  }
});

test('every rule cited by a test, a checker, the fuzzer or the soak is in docs/spec.md, and every rule there is cited', () => {
  const { rules } = parseSpec();
  const defined = new Set(rules.map((r) => r.id));
  const cited = new Set<string>();
  for (const [f, ids] of citations()) {
    for (const id of ids) {
      assert.ok(defined.has(id), `${f} cites ${id}, which docs/spec.md does not define`);
      cited.add(id);
    }
  }
  const uncited = rules.filter((r) => !cited.has(r.id)).map((r) => r.id);
  assert.deepEqual(uncited, [], `rules no test or checker cites: ${uncited.join(', ')}`);
});

test('each rule\'s "Checked by" names exactly the files that cite it', () => {
  const { rules } = parseSpec();
  const citing = new Map<string, string[]>();
  for (const [f, ids] of citations()) for (const id of ids) citing.set(id, [...(citing.get(id) ?? []), f]);
  for (const r of rules) {
    assert.deepEqual(
      [...r.checkedBy].sort(),
      (citing.get(r.id) ?? []).sort(),
      `${r.id}: its "Checked by" (actual) differs from the files that cite it (expected)`,
    );
    const byTool = r.checkedBy.some((f) => TOOLS.includes(f));
    assert.equal(r.testsOnly, !byTool, `${r.id}: says "tests only" exactly when no checker, fuzzer or soak checks it`);
  }
});

test('each simulator checker checks a different rule', () => {
  const rules = CHECKERS.map((c) => c.rule);
  assert.equal(new Set(rules).size, rules.length, `a rule with two checkers: ${rules.join(', ')}`);
  for (const c of CHECKERS) assert.ok(c.description.length > 10, `${c.rule} has no description`);
});
