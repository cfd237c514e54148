/**
 * The room engine (server side, §4.2–4.6): one total order of ops per room. A deterministic
 * function of its ordered inputs — connection opened, frame received, connection closed,
 * clock tick — that returns what to send and what to persist. No timers, no I/O, so a room
 * can be simulated, and later replayed from a replicated log.
 *
 * What it keeps:
 *   checkpoint (state at the stable frontier) + suffix (ops after it; the state after some of them)
 *   per client, forever: highWater (exactly-once) and visibleSeq (what it was told is visible)
 *   per connection: ack position, membership of the visibility set
 *
 * Durability contract for adapters: apply `persist` from an output before delivering its
 * `send`s, so an op is announced Authoritative only once it is stored.
 */
import { HerculesError, errorMessage, unreachable, type ErrorCode } from './errors.ts';
import { SYSTEM_CLIENT, applyOp, applyOps, deepFreeze, hasOp, translateOp, type Machine } from './machine.ts';
import { prepareRestore } from './room-migration.ts';
import { GENESIS_DIGEST, domainBytes, domainCopy, sameArgs, scanOp } from './args.ts';
import {
  MAX_PRESENCE_BYTES,
  MAX_PRESENCE_KEYS,
  presenceTooLarge,
  protocolRefusal,
  RECENT_DIGESTS,
  type PeerPresence,
  parseClientMessage,
  readLegacyRefusal,
  type ClientMessage,
  type HelloMessage,
  type LogEntry,
  type ServerMessage,
  type WireEntry,
} from './protocol.ts';

export type ConnId = string;

/** Who is behind a connection, as the transport authenticated it. */
export interface Principal {
  /**
   * The authenticated user. Stamped as the author of every op of the connection, and it owns
   * the client ids it uses: no other user may resume them. Absent (no authentication): the
   * author is the client id and client ids are not owned.
   */
  readonly user?: string;
  /** 'read' receives everything and can submit nothing. Default 'write'. */
  readonly access?: 'read' | 'write';
  /** For a read-only connection: whether it may set presence (default: RoomOptions.readersPresence). */
  readonly presence?: boolean;
}

/** What an `authorize` hook sees about the op's submitter. */
export interface AuthorizeContext {
  readonly user?: string;
  readonly author: string;
  readonly client: string;
  readonly seq: number;
  /** The position the op will take in the global log if allowed. */
  readonly position: number;
}

/**
 * Decide, before an op is ordered, whether it may be. `true` or `undefined`: allowed; `false`:
 * refused; a string: refused with that reason; a throw: refused with its message. It sees the
 * state the op would apply to. A refused op is ordered as a no-op that names the reason, so its
 * submitter's handle settles as rejected and every replica skips it.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a hook with no return statement allows the op (documented above); `undefined` would refuse such a hook at compile time
export type AuthorizeOp<S = unknown> = (op: { readonly name: string; readonly args: unknown }, ctx: AuthorizeContext, state: S) => boolean | string | void;

export interface RoomOptions<S = unknown> {
  /** Remove a member whose ack is outstanding this long (ms). Paper: ~2 s. */
  ackTimeoutMs?: number;
  /** Op-level authorization, run after schema validation and before ordering. */
  authorize?: AuthorizeOp<S>;
  /** Whether read-only connections may set presence (default false: they only see the others'). */
  readersPresence?: boolean;
  /**
   * A connection's presence goes to the others at most once per this many ms on average, in
   * bursts of up to PRESENCE_BURST (default 10 ms: a client paced at 16 ms is never held up; 0:
   * no pacing). Past
   * it the latest value waits, replacing the one before, for the room's next input or tick.
   */
  presenceEveryMs?: number;
  /**
   * Order a frame's ops and fan them out before they run here (without an `authorize` hook,
   * whose verdict reads the state): an input's output lists other members' copies (`tentative`)
   * whose ops have not run yet, and `settle(out)` runs them, adding each thrown op's error to its
   * entry and the records that changed to `out`. A host that sends the tentative logs first and
   * then settles takes the op's run off the path to the other members (LOG-RUN-AFTER-SEND). The
   * host must settle an output before it stores or sends anything else of it. Default false:
   * every input's ops run before it returns.
   */
  settleLater?: boolean;
}

/**
 * The client id of ops the server's own API submits (RoomEngine.submitAsServer): reserved, a
 * connection's hello under it is refused.
 */
export const SERVER_CLIENT = '~server';
/** How many idempotency keys of server-submitted ops a room remembers (ClientRecord.keys). */
export const MAX_SERVER_KEYS = 1000;

/** What `submitAsServer` did. */
export interface ServerSubmitResult {
  /** The op's seq under SERVER_CLIENT and its position in the log. */
  readonly seq: number;
  readonly position: number;
  /** The op threw at its position: it is in the log as a no-op with this error. */
  readonly error?: string;
  /** An op with the same idempotency key was ordered before: this is its result, nothing new was ordered. */
  readonly duplicate: boolean;
}

/** Presence updates a connection may send back to back before presenceEveryMs paces it. */
export const PRESENCE_BURST = 5;

export interface ClientRecord {
  /** Highest seq of this client in the global log: ops with seq <= highWater are duplicates. */
  highWater: number;
  /** Highest seq of this client known visible to every other member. */
  visibleSeq: number;
  /** Rejected ops of this client it has not acked yet: their verdict must survive compaction. */
  rejected?: { seq: number; pos: number; error: string; refused?: true }[];
  /** The authenticated user who first used this client id; only that user may resume it. */
  owner?: string;
  /**
   * Digest chain of this client's ops up to highWater (args.ts): lets a client tell whether the
   * ops under its id are its own. Absent for records created before digests existed.
   */
  digest?: number;
  /**
   * [seq, digest] at this client's last RECENT_DIGESTS ops and the one before them (oldest
   * first; [0, genesis] before its first): answers a restarted client's hello.verify. Absent for
   * records created before it.
   */
  recent?: [number, number][];
  /**
   * The client said its ops up to this seq are saved on its device (AckMessage.durable; at most
   * highWater). A restart of it never holds less, so a declared gap after an earlier seq is a copy.
   */
  durable?: number;
  /** SERVER_CLIENT only: [idempotency key, seq, position] of its last MAX_SERVER_KEYS keyed ops. */
  keys?: [string, number, number][];
}

/** Everything a room must keep across restarts; what storage adapters write. */
export interface RoomDurableState {
  checkpoint: { pos: number; state: unknown };
  suffix: LogEntry[];
  clients: Record<string, ClientRecord>;
  stable: number;
  /**
   * The machine version the room was created under (RoomMeta.version), which it runs unless a
   * migration says otherwise (docs/migrations.md); absent: the engine's machine's.
   */
  version?: number;
}

