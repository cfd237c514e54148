/** The machine of the browser test: one rich text, shared by the test's server and its page. */
import { defineMachine, textOps } from '@hercules/core';
import { createRichText, richTextOps } from '../src/rich.ts';

export const doc = defineMachine({ name: 'pm-doc', version: 1, initial: { doc: createRichText() }, ops: { ...textOps(), ...richTextOps() } });
