/**
 * What a client is told when its room failed on the server but nothing it made durable was lost:
 * the one recovery sentence, written once (it was written out at ten places).
 */
export const RECONNECT_TO_RESUME = 'reconnect to resume (nothing you made durable is lost)';

/** `what` went wrong, then what to do about it: "<what>; reconnect to resume (...)". */
export function reconnectToResume(what: string): string {
  return `${what}; ${RECONNECT_TO_RESUME}`;
}