export interface RoomOutput {
  send: { conn: ConnId; msg: ServerMessage }[];
  close: { conn: ConnId; reason: ErrorCode }[];
  /**
   * True when the messages may go out before `persist` is durable: the output appends nothing to
   * the log and creates or claims no client record. Its writes are then bookkeeping (acks,
   * visibility, the stable position, checkpoints of ops already on disk): lost in a crash, the
   * server re-derives them, and what it told clients stays true, because every announced fact
   * is about ops that were on disk before anyone heard of them. Sending first takes a disk write
   * off the path to Visible. False: persist first, then send (an op is Authoritative only once
   * it is on disk). Either way outputs go out in the order they were made, each after every
   * output before it: a member may ack entries sent ahead of their commit (LOG-TENTATIVE), and a
   * stable frontier or visibility that counts them then goes out after that commit.
   */
  sendFirst: boolean;
  /** Persist before sending, unless `sendFirst`. */
  persist: {
    appended: LogEntry[];
    clients: Record<string, ClientRecord>;
    /** New checkpoint: entries up to pos may be deleted from storage. */
    checkpoint?: { pos: number; state: unknown };
  };
  /** Non-fatal problems, for logging. */
  warnings: string[];
  /**
   * Indices in `send` of log messages with other clients' entries for members of protocol 4 on: a host
   * that stores `persist` before sending may send these ahead of the commit, marked `tentative`,
   * and must then send the member a committed message once stored (LOG-TENTATIVE). A host that
   * ignores this sends them as any log: after the commit, as stored.
   */
  tentative?: number[];
}

interface Session {
  conn: ConnId;
  client?: string;
  author?: string;
  user?: string;
  access: 'read' | 'write';
  /** Highest position the client acked (or is known to hold). */
  ack: number;
  /** 'member' counts for visibility and stable; 'joining' waits to catch up; 'out' was deregistered. */
  status: 'new' | 'joining' | 'member' | 'out';
  /** The protocol version its hello spoke (MIN_PROTOCOL_VERSION..PROTOCOL_VERSION); 0 before. */
  protocol: number;
  memberSince: number;
  /** When the client opened this connection (its hello's `at`), if it said. */
  openedAt?: number;
  /** A read-only connection's own say on setting presence (Principal.presence), over RoomOptions.readersPresence. */
  readerPresence?: boolean;
  /**
   * Its presence values (PresenceSetMessage), never stored, by key ('' for the connection's own,
   * protocol 8 keys for the others); the last set is last (a protocol-7 peer is shown that one).
   */
  presence?: Map<string, unknown>;
  /** Presence updates it may forward now (a token bucket: RoomOptions.presenceEveryMs), and when counted. */
  presenceTokens?: number;
  presenceCountedAt?: number;
  /** Delivery receipts (protocol 7): off, on, or on and owed every member's position (ReceiptsMessage). */
  receipts?: 'on' | 'full';
}

interface SuffixItem {
  entry: LogEntry;
  /** The state after this entry, kept at the end of each step, and thinned out (see keepState). */
  after?: unknown;
  at: number;
}

/**
 * At most this many states are kept in a room's suffix. A state after an op that grows a large
 * array shares little with its neighbours (the array is copied), so keeping one per op made a
 * room's memory the suffix length times the state size: 1.2 GB in a flood within the limits.
 */
const MAX_KEPT_STATES = 32;

export class RoomEngine<S = unknown> {
  readonly machine: Machine<S>;
  private readonly ackTimeoutMs: number;
  private readonly authorize?: AuthorizeOp<S>;
  private readonly readersPresence: boolean;
  private readonly presenceEveryMs: number;
  private readonly settleLater: boolean;
  /** Frames ordered and fanned out whose ops have not run yet (RoomOptions.settleLater), oldest first. */
  private unsettled: { appended: LogEntry[]; client: string; own?: WireEntry[] }[] = [];
  /** Sessions whose latest presence waits for a token, with the keys that changed (coalesced: only the latest goes). */
  private readonly presenceHeld = new Map<Session, Set<string>>();

  private checkpointPos: number;
  private checkpointState: S;
  private suffix: SuffixItem[] = [];
  /** Positions of the suffix entries whose `after` state is kept, ascending. */
  private kept: number[] = [];
  private headState: S;
  private stable: number;
  /** Highest position of an op announced visible; joiners must have it before they count. */
  private visWatermark = 0;
  private clients = new Map<string, ClientRecord>();
  /** Per client: own ops ordered but not yet visible, oldest first. */
  private pendingVisible = new Map<string, { seq: number; pos: number }[]>();
  private sessions = new Map<ConnId, Session>();
  private byClient = new Map<string, Session>();

  private out: RoomOutput = emptyOutput();
  private dirtyClients = new Set<string>();
  private membersChanged = false;
  /** Members whose acked position moved (or that joined) in this turn: the acks owed to subscribers. */
  private acksMoved = new Set<Session>();
  /** Connections that asked for delivery receipts (protocol 7); none: receipts cost nothing. */
  private receiptSubscribers = new Set<Session>();
  /** A client record was created or claimed in this step: it must be on disk before the welcome. */
  private claimed = false;

  readonly stats = { sequenced: 0, duplicates: 0, conflicts: 0, rejected: 0, refused: 0, timeouts: 0, malformed: 0 };

  constructor(machine: Machine<S>, opts: RoomOptions<S> = {}, restore?: RoomDurableState) {
    this.machine = machine;
    const t = opts.ackTimeoutMs ?? 2000;
    if (!(typeof t === 'number' && t > 0 && Number.isFinite(t))) {
      throw new HerculesError('bad-argument', `ackTimeoutMs must be a positive number of milliseconds, got ${String(t)}`);
    }
    this.ackTimeoutMs = t;
    if (opts.authorize !== undefined && typeof opts.authorize !== 'function') {
      throw new HerculesError('bad-argument', 'authorize must be a function (op, ctx, state) => boolean | string | void');
    }
    this.authorize = opts.authorize;
    this.readersPresence = opts.readersPresence === true;
    const every = opts.presenceEveryMs ?? 10;
    if (!(typeof every === 'number' && every >= 0 && Number.isFinite(every))) {
      throw new HerculesError('bad-argument', `presenceEveryMs must be a non-negative number of milliseconds, got ${String(every)}`);
    }
    this.presenceEveryMs = every;
    this.settleLater = opts.settleLater === true;
    // A room stored under an older version is migrated now, before any input (REC-MIGRATE-ONCE).
    const prepared = restore && prepareRestore(machine, restore);
    if (prepared) restore = prepared.durable;
    if (restore) {
      this.checkpointPos = restore.checkpoint.pos;
      this.checkpointState = deepFreeze(restore.checkpoint.state as S);
      this.stable = Math.max(restore.stable, restore.checkpoint.pos);
      let s = this.checkpointState;
      for (const stored of restore.suffix) {
        const e = readLegacyRefusal(stored); // stored by a server before protocol 2
        if (e.error === undefined) s = applyOp(machine, s, e, e.pos).state;
        this.suffix.push({ entry: e, at: -Infinity });
      }
      this.headState = s;
      if (this.suffix.length) this.keepState(this.suffix[this.suffix.length - 1], s);
      for (const [id, rec] of Object.entries(restore.clients))
        this.clients.set(id, {
          ...copyRecord(rec),
          ...(rec.rejected ? { rejected: rec.rejected.map((r) => ({ ...readLegacyRefusal(r) })) } : {}),
          // A record from before `recent`: its history starts at its current head.
          ...(rec.digest !== undefined && rec.recent === undefined ? { recent: [[rec.highWater, rec.digest]] as [number, number][] } : {}),
        });
      for (const e of restore.suffix) {
        const rec = this.clients.get(e.client);
        if (rec && e.seq > rec.visibleSeq) this.pushPending(e.client, e.seq, e.pos);
      }
      // A store may keep an older checkpoint than its stable position (ClusterStore writes them
      // lazily): compact to the frontier, as the engine had before it was stored.
      this.compact();
      // What the migration wrote goes out with the first output, whatever its input.
      if (prepared?.appended) this.out.persist.appended.push(prepared.appended);
      if (prepared?.checkpoint) this.out.persist.checkpoint ??= prepared.checkpoint;
      for (const id of prepared?.dirty ?? []) this.dirtyClients.add(id);
    } else {
      this.checkpointPos = 0;
      this.checkpointState = machine.initial;
      this.headState = machine.initial;
      this.stable = 0;
    }
  }

