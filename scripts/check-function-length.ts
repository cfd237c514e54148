/**
 * The function-length ratchet (issue 36, item 5; TigerBeetle's tidy check is the model): no
 * function in packages/*\/src is longer than 100 lines, but for the named exceptions below, each
 * with its reason and the length it had when it was listed. The list only shrinks: the check also
 * fails when an exception is gone, or is shorter than its recorded length (then lower the figure,
 * or drop the entry once the function is at most 100 lines).
 *
 * A function is a declaration, a method, an accessor, a constructor, an arrow function or a
 * function expression; its length counts the lines from its first token to its closing brace,
 * nested functions included (a nested function is also measured on its own).
 *
 *   node --import tsx scripts/check-function-length.ts     (in npm test, beside lint; about 2 s)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const MAX_LINES = 100;

export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
}

export interface Exception {
  file: string;
  name: string;
  lines: number;
  reason: string;
}

/** The exceptions, longest first. Shrink it: split the function, then lower or remove its entry. */
export const EXCEPTIONS: Exception[] = [
  {
    file: 'packages/server/src/room-service.ts',
    name: 'createRoomService',
    lines: 146,
    reason:
      'composes the named parts (Session, InputScheduler, BackendApi, ServiceMetrics) over shared state: options, admission, close; shrinking (issue 36, item 1)',
  },
  {
    file: 'packages/sim/src/sim.ts',
    name: 'startClient',
    lines: 125,
    reason: 'one simulated client with its link and checkers; goes with the simulator driving the service (issue 36, item 3)',
  },
  { file: 'packages/core/src/room-engine.ts', name: 'onOps', lines: 115, reason: 'validation, ordering and fan-out of one ops frame; not yet split' },
  { file: 'packages/core/src/room-engine.ts', name: 'onHello', lines: 108, reason: 'the hello handshake (auth, catch-up choice, welcome); not yet split' },
];

/** The name a reader would search for: the declared name, or the variable / property it is bound to. */
function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (named.name && (ts.isIdentifier(named.name) || ts.isStringLiteral(named.name) || ts.isPrivateIdentifier(named.name))) return named.name.text;
  if (named.name) return named.name.getText(source);
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && ts.isIdentifier(parent.name)) {
    return parent.name.text;
  }
  return `<anonymous:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}>`;
}

function isFunction(node: ts.Node): boolean {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** Every function in one file's text, with its length in lines. */
export function measureSource(file: string, text: string): FunctionLength[] {
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const found: FunctionLength[] = [];
  const visit = (node: ts.Node): void => {
    if (isFunction(node) && (node as ts.FunctionLikeDeclaration).body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file, name: functionName(node, source), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The .ts and .tsx files under a directory, recursively (declaration files excluded). */
function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) files.push(path);
  }
  return files;
}

/** Every function in packages/*\/src of the repository at `root`; paths relative to it. */
export function measureRepository(root: string): FunctionLength[] {
  const found: FunctionLength[] = [];
  const packages = join(root, 'packages');
  for (const pkg of readdirSync(packages, { withFileTypes: true })) {
    if (!pkg.isDirectory()) continue;
    const src = join(packages, pkg.name, 'src');
    let files: string[];
    try {
      files = sourceFiles(src);
    } catch {
      continue; // a package without src/
    }
    for (const path of files) found.push(...measureSource(relative(root, path).split('\\').join('/'), readFileSync(path, 'utf8')));
  }
  return found;
}

/** The check's findings: one line per violation; empty when the code and the list agree. */
export function checkFunctionLengths(functions: FunctionLength[], exceptions: Exception[], max = MAX_LINES): string[] {
  const problems: string[] = [];
  const key = (file: string, name: string) => `${file}#${name}`;
  const allowed = new Map(exceptions.map((e) => [key(e.file, e.name), e]));
  const seen = new Map<string, number>();
  for (const f of functions) {
    if (f.lines <= max) continue;
    const k = key(f.file, f.name);
    const exception = allowed.get(k);
    seen.set(k, Math.max(seen.get(k) ?? 0, f.lines));
    if (!exception) problems.push(`${f.file}:${f.line} ${f.name} is ${f.lines} lines (at most ${max}): split it into named parts`);
    else if (f.lines > exception.lines)
      problems.push(`${f.file}:${f.line} ${f.name} grew to ${f.lines} lines (its exception allows ${exception.lines}): split it, do not grow it`);
  }
  for (const e of exceptions) {
    const k = key(e.file, e.name);
    const now = seen.get(k);
    if (now === undefined) problems.push(`${e.file} ${e.name}: listed as an exception but now at most ${max} lines (or gone): remove its entry`);
    else if (now < e.lines) problems.push(`${e.file} ${e.name}: now ${now} lines, its exception records ${e.lines}: lower the recorded length to ${now}`);
  }
  return problems;
}

function main(): void {
  // --root <dir>: check another tree laid out as packages/*/src (the test's fixture).
  const at = process.argv.indexOf('--root');
  const root = at >= 0 ? resolve(process.argv[at + 1]!) : resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const functions = measureRepository(root);
  const problems = checkFunctionLengths(functions, EXCEPTIONS);
  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    console.error(`check-function-length: ${problems.length} problem(s); functions are at most ${MAX_LINES} lines (scripts/check-function-length.ts)`);
    process.exit(1);
  }
  const over = functions.filter((f) => f.lines > MAX_LINES).length;
  console.log(`check-function-length: ${functions.length} functions in packages/*/src, ${over} over ${MAX_LINES} lines, all listed exceptions`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
