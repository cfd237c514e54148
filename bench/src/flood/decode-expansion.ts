/**
 * How much heap one frame takes once decoded, for the worst shapes a client can send: the
 * factor behind limits.maxDecodingBytes (docs/security.md).
 *
 *   node --expose-gc -C @hercules/source --import tsx bench/src/flood/decode-expansion.ts
 */
import { ClientCodec, ServerCodec } from '@hercules/core';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const ops = (args: unknown) => ({ t: 'ops' as const, ops: [{ seq: 1, name: 'say', args }] });
const shapes: Record<string, () => unknown> = {
  'empty arrays': () => ops(Array.from({ length: 1_000_000 }, () => [])),
  'empty maps': () => ops(Array.from({ length: 1_000_000 }, () => ({}))),
  'in-domain, 10,000 ops of 100 empty arrays': () => ({
    t: 'ops',
    ops: Array.from({ length: 10_000 }, (_, i) => ({ seq: i + 1, name: 'say', args: Array.from({ length: 100 }, () => []) })),
  }),
  '10,000 chat ops': () => ({
    t: 'ops',
    ops: Array.from({ length: 10_000 }, (_, i) => ({
      seq: i + 1,
      name: 'say',
      args: { text: `flood message number ${i} with some words in it to look like chat` },
    })),
  }),
  'one-letter strings': () => ops(Array.from({ length: 500_000 }, (_, i) => String.fromCharCode(97 + (i % 26)))),
};
// Every decoded frame is kept, so a later measurement never counts an earlier one's collection.
const keep: unknown[] = [];
// Encode every frame first, in its own call: the source objects are garbage before any measurement.
const frames = Object.entries(shapes).map(([name, make]) => [name, new ClientCodec().encode(make() as never)] as const);
for (const [name, frame] of frames) {
  gc();
  const before = process.memoryUsage().heapUsed;
  keep.push(new ServerCodec().decode(frame));
  gc();
  const grew = process.memoryUsage().heapUsed - before;
  console.log(
    `${name.padEnd(44)} ${(frame.length / 2 ** 20).toFixed(2)} MiB frame -> ${(grew / 2 ** 20).toFixed(1)} MiB heap (x${(grew / frame.length).toFixed(1)})`,
  );
}