  // ================================================================ reads

  head(): number {
    return this.checkpointPos + this.suffix.length;
  }
  /** The protocol a connection's hello spoke (0: none yet, or no such connection). */
  protocolOf(conn: ConnId): number {
    return this.sessions.get(conn)?.protocol ?? 0;
  }
  stableFrontier(): number {
    return this.stable;
  }
  headSnapshot(): S {
    this.settle();
    return this.headState;
  }
  /** Members of the visibility set, sorted. */
  members(): string[] {
    const m: string[] = [];
    for (const s of this.sessions.values()) if (s.status === 'member' && s.client) m.push(s.client);
    return m.sort();
  }
  /** [client id, connection] of each member of the visibility set. */
  memberConnections(): [string, ConnId][] {
    const m: [string, ConnId][] = [];
    for (const s of this.sessions.values()) if (s.status === 'member' && s.client) m.push([s.client, s.conn]);
    return m;
  }
  clientRecord(id: string): ClientRecord | undefined {
    const r = this.clients.get(id);
    return r && copyRecord(r);
  }
  connections(): number {
    return this.sessions.size;
  }
  /** Entries still held (after the checkpoint). */
  suffixLength(): number {
    return this.suffix.length;
  }
  /** A consistent copy of what storage must hold; cheap (states are immutable). */
  durableState(): RoomDurableState {
    this.settle();
    return {
      checkpoint: { pos: this.checkpointPos, state: this.checkpointState },
      suffix: this.suffix.map((i) => i.entry),
      clients: Object.fromEntries([...this.clients].map(([k, v]) => [k, copyRecord(v)])),
      stable: this.stable,
    };
  }

  // ================================================================ inputs

  /** A connection opened; `principal` is who the transport authenticated (none: anonymous writer). */
  open(conn: ConnId, now: number, principal: Principal = {}): RoomOutput {
    this.settle();
    if (this.sessions.has(conn)) {
      this.out.warnings.push(`connection ${conn} opened twice`);
    } else {
      const access = principal.access ?? 'write';
      if (access !== 'read' && access !== 'write')
        throw new HerculesError('bad-argument', `principal.access must be 'read' or 'write', got ${JSON.stringify(access)}`);
      if (principal.user !== undefined && (typeof principal.user !== 'string' || principal.user.length === 0)) {
        throw new HerculesError('bad-argument', 'principal.user must be a non-empty string when given');
      }
      this.sessions.set(conn, {
        conn,
        ack: 0,
        status: 'new',
        protocol: 0,
        memberSince: now,
        user: principal.user,
        access,
        ...(principal.presence !== undefined ? { readerPresence: principal.presence === true } : {}),
      });
    }
    return this.finish(now);
  }

  /** A frame from a connection. `frame` is untrusted: it is validated here. */
  message(conn: ConnId, frame: unknown, now: number): RoomOutput {
    this.settle();
    const s = this.sessions.get(conn);
    if (!s) {
      this.out.warnings.push(`message from unknown connection ${conn}`);
      return this.finish(now);
    }
    let msg: ClientMessage;
    try {
      msg = parseClientMessage(frame);
    } catch (e) {
      this.stats.malformed++;
      this.error(conn, 'malformed-frame', errorMessage(e), false);
      return this.finish(now);
    }
    try {
      this.dispatch(s, msg, now);
    } catch (e) {
      // A bug must not take the room down: report it to this client only.
      this.out.warnings.push(`internal error handling ${msg.t} from ${conn}: ${errorMessage(e)}`);
      this.error(conn, 'internal', `the server failed to handle ${msg.t}: ${errorMessage(e)}`, false);
    }
    return this.finish(now);
  }

  close(conn: ConnId, now: number): RoomOutput {
    this.settle();
    const s = this.sessions.get(conn);
    if (s) this.drop(s);
    return this.finish(now);
  }

  /**
   * Clock tick: ack timeouts (§4.6). Call it periodically, e.g. every ackTimeout / 4.
   * `heardUntil(conn)`: the time up to which the adapter has handled everything the connection
   * sent (the arrival of its oldest frame still waiting for a turn; `now` when none waits). An
   * ack that may sit in that waiting input is not counted late: the age stops there, but not
   * before `now - ackTimeoutMs`, so a member is kept at most twice the timeout (VIS-DROP-DEAD).
   */
  tick(now: number, heardUntil?: (conn: ConnId) => number): RoomOutput {
    this.settle();
    const headPos = this.head();
    for (const s of this.sessions.values()) {
      if (s.status !== 'member' || s.ack >= headPos) continue;
      const item = this.suffix[s.ack + 1 - this.checkpointPos - 1];
      const since = Math.max(item ? item.at : now, s.memberSince);
      const heard = heardUntil ? Math.min(now, Math.max(heardUntil(s.conn), now - this.ackTimeoutMs)) : now;
      if (heard - since > this.ackTimeoutMs) {
        this.stats.timeouts++;
        s.status = 'out';
        this.membersChanged = true;
        this.send(s.conn, { t: 'deregister', reason: `no ack for ${Math.round(now - since)} ms (timeout ${this.ackTimeoutMs} ms)` });
      }
    }
    return this.finish(now);
  }

  // ================================================================ handlers

