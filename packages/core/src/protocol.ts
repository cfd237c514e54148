/**
 * The Hercules wire protocol: every message between a client and a room, as one typed union
 * per direction, plus a validator that turns untrusted input into a typed message or a clear
 * error. Transports encode these objects; the engines never see bytes.
 *
 * Paper RPC (§4.3, Fig. 7)   -> message here
 *   Deliver-Operation          ClientMessage 'ops'        (batched, ordered by client seq)
 *   Remote-Ack                 ClientMessage 'ack'        (cumulative: "I have the log up to pos")
 *   Register                   ClientMessage 'hello' (first time / after reconnect), 'register' (after Deregister)
 *   Notify-Auth                ServerMessage 'log' entry of kind 'own' (no args: the client has them)
 *   Remote-Operation           ServerMessage 'log' entry of kind 'op'
 *   Notify-Visible             ServerMessage 'visible'    (cumulative: own ops up to seq; or 'stable', protocol 3)
 *   Visibility-Set-Change      ServerMessage 'members'
 *   Deregister                 ServerMessage 'deregister'
 *   catch-up (§4.6)            ServerMessage 'welcome'
 *   (new) stable frontier      ServerMessage 'stable'
 *   (new) delivery receipts    ClientMessage 'receipts' asks, ServerMessage 'acks' answers (protocol 7)
 */
import { HerculesError, type ErrorCode } from './errors.ts';

/**
 * Bump on any incompatible change. A client speaks exactly this version; a server also accepts
 * clients down to MIN_PROTOCOL_VERSION and speaks to each in its own (the welcome says which).
 * 2: a refused op is flagged (`refused`) instead of named by its error's 'refused: ' prefix;
 *    an own log entry's tuple may carry a third element, which a version-1 client reads as
 *    another client's op.
 * 3: a stable frontier also makes the receiver's own ops up to it visible, so the server sends
 *    no Notify-Visible that the stable message of the same pass covers (VIS-BY-STABLE); an ops
 *    message may carry the sender's ack (`ack`, VIS-ACK-WITH-OPS), one frame where there were two.
 * 4: other clients' ops may come before their commit, as a tentative log message, confirmed by a
 *    committed message once stored (LOG-TENTATIVE); the client holds them in its Durable and
 *    Submitted views only, never Authoritative, until then (VIEW-TENTATIVE).
 * 5: a client acks the entries it holds, tentative ones too; the server keeps the stable frontier
 *    and visibility within what it stored, so a stable frontier also confirms the tentative
 *    entries up to it, and the server sends no committed message that the stable message it is
 *    about to send covers (LOG-TENTATIVE).
 * 6: a client says when its store holds the outcome of its own ops (`settled`), and the server
 *    keeps a rejection until then, not only until the client acks past it: a client restarted
 *    from its store learns the verdict of every op it restores (OP-VERDICT-KEPT).
 * 7: delivery receipts: a client may ask (`receipts`) for the other members' acked positions, and
 *    the server then sends them (`acks`), only what changed, at most one message per engine turn
 *    (RECEIPT-TRUE, RECEIPT-LIVE). A server sends none to a client that did not ask.
 * 8: a connection may show several presences, each under a key (`presence.key`: a tab of a
 *    shared client, docs/tabs.md), and others see one peer per key (`PeerPresence.key`). A client
 *    of protocol 7 or older is sent one presence per connection, as before: its latest set value
 *    (PRESENCE-PER-KEY).
 */
export const PROTOCOL_VERSION = 8;
/** The oldest client protocol a server still speaks (PROTOCOL_VERSION). */
export const MIN_PROTOCOL_VERSION = 2;

/** Why a server refuses a hello of protocol `v` (SEC-PROTOCOL-RANGE), or undefined if it speaks it. */
export function protocolRefusal(v: number): string | undefined {
  if (v >= MIN_PROTOCOL_VERSION && v <= PROTOCOL_VERSION) return undefined;
  return `this server speaks protocol ${MIN_PROTOCOL_VERSION} to ${PROTOCOL_VERSION}, the client ${v}; upgrade the older side`;
}

