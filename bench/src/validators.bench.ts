/**
 * Op-argument validators, called the way Hercules calls them: through the Standard Schema
 * interface (`schema['~standard'].validate(args)`), which is what `defineMachine({ schemas })`
 * accepts. Valibot, Zod 4, Zod Mini and ArkType implement it natively; TypeBox does not, so
 * it runs behind a small adapter around its compiled checker (what a TypeBox user would write).
 * Cases: the design app's `move` and the spreadsheet's `setCell`, valid and invalid.
 * Times are medians of interleaved repetitions (noisy shared machine).
 *   node --import tsx bench/src/validators.bench.ts
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import * as v from 'valibot';
import { z } from 'zod';
import * as zm from 'zod/mini';
import { type } from 'arktype';
import Type from 'typebox';
import { Compile } from 'typebox/compile';

type Lib = { name: string; move: StandardSchemaV1; setCell: StandardSchemaV1 };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- TypeBox's schema types vary by overload
function typeboxStandard(schema: any): StandardSchemaV1 {
  const check = Compile(schema);
  return {
    '~standard': {
      version: 1,
      vendor: 'typebox-adapter',
      validate: (value) =>
        check.Check(value)
          ? { value }
          : {
              issues: [...check.Errors(value)].slice(0, 3).map((e) => ({
                message: e.message,
                path: String((e as { instancePath?: string }).instancePath ?? '')
                  .split('/')
                  .filter(Boolean),
              })),
            },
    },
  };
}

const libs: Lib[] = [
  {
    name: 'Valibot 1',
    move: v.object({ id: v.pipe(v.string(), v.maxLength(64)), x: v.pipe(v.number(), v.finite()), y: v.pipe(v.number(), v.finite()) }),
    setCell: v.object({
      row: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(999)),
      col: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(25)),
      text: v.pipe(v.string(), v.maxLength(10000)),
    }),
  },
  {
    name: 'Zod 4',
    move: z.object({ id: z.string().max(64), x: z.number(), y: z.number() }),
    setCell: z.object({ row: z.number().int().min(0).max(999), col: z.number().int().min(0).max(25), text: z.string().max(10000) }),
  },
  {
    name: 'Zod Mini',
    move: zm.object({ id: zm.string().check(zm.maxLength(64)), x: zm.number(), y: zm.number() }),
    setCell: zm.object({
      row: zm.number().check(zm.int(), zm.gte(0), zm.lte(999)),
      col: zm.number().check(zm.int(), zm.gte(0), zm.lte(25)),
      text: zm.string().check(zm.maxLength(10000)),
    }),
  },
  {
    name: 'ArkType 2',
    move: type({ id: 'string <= 64', x: 'number', y: 'number' }) as unknown as StandardSchemaV1,
    setCell: type({ row: '0 <= number.integer <= 999', col: '0 <= number.integer <= 25', text: 'string <= 10000' }) as unknown as StandardSchemaV1,
  },
  {
    name: 'TypeBox 1 (compiled, adapter)',
    move: typeboxStandard(Type.Object({ id: Type.String({ maxLength: 64 }), x: Type.Number(), y: Type.Number() })),
    setCell: typeboxStandard(
      Type.Object({ row: Type.Integer({ minimum: 0, maximum: 999 }), col: Type.Integer({ minimum: 0, maximum: 25 }), text: Type.String({ maxLength: 10000 }) }),
    ),
  },
];

const cases: { id: string; schema: 'move' | 'setCell'; args: unknown; valid: boolean }[] = [
  { id: 'move, valid', schema: 'move', args: { id: 'chair-17', x: 120.5, y: 88 }, valid: true },
  { id: 'move, invalid (x is a string)', schema: 'move', args: { id: 'chair-17', x: '120', y: 88 }, valid: false },
  { id: 'setCell, valid', schema: 'setCell', args: { row: 3, col: 2, text: 'Gear' }, valid: true },
  { id: 'setCell, invalid (row 1.5, col -1)', schema: 'setCell', args: { row: 1.5, col: -1, text: 'Gear' }, valid: false },
];

// Every library must agree with the expected verdict before anything is timed.
for (const l of libs)
  for (const c of cases) {
    const r = l[c.schema]['~standard'].validate(c.args) as StandardSchemaV1.Result<unknown>;
    if (r instanceof Promise) throw new Error(`${l.name} validated asynchronously`);
    if (!r.issues !== c.valid) throw new Error(`${l.name} says ${c.id} is ${r.issues ? 'invalid' : 'valid'}`);
  }

const N = 100_000,
  REPS = 9;
const ns: Record<string, Record<string, number[]>> = {};
let sink = 0;
for (let rep = 0; rep < REPS + 2; rep++) {
  for (const c of cases) {
    for (const l of libs) {
      const validate = l[c.schema]['~standard'].validate;
      const t0 = performance.now();
      for (let i = 0; i < N; i++) {
        const r = validate(c.args) as StandardSchemaV1.Result<unknown>;
        if (r.issues) sink++;
      }
      const per = ((performance.now() - t0) * 1e6) / N;
      if (rep >= 2) ((ns[c.id] ??= {})[l.name] ??= []).push(per);
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const table: Record<string, Record<string, number>> = {};
for (const c of cases) for (const l of libs) (table[l.name] ??= {})[c.id] = Math.round(median(ns[c.id][l.name]));
console.log(`validate() through Standard Schema, ns per call, median of ${REPS} interleaved repetitions of ${N} calls (sink ${sink})`);
console.table(table);
const best = Object.fromEntries(cases.map((c) => [c.id, Math.min(...libs.map((l) => table[l.name][c.id]))]));
const ratio: Record<string, Record<string, string>> = {};
for (const l of libs) for (const c of cases) (ratio[l.name] ??= {})[c.id] = `${(table[l.name][c.id] / best[c.id]).toFixed(2)}x`;
console.log('ratio to the fastest in each case');
console.table(ratio);

const version = (p: string) =>
  (JSON.parse(readFileSync(new URL(`../../node_modules/${p}/package.json`, import.meta.url), 'utf8')) as { version: string }).version;
mkdirSync(new URL('../../docs/benchmarks/', import.meta.url), { recursive: true });
writeFileSync(
  new URL('../../docs/benchmarks/validators.json', import.meta.url),
  JSON.stringify(
    {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model,
      cpus: cpus().length,
      versions: { valibot: version('valibot'), zod: version('zod'), arktype: version('arktype'), typebox: version('typebox') },
      calls: N,
      repetitions: REPS,
      nsPerCall: table,
    },
    null,
    2,
  ) + '\n',
);
