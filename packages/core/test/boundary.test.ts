/**
 * Core is pure: its build (tsconfig.build.json) has neither the Node nor the DOM types, so an
 * I/O import or a host global in core fails to compile. Proven here with core's own compiler
 * settings: core's sources compile without a single error, and a file added to them that reaches
 * for Node or the browser fails on exactly those lines, while the globals every runtime has
 * (declared in src/host.d.ts) still compile.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const coreDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const fixtureFile = join(coreDir, 'src', 'boundary-fixture.ts');

/** Each line of the fixture, and whether core's build must refuse it. */
const FIXTURE: [code: string, refused: boolean][] = [
  [`import { readFileSync } from 'node:fs';`, true],
  [`import { EventEmitter } from 'events';`, true],
  [`export const env = process.env.HOME;`, true],
  [`export const buf = Buffer.from('x');`, true],
  [`export const href = window.location.href;`, true],
  [`export const el = document.createElement('div');`, true],
  [`export const res = fetch('https://example.invalid/');`, true],
  [`export const ws = new WebSocket('ws://localhost');`, true],
  [`export const store = localStorage.getItem('k');`, true],
  [`export const dir = __dirname;`, true],
  // What every runtime has, as core uses it, and core's own modules:
  [`export const bytes = new TextEncoder().encodeInto('x', new Uint8Array(4)).written;`, false],
  [`export const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(new Uint8Array(1));`, false],
  [`export const now = performance.now() + structuredClone(1);`, false],
  [`queueMicrotask(() => clearTimeout(setTimeout(() => {}, 1)));`, false],
  [`export { HerculesError } from './errors.ts';`, false],
];

function compileCore(extra?: string) {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(coreDir, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  assert.ok(config, 'core has a tsconfig.build.json');
  // Core's settings as its build has them, without writing anything (and without `composite`,
  // which would refuse a file its `include` does not list).
  const options = {
    ...config.options,
    noEmit: true,
    composite: false,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
    incremental: false,
    tsBuildInfoFile: undefined,
  };
  const host = ts.createCompilerHost(options);
  if (extra !== undefined) {
    const { getSourceFile, fileExists, readFile } = host;
    host.getSourceFile = (f, lang, ...rest) => (f === fixtureFile ? ts.createSourceFile(f, extra, lang) : getSourceFile.call(host, f, lang, ...rest));
    host.fileExists = (f) => f === fixtureFile || fileExists.call(host, f);
    host.readFile = (f) => (f === fixtureFile ? extra : readFile.call(host, f));
  }
  const program = ts.createProgram({ rootNames: extra === undefined ? config.fileNames : [...config.fileNames, fixtureFile], options, host });
  return { config, program, diagnostics: ts.getPreEmitDiagnostics(program) };
}

const text = (d: ts.Diagnostic) =>
  `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;

test('core compiles with its own settings: no Node types, no DOM, not one error', () => {
  const { config, diagnostics } = compileCore();
  assert.deepEqual(config.options.types, [], 'core names no type packages (a bare tsconfig would take every @types/* installed)');
  assert.ok(!config.options.lib?.some((l) => /dom/i.test(l)), `core's lib has no DOM: ${config.options.lib?.join(', ')}`);
  assert.ok(
    config.fileNames.some((f) => f.endsWith('host.d.ts')),
    'core declares its few host globals itself',
  );
  assert.deepEqual(diagnostics.map(text), []);
});

test('an I/O import or a Node or browser global in core fails its build, on exactly those lines; the universal globals compile', () => {
  const { diagnostics } = compileCore(FIXTURE.map(([code]) => code).join('\n'));
  const inCore = diagnostics.filter((d) => d.file?.fileName !== fixtureFile);
  assert.deepEqual(inCore.map(text), [], 'core itself still compiles');
  const failedLines = new Set(diagnostics.filter((d) => d.file?.fileName === fixtureFile).map((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line));
  FIXTURE.forEach(([code, refused], line) => {
    assert.equal(failedLines.has(line), refused, `${refused ? 'must fail' : 'must compile'} in core: ${code}\n${diagnostics.map(text).join('\n')}`);
  });
});