/** An op as a client submits it. (client, seq) identifies it for exactly-once delivery. */
export interface OpRecord {
  readonly client: string;
  /** Per-client sequence number: 1, 2, 3, ... with no gaps but declared ones (`after`). */
  readonly seq: number;
  readonly name: string;
  readonly args: unknown;
  /**
   * The client's digest chain after this op (args.ts), kept in client storage so a restarted
   * client can tell its ops from another's under the same id. Never sent: the server computes
   * its own.
   */
  readonly digest?: number;
  /**
   * The seq of this client's previous op, present only when it is not seq - 1: the seqs between
   * were reserved by a process of this client that stopped before persisting them
   * (DUR-BEFORE-SEND); they may have reached the server or not, and none will come now. The
   * server accepts the gap if it has ordered everything up to `after`; this op starts a new
   * digest chain. Sent and stored.
   */
  readonly after?: number;
  /**
   * The machine version the op was written against (docs/migrations.md). Stores keep it; it is
   * sent only when older than the client's machine (an op saved offline before an upgrade), and
   * the server translates such an op (MigrateFrom.op) before ordering it. Never in a log entry:
   * the log holds the translated op.
   */
  readonly v?: number;
}

/** An op in the global log. */
export interface LogEntry extends OpRecord {
  /** 1-based position in the room's global log. */
  readonly pos: number;
  /** The author the server stamped (never taken from the client's say-so). */
  readonly author: string;
  /**
   * Present if the op has no effect anywhere: it threw at its global position, or (with
   * `refused`) it was refused before ordering; the reason, for humans.
   */
  readonly error?: string;
  /**
   * The op was refused before ordering (no write access, invalid or out-of-domain arguments, an
   * unknown op, the authorize hook): `error` says why and `args` is null, as they were never
   * accepted. Absent on ops that were ordered and ran, including ones that threw.
   */
  readonly refused?: true;
}

/** A log entry as streamed live: full for other clients' ops, compact for the receiver's own. */
export type WireEntry =
  | { readonly k: 'op'; readonly e: LogEntry }
  | { readonly k: 'own'; readonly seq: number; readonly error?: string; readonly refused?: true };

export interface MachineId {
  readonly name: string;
  readonly version: number;
}

// ---------------------------------------------------------------- client -> server

export interface HelloMessage {
  readonly t: 'hello';
  readonly v: number;
  readonly client: string;
  readonly machine: MachineId;
  /** The client holds the global log up to this position (0: nothing but the initial state). */
  readonly have: number;
  /**
   * When this connection was opened (ms since the epoch). A client id lives on one connection: a
   * newer one replaces the one the room holds, and an older one that arrives after it is refused
   * (its hello was held up on the way, e.g. while a cluster node waited to route it, and the
   * client has moved on). Without it, the hello that arrives last wins. The room service replaces
   * what the client says with when a server accepted the connection (ConnectionRequest.acceptedAt):
   * a client's clock may be wrong or go back.
   */
  readonly at?: number;
  /**
   * A client that holds seqs an earlier process of it reserved and may have sent without
   * persisting (DUR-BEFORE-SEND): the seq of its last persisted op before each such gap (at most
   * MAX_VERIFY). The welcome answers with the server's digest at those seqs (`verified`), so the
   * client can tell its own lost ops from another client's under its id.
   */
  readonly verify?: readonly number[];
}
export interface OpsMessage {
  readonly t: 'ops';
  /** `v`: the machine version an op was written against, when older than the connection's (OpRecord.v). */
  readonly ops: readonly { readonly seq: number; readonly name: string; readonly args: unknown; readonly after?: number; readonly v?: number }[];
  /**
   * An ack the client would have sent just before these ops (protocol 3, VIS-ACK-WITH-OPS): the room
   * handles it first, exactly as that separate message.
   */
  readonly ack?: { readonly pos: number; readonly durable?: number };
}
export interface AckMessage {
  readonly t: 'ack';
  /** Cumulative: the client has received and applied every log entry up to `pos`. */
  readonly pos: number;
  /**
   * The client's own ops up to this seq are saved on its device (said when it grew). A restart
   * never holds less, so a declared gap after an earlier seq comes from a copy of its store
   * (a restored backup): the room refuses it (DUR-BEFORE-SEND).
   */
  readonly durable?: number;
}
/**
 * Presence (ephemeral: never ordered, stored or part of any view): this connection's value for
 * the others to see, the latest replacing the one before; null clears it. At most
 * MAX_PRESENCE_BYTES, in the op-argument domain (args.ts).
 */
