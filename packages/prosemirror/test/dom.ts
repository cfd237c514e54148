/** A DOM for ProseMirror's view in Node (happy-dom), installed before the view loads. */
import { Window } from 'happy-dom';

const win = new Window();
const g = globalThis as Record<string, unknown>;
for (const name of ['window', 'document', 'navigator'] as const)
  Object.defineProperty(globalThis, name, {
    value: name === 'window' ? win : (win as unknown as Record<string, unknown>)[name],
    configurable: true,
    writable: true,
  });
for (const name of [
  'MutationObserver',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'getComputedStyle',
  'getSelection',
  'Node',
  'Element',
  'HTMLElement',
  'Text',
  'Range',
  'Selection',
  'DocumentFragment',
  'Event',
  'KeyboardEvent',
  'MouseEvent',
] as const)
  g[name] ??= (win as unknown as Record<string, unknown>)[name];
