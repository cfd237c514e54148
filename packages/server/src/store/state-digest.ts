/**
 * A room state's digest, recorded by every store for each checkpoint it is given (RoomExport
 * `digests`), carried in a room export and checked by `hercules replay` (docs/replay.md).
 *
 * The encoding: the state as JSON with every object's keys sorted (safe-stable-stringify with
 * `deterministic: true`: keys in JavaScript's default sort, by UTF-16 code units; otherwise as
 * JSON.stringify writes it: no spaces, -0 as 0, `undefined` properties left out), hashed with
 * SHA-256 (node:crypto) over its UTF-8 bytes, written as 64 lowercase hex digits. Sorting the keys
 * makes two equal states hash alike whatever order their keys were inserted in, so a state read
 * back from JSON, from msgpack or rebuilt by a replay digests as the live one did.
 */
import { createHash } from 'node:crypto';
import { configure } from 'safe-stable-stringify';
import { type RoomExport, StorageError } from './room-store.ts';

/** The digest of the room's state at checkpoint position `pos`. */
export interface CheckpointDigest {
  pos: number;
  /** stateDigest of the state at `pos`: 64 lowercase hex digits. */
  digest: string;
}

/**
 * How many checkpoint digests a store keeps per room, at most (the newest). Checkpoints are
 * written every 1,000 ops by default, so 256 of them cover a retained log of 256,000 ops.
 */
export const MAX_CHECKPOINT_DIGESTS = 256;

/** A digest as `stateDigest` writes it. */
export const DIGEST_PATTERN = /^[0-9a-f]{64}$/;

const canonical = configure({ deterministic: true, circularValue: TypeError, bigint: false });

/** The SHA-256 of the state's canonical JSON (see above), in hex. Throws on a value JSON cannot hold (a cycle, a BigInt). */
export function stateDigest(state: unknown): string {
  const json = canonical(state) ?? 'null';
  return createHash('sha256').update(json, 'utf8').digest('hex');
}

/**
 * The digest of a checkpoint a store is given, or a StorageError of kind 'value' naming the room
 * and position (a state JSON cannot hold: a cycle, a BigInt). Every store asks for it before it
 * writes anything of the write (memory, SQLite, the cluster's), so nothing of it is stored then.
 */
export function checkpointDigest(room: string, pos: number, state: unknown): string {
  try {
    return stateDigest(state);
  } catch (e) {
    throw new StorageError(`room ${room}: cannot digest its checkpoint at ${pos}: ${(e as Error).message}; nothing of this write was stored`, e, 'value');
  }
}

/**
 * A room's digest list after a checkpoint at `d.pos`: `d` added (replacing one at the same
 * position), those before `from` (positions whose log the store no longer keeps) dropped, and
 * at most MAX_CHECKPOINT_DIGESTS kept, the newest. Sorted by position.
 */
export function keepDigests(list: readonly CheckpointDigest[], d: CheckpointDigest | undefined, from: number): CheckpointDigest[] {
  const out = list.filter((x) => x.pos >= from && x.pos !== d?.pos);
  if (d && d.pos >= from) out.push(d);
  out.sort((a, b) => a.pos - b.pos);
  return out.length > MAX_CHECKPOINT_DIGESTS ? out.slice(out.length - MAX_CHECKPOINT_DIGESTS) : out;
}

/** An import's digests within its log (from its checkpoint on), as the store keeps them. */
export function importedDigests(data: Pick<RoomExport, 'digests' | 'durable'>): CheckpointDigest[] {
  return keepDigests(
    (data.digests ?? []).map((d) => ({ pos: d.pos, digest: d.digest })),
    undefined,
    data.durable.checkpoint.pos,
  );
}
