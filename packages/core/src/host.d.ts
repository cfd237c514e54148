/**
 * The host globals core uses: each is in every runtime Hercules supports (Node >= 20, browsers,
 * workers, React Native with Hermes), with the same meaning. Declared here, to the extent core
 * uses them, instead of taking lib.dom or @types/node, so that anything else a host offers
 * (node:* modules, process, window, fetch, localStorage) fails core's build. Add to this list
 * only what every such runtime has; I/O belongs in the adapters.
 *
 * Only core's build sees this file (the root tsconfig.json, which has the Node and DOM types,
 * excludes it), and no exported type names these, so the published .d.ts files need neither.
 */

declare class TextEncoder {
  encodeInto(source: string, destination: Uint8Array): { read: number; written: number };
}
declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean; ignoreBOM?: boolean });
  decode(input?: Uint8Array): string;
}
declare const performance: { now(): number };
declare function setTimeout(callback: () => void, ms?: number): unknown;
declare function clearTimeout(handle: unknown): void;
declare function queueMicrotask(callback: () => void): void;
declare function structuredClone<T>(value: T): T;
