/**
 * The function-length ratchet can fail: on a fixture repository whose one long function is 101
 * lines, the check reports it, accepts it only as an exception at exactly that length, and asks
 * for an exception to be lowered or removed when the code is shorter than it records.
 *
 *   node --import tsx --test scripts/check-function-length.test.ts     (in npm run check:functions)
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { checkFunctionLengths, EXCEPTIONS, MAX_LINES, measureRepository, measureSource } from './check-function-length.ts';

const here = dirname(fileURLToPath(import.meta.url));
const fixture = join(here, 'fixtures', 'function-length');
const FILE = 'packages/demo/src/long.ts';

test('measures declarations, arrows, methods and function expressions by name', () => {
  const found = measureRepository(fixture);
  const byName = new Map(found.map((f) => [f.name, f]));
  assert.deepEqual([...byName.keys()].sort(), ['onEvent', 'shortArrow', 'size', 'tooLong']);
  assert.deepEqual(byName.get('tooLong'), { file: FILE, name: 'tooLong', line: 2, lines: 101 });
  assert.equal(byName.get('shortArrow')!.lines, 1);
  assert.equal(byName.get('size')!.lines, 3);
  assert.equal(byName.get('onEvent')!.lines, 3);
});

test('a function over the limit without an exception fails the check', () => {
  const problems = checkFunctionLengths(measureRepository(fixture), []);
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /long\.ts:2 tooLong is 101 lines \(at most 100\)/);
});

test('an exception at the current length passes; one that grew or shrank fails', () => {
  const found = measureRepository(fixture);
  const at = (lines: number) => [{ file: FILE, name: 'tooLong', lines, reason: 'fixture' }];
  assert.deepEqual(checkFunctionLengths(found, at(101)), []);
  assert.match(checkFunctionLengths(found, at(100)).join('\n'), /grew to 101 lines \(its exception allows 100\)/);
  assert.match(checkFunctionLengths(found, at(120)).join('\n'), /now 101 lines, its exception records 120: lower/);
  // Under the limit, the exception must go.
  assert.match(checkFunctionLengths(found, at(101), 101).join('\n'), /now at most 101 lines \(or gone\): remove its entry/);
  const gone = [{ file: FILE, name: 'removedLongAgo', lines: 150, reason: 'fixture' }];
  assert.match(checkFunctionLengths(found, [...at(101), ...gone]).join('\n'), /removedLongAgo: listed as an exception but now at most 100 lines/);
});

test('the nested function is measured on its own, and inside its parent', () => {
  const inner = Array.from({ length: 101 }, (_, i) => `    x += ${i};`).join('\n');
  const text = `function outer() {\n  const inner = () => {\n    let x = 0;\n${inner}\n  };\n  return inner;\n}\n`;
  const found = measureSource('a.ts', text);
  assert.deepEqual(
    found.map((f) => [f.name, f.lines]),
    [
      ['outer', 107],
      ['inner', 104],
    ],
  );
});

test('the repository passes, and every exception states a reason and is over the limit', () => {
  assert.deepEqual(checkFunctionLengths(measureRepository(join(here, '..')), EXCEPTIONS), []);
  for (const e of EXCEPTIONS) {
    assert.ok(e.reason.length > 10, `${e.name} has a reason`);
    assert.ok(e.lines > MAX_LINES, `${e.name} is over the limit`);
  }
});

test('the script exits non-zero on a violation (the fixture, as the repository root)', () => {
  const script = join(here, 'check-function-length.ts');
  const run = spawnSync(process.execPath, ['--import', 'tsx', script, '--root', fixture], { encoding: 'utf8' });
  assert.equal(run.status, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /tooLong is 101 lines/);
});