  private dispatch(s: Session, msg: ClientMessage, now: number): void {
    if (msg.t === 'hello') return this.onHello(s, msg, now);
    if (!s.client) {
      this.error(s.conn, 'not-ready', `send hello before ${msg.t}`, true);
      return;
    }
    switch (msg.t) {
      case 'ops':
        // VIS-ACK-WITH-OPS: the ack the client would have sent just before these ops, handled first.
        if (msg.ack) this.onAck(s, s.client, msg.ack);
        return this.onOps(s, msg.ops, now);
      case 'ack':
        return this.onAck(s, s.client, msg);
      case 'settled':
        return this.onSettled(s.client, msg.seq);
      case 'presence':
        return this.onPresence(s, msg.value, s.protocol >= 8 ? (msg.key ?? '') : '', now);
      case 'receipts':
        return this.onReceipts(s, msg.on);
      case 'register':
        if (s.status === 'out') {
          s.status = 'joining';
          s.memberSince = now;
        }
        return;
      default:
        unreachable(msg, 'client message'); // parseClientMessage lets nothing else through
    }
  }

  /** Remote-Ack (§4.3): `client` is the session's own (a hello came first). */
  private onAck(s: Session, client: string, { pos, durable: durableSeq }: { pos: number; durable?: number }): void {
    const head = this.head();
    if (pos > head) {
      this.error(s.conn, 'malformed-frame', `ack for position ${pos} but the log ends at ${head}`, false);
      return;
    }
    if (pos > s.ack) {
      s.ack = pos;
      if (this.receiptSubscribers.size && s.status === 'member') this.acksMoved.add(s);
    }
    const rec = this.clients.get(client)!;
    // Only claims about ordered ops count (a gap's `after` is one). Kept in memory and written
    // with the record's next change, so an ack never costs a write of its own.
    const durable = Math.min(durableSeq ?? 0, rec.highWater);
    if (durable > (rec.durable ?? 0)) rec.durable = durable;
    // Protocol 6 keeps a rejection until the client's store holds it (onSettled): an ack says the
    // client received the entry, not that a restart of it will know (OP-VERDICT-KEPT).
    if (s.protocol < 6 && rec.rejected && rec.rejected.length && rec.rejected[0].pos <= s.ack) {
      rec.rejected = rec.rejected.filter((r) => r.pos > s.ack);
      if (rec.rejected.length === 0) delete rec.rejected;
      this.dirtyClients.add(client);
    }
  }

  /** Delivery receipts on or off for this connection (protocol 7): on owes it every member's position. */
  private onReceipts(s: Session, on: boolean): void {
    if (s.protocol < 7) {
      this.error(s.conn, 'malformed-frame', `receipts need protocol 7; this connection spoke ${s.protocol}`, false);
      return;
    }
    if (on) {
      s.receipts = 'full';
      this.receiptSubscribers.add(s);
    } else {
      s.receipts = undefined;
      this.receiptSubscribers.delete(s);
    }
  }

  /**
   * Tell each receipt subscriber the members' acked positions that moved in this turn (all of
   * them to one that just asked), its own left out: one message per subscriber per turn at most.
   */
  private sendAcks(): void {
    for (const t of this.receiptSubscribers) {
      if (t.status === 'new') continue;
      const acks: { client: string; pos: number }[] = [];
      if (t.receipts === 'full') {
        for (const m of this.sessions.values()) if (m !== t && m.status === 'member' && m.client) acks.push({ client: m.client, pos: m.ack });
        t.receipts = 'on';
      } else {
        for (const m of this.acksMoved) if (m !== t && m.status === 'member' && m.client) acks.push({ client: m.client, pos: m.ack });
      }
      if (acks.length) this.send(t.conn, { t: 'acks', acks });
    }
    this.acksMoved.clear();
  }

  /** The client's store holds the outcome of its ops up to `seq` (SettledMessage): forget their rejections. */
  private onSettled(client: string, seq: number): void {
    const rec = this.clients.get(client)!;
    if (!rec.rejected || !rec.rejected.some((r) => r.seq <= seq)) return;
    rec.rejected = rec.rejected.filter((r) => r.seq > seq);
    if (rec.rejected.length === 0) delete rec.rejected;
    this.dirtyClients.add(client);
  }

  private onHello(s: Session, m: HelloMessage, now: number): void {
    const refused = protocolRefusal(m.v);
    if (refused !== undefined) {
      this.error(s.conn, 'protocol-version', refused, true);
      return;
    }
    if (m.machine.name !== this.machine.name) {
      this.error(
        s.conn,
        'machine-mismatch',
        `this room runs ${this.machine.name}@${this.machine.version}, the client ${m.machine.name}@${m.machine.version}; deploy the same machine module to both`,
        true,
      );
      return;
    }
    if (m.machine.version !== this.machine.version) {
      const older = m.machine.version < this.machine.version;
      this.error(
        s.conn,
        older ? 'client-too-old' : 'server-too-old',
        older
          ? `this room runs ${this.machine.name}@${this.machine.version}, the client ${m.machine.name}@${m.machine.version}; reload the app to get the new version (its saved ops are kept and translated)`
          : `this room runs ${this.machine.name}@${this.machine.version}, the client ${m.machine.name}@${m.machine.version}; deploy the new machine to the server`,
        true,
      );
      return;
    }
    if (m.client === SYSTEM_CLIENT || m.client === SERVER_CLIENT) {
      // The room's own entries (migrations) and the server API's ops are logged under these.
      this.error(
        s.conn,
        'forbidden',
        `client id ${m.client} is the server's own (its migrations and the ops of its API); let the client library generate an id`,
        true,
      );
      return;
    }
    if (s.client) {
      this.error(s.conn, 'malformed-frame', 'hello sent twice on one connection', false);
      return;
    }
    const known = this.clients.get(m.client);
    if (s.user !== undefined && known?.owner !== undefined && known.owner !== s.user) {
      // Client ids are not secret (members and log entries show them): ownership is what stops
      // one user from resuming, or kicking off, another user's client.
      this.error(s.conn, 'forbidden', `client id ${m.client} belongs to another user; let the client library generate a fresh id`, true);
      return;
    }
    const prev = this.byClient.get(m.client);
    if (prev && prev !== s) {
      // A client id lives on one connection: the newer one wins (the old one is likely dead).
      // Newer by when the client opened it, when both hellos say: a hello held up on the way
      // (a cluster node waiting to route it) may arrive after its client's next connection's.
      if (m.at !== undefined && prev.openedAt !== undefined && m.at < prev.openedAt) {
        this.error(s.conn, 'replaced', 'a newer connection of this client id is open', true);
        return;
      }
      this.error(prev.conn, 'replaced', 'this client id connected again elsewhere', true);
      this.drop(prev);
    }
    s.openedAt = m.at;
    s.client = m.client;
    s.author = s.user ?? m.client;
    this.byClient.set(m.client, s);
    let rec = this.clients.get(m.client);
    if (!rec) {
      rec =
        s.user !== undefined
          ? { highWater: 0, visibleSeq: 0, owner: s.user, digest: GENESIS_DIGEST, recent: [[0, GENESIS_DIGEST]] }
          : { highWater: 0, visibleSeq: 0, digest: GENESIS_DIGEST, recent: [[0, GENESIS_DIGEST]] };
      this.clients.set(m.client, rec);
      this.dirtyClients.add(m.client);
      this.claimed = true;
    } else if (s.user !== undefined && rec.owner === undefined) {
      rec.owner = s.user; // a record from before authentication was turned on: first user claims it
      this.dirtyClients.add(m.client);
      this.claimed = true;
    }
    const head = this.head();
    const resume = m.have >= this.checkpointPos && m.have <= head;
    const from = resume ? m.have + 1 : this.checkpointPos + 1;
    const entries = this.suffix.slice(from - this.checkpointPos - 1).map((i) => i.entry);
    const verified = (m.verify ?? []).flatMap((v) => rec.recent?.filter(([seq]) => seq === v).map(([seq, digest]) => ({ seq, digest })) ?? []);
    // Count only what the client holds now; the welcome is not yet delivered. A client claiming
    // more than the log holds has diverged from this room and holds nothing we can count.
    s.ack = m.have <= head ? m.have : 0;
    s.status = 'joining';
    s.memberSince = now;
    s.protocol = m.v;
    this.send(s.conn, {
      t: 'welcome',
      v: m.v,
      client: m.client,
      author: s.author,
      ...(s.access === 'read' ? { access: 'read' as const } : {}),
      ...(resume ? {} : { checkpoint: { pos: this.checkpointPos, state: this.checkpointState } }),
      from,
      entries,
      highWater: rec.highWater,
      ...(rec.digest !== undefined ? { digest: rec.digest } : {}),
      ...(verified.length ? { verified } : {}),
      visibleSeq: rec.visibleSeq,
      rejected: (rec.rejected ?? []).map((r) => (r.refused ? { seq: r.seq, error: r.error, refused: true as const } : { seq: r.seq, error: r.error })),
      stable: this.stable,
      members: this.members(),
      ...this.presenceOfOthers(s),
    });
  }

