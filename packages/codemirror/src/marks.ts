/**
 * Which of the views the editor marks (the paper's red text): the text of the Submitted view
 * not yet Authoritative (ours, not yet ordered by the server) and not yet Visible (not yet
 * everyone's: ours, and others' ordered but not yet acknowledged by every client). A facet, so
 * the app toggles it by reconfiguring a Compartment holding `viewMarks(...)`.
 */
import { Facet } from '@codemirror/state';

export interface ViewMarks {
  /** Underline the text not yet in the Authoritative view (class cm-hercules-unauthoritative). */
  authoritative?: boolean;
  /** Fade the text not yet in the Visible view (class cm-hercules-invisible). */
  visible?: boolean;
}

/** The marks asked for: each on when any provider asks for it. */
export const viewMarksFacet = Facet.define<ViewMarks, Required<ViewMarks>>({
  combine: (vs) => ({ authoritative: vs.some((v) => v.authoritative === true), visible: vs.some((v) => v.visible === true) }),
  compare: (a, b) => a.authoritative === b.authoritative && a.visible === b.visible,
});

/** Mark these views in the editor: `compartment.of(viewMarks({ authoritative: true }))`. */
export const viewMarks = (marks: ViewMarks) => viewMarksFacet.of(marks);
