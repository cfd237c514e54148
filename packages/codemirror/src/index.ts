export { hercules, fromRoom, type BindableRoom, type CollabOptions } from './binding.ts';
export { viewMarks, viewMarksFacet, type ViewMarks } from './marks.ts';
export { placeAt, indexOf, type TextPlace } from './anchor.ts';
export { changesBetween, newRanges, type TextChange } from './diff.ts';
export type { PeerLike } from './decorations.ts';