  /**
   * An op from the server's own API (a backend, not a connection): checked like a client's
   * (a known op, the argument domain, its schema; not the authorize hook, which judges
   * connections), then ordered under SERVER_CLIENT with `author` as ctx.author and fanned out
   * to every connection like any op. With `key`, an op whose key was seen among the last
   * MAX_SERVER_KEYS is not ordered again: its first result comes back (`duplicate`). Throws
   * `unknown-op` or `bad-argument` (nothing ordered) for an op that could never be ordered.
   */
  submitAsServer(author: string, name: string, args: unknown, key: string | undefined, now: number): { out: RoomOutput; result: ServerSubmitResult } {
    this.settle();
    if (typeof author !== 'string' || author.length === 0 || author.length > 256)
      throw new HerculesError('bad-argument', 'submit: author must name who submits (a string of 1-256 characters)');
    if (key !== undefined && (typeof key !== 'string' || key.length === 0 || key.length > 256))
      throw new HerculesError('bad-argument', 'submit: key must be a string of 1-256 characters (an idempotency key)');
    if (!hasOp(this.machine, name)) throw new HerculesError('unknown-op', this.unknownOp(String(name)));
    const scan = scanOp(0, name, args);
    const invalid = 'problem' in scan ? scan.problem : this.machine.validate(name, args);
    if (invalid !== undefined) throw new HerculesError('bad-argument', `submit ${name}: ${invalid}`);
    let rec = this.clients.get(SERVER_CLIENT);
    if (!rec) {
      rec = { highWater: 0, visibleSeq: 0 };
      this.clients.set(SERVER_CLIENT, rec);
      this.claimed = true;
    }
    const seen = key === undefined ? undefined : rec.keys?.find((k) => k[0] === key);
    if (seen) {
      const held = seen[2] > this.checkpointPos ? this.suffix[seen[2] - this.checkpointPos - 1]?.entry : undefined;
      const result = { seq: seen[1], position: seen[2], duplicate: true, ...(held?.error !== undefined ? { error: held.error } : {}) };
      return { out: this.finish(now), result };
    }
    const seq = rec.highWater + 1;
    const pos = this.head() + 1;
    const frozen = deepFreeze(domainCopy(name, args)); // the caller may change its object later
    const res = applyOp(this.machine, this.headState, { client: SERVER_CLIENT, seq, name, args: frozen, author }, pos);
    const entry: LogEntry =
      res.error === undefined
        ? { pos, client: SERVER_CLIENT, seq, name, args: frozen, author }
        : { pos, client: SERVER_CLIENT, seq, name, args: frozen, author, error: res.error };
    if (res.error !== undefined) this.stats.rejected++;
    this.headState = res.state;
    this.suffix.push({ entry, at: now });
    this.keepState(this.suffix[this.suffix.length - 1], this.headState);
    rec.highWater = seq;
    if (key !== undefined) {
      (rec.keys ??= []).push([key, seq, pos]);
      if (rec.keys.length > MAX_SERVER_KEYS) rec.keys.shift();
    }
    this.dirtyClients.add(SERVER_CLIENT);
    this.out.persist.appended.push(entry);
    this.stats.sequenced++;
    this.fanOut([entry], SERVER_CLIENT);
    return { out: this.finish(now), result: { seq, position: pos, duplicate: false, ...(res.error !== undefined ? { error: res.error } : {}) } };
  }

  /** The presence of every other connection that set one, for a welcome. */
  private presenceOfOthers(s: Session): { presence?: PeerPresence[] } {
    const peers: PeerPresence[] = [];
    for (const o of this.sessions.values()) {
      if (o === s || !o.client || !o.presence?.size) continue;
      if (s.protocol >= 8) for (const [key, value] of o.presence) peers.push(peerOf(o, key, value));
      else peers.push(peerOf(o, '', lastPresence(o)));
    }
    return peers.length ? { presence: peers } : {};
  }

  /**
   * A connection sets its presence: kept in memory only (never persisted, never in a log or a
   * view) and sent at once to every other connection of the room.
   */
  private onPresence(s: Session, value: unknown, key: string, now: number): void {
    if (s.access === 'read' && !(s.readerPresence ?? this.readersPresence)) {
      this.error(s.conn, 'forbidden', 'read-only access; this room does not let readers set presence', false);
      return;
    }
    const size = domainBytes(value);
    if (typeof size !== 'number' || size > MAX_PRESENCE_BYTES) {
      const why = typeof size !== 'number' ? size.problem : presenceTooLarge(size);
      this.error(s.conn, 'too-large', `presence not set: ${why}; keep presence small (cursor, selection, name)`, false);
      return;
    }
    const invalid = value === null ? undefined : this.machine.validatePresence(value);
    if (invalid !== undefined) {
      this.error(s.conn, 'bad-argument', `presence not set: ${invalid}; client and server must share the machine's presence schema`, false);
      return;
    }
    const shown = (s.presence ??= new Map());
    const held = this.presenceHeld.get(s);
    if (value === null && !shown.has(key) && !held?.has(key)) return;
    if (value !== null && key !== '' && !shown.has(key) && shown.size - (shown.has('') ? 1 : 0) >= MAX_PRESENCE_KEYS) {
      this.error(s.conn, 'too-large', `presence not set: this connection already shows ${MAX_PRESENCE_KEYS} keyed presences; clear one first`, false);
      return;
    }
    shown.delete(key); // re-inserted last: the latest set is what a protocol-7 peer sees
    if (value !== null) shown.set(key, value);
    if (held) held.add(key);
    else if (this.takePresenceToken(s, now)) this.broadcastPresence(s, [key]);
    else this.presenceHeld.set(s, new Set([key]));
  }

