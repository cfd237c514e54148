/**
 * npm run fuzz -- --count N [--seeds K] [--start S]   fuzz campaign: K seeds of N frames each
 * npm run fuzz -- --seed S --count N                  replay one seed (what a failure prints)
 * npm run fuzz -- --imports N [--seeds K | --seed S]  the import path instead: N room files per seed (import-fuzz.ts)
 */
import { parseArgs } from 'node:util';
import { FuzzFailure, runFuzz } from './fuzz.ts';
import { runImportFuzz } from './import-fuzz.ts';

let values;
try {
  ({ values } = parseArgs({
    options: {
      count: { type: 'string', default: '50000' },
      seeds: { type: 'string', default: '1' },
      start: { type: 'string', default: '1' },
      seed: { type: 'string' },
      imports: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (e) {
  console.error(`fuzz: ${(e as Error).message}; see --help`);
  process.exit(2);
}
if (values.help) {
  console.log(
    'npm run fuzz -- [--count N frames per seed, default 50000] [--seeds K, default 1] [--start S, default 1] [--seed S: one seed] [--imports N: fuzz the import path with N room files per seed instead]',
  );
  process.exit(0);
}
const int = (name: string, v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) {
    console.error(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
    process.exit(2);
  }
  return n;
};
const count = int('count', values.count);
const seeds =
  values.seed !== undefined ? [int('seed', values.seed)] : Array.from({ length: int('seeds', values.seeds) }, (_, i) => int('start', values.start) + i);
if (values.imports !== undefined) await importCampaign(int('imports', values.imports));
const t0 = performance.now();
let frames = 0,
  failed = 0;
const total = { malformedBytes: 0, tooLarge: 0, presence: 0, invalidMessages: 0, validMessages: 0, refusedOps: 0, honestOps: 0 };
for (const seed of seeds) {
  try {
    const s = runFuzz(seed, count);
    frames += s.frames;
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += s[k];
  } catch (e) {
    failed++;
    console.error(
      e instanceof FuzzFailure ? e.message : `fuzz seed ${seed} crashed: ${(e as Error).stack}\n  replay: npm run fuzz -- --seed ${seed} --count ${count}`,
    );
  }
}
const s = (performance.now() - t0) / 1000;
console.log(
  `fuzz: ${seeds.length} seed(s), ${frames} hostile frames in ${s.toFixed(1)} s (${Math.round(frames / s)} frames/s): ${total.malformedBytes} undecodable, ${total.tooLarge} refused as too large before decoding, ${total.presence} presence values in floods, ${total.invalidMessages} decoded but invalid, ${total.validMessages} valid messages (${total.refusedOps} ops refused before ordering); ${total.honestOps} honest ops, all checked`,
);
console.log(failed ? `fuzz: ${failed} seed(s) FAILED` : 'fuzz: no crash, no broken invariant, every malformed frame answered');
process.exit(failed ? 1 : 0);

/** --imports N: each seed imports N mutated room files both ways (in process and over HTTP); exits. */
async function importCampaign(files: number): Promise<never> {
  const t0 = performance.now();
  let failed = 0;
  const total = { files: 0, refused: 0, accepted: 0 };
  for (const seed of seeds) {
    try {
      const s = await runImportFuzz(seed, files);
      for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += s[k];
    } catch (e) {
      failed++;
      console.error(
        e instanceof FuzzFailure
          ? e.message
          : `import fuzz seed ${seed} crashed: ${(e as Error).stack}\n  replay: npm run fuzz -- --imports ${files} --seed ${seed}`,
      );
    }
  }
  const s = (performance.now() - t0) / 1000;
  console.log(
    `import fuzz: ${seeds.length} seed(s), ${total.files} imports in ${s.toFixed(1)} s: ${total.refused} refused, ${total.accepted} accepted and round-tripped`,
  );
  console.log(failed ? `import fuzz: ${failed} seed(s) FAILED` : 'import fuzz: every hostile file refused without a trace, every valid one kept as it was');
  process.exit(failed ? 1 : 0);
}