export interface PresenceSetMessage {
  readonly t: 'presence';
  readonly value: unknown;
  /**
   * Protocol 8: which of this connection's presences (at most MAX_PRESENCE_KEYS), each shown to
   * others as a peer of its own; absent: the connection's own, as before.
   */
  readonly key?: string;
}
/** How many keyed presences one connection may show at once (protocol 8, PRESENCE-PER-KEY). */
export const MAX_PRESENCE_KEYS = 16;
export interface RegisterMessage {
  readonly t: 'register';
}
/**
 * Protocol 6: the client's store holds a base covering its own ops up to `seq` (BaseSnapshot.ownSeq),
 * so a restart of the client never restores them and the room may forget their rejections. Sent
 * only when the room may still keep a rejection of one of them (OP-VERDICT-KEPT).
 */
export interface SettledMessage {
  readonly t: 'settled';
  readonly seq: number;
}
/**
 * Protocol 7: turn delivery receipts on or off for this connection. On: the server answers with
 * every other member's acked position, then sends what changes (AcksMessage). Off by default and
 * after every reconnect, so a room whose clients never ask pays nothing.
 */
export interface ReceiptsMessage {
  readonly t: 'receipts';
  readonly on: boolean;
}
export type ClientMessage = HelloMessage | OpsMessage | AckMessage | RegisterMessage | PresenceSetMessage | SettledMessage | ReceiptsMessage;

/** One connection's presence as others see it: null once it cleared it or left. */
export interface PeerPresence<P = unknown> {
  readonly client: string;
  /** The authenticated user behind it, if any (else the client id stands for it). */
  readonly user?: string;
  /** Protocol 8: which of that connection's presences (e.g. a tab of a shared client); absent: its own. */
  readonly key?: string;
  readonly value: P;
}

// ---------------------------------------------------------------- server -> client

export interface WelcomeMessage {
  readonly t: 'welcome';
  readonly v: number;
  readonly client: string;
  /** The author the server will stamp on this client's ops. */
  readonly author: string;
  /** What this connection may do: 'read' receives everything and can submit nothing. Absent: 'write'. */
  readonly access?: 'read' | 'write';
  /**
   * With a checkpoint, the client replaces what it holds with it (§4.6 catch-up); without one,
   * `entries` continue the log the client already has (`from` = its `have` + 1).
   */
  readonly checkpoint?: { readonly pos: number; readonly state: unknown };
  readonly from: number;
  readonly entries: readonly LogEntry[];
  /** Highest seq of this client's ops in the global log (exactly-once high-water mark). */
  readonly highWater: number;
  /**
   * Answer to hello.verify: the server's digest chain at each of those seqs that is among the
   * last RECENT_DIGESTS of this client's ops it ordered.
   */
  readonly verified?: readonly { readonly seq: number; readonly digest: number }[];
  /** The server's digest chain of this client's ops at highWater (args.ts); absent for records older than digests. */
  readonly digest?: number;
  /** Highest seq of this client's ops that is visible to every other member. */
  readonly visibleSeq: number;
  /** This client's rejected ops whose verdict it may not have seen (their entries may be compacted). */
  readonly rejected: readonly { readonly seq: number; readonly error: string; readonly refused?: true }[];
  readonly stable: number;
  readonly members: readonly string[];
  /** The other connections' current presence (PresenceSetMessage); absent: none. */
  readonly presence?: readonly PeerPresence[];
}
export interface LogMessage {
  readonly t: 'log';
  /** Position of the first entry; entries are consecutive. */
  readonly from: number;
  readonly entries: readonly WireEntry[];
  /**
   * Other clients' entries sent before the server stored them (protocol 4, LOG-TENTATIVE): not
   * yet Authoritative. A committed message confirms them; a new connection forgets them.
   */
  readonly tentative?: true;
  /**
   * With `tentative`: the log up to here is stored, as a committed message would say (the server
   * folds a confirmation that would have gone alone into the next tentative log).
   */
  readonly committed?: number;
}
/** The log up to `pos` is stored: the tentative entries up to it are Authoritative (protocol 4, LOG-TENTATIVE). */
export interface CommittedMessage {
  readonly t: 'committed';
  readonly pos: number;
}
export interface VisibleMessage {
  readonly t: 'visible';
  /** Every op of this client with seq <= `seq` has been delivered to every other member. */
  readonly seq: number;
}
export interface StableMessage {
  readonly t: 'stable';
  /**
   * Every member of the visibility set has received the log up to `pos`. Never decreases. So
   * the receiver's own ops up to `pos` are visible too, which a protocol-3 client reads from it
   * (VIS-BY-STABLE).
   */
  readonly pos: number;
}
export interface MembersMessage {
  readonly t: 'members';
  readonly members: readonly string[];
}
export interface DeregisterMessage {
  readonly t: 'deregister';
  readonly reason: string;
}
export interface ErrorMessage {
  readonly t: 'error';
  /** One of ERROR_CODES (docs/errors.md); a client that does not know it treats it as 'internal'. */
  readonly code: ErrorCode;
  readonly message: string;
  /**
   * Fatal: retrying cannot help (wrong version or machine, bad credentials, no access): the
   * client stops reconnecting. Non-fatal errors may still be followed by a close (room full,
   * rate limited); the client then reconnects with backoff.
   */
  readonly fatal: boolean;
}
/** Presence changes of other connections, in the order they happened (value null: gone). */
export interface PresenceMessage {
  readonly t: 'presence';
  readonly peers: readonly PeerPresence[];
}
/**
 * Protocol 7, only to a connection that asked (ReceiptsMessage): other members' acked positions,
 * each the highest log position that member acked (it holds every entry up to it). After the ask,
 * every member's; then only those that moved or joined, coalesced per engine turn. A member that
 * left is dropped by the members message, not here.
 */