  /** Whether `s` may forward a presence update now (and spend the chance). */
  private takePresenceToken(s: Session, now: number): boolean {
    if (this.presenceEveryMs === 0) return true;
    const since = now - (s.presenceCountedAt ?? now);
    s.presenceTokens = Math.min(PRESENCE_BURST, (s.presenceTokens ?? PRESENCE_BURST) + Math.max(0, since) / this.presenceEveryMs);
    s.presenceCountedAt = now;
    if (s.presenceTokens < 1) return false;
    s.presenceTokens -= 1;
    return true;
  }

  /** Forward the held presence of every session whose pace allows it now. */
  private releasePresence(now: number): void {
    for (const [s, keys] of this.presenceHeld) {
      if (!this.takePresenceToken(s, now)) continue;
      this.presenceHeld.delete(s);
      this.broadcastPresence(s, keys);
    }
  }

  /**
   * Tell the others what `s` shows now under `keys` (null: gone). A peer of protocol 8 gets one
   * presence per key; an older one the connection's latest set value, one per connection.
   */
  private broadcastPresence(s: Session, keys: Iterable<string>): void {
    const shown = s.presence;
    const now: ServerMessage = { t: 'presence', peers: [...keys].map((k) => peerOf(s, k, shown?.get(k) ?? null)) };
    let old: ServerMessage | undefined;
    for (const o of this.sessions.values()) {
      if (o === s || !o.client) continue;
      if (o.protocol >= 8) this.send(o.conn, now);
      else this.send(o.conn, (old ??= { t: 'presence', peers: [peerOf(s, '', lastPresence(s))] }));
    }
  }

  private onOps(s: Session, ops: readonly { seq: number; name: string; args: unknown; after?: number; v?: number }[], now: number): void {
    const client = s.client!;
    const rec = this.clients.get(client)!;
    const appended: LogEntry[] = [];
    const deferApply = this.authorize === undefined && (this.settleLater || ops.length > 1);
    for (const sent of ops) {
      // An op written against an older version is translated here, where it is ordered: once
      // (docs/migrations.md). The digest chain stays over the op as sent, which the client holds.
      const tr = sent.v === undefined || sent.v === this.machine.version ? undefined : translateOp(this.machine, sent.v, sent.name, sent.args);
      const translated = tr !== undefined && !('refuse' in tr) ? tr : undefined;
      const op = translated ? { ...sent, name: translated.name, args: translated.args } : sent;
      if (op.seq <= rec.highWater) {
        // A retransmission of an op already ordered is dropped (exactly once). An op under an
        // ordered seq that differs from it comes from a second sender under one id, or a store
        // restored from a backup: refused loudly. (Once compacted, the op can no longer be
        // compared here; the client then finds the conflict by the digest in its welcome.)
        if (this.compareOrdered(client, op) !== 'different') {
          this.stats.duplicates++;
          continue;
        }
        this.stats.conflicts++;
        this.error(
          s.conn,
          'client-id-conflict',
          `op seq ${op.seq} of client ${client} is not the op the room ordered under that seq: another client uses the same id, or this client's store was copied or restored from a backup. The op was not ordered; give each client its own id and store`,
          true,
        );
        break;
      }
      // A declared gap (DUR-BEFORE-SEND) skips seqs the client reserved and lost in a crash; it
      // is accepted once everything up to the op it follows is ordered, so nothing durable is skipped.
      const gap = op.seq !== rec.highWater + 1 && op.after !== undefined && op.after <= rec.highWater;
      if (gap && op.after! < (rec.durable ?? 0)) {
        // A restart holds every op it said was saved; a store that does not is a copy taken
        // before (a restored backup) while its original goes on. Without this, its gap would
        // jump past the original's reserved seqs and take the id over.
        this.stats.conflicts++;
        this.error(
          s.conn,
          'client-id-conflict',
          `op seq ${op.seq} follows ${op.after} across a declared gap, but client ${client} said its ops up to ${rec.durable} were saved on its device: this store is an older copy of that client's (restored from a backup, or copied while it ran). The op was not ordered; give each client its own id and store`,
          true,
        );
        break;
      }
      if (op.seq !== rec.highWater + 1 && !gap) {
        this.error(
          s.conn,
          'seq-gap',
          `op seq ${op.seq} follows ${rec.highWater}; ops must arrive in order without gaps — reconnect to resend from ${rec.highWater + 1}`,
          true,
        );
        this.drop(s);
        break;
      }
      const pos = this.head() + 1;
      // The argument domain and size (args.ts) before anything else: nothing outside them is
      // ever applied, stored or fanned out. The same walk extends this client's digest chain, which
      // starts again at an op that declares a gap, as the client's does (ViewEngine.submit), even
      // when the server holds every seq in it (the process before sent them and crashed unsaved).
      const scan = scanOp(op.after !== undefined ? GENESIS_DIGEST : (rec.digest ?? 0), sent.name, sent.args);
      const tscan = translated && scanOp(0, op.name, op.args);
      const refusal =
        'problem' in scan
          ? scan.problem
          : tr && 'refuse' in tr
            ? tr.refuse
            : tscan && 'problem' in tscan
              ? `translated: ${tscan.problem}`
              : this.refusal(s, op, pos);
      if (rec.digest !== undefined) {
        rec.digest = 'digest' in scan ? scan.digest : -op.seq; // refused: any value no client holds
        if (rec.recent !== undefined) {
          rec.recent.push([op.seq, rec.digest]);
          if (rec.recent.length > RECENT_DIGESTS + 1) rec.recent.shift();
        }
      }
      // Without an authorize hook no verdict reads the state: the frame's ops are applied after
      // this loop, in one draft (a large map is copied once per frame, not once per op), or
      // with settleLater after the output's tentative logs are sent (settle).
      const res =
        refusal !== undefined
          ? { state: this.headState, error: refusal }
          : deferApply
            ? { state: this.headState, error: undefined }
            : applyOp(this.machine, this.headState, { client, seq: op.seq, name: op.name, args: op.args, author: s.author! }, pos);
      // A refused op keeps its place in the client's sequence (exactly-once needs no gaps) but
      // enters the log as a no-op without its arguments: they were never accepted.
      const entry: LogEntry =
        res.error === undefined
          ? { pos, client, seq: op.seq, name: op.name, args: op.args, author: s.author! }
          : refusal === undefined
            ? { pos, client, seq: op.seq, name: op.name, args: op.args, author: s.author!, error: res.error }
            : { pos, client, seq: op.seq, name: op.name, args: null, author: s.author!, error: res.error, refused: true };
      if (refusal !== undefined) this.stats.refused++;
      if (res.error !== undefined) {
        this.stats.rejected++;
        (rec.rejected ??= []).push(refusal === undefined ? { seq: op.seq, pos, error: res.error } : { seq: op.seq, pos, error: res.error, refused: true });
      }
      this.headState = res.state;
      this.suffix.push({ entry, at: now });
      rec.highWater = op.seq;
      this.dirtyClients.add(client);
      this.pushPending(client, op.seq, pos);
      appended.push(entry);
      this.stats.sequenced++;
    }
    if (appended.length === 0) return;
    const later = deferApply && this.settleLater;
    if (deferApply && !later) this.applyAppended(appended, client);
    this.out.persist.appended.push(...appended);
    const own = this.fanOut(appended, client);
    if (later) this.unsettled.push(own ? { appended, client, own } : { appended, client });
    else this.keepState(this.suffix[this.suffix.length - 1], this.headState);
  }

