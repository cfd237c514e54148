/**
 * The hercules command's options, in one table: each has a flag and an environment variable
 * (HERCULES_ + its name in capitals, `-` as `_`: --max-connections is HERCULES_MAX_CONNECTIONS),
 * the twelve-factor way, so a container or a systemd unit configures the server without a
 * command line. A flag wins over its variable. `--help` is written from the same table.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { HerculesError } from '@hercules/core';

export interface OptionSpec {
  name: string;
  /** The value's placeholder in --help; absent: a boolean switch. */
  arg?: string;
  help: string;
  short?: string;
  /** Not read from the environment (per-invocation switches such as --help). */
  noEnv?: boolean;
}

export interface OptionGroup {
  title: string;
  options: readonly OptionSpec[];
}

/** The environment variable of an option. */
export function envName(option: string): string {
  return `HERCULES_${option.toUpperCase().replace(/-/g, '_')}`;
}

export type Values = Record<string, string | boolean | undefined>;

/**
 * Parses argv against every command's options (so a command's name may come after its options),
 * picks the command (the first positional), refuses an option that is not the command's, and
 * fills each of the command's options not given on the command line from its environment
 * variable. A boolean variable is `1`/`true` or `0`/`false`. Throws an Error whose message is the
 * one line to show (unknown option, bad boolean).
 */
export function parseOptions(
  argv: string[],
  all: readonly OptionGroup[],
  commandGroups: (command: string | undefined) => readonly OptionGroup[],
  env: NodeJS.ProcessEnv,
): { values: Values; positionals: string[] } {
  const everyOption = new Map(all.flatMap((g) => g.options).map((s) => [s.name, s]));
  const options: NonNullable<ParseArgsConfig['options']> = Object.fromEntries(
    [...everyOption.values()].map((s) => [s.name, { type: s.arg ? ('string' as const) : ('boolean' as const), ...(s.short ? { short: s.short } : {}) }]),
  );
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options }) as { values: Values; positionals: string[] };
  } catch (e) {
    const unknown = /^Unknown option '([^']+)'/.exec((e as Error).message);
    throw new HerculesError('bad-argument', unknown ? `unknown option ${unknown[1]}` : (e as Error).message);
  }
  const specs = commandGroups(parsed.positionals[0]).flatMap((g) => g.options);
  const own = new Set(specs.map((s) => s.name));
  const stray = Object.keys(parsed.values).find((k) => !own.has(k));
  if (stray !== undefined) throw new HerculesError('bad-argument', `unknown option --${stray}${parsed.positionals[0] ? ` for ${parsed.positionals[0]}` : ''}`);
  const values: Values = { ...parsed.values };
  for (const s of specs) {
    if (s.noEnv || values[s.name] !== undefined) continue;
    const v = env[envName(s.name)];
    if (v === undefined || v === '') continue;
    values[s.name] = s.arg ? v : booleanOf(envName(s.name), v);
  }
  return { values, positionals: parsed.positionals };
}

function booleanOf(name: string, v: string): boolean {
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new HerculesError('bad-argument', `${name} must be 1, true, 0 or false, got ${JSON.stringify(v)}`);
}

/** The options part of --help: each flag, its description, and its environment variable. */
export function renderOptions(groups: readonly OptionGroup[]): string {
  const out: string[] = [];
  for (const g of groups) {
    out.push('', `${g.title}:`);
    for (const s of g.options) {
      const flag = `${s.short ? `-${s.short}, ` : ''}--${s.name}${s.arg ? ` <${s.arg}>` : ''}`;
      const lines = s.help.split('\n');
      out.push(`  ${flag.padEnd(30)} ${lines[0]}`);
      for (const l of lines.slice(1)) out.push(`  ${''.padEnd(30)} ${l}`);
      if (!s.noEnv) out.push(`  ${''.padEnd(30)} env ${envName(s.name)}`);
    }
  }
  return out.join('\n');
}