export interface AcksMessage {
  readonly t: 'acks';
  readonly acks: readonly { readonly client: string; readonly pos: number }[];
}
/** Heartbeat: lets a client (even a browser, which cannot see WebSocket pings) notice a dead link. */
export interface PingMessage {
  readonly t: 'ping';
  /**
   * The server's heartbeat interval, ms (LIVE-DEAD-LINK): a client that did not choose its
   * watchdog gives the link up after about two of them without a frame. Absent from servers
   * before it: the client keeps its default.
   */
  readonly every?: number;
}
export type ServerMessage =
  | PingMessage
  | WelcomeMessage
  | LogMessage
  | CommittedMessage
  | VisibleMessage
  | StableMessage
  | MembersMessage
  | DeregisterMessage
  | ErrorMessage
  | PresenceMessage
  | AcksMessage;

/** Until protocol 2, a refused op was marked only by this prefix on its error. */
const LEGACY_REFUSED = 'refused: ';

/**
 * An entry or rejection record as stored before protocol 2, read as it is now: an error that
 * starts with 'refused: ' becomes `refused: true` and the reason without the prefix. Anything
 * else is returned as it is. (An op that threw an error starting with those words was written
 * the same way then, so it is read as refused: its args are kept, it has no effect either way.)
 */
export function readLegacyRefusal<T extends { readonly error?: string; readonly refused?: true }>(e: T): T {
  if (e.refused || e.error === undefined || !e.error.startsWith(LEGACY_REFUSED)) return e;
  return { ...e, error: e.error.slice(LEGACY_REFUSED.length), refused: true };
}

// ---------------------------------------------------------------- validation

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 128;

/** Limits on what one frame may carry; the transport enforces byte sizes. */
export const MAX_OPS_PER_FRAME = 10_000;
export const MAX_OP_NAME = 128;
/**
 * Clients keep each ops frame under this many bytes of arguments (estimated as JSON), so the
 * server's default 1 MiB frame limit is never hit, and refuse a single op larger than
 * MAX_OP_BYTES at submit: an op that can never be sent must not be accepted.
 */
/**
 * How many of a client's most recent ops the server keeps the digest chain at (ClientRecord.recent),
 * and so how many ops a client may send ahead of its store (DUR-BEFORE-SEND): a client restarted
 * after a crash verifies its last persisted op among them.
 */
export const RECENT_DIGESTS = 16;

/**
 * The largest presence value a connection may set, in bytes as the argument domain counts them
 * (domainBytes, args.ts: a string its UTF-8 bytes + 5, a number 9, an array or object 5, null or a
 * boolean 1): a string alone of up to 4,091 ASCII characters.
 */
export const MAX_PRESENCE_BYTES = 4096;

/** Why a presence value of `bytes` (domainBytes) is refused: the same words from the client and the server. */
export function presenceTooLarge(bytes: number): string {
  return `${bytes} bytes as the argument domain counts them (a string's UTF-8 bytes + 5, a number 9, an array or object 5, null or a boolean 1), over the ${MAX_PRESENCE_BYTES} allowed`;
}

/** The most seqs a hello may ask the server to verify (HelloMessage.verify). */
export const MAX_VERIFY = 64;

export const FRAME_BUDGET_BYTES = 512 * 1024;
export const MAX_OP_BYTES = 256 * 1024;