  /**
   * Run the ops ordered since the last settle (RoomOptions.settleLater), in order: each frame's
   * in one draft, as an input would have. An op that throws gets its error in its entry, which
   * the output's persist and queued sends hold (the same object), and in its author's record and
   * Notify-Auth; records that changed go into `out` when given, else into the next output.
   * Every input and read settles first, so a host that forgets loses nothing but the overlap.
   */
  settle(out?: RoomOutput): void {
    if (this.unsettled.length === 0) return;
    const frames = this.unsettled;
    this.unsettled = [];
    for (const { appended, client, own } of frames) {
      if (this.applyAppended(appended, client) && own) for (let i = 0; i < own.length; i++) own[i] = ownEntry(appended[i]);
      const last = appended[appended.length - 1].pos;
      this.keepState(this.suffix[last - this.checkpointPos - 1], this.headState);
    }
    if (!out) return;
    for (const c of this.dirtyClients) out.persist.clients[c] = copyRecord(this.clients.get(c)!);
    this.dirtyClients.clear();
  }

  /**
   * Send new entries to every connection: the submitter gets Notify-Auth (compact), everyone else
   * Remote-Operation. Another's entries to a client of protocol 4 on are listed in `tentative`: the host
   * may send them before their commit (LOG-TENTATIVE); its own never (Authoritative is stored).
   */
  private fanOut(appended: readonly LogEntry[], submitter: string): WireEntry[] | undefined {
    const from = appended[0].pos;
    let remote: WireEntry[] | undefined;
    let own: WireEntry[] | undefined;
    for (const t of this.sessions.values()) {
      if (!t.client || t.status === 'new') continue;
      if (t.client === submitter) {
        own = appended.map(ownEntry);
        this.send(t.conn, { t: 'log', from, entries: own });
        continue;
      }
      remote ??= appended.map((e) => ({ k: 'op', e }));
      if (t.protocol >= 4) (this.out.tentative ??= []).push(this.out.send.length);
      this.send(t.conn, { t: 'log', from, entries: remote });
    }
    return own;
  }

  /**
   * Apply a frame's appended entries (refused ones carry their error and are skipped) to the
   * head state in one draft. An op that throws becomes a rejected entry in its place, as if it
   * had been applied alone: its error is set on the entry object itself, which the suffix, the
   * output's persist and the queued logs to others hold. Whether one threw.
   */
  private applyAppended(appended: LogEntry[], client: string): boolean {
    const first = appended[0].pos;
    const rec = this.clients.get(client)!;
    let threw = false;
    this.headState = applyOps(this.machine, this.headState, appended, first, (i, error) => {
      const e = appended[i] as { error?: string } & LogEntry;
      e.error = error;
      this.stats.rejected++;
      (rec.rejected ??= []).push({ seq: e.seq, pos: e.pos, error });
      threw = true;
    });
    if (threw) {
      rec.rejected!.sort((a, b) => a.pos - b.pos);
      this.dirtyClients.add(client);
    }
    return threw;
  }

  /** Whether an op under an already ordered seq is the op the log holds there, if still held. */
  private compareOrdered(client: string, op: { seq: number; name: string; args: unknown }): 'same' | 'different' | 'unknown' {
    for (let i = this.suffix.length - 1; i >= 0; i--) {
      const e = this.suffix[i].entry;
      if (e.client !== client || e.seq > op.seq) continue;
      if (e.seq < op.seq) return 'unknown';
      if (e.name !== op.name) return 'different';
      if (e.refused) return 'same'; // its args were dropped: only the name can be compared
      return sameArgs(op.args, e.args) ? 'same' : 'different';
    }
    return 'unknown';
  }

  /** Why an op may not be ordered (access, schema, authorize hook), or undefined if it may. */
  private unknownOp(name: string): string {
    return `unknown op ${JSON.stringify(name.slice(0, 64))} for machine ${this.machine.name}@${this.machine.version}; known ops: ${[...this.machine.opNames].join(', ')}`;
  }

  private refusal(s: Session, op: { seq: number; name: string; args: unknown }, pos: number): string | undefined {
    if (s.access === 'read') return 'read-only access; this client may not submit ops to the room';
    // Unknown ops are refused like invalid ones: their arguments never reach the log.
    if (!hasOp(this.machine, op.name)) return this.unknownOp(op.name);
    const invalid = this.machine.validate(op.name, op.args);
    if (invalid !== undefined) return invalid;
    if (!this.authorize) return undefined;
    let verdict: ReturnType<AuthorizeOp<S>>;
    try {
      verdict = this.authorize(
        { name: op.name, args: op.args },
        { user: s.user, author: s.author!, client: s.client!, seq: op.seq, position: pos },
        this.headState,
      );
    } catch (e) {
      return `not authorized: ${errorMessage(e)}`;
    }
    if (verdict === true || verdict === undefined) return undefined;
    if (verdict === false) return `not authorized to ${op.name}`;
    if (typeof verdict === 'string') return `not authorized: ${verdict}`;
    return `the authorize hook returned ${typeof verdict}; it must return boolean, string or nothing`;
  }

  // ================================================================ membership, visibility, stability

  private drop(s: Session): void {
    if (s.status === 'member') this.membersChanged = true;
    this.sessions.delete(s.conn);
    this.receiptSubscribers.delete(s);
    this.acksMoved.delete(s);
    const held = this.presenceHeld.get(s);
    this.presenceHeld.delete(s);
    const keys = new Set([...(s.presence?.keys() ?? []), ...(held ?? [])]);
    if (keys.size) {
      s.presence = undefined;
      this.broadcastPresence(s, keys); // gone for everyone, with the connection
    }
    if (s.client && this.byClient.get(s.client) === s) this.byClient.delete(s.client);
    this.out.close.push({ conn: s.conn, reason: 'closed' });
  }

  private pushPending(client: string, seq: number, pos: number): void {
    let q = this.pendingVisible.get(client);
    if (!q) this.pendingVisible.set(client, (q = []));
    q.push({ seq, pos });
  }

