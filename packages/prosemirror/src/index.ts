export { hercules, docOf, setViewMarks, isFromRoom, herculesKey, type BindableRoom, type CollabOptions, type ViewMarks } from './binding.ts';
export { schema } from './schema.ts';
export { docToFlat, flatToDoc } from './convert.ts';
export { flatOf, type Flat, type MarkValue } from './flat.ts';
export { textPlaceAt as placeAt, textPlaceIndex as indexOf, type TextPlace } from '@hercules/core';
export type { PeerLike } from './decorations.ts';
export {
  createRichText,
  richTextOps,
  richAt,
  isRichText,
  textPathOf,
  RICH_BLOCK,
  RICH_FORMAT,
  type RichText,
  type MarkSpan,
  type BlockAttrs,
  type CharId,
  type RichBlockArgs,
  type RichFormatArgs,
} from './rich.ts';