function bad(what: string): never {
  throw new HerculesError('malformed-frame', `malformed client message: ${what}`);
}

function parseAck(v: Record<string, unknown>, what: string): { pos: number; durable?: number } {
  if (!isNat(v.pos)) bad(`${what}.pos must be a non-negative integer`);
  if (v.durable !== undefined && !isNat(v.durable)) bad(`${what}.durable must be a non-negative integer (a seq)`);
  return v.durable === undefined ? { pos: v.pos } : { pos: v.pos, durable: v.durable };
}

/**
 * Check an untrusted, already-decoded value and return it as a ClientMessage.
 * Throws HerculesError('malformed-frame') naming the first problem.
 */
export function parseClientMessage(v: unknown): ClientMessage {
  if (!isObj(v)) bad('expected an object with a string field `t`');
  switch (v.t) {
    case 'hello': {
      if (!isNat(v.v)) bad('hello.v must be the protocol version (an integer)');
      if (!isId(v.client)) bad('hello.client must be a non-empty string of at most 128 characters');
      if (!isObj(v.machine) || typeof v.machine.name !== 'string' || !isNat(v.machine.version)) bad('hello.machine must be { name: string, version: integer }');
      if (!isNat(v.have)) bad('hello.have must be a non-negative integer');
      if (v.at !== undefined && !isNat(v.at)) bad('hello.at must be a non-negative integer (ms since the epoch)');
      if (v.verify !== undefined && !(Array.isArray(v.verify) && v.verify.length <= MAX_VERIFY && v.verify.every(isNat)))
        bad(`hello.verify must be a list of at most ${MAX_VERIFY} seqs`);
      return {
        t: 'hello',
        v: v.v,
        client: v.client,
        machine: { name: v.machine.name, version: v.machine.version },
        have: v.have,
        ...(v.at !== undefined ? { at: v.at } : {}),
        ...(v.verify !== undefined ? { verify: v.verify } : {}),
      };
    }
    case 'ops': {
      if (!Array.isArray(v.ops)) bad('ops.ops must be an array');
      if (v.ops.length === 0 || v.ops.length > MAX_OPS_PER_FRAME) bad(`ops.ops must hold 1..${MAX_OPS_PER_FRAME} ops`);
      const ops = v.ops.map((o, i) => {
        if (!isObj(o)) bad(`ops.ops[${i}] must be an object`);
        if (!isNat(o.seq) || o.seq === 0) bad(`ops.ops[${i}].seq must be a positive integer`);
        if (typeof o.name !== 'string' || o.name.length === 0 || o.name.length > MAX_OP_NAME)
          bad(`ops.ops[${i}].name must be a non-empty string of at most ${MAX_OP_NAME} characters`);
        if (o.after !== undefined && !(isNat(o.after) && o.after < o.seq - 1)) bad(`ops.ops[${i}].after must be an integer below seq - 1 (a declared gap)`);
        if (o.v !== undefined && !isNat(o.v)) bad(`ops.ops[${i}].v must be a machine version (a non-negative integer)`);
        const op: { seq: number; name: string; args: unknown; after?: number; v?: number } = { seq: o.seq, name: o.name, args: o.args };
        if (o.after !== undefined) op.after = o.after;
        if (o.v !== undefined) op.v = o.v;
        return op;
      });
      if (v.ack === undefined) return { t: 'ops', ops };
      if (!isObj(v.ack)) bad('ops.ack must be an object { pos, durable? }');
      return { t: 'ops', ops, ack: parseAck(v.ack, 'ops.ack') };
    }
    case 'ack':
      return { t: 'ack', ...parseAck(v, 'ack') };
    case 'register':
      return { t: 'register' };
    case 'settled':
      if (!isNat(v.seq)) bad('settled.seq must be a non-negative integer (a seq)');
      return { t: 'settled', seq: v.seq };
    case 'receipts':
      if (typeof v.on !== 'boolean') bad('receipts.on must be a boolean');
      return { t: 'receipts', on: v.on };
    case 'presence':
      if (!('value' in v)) bad('presence.value is required (null clears it)');
      if (v.key === undefined) return { t: 'presence', value: v.value };
      if (!isId(v.key)) bad('presence.key must be a non-empty string of at most 128 characters');
      return { t: 'presence', value: v.value, key: v.key };
    default:
      return bad(`unknown message type ${JSON.stringify(String(v.t)).slice(0, 40)}`);
  }
}
