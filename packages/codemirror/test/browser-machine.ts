/** The machine of the browser test: one text, shared by the test's server and its page. */
import { createText, defineMachine, textOps } from '@hercules/core';

export const pad = defineMachine({ name: 'cm-pad', version: 1, initial: { doc: createText('') }, ops: { ...textOps() } });
