export { hercules, fromRoom, type BindableRoom, type CollabOptions } from './binding.ts';
export { viewMarks, viewMarksFacet, type ViewMarks } from './marks.ts';
export { textPlaceAt as placeAt, textPlaceIndex as indexOf, type TextPlace } from '@hercules/core';
export { changesBetween, newRanges, type TextChange } from './diff.ts';
export type { PeerLike } from './decorations.ts';
