/**
 * The machine of the text benchmarks (issue 38, item 4): one collaborative text at `doc`. Shared
 * by the benchmark clients and the benchmark server process (runtime/server-process.ts).
 */
import { createText, defineMachine, textOps } from '@hercules/core';

export const textBench = defineMachine({ name: 'text-bench', version: 1, initial: { doc: createText() }, ops: { ...textOps() } });