  /** Recompute joins, visibility and the stable frontier after any input. */
  private finish(now: number): RoomOutput {
    if (this.presenceHeld.size) this.releasePresence(now);
    // Joiners become members once they hold everything already promised to others.
    const need = Math.max(this.visWatermark, this.stable);
    for (const s of this.sessions.values()) {
      if (s.status === 'joining' && s.ack >= need) {
        s.status = 'member';
        s.memberSince = now;
        this.membersChanged = true;
        if (this.receiptSubscribers.size) this.acksMoved.add(s);
      }
    }
    // Visibility: an op is visible once every *other* member acked it (§4.3 step 7).
    let min1 = Infinity,
      min2 = Infinity,
      argmin: string | undefined;
    for (const s of this.sessions.values()) {
      if (s.status !== 'member') continue;
      if (s.ack < min1) {
        min2 = min1;
        min1 = s.ack;
        argmin = s.client;
      } else if (s.ack < min2) min2 = s.ack;
    }
    // Stable: the prefix every member has received. With no members, all of it, vacuously.
    // (A member may hold, and ack, entries sent ahead of their commit: LOG-TENTATIVE. What this
    // announces goes out only after every entry ordered so far is stored, RoomOutput.sendFirst.)
    const candidate = min1 === Infinity ? this.head() : min1;
    for (const [client, q] of this.pendingVisible) {
      const bound = client === argmin ? min2 : min1;
      let n = 0;
      while (n < q.length && q[n].pos <= bound) n++;
      if (n === 0) continue;
      const last = q[n - 1];
      q.splice(0, n);
      if (q.length === 0) this.pendingVisible.delete(client);
      const rec = this.clients.get(client)!;
      rec.visibleSeq = last.seq;
      this.dirtyClients.add(client);
      if (last.pos > this.visWatermark) this.visWatermark = last.pos;
      const sess = this.byClient.get(client);
      // VIS-BY-STABLE: a protocol-3 member reads its own ops up to a stable frontier as
      // visible (every member holds them), so one this pass announces (below) says it instead.
      // Not a joiner: the frontier may run ahead of what it holds.
      if (sess && sess.status !== 'new' && !(sess.protocol >= 3 && sess.status === 'member' && last.pos <= candidate && candidate > this.stable))
        this.send(sess.conn, { t: 'visible', seq: last.seq });
    }
    if (candidate > this.stable) {
      this.stable = candidate;
      for (const s of this.sessions.values()) if (s.client && s.status !== 'new') this.send(s.conn, { t: 'stable', pos: this.stable });
      this.compact();
    }
    if (this.membersChanged) {
      this.membersChanged = false;
      const members = this.members();
      for (const s of this.sessions.values()) if (s.client && s.status !== 'new') this.send(s.conn, { t: 'members', members });
    }
    if (this.receiptSubscribers.size) this.sendAcks();
    else this.acksMoved.clear();
    for (const c of this.dirtyClients) this.out.persist.clients[c] = copyRecord(this.clients.get(c)!);
    this.dirtyClients.clear();
    const o = this.out;
    o.sendFirst = o.persist.appended.length === 0 && !this.claimed;
    this.claimed = false;
    this.out = emptyOutput();
    return o;
  }

  /**
   * Keep the state after `item` (the end of a step). Past MAX_KEPT_STATES, every other kept
   * state is dropped, the newest always stays: a room holds a bounded number of states whatever
   * its suffix length, and compaction replays at most the ops between two kept states.
   */
  private keepState(item: SuffixItem, state: S): void {
    item.after = state;
    this.kept.push(item.entry.pos);
    if (this.kept.length <= MAX_KEPT_STATES) return;
    const keep: number[] = [];
    const last = this.kept.length - 1;
    for (let i = 0; i <= last; i++) {
      if ((last - i) % 2 === 0) keep.push(this.kept[i]);
      else this.suffix[this.kept[i] - this.checkpointPos - 1].after = undefined;
    }
    this.kept = keep;
  }

  /** Advance the checkpoint to the stable frontier and prune the suffix (§4.6). */
  private compact(): void {
    const n = this.stable - this.checkpointPos;
    if (n <= 0) return;
    // A room without members is stable up to its head at once: its states come from running the ops.
    this.settle();
    // The state at the frontier: kept (members ack what they received, the end of a step), or
    // the ops from the nearest kept state before it applied again (deterministic: same verdicts).
    let k = this.kept.length - 1;
    while (k >= 0 && this.kept[k] > this.stable) k--;
    const basePos = k >= 0 ? this.kept[k] : this.checkpointPos;
    const base = (k >= 0 ? this.suffix[basePos - this.checkpointPos - 1].after : this.checkpointState) as S;
    this.checkpointState =
      basePos === this.stable
        ? base
        : applyOps(
            this.machine,
            base,
            this.suffix.slice(basePos - this.checkpointPos, n).map((i) => i.entry),
            basePos + 1,
          );
    this.checkpointPos = this.stable;
    this.suffix.splice(0, n);
    this.kept.splice(0, k + 1);
    this.out.persist.checkpoint = { pos: this.checkpointPos, state: this.checkpointState };
  }

  private send(conn: ConnId, msg: ServerMessage): void {
    this.out.send.push({ conn, msg });
  }

  private error(conn: ConnId, code: ErrorCode, message: string, fatal: boolean): void {
    this.send(conn, { t: 'error', code, message, fatal });
    if (fatal) {
      const s = this.sessions.get(conn);
      if (s) this.drop(s);
      else this.out.close.push({ conn, reason: code });
    }
  }
}

/** Notify-Auth for the submitter: its verdict without the op, which it holds. */
function ownEntry(e: LogEntry): WireEntry {
  if (e.error === undefined) return { k: 'own', seq: e.seq };
  return e.refused ? { k: 'own', seq: e.seq, error: e.error, refused: true } : { k: 'own', seq: e.seq, error: e.error };
}

function emptyOutput(): RoomOutput {
  return { send: [], close: [], sendFirst: false, persist: { appended: [], clients: {} }, warnings: [] };
}

function peerOf(s: Session, key: string, value: unknown): PeerPresence {
  return { client: s.client!, ...(s.user !== undefined ? { user: s.user } : {}), ...(key !== '' ? { key } : {}), value };
}

/** The value a session set last (what a protocol-7 peer is shown of it), null if none. */
function lastPresence(s: Session): unknown {
  let last: unknown = null;
  for (const v of s.presence?.values() ?? []) last = v;
  return last;
}

function copyRecord(r: ClientRecord): ClientRecord {
  const c = r.rejected ? { ...r, rejected: r.rejected.map((x) => ({ ...x })) } : { ...r };
  // A pair of `recent` is never changed in place (each op pushes a new one): the copy shares them.
  // Copying all 17 pairs for each client a step touched allocated 15 of the 263 MB that 1,000
  // turns of bench:keys (100,000 keys) allocated (a sampling heap profile; issue 43).
  if (r.recent) c.recent = [...r.recent];
  if (r.keys) c.keys = r.keys.map(([k, seq, pos]) => [k, seq, pos]);
  return c;
}
