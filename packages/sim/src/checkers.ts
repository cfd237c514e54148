/**
 * The simulator's named checkers. Each checks one rule of docs/spec.md against what the
 * simulation can observe, and a failure names that rule. What a checker may read is `SimState`:
 * the global log as the server's disk holds it, the reference fold of that log (the oracle),
 * which ops each client's disk confirmed, how far each connection's client has processed the
 * log, each live client's room and op handles, and the running server's engine.
 *
 * A checker is a set of hooks: `step` runs after every event, the
 * others at the moment something observable happens (an entry committed, a frame sent, a client
 * process started, ...). A checker keeps its own state between calls, so the simulation makes a
 * fresh set per run (`Checks`). Checkers must not draw from the simulation's random numbers:
 * a seed replays the same run with or without them.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  HerculesError,
  SYSTEM_CLIENT,
  VIEWS,
  applyOp,
  isMigrationEntry,
  translateOp,
  type ClientMessage,
  type ClientRoom,
  type LogEntry,
  type OpHandle,
  type OwnOp,
  type RoomDurableState,
  type RoomEngine,
  type ServerMessage,
  type ServerSubmitResult,
  SERVER_CLIENT,
  type ViewName,
  type ViewPositions,
} from '@hercules/core';
import type { Limits } from '@hercules/server';
import type { LoadedRoom } from '@hercules/server/pipeline';
import { ledgerAt, type AnyLedgerState, type Ledger } from './machine.ts';
import { RECEIPT_CHECKERS } from './receipt-checkers.ts';
import { SEC_CHECKERS } from './sec-checkers.ts';
import { TEXT_CHECKERS } from './text-checkers.ts';
import { RICH_CHECKERS } from './rich-checkers.ts';
import { VIS_CHECKERS } from './vis-checkers.ts';

/** A state of either version of the machine (machine.ts): what checkers compare is mostly its `log`. */
type LedgerState = AnyLedgerState;

export type Room = ClientRoom<Ledger>;

/** One simulated client as checkers see it. */
export interface ClientState {
  readonly id: string;
  readonly alive: boolean;
  /** The machine version its code runs (docs/migrations.md). */
  readonly version: number;
  readonly room?: Room;
  /** Handles of the ops of an older version its disk held when this process started. */
  readonly carried: readonly OpHandle[];
  /** Handles of the ops its disk held when this process started (ClientRoom.pending() then). */
  readonly restored: readonly OpHandle[];
  /** Handles of the ops this client process submitted. */
  readonly handles: readonly OpHandle[];
}

/** What the simulation lets checkers observe. */
export interface SimState {
  readonly now: number;
  /** A server runs and holds the room: `server` is its engine. */
  readonly serverUp: boolean;
  readonly server: RoomEngine<LedgerState>;
  /**
   * The running server's store has everything its engine ordered (no append in flight): only
   * then is the engine's head the committed log. While appends are in flight it is ahead.
   */
  readonly serverSettled: boolean;
  /** The global log as the server's disk holds it: every committed entry, never compacted. */
  readonly global: readonly LogEntry[];
  /** oracle[n]: the reference fold of the first n entries of the global log. */
  readonly oracle: readonly LedgerState[];
  /** oracleVersion[n]: the machine version of oracle[n] (it changes at a migration entry). */
  readonly oracleVersion: readonly number[];
  /** The machine version the servers run (deployed): every server process started since runs it. */
  readonly serverVersion: number;
  /**
   * oracle[n] as a client running `version` shows it: migrated if the fold is of an older version
   * (a client restarted on new code from an older base); undefined if of a newer one.
   */
  expected(n: number, version: number): LedgerState | undefined;
  /** Position of each committed op, by `${client}:${seq}`. */
  readonly posOf: ReadonlyMap<string, number>;
  /** Ops some client's disk confirmed, by `${client}:${seq}`. */
  readonly durableEver: ReadonlySet<string>;
  /** Whether clients set presence in this run, and what each live one last set (PRESENCE-EPHEMERAL). */
  readonly presenceOn: boolean;
  readonly presenceNow: ReadonlyMap<string, unknown>;
  /** Whether every client process listens to delivery receipts from its start in this run (RECEIPT-*). */
  readonly receiptsOn: boolean;
  /** The seq reservation each client's disk holds; absent: none (DUR-BEFORE-SEND). */
  readonly reserved: ReadonlyMap<string, number>;
  /** Highest log position the client behind each connection holds: Authoritative, and the entries it was sent ahead of their commit (it acks them, protocol 5). */
  readonly processed: ReadonlyMap<string, number>;
  readonly clients: readonly ClientState[];
  /** Quiescent: healed, nothing in flight, everyone connected and settled. */
  finished(): boolean;
  describe(): string;
  /**
   * The server's store fails appends in this run (cluster mode: a replicated log that elects
   * leaders, loses acks and fences a stale owner). A non-fatal `storage-failed` error is then the
   * documented answer to a client whose room failed (it reconnects and resumes), not a refusal.
   */
  readonly storeMayFail: boolean;
  /** Cluster mode: each running node that believes it owns the room's shard, with its claim's epoch (empty otherwise). */
  owners(): readonly { node: string; epoch: number }[];
  /** The author the server must stamp on `client`'s ops: its user when clients authenticate, else the client id (SEC-AUTHOR). */
  authorOf(client: string): string;
  /** The run made the server refuse `c` with `code` on purpose (its user's access revoked, its credential expired). */
  refusedByDesign(c: ClientState, code: string): boolean;
  /** The room service's limits in this run (absent ones: the defaults). */
  readonly limits: Partial<Limits>;
  /** The server's ack timeout in this run (VIS-DROP-DEAD). */
  readonly ackTimeoutMs: number;
}

/** A credential a connection authenticated with: its user, and when it expires (simulated ms; Infinity: never). */
export interface Credential {
  readonly user: string;
  readonly expiresAt: number;
  /** The service's access hook answers `none` for the user as the connection opens (the run revoked it). */
  readonly denied: boolean;
}

/** Who ended a connection first: the service, the client (or its network), or the server process, by dying. */
export type ClosedBy = 'server' | 'client' | 'died';

export type Positions = ViewPositions;

/** A live client at one step, observed once and shared by every checker. */
export interface LiveClient {
  readonly c: ClientState;
  readonly room: Room;
  readonly p: Positions;
  readonly views: Readonly<Record<ViewName, LedgerState>>;
  readonly pending: readonly OwnOp[];
  /** Other clients' entries it holds before the server stored them (LOG-TENTATIVE). */
  readonly tentative: readonly LogEntry[];
  /** Nothing this client shows changed since the last step: checks of its views alone would pass again. */
  readonly unchanged: boolean;
}

export interface Step {
  /** Run the expensive checks too (every `deepCheckEvery` events). */
  readonly deep: boolean;
  readonly live: readonly LiveClient[];
  /** Members of the running server's visibility set: client id -> connection (empty while it is down). */
  readonly members: ReadonlyMap<string, string>;
}

/** A stub call the simulation made, and what came of it. */
export type Attempt =
  | { readonly kind: 'op'; readonly handle: OpHandle; readonly after: LedgerState }
  | {
      readonly kind: 'outside-domain';
      readonly value: unknown;
      readonly returned: boolean;
      readonly threw: unknown;
      readonly before: LedgerState;
      readonly after: LedgerState;
    };

export interface Hooks {
  /** After every event. */
  step?(s: SimState, st: Step): void;
  /** The server committed `e`; the global log does not hold it yet. `reference` is the oracle's verdict for it. */
  sequenced?(s: SimState, e: LogEntry, reference: string | undefined): void;
  /** The server put `msg` on the wire to the client `client` on connection `conn`. */
  sent?(s: SimState, conn: string, client: string, msg: ServerMessage): void;
  /** Client `c` put `msg` on the wire (of its connection `conn`). */
  clientSent?(s: SimState, c: ClientState, msg: ClientMessage, conn?: string): void;
  /** A client process started from its disk, before it heard from anyone. */
  clientStarted?(s: SimState, c: ClientState, room: Room): void;
  /** A server started; `restore` is what it started from (undefined: a new room). */
  serverStarted?(s: SimState, restore: RoomDurableState | undefined): void;
  submitted?(s: SimState, c: ClientState, a: Attempt): void;
  warned?(s: SimState, c: ClientState, message: string): void;
  /** The client's engine found itself out of step and asked for a new connection. */
  resynced?(s: SimState, c: ClientState, reason: string): void;
  fatal?(s: SimState, c: ClientState, code: string, message: string): void;
  /** The run ended: the event queue drained, or `timedOutMs` after healing it had not converged. */
  end?(s: SimState, timedOutMs: number | undefined): void;
  /** Cluster mode: node `node`, holding the claim at `claim` in the stream (`lastClaim` the last one there), loaded the room. */
  roomLoaded?(s: SimState, node: string, claim: number | undefined, lastClaim: number, loaded: LoadedRoom): void;
  /** Cluster mode: node `node`, whose claim is of `epoch` (undefined: it owns no claim now), sends `msg` to a client. */
  announced?(s: SimState, node: string, epoch: number | undefined, msg: ServerMessage): void;
  /** The server's own API answered a submit of `args` under idempotency `key` (API-SUBMIT). */
  apiAnswered?(s: SimState, key: string, args: unknown, outcome: ApiOutcome): void;
  /** Room service: client connection `conn` reached it, with credential `cred` (undefined: anonymous). */
  opened?(s: SimState, conn: string, cred: Credential | undefined): void;
  /** Room service: `msg` from `conn` arrived at the service's end of the connection (in the order sent). */
  delivered?(s: SimState, conn: string, msg: ClientMessage): void;
  /** Room service: it read `msg` from `conn` (into the session's input; a paused connection's frames wait in its socket until then). */
  read?(s: SimState, conn: string, msg: ClientMessage): void;
  /** Room service: it joined `conn` to its room, as `user` (undefined: anonymous). */
  roomJoined?(s: SimState, conn: string, user: string | undefined): void;
  /** Room service: it handed its room `frame` from `conn` (RoomHost.receive). */
  roomInput?(s: SimState, conn: string, frame: unknown): void;
  /** Room service: connection `conn` closed; `by` the service, with `error` the last error it sent on it (if any). */
  closed?(s: SimState, conn: string, by: ClosedBy, error?: { code: string; fatal: boolean }): void;
  /** Room service: a backend revoked `user`; the service says it closed `cut` connections. */
  revoked?(s: SimState, user: string, cut: number): void;
  /** Room service: connection `conn` (opened just before) is a hostile peer of `kind`, to be closed with one of `expect` (hostile-peer.ts). */
  hostileOpened?(s: SimState, conn: string, kind: string, expect: readonly string[]): void;
}

/** What a submit through the server's own API came to: its result, or the error code it was refused with. */
export type ApiOutcome = { readonly result: ServerSubmitResult } | { readonly error: string };

/** The author the simulation submits API ops as. */
export const API_AUTHOR = 'api';

/** Throws a Violation naming the checker's rule. */
export type Fail = (message: string) => never;

export interface Checker {
  /** The rule of docs/spec.md this checker checks. */
  readonly rule: string;
  readonly description: string;
  /** Fresh hooks for one run. */
  create(fail: Fail): Hooks;
}

export class Violation extends Error {
  constructor(
    readonly rule: string,
    message: string,
  ) {
    super(`[${rule}] ${message}`);
  }
}

// ------------------------------------------------------------------ helpers

/** Snapshots are immutable, so a fingerprint cached by identity stays right. */
const prints = new WeakMap<object, string>();
function print(s: LedgerState): string {
  let p = prints.get(s);
  if (p === undefined) prints.set(s, (p = JSON.stringify(s)));
  return p;
}
export const same = (a: LedgerState, b: LedgerState) => a === b || print(a) === print(b);

const idOf = (e: { client: string; seq: number }) => `${e.client}:${e.seq}`;

/** The version the committed log runs: that of its last migration entry, else the first. */
function roomVersion(s: SimState): number {
  return s.oracleVersion[s.global.length] ?? 1;
}

/** Position of the committed migration entry to a version above `version`, if any. */
function migrationPast(s: SimState, version: number): number | undefined {
  for (let n = 1; n < s.oracleVersion.length; n++) if (s.oracleVersion[n] > version) return n;
  return undefined;
}

/** A state of version 2 says so (`schema: 2`, machine.ts); one of version 1 has no such field. */
const versionOf = (st: LedgerState): number => ('schema' in st ? st.schema : 1);

/** JSON text, as a store or the wire keeps a value (-0 is 0). */
const json = (v: unknown) => JSON.stringify(v ?? null);

/** Observe the live clients once per step; `memo` keeps each client's key from the last step. */
export function observe(s: SimState, deep: boolean, memo: Map<ClientState, unknown[]>): Step {
  const live: LiveClient[] = [];
  for (const c of s.clients) {
    if (!c.alive || !c.room) continue;
    const room = c.room;
    const p = room.positions();
    const views = {
      submitted: room.getState('submitted'),
      durable: room.getState('durable'),
      authoritative: room.getState('authoritative'),
      visible: room.getState('visible'),
      stable: room.getState('stable'),
    };
    const pending = room.engine.pending();
    const tentative = room.engine.tentativeEntries();
    const key = [
      views.submitted,
      views.durable,
      views.authoritative,
      views.visible,
      views.stable,
      p.stable,
      p.visible,
      p.authoritative,
      p.durable,
      p.submitted,
      pending.length,
      tentative.length,
    ];
    const last = memo.get(c);
    const unchanged = last !== undefined && key.length === last.length && key.every((x, i) => x === last[i]);
    memo.set(c, key);
    live.push({ c, room, p, views, pending, tentative, unchanged });
  }
  const members = new Map<string, string>();
  if (s.serverUp) for (const [id, conn] of s.server.memberConnections()) members.set(id, conn);
  return { deep, live, members };
}

// ------------------------------------------------------------------ the checkers

/**
 * In the order they run: when one event breaks several rules, the first checker here names it,
 * so the ones that guard the others' preconditions come first (AUTH-STORED before any checker
 * that reads the oracle at a client's Authoritative length).
 */
export const CHECKERS: readonly Checker[] = [
  {
    rule: 'LOG-CONTIGUOUS',
    description: 'the server commits positions 1, 2, 3... in order, and its head is the committed log and its fold',
    create: (fail: Fail) => ({
      sequenced(s, e) {
        if (e.pos !== s.global.length + 1) fail(`server committed ${idOf(e)} at ${e.pos}, expected ${s.global.length + 1}`);
      },
      step(s) {
        if (!s.serverUp) return;
        // Ordering runs ahead of the store (group commit): the committed log is a prefix of the
        // server's, and all of it once nothing is in flight.
        const head = s.server.head();
        if (head < s.global.length || (s.serverSettled && head !== s.global.length))
          fail(`server head ${head} but ${s.global.length} entries are committed${s.serverSettled ? '' : ' (appends in flight)'}`);
        if (head === s.global.length && !same(s.server.headSnapshot(), s.oracle[head])) fail('server head state differs from the fold of the committed log');
      },
    }),
  },
  {
    rule: 'LOG-EXACTLY-ONCE',
    description: 'no (client, seq) enters the global log twice',
    create: (fail: Fail) => ({
      sequenced(s, e) {
        const at = s.posOf.get(idOf(e));
        if (at !== undefined) fail(`op ${idOf(e)} sequenced twice (positions ${at} and ${e.pos})`);
      },
    }),
  },
  {
    rule: 'REC-MIGRATE-ONCE',
    description:
      'a room migrates to each version at most once, by a migration entry; the reserved client id has no other entries; a server never runs an older version than the log migrated to',
    create: (fail: Fail) => ({
      sequenced(s, e) {
        if (e.client !== SYSTEM_CLIENT) return;
        if (!isMigrationEntry(e)) fail(`entry ${idOf(e)} at ${e.pos} is under the reserved client id ${SYSTEM_CLIENT} but is no migration`);
        const to = (e.args as { to?: unknown } | null)?.to;
        if (to !== e.seq) fail(`migration entry at ${e.pos} has seq ${e.seq} but migrates to ${String(to)}`);
        const earlier = s.global.find((g) => isMigrationEntry(g) && g.seq >= e.seq);
        if (earlier) fail(`room migrated to version ${e.seq} at ${e.pos}, after it migrated to version ${earlier.seq} at ${earlier.pos}`);
      },
      step(s) {
        if (!s.serverUp) return;
        let last: LogEntry | undefined;
        for (let i = s.global.length - 1; i >= 0 && !last; i--) if (isMigrationEntry(s.global[i])) last = s.global[i];
        if (last && s.server.machine.version < last.seq)
          fail(`the server runs version ${s.server.machine.version} of the machine, but the room migrated to ${last.seq} at ${last.pos}`);
      },
    }),
  },
  {
    rule: 'REC-MIGRATE-OPS',
    description:
      "an op written against an older version is sent as written, tagged with its version, and ordered once as its translation or refused with the translation's reason (and its handle says so); never ordered by a room of an older version",
    create: (fail: Fail) => {
      /** Each op as first sent: its name, args (JSON) and the version it was written against. */
      const sent = new Map<string, { name: string; args: string; v: number }>();
      return {
        clientSent(_s, c, msg) {
          if (msg.t !== 'ops') return;
          for (const op of msg.ops) {
            const id = `${c.id}:${op.seq}`;
            const now = { name: op.name, args: json(op.args), v: op.v ?? c.version };
            const was = sent.get(id);
            if (!was) sent.set(id, now);
            else if (was.v !== now.v || was.name !== now.name || was.args !== now.args)
              fail(`${c.id} sent ${id} as ${now.name}@${now.v} ${now.args}, and before as ${was.name}@${was.v} ${was.args}`);
          }
        },
        sequenced(s, e) {
          const op = sent.get(idOf(e));
          if (!op || isMigrationEntry(e)) return;
          const room = roomVersion(s);
          if (op.v > room) fail(`${idOf(e)}, written against v${op.v}, was ordered at ${e.pos} by a room of v${room}`);
          const tr = op.v === room ? { name: op.name, args: JSON.parse(op.args) as unknown } : translateOp(ledgerAt(room), op.v, op.name, JSON.parse(op.args));
          if ('refuse' in tr) {
            if (!e.refused || e.error !== tr.refuse)
              fail(
                `${idOf(e)} (${op.name}@${op.v}) was ordered at ${e.pos} ${e.refused ? `refused with "${e.error}"` : `as ${e.name}`}; its translation refuses it: "${tr.refuse}"`,
              );
          } else if (op.v < room && (e.refused || e.name !== tr.name || json(e.args) !== json(tr.args)))
            fail(
              `${idOf(e)} (${op.name}@${op.v}) was ordered at ${e.pos} as ${e.refused ? `refused ("${e.error}")` : `${e.name} ${json(e.args)}`}; its translation is ${tr.name} ${json(tr.args)}`,
            );
        },
        step(s, st) {
          for (const { c } of st.live)
            for (const h of c.carried) {
              if (h.stage !== 'rejected') continue;
              const g = h.position !== undefined ? s.global[h.position - 1] : s.global.find((e) => e.client === c.id && e.seq === h.seq);
              if (!g || g.error !== h.error)
                fail(`${h.id} (carried over the upgrade) is rejected with "${h.error}", the log says ${g ? `"${g.error ?? 'accepted'}"` : 'nothing'}`);
            }
        },
        end(s, timedOutMs) {
          if (timedOutMs !== undefined) return;
          for (const c of s.clients)
            for (const h of c.carried)
              if (h.stage !== 'visible' && h.stage !== 'rejected') fail(`after quiescence ${h.id} (carried over the upgrade) is still ${h.stage}`);
        },
      };
    },
  },
  {
    rule: 'REC-MIGRATE-VIEWS',
    description:
      "a client shows only states of its own machine version, and the server sends it only entries of it: none before the room's migration to a client of the new version, none from it on to one of an older",
    create: (fail: Fail) => {
      /** The machine version each connection's hello named. */
      const connVersion = new Map<string, number>();
      let past: number | undefined;
      return {
        clientSent(_s, _c, msg, conn) {
          if (msg.t === 'hello' && conn !== undefined) connVersion.set(conn, msg.machine.version);
        },
        sent(s, conn, client, msg) {
          if (msg.t !== 'log' && msg.t !== 'welcome') return;
          const v = connVersion.get(conn);
          if (v === undefined) return;
          if (msg.t === 'welcome' && msg.checkpoint && versionOf(msg.checkpoint.state as LedgerState) !== v)
            fail(`the server sent ${client} (v${v}, ${conn}) a checkpoint of v${versionOf(msg.checkpoint.state as LedgerState)} at ${msg.checkpoint.pos}`);
          const last = Math.min(msg.from + msg.entries.length - 1, s.global.length);
          for (let n = msg.from; n <= last; n++)
            if (s.oracleVersion[n - 1] !== v || s.oracleVersion[n] !== v)
              fail(
                `the server sent ${client} (v${v}, ${conn}) entry ${n}, of a v${s.oracleVersion[n - 1]}${s.oracleVersion[n] !== s.oracleVersion[n - 1] ? `->v${s.oracleVersion[n]}` : ''} log`,
              );
        },
        step(s, st) {
          // (The room's first migration stays where it is once committed: found once.)
          if (past === undefined && roomVersion(s) > 1) past = migrationPast(s, 1);
          for (const { c, p, views, unchanged } of st.live) {
            if (c.version === 1 && past !== undefined && p.authoritative >= past)
              fail(`${c.id} runs v1 and holds the log up to ${p.authoritative}, past the room's migration at ${past}`);
            if (!st.deep || unchanged) continue;
            for (const v of VIEWS)
              if (versionOf(views[v]) !== c.version) fail(`${c.id} runs v${c.version} and shows a state of v${versionOf(views[v])} in its ${v} view`);
          }
        },
      };
    },
  },
  {
    rule: 'LOG-CLIENT-ORDER',
    description: "each client's ops enter the global log in seq order, skipping only seqs no disk ever confirmed (a declared gap)",
    create: (fail: Fail) => {
      const last = new Map<string, number>();
      return {
        sequenced(s, e) {
          const prev = last.get(e.client) ?? 0;
          if (e.seq <= prev) fail(`op ${idOf(e)} committed at ${e.pos} after seq ${prev} of its client`);
          for (let seq = prev + 1; seq < e.seq; seq++) {
            if (s.durableEver.has(`${e.client}:${seq}`)) fail(`op ${idOf(e)} committed at ${e.pos} skipping ${e.client}:${seq}, which its disk confirmed`);
          }
          last.set(e.client, e.seq);
        },
      };
    },
  },
  {
    rule: 'DUR-BEFORE-SEND',
    description:
      'a client sends an op only once its disk confirmed it or a reservation of its seq, so a crash never reuses a seq the server may hold; the server orders no other',
    create: (fail: Fail) => {
      const covered = (s: SimState, client: string, seq: number) => s.durableEver.has(`${client}:${seq}`) || seq <= (s.reserved.get(client) ?? 0);
      return {
        clientSent(s, c, msg) {
          if (msg.t !== 'ops') return;
          for (const op of msg.ops)
            if (!covered(s, c.id, op.seq)) fail(`${c.id} sent op ${c.id}:${op.seq} before its disk confirmed it or a reservation of its seq`);
        },
        sequenced(s, e) {
          // The server's own ops (API-SUBMIT) and the room's migration entries (REC-MIGRATE-ONCE)
          // have no client disk: they are durable by the room's commit.
          if (e.client !== SERVER_CLIENT && e.client !== SYSTEM_CLIENT && !covered(s, e.client, e.seq))
            fail(`op ${idOf(e)} reached the server before it was durable or reserved on its client`);
        },
      };
    },
  },
  {
    rule: 'OP-VERDICT',
    description: "the server's verdict on each op is the reference fold's, and every handle agrees with the entry at its position",
    create: (fail: Fail) => ({
      sequenced(_s, e, reference) {
        if ((reference === undefined) !== (e.error === undefined))
          fail(`server verdict for ${idOf(e)} differs from the reference: ${e.error ?? 'accepted'} vs ${reference ?? 'accepted'}`);
      },
      step(s, st) {
        for (const { c } of st.live) {
          for (const h of c.handles) {
            if (h.stage !== 'authoritative' && h.stage !== 'visible' && h.stage !== 'rejected') continue;
            const g = h.position !== undefined ? s.global[h.position - 1] : s.global.find((e) => e.client === c.id && e.seq === h.seq);
            if (!g || g.client !== c.id || g.seq !== h.seq) fail(`${h.id} is ${h.stage} but not at position ${h.position} of the global log`);
            if ((h.stage === 'rejected') !== (g.error !== undefined)) fail(`${h.id} is ${h.stage} but the global log says ${g.error ?? 'accepted'}`);
          }
        }
      },
    }),
  },
  {
    rule: 'OP-VERDICT-KEPT',
    description:
      "a handle a client process restores from its store settles as the global log's verdict on its op, however many restarts ago the op was ordered",
    create: (fail: Fail) => ({
      step(s, st) {
        for (const { c } of st.live) {
          for (const h of c.restored) {
            if (h.stage !== 'authoritative' && h.stage !== 'visible' && h.stage !== 'rejected') continue;
            const g = s.global.find((e) => e.client === c.id && e.seq === h.seq);
            if (!g) fail(`${h.id}, restored from the store, is ${h.stage} but the global log does not hold it`);
            if ((h.stage === 'rejected') !== (g.error !== undefined))
              fail(`${h.id}, restored from the store, is ${h.stage} but the global log says ${g.error ?? 'accepted'} (at ${g.pos})`);
          }
        }
      },
      end(s, timedOutMs) {
        if (timedOutMs !== undefined) return;
        for (const c of s.clients)
          for (const h of c.restored)
            if (h.stage !== 'visible' && h.stage !== 'rejected') fail(`after quiescence ${h.id}, restored from the store, is still ${h.stage}`);
      },
    }),
  },
  {
    rule: 'AUTH-STORED',
    description:
      'the server announces an entry only once it is committed (a tentative log is no announcement; a stable frontier or a Notify-Visible is one, though members ack what they were sent ahead); no client holds an entry the disk does not in its Authoritative view',
    create: (fail: Fail) => ({
      sent(s, conn, client, msg) {
        if (msg.t === 'log' && msg.tentative) {
          // LOG-TENTATIVE: not an announcement, but the confirmation it may carry is.
          if (msg.committed !== undefined && msg.committed > s.global.length)
            fail(`the server confirmed ${conn} the log up to ${msg.committed} while ${s.global.length} entries are committed`);
          return;
        }
        const last =
          msg.t === 'log'
            ? msg.from + msg.entries.length - 1
            : msg.t === 'committed' || msg.t === 'stable'
              ? msg.pos
              : msg.t === 'visible'
                ? (s.posOf.get(`${client}:${msg.seq}`) ?? Number.POSITIVE_INFINITY)
                : msg.t === 'welcome'
                  ? Math.max(msg.from - 1 + msg.entries.length, msg.checkpoint?.pos ?? 0, msg.stable)
                  : 0;
        if (last > s.global.length) fail(`the server sent ${conn} a ${msg.t} up to position ${last} while ${s.global.length} entries are committed`);
      },
      step(s, st) {
        for (const { c, p } of st.live)
          if (p.authoritative > s.global.length) fail(`${c.id} authoritative at ${p.authoritative} beyond the committed log (${s.global.length})`);
      },
    }),
  },
  {
    rule: 'LOG-TENTATIVE',
    description:
      "what a connection is sent ahead of its commit is confirmed to it only as the entries the log holds there; a tentative log never carries the receiver's own ops, and a connection is confirmed before any stored log after tentative entries",
    create: (fail: Fail) => {
      /** Per connection: the entries it was sent ahead of their commit and not yet confirmed, by position. */
      const ahead = new Map<string, Map<number, string>>();
      return {
        sent(s, conn, client, msg) {
          const confirm = (upTo: number) => {
            const held = ahead.get(conn);
            if (!held) return;
            // (AUTH-STORED checks that the log holds upTo already.) Two servers may each send ahead
            // at a position, a stale one too (it fails, fenced, and closes its members): what
            // counts is what each connection is told is stored.
            for (const [pos, id] of held) {
              if (pos > upTo) continue;
              const e = s.global[pos - 1];
              if (!e || idOf(e) !== id) fail(`the server confirmed to ${conn} ${id} at ${pos}, where the log holds ${e ? idOf(e) : 'nothing'}`);
              held.delete(pos);
            }
          };
          if (msg.t === 'log' && msg.tentative) {
            if (msg.committed !== undefined) confirm(msg.committed);
            let held = ahead.get(conn);
            if (!held) ahead.set(conn, (held = new Map()));
            for (const w of msg.entries) {
              if (w.k !== 'op' || w.e.client === client) fail(`the server sent ${conn} its own op at ${msg.from} ahead of its commit`);
              held.set(w.e.pos, idOf(w.e));
            }
            return;
          }
          const held = ahead.get(conn);
          if (!held?.size) return;
          // A stable frontier is never past what is stored: it confirms too (protocol 5, which every simulated client speaks).
          if (msg.t === 'committed' || msg.t === 'stable') return confirm(msg.pos);
          if (msg.t === 'log')
            fail(`the server sent ${conn} a stored log at ${msg.from} while its tentative entries from ${Math.min(...held.keys())} were not confirmed`);
        },
      };
    },
  },
  {
    rule: 'VIEW-PREFIX',
    description: 'Stable ⊑ Visible ⊑ Authoritative ⊑ Durable ⊑ Submitted, as lengths and as effective-op logs',
    create: (fail: Fail) => ({
      step(_s, st) {
        for (const { c, p, views, unchanged } of st.live) {
          if (!(p.stable <= p.visible && p.visible <= p.authoritative && p.authoritative <= p.durable && p.durable <= p.submitted)) {
            fail(`${c.id} positions out of order: ${JSON.stringify(p)}`);
          }
          if (!st.deep || unchanged) continue;
          for (let i = 0; i + 1 < VIEWS.length; i++) {
            const newer = views[VIEWS[i]].log,
              older = views[VIEWS[i + 1]].log;
            if (older.length > newer.length || older.some((id, j) => newer[j] !== id)) fail(`${c.id} ${VIEWS[i + 1]} is not a prefix of ${VIEWS[i]}`);
          }
        }
      },
    }),
  },
  {
    rule: 'VIEW-GLOBAL-PREFIX',
    description: 'Authoritative, Visible and Stable each equal the fold of a prefix of the global log',
    create: (fail: Fail) => ({
      step(s, st) {
        // As the client's version shows the prefix: a client restarted on new code from a base of
        // the older version shows it migrated until its welcome (docs/migrations.md). Only then
        // does the expected state differ from the oracle's; REC-MIGRATE-VIEWS, before this, fails
        // a client holding a prefix of a newer version than its own.
        for (const { c, p, views, unchanged } of st.live) {
          const ref = s.expected(p.authoritative, c.version);
          if (ref === undefined || !same(views.authoritative, ref)) fail(`${c.id} authoritative view differs from the global log prefix ${p.authoritative}`);
          if (!st.deep || unchanged) continue;
          const vis = s.expected(p.visible, c.version),
            stab = s.expected(p.stable, c.version);
          if (vis === undefined || !same(views.visible, vis)) fail(`${c.id} visible view differs from the global log prefix ${p.visible}`);
          if (stab === undefined || !same(views.stable, stab)) fail(`${c.id} stable view differs from the global log prefix ${p.stable}`);
        }
      },
    }),
  },
  {
    rule: 'VIEW-SPECULATIVE',
    description:
      "Durable and Submitted equal a naive fold of Authoritative, then the other clients' entries it holds tentatively (VIEW-TENTATIVE), then the client's own pending ops in seq order",
    create: (fail: Fail) => ({
      step(s, st) {
        if (!st.deep) return;
        for (const { c, p, views, pending, tentative, unchanged } of st.live) {
          if (unchanged) continue;
          const pend = pending.filter((o) => o.stage === 'durable' || o.stage === 'submitted');
          // (As the client's version shows Authoritative, and its machine folds its pending ops:
          // an op of an older version that it holds is translated, as the server will order it.)
          let state = s.expected(p.authoritative, c.version);
          if (state === undefined) fail(`${c.id} (v${c.version}) is at ${p.authoritative}, where the room runs a newer version`);
          const machine = ledgerAt(c.version);
          let pos = p.authoritative;
          for (const e of tentative) {
            if (e.pos !== pos + 1) fail(`${c.id} holds a tentative entry at ${e.pos} after position ${pos}`);
            if (e.error === undefined) state = applyOp(machine, state, e, e.pos).state;
            pos++;
          }
          const durCount = p.durable - pos;
          for (let i = 0; i < pend.length; i++) {
            if (i === durCount && !same(views.durable, state)) fail(`${c.id} durable view differs from the reference fold`);
            state = applyOp(machine, state, pend[i], ++pos).state;
          }
          if (durCount === pend.length && !same(views.durable, state)) fail(`${c.id} durable view differs from the reference fold`);
          if (!same(views.submitted, state)) fail(`${c.id} submitted view differs from the reference fold`);
        }
      },
    }),
  },
  {
    rule: 'VIEW-FROZEN',
    description: 'every snapshot a view hands out is frozen',
    create: (fail: Fail) => ({
      step(_s, st) {
        for (const { c, views, unchanged } of st.live) {
          if (unchanged) continue;
          for (const v of VIEWS) if (!Object.isFrozen(views[v]) || !Object.isFrozen(views[v].log)) fail(`${c.id} ${v} snapshot is not frozen`);
        }
      },
    }),
  },
  {
    rule: 'VIEW-NOTIFY',
    description: 'a subscriber sees each new snapshot once, and only the current one',
    create: (fail: Fail) => {
      // A listener's throw is caught by the room (and turned into a warning): note the first
      // violation here and fail after the event.
      let seen: string | undefined;
      return {
        clientStarted(_s, c, room) {
          for (const v of VIEWS) {
            let last: unknown = room.getState(v);
            room.subscribe(v, (state, view) => {
              if (state === last) seen ??= `${c.id} ${view} listener called twice with the same snapshot`;
              else if (state !== room.getState(view)) seen ??= `${c.id} ${view} listener got a snapshot that is not current`;
              last = state;
            });
          }
        },
        step() {
          if (seen !== undefined) fail(seen);
        },
      };
    },
  },
  {
    rule: 'VIEW-SUBMIT-NOW',
    description: 'a stub call applies its op to the Submitted view before it returns',
    create: (fail: Fail) => ({
      submitted(_s, _c, a) {
        if (a.kind !== 'op') return;
        // (withdraw may throw where it lands; boom always does: no id in the state then.)
        const log = a.after.log;
        if (a.handle.name !== 'boom' && a.handle.name !== 'withdraw' && log[log.length - 1] !== a.handle.id)
          fail(`${a.handle.id} not at the end of the Submitted view after submit`);
      },
    }),
  },
  {
    rule: 'OP-ARG-DOMAIN',
    description: 'a stub refuses arguments outside the JSON domain with bad-argument and submits nothing',
    create: (fail: Fail) => ({
      submitted(_s, c, a) {
        if (a.kind !== 'outside-domain') return;
        if (a.returned) fail(`${c.id}: the stub accepted an argument ${String(a.value)}`);
        if (!(a.threw instanceof HerculesError) || a.threw.code !== 'bad-argument') fail(`${c.id}: the stub threw ${String(a.threw)} for ${String(a.value)}`);
        if (a.after !== a.before) fail(`${c.id}: a refused stub call changed the Submitted view`);
      },
    }),
  },
  {
    rule: 'DUR-SURVIVES-RESTART',
    description: "a restarted client's Durable view holds every own op its disk ever confirmed, before it hears from anyone",
    create: (fail: Fail) => ({
      clientStarted(s, c, room) {
        const { upTo, tail } = room.engine.viewLog('durable');
        const held = new Set(tail);
        for (const id of s.durableEver) {
          if (!id.startsWith(`${c.id}:`) || held.has(id)) continue;
          const pos = s.posOf.get(id);
          if (pos === undefined || pos > upTo)
            fail(
              `${c.id} restarted without its durable op ${id} in its Durable view (base at ${upTo}${pos !== undefined ? `, the op is at ${pos}` : ', the op never reached the server'})`,
            );
        }
      },
    }),
  },
  {
    rule: 'VIS-DELIVERED',
    description: "a client's own ops in its Visible view were delivered to every other member of the visibility set",
    create: (fail: Fail) => ({
      step(s, st) {
        if (!s.serverUp) return;
        for (const { c, p } of st.live) {
          let lastOwnVisible = 0;
          for (let i = p.visible; i >= 1 && i > p.visible - 5000; i--) {
            if (s.global[i - 1].client === c.id) {
              lastOwnVisible = i;
              break;
            }
          }
          if (lastOwnVisible === 0) continue;
          for (const [mid, mconn] of st.members) {
            if (mid === c.id) continue;
            const got = s.processed.get(mconn) ?? 0;
            if (got < lastOwnVisible) fail(`${c.id}'s op at ${lastOwnVisible} is in its Visible view but member ${mid} (${mconn}) has only ${got}`);
          }
        }
      },
    }),
  },
  {
    rule: 'VIS-JOIN-GATE',
    description: 'every member holds every op any server announced visible to another client',
    create: (fail: Fail) => {
      /** Per client id: the highest position of its ops announced visible. */
      const announced = new Map<string, number>();
      return {
        sent(s, _conn, client, msg) {
          // A stable frontier announces the receiver's own ops up to it visible (VIS-BY-STABLE).
          const pos = msg.t === 'visible' ? (s.posOf.get(`${client}:${msg.seq}`) ?? 0) : msg.t === 'stable' ? msg.pos : 0;
          if (pos > (announced.get(client) ?? 0)) announced.set(client, pos);
        },
        step(s, st) {
          for (const [mid, mconn] of st.members) {
            let need = 0;
            for (const [owner, pos] of announced) if (owner !== mid && pos > need) need = pos;
            const got = s.processed.get(mconn) ?? 0;
            if (got < need) fail(`member ${mid} (${mconn}) has only ${got}, but position ${need} was announced visible`);
          }
        },
      };
    },
  },
  {
    rule: 'STABLE-RECEIVED',
    description: "every member of the visibility set has received the server's stable frontier",
    create: (fail: Fail) => ({
      step(s, st) {
        if (!s.serverUp) return;
        const stable = s.server.stableFrontier();
        for (const [mid, mconn] of st.members) {
          const got = s.processed.get(mconn) ?? 0;
          if (got < stable) fail(`stable frontier ${stable} but member ${mid} has only ${got}`);
        }
      },
    }),
  },
  {
    rule: 'STABLE-MONOTONIC',
    description: "the server's stable frontier never moves back while it runs, nor a client's Stable view",
    create: (fail: Fail) => {
      let server = 0;
      const client = new Map<ClientState, number>();
      return {
        serverStarted(_s, restore) {
          server = restore ? Math.max(restore.stable, restore.checkpoint.pos) : 0;
        },
        clientStarted(_s, c) {
          client.set(c, 0);
        },
        step(s, st) {
          if (s.serverUp) {
            const now = s.server.stableFrontier();
            if (now < server) fail(`server stable frontier moved back from ${server} to ${now}`);
            server = now;
          }
          for (const { c, p } of st.live) {
            const before = client.get(c) ?? 0;
            if (p.stable < before) fail(`${c.id} stable moved back from ${before} to ${p.stable}`);
            client.set(c, p.stable);
          }
        },
      };
    },
  },
  {
    rule: 'STABLE-BOUNDED',
    description: "no client's Stable view is ahead of a stable frontier some server announced",
    create: (fail: Fail) => {
      let announced = 0;
      return {
        sent(_s, _conn, _client, msg) {
          if (msg.t === 'stable') announced = Math.max(announced, msg.pos);
          else if (msg.t === 'welcome') announced = Math.max(announced, msg.stable, msg.checkpoint?.pos ?? 0);
        },
        step(_s, st) {
          // (A server restarted from a disk without the last acks may be behind what its clients hold.)
          for (const { c, p } of st.live) if (p.stable > announced) fail(`${c.id} stable ${p.stable} ahead of any stable frontier announced (${announced})`);
        },
      };
    },
  },
  {
    rule: 'STABLE-CHECKPOINT',
    description: "the server's checkpoint is at its stable frontier and equals the fold of the log up to it",
    create: (fail: Fail) => ({
      step(s, st) {
        if (!s.serverUp) return;
        const stable = s.server.stableFrontier();
        const ds = s.server.durableState();
        if (ds.checkpoint.pos !== stable) fail(`checkpoint at ${ds.checkpoint.pos}, stable at ${stable}`);
        // (With no members the frontier is the whole log, vacuously, stored or not yet.)
        if (st.deep && stable <= s.global.length && !same(ds.checkpoint.state as LedgerState, s.oracle[stable]))
          fail(`server checkpoint differs from the fold of the log up to ${stable}`);
      },
    }),
  },
  {
    rule: 'LOG-FIFO',
    description: 'a client never finds itself out of step with the log a connection brings it',
    create: (fail: Fail) => ({
      warned(_s, c, m) {
        if (/diverg|deterministic|out of sequence|gap|was expected|we hold|resumes at/.test(m)) fail(`client ${c.id} warned: ${m}`);
      },
      resynced(_s, c, reason) {
        fail(`client ${c.id} had to resynchronise: ${reason}`);
      },
    }),
  },
  {
    rule: 'LIVE-HONEST',
    description: 'an honest client is never refused: no error frame, no fatal error',
    create: (fail: Fail) => ({
      fatal(s, c, code, m) {
        // A client running an older version than the servers run is not honest (it must
        // use the room's machine version, docs/spec.md "Words"): its documented answer is
        // client-too-old, after which it reloads on the new code. Any other refusal fails.
        if (code === 'client-too-old' && c.version < s.serverVersion) return;
        // Nor is one whose user lost access, or whose credential expired: the run did that (SEC-ACCESS, SEC-AUTHN).
        if (s.refusedByDesign(c, code)) return;
        fail(`client ${c.id} got fatal ${code}: ${m}`);
      },
      warned(s, c, m) {
        if (s.storeMayFail && m.startsWith('server error storage-failed')) return;
        if (m.startsWith('server error')) fail(`client ${c.id} got an error frame: ${m}`);
      },
    }),
  },
  {
    rule: 'LIVE-CONVERGE',
    description: 'once faults stop, every client reaches the final state in every view and every op a verdict',
    create: (fail: Fail) => ({
      end(s, timedOutMs) {
        if (timedOutMs !== undefined) fail(`no convergence ${timedOutMs} ms after healing: ${s.describe()}`);
        if (!s.finished()) fail(`event queue drained before convergence: ${s.describe()}`);
        const final = s.oracle[s.global.length];
        for (const c of s.clients) {
          const room = c.room!;
          for (const v of VIEWS)
            if (!isDeepStrictEqual(room.getState(v), final) || !same(room.getState(v), final))
              fail(`after quiescence ${c.id}'s ${v} view differs from the final state`);
          for (const h of c.handles) if (h.stage !== 'visible' && h.stage !== 'rejected') fail(`after quiescence ${h.id} is still ${h.stage}`);
        }
      },
    }),
  },
  {
    rule: 'API-SUBMIT',
    description:
      "an op of the server's own API is ordered at most once per idempotency key: every answer for a key names one entry, the log holds it under the server's client id with the key's op and author, and nothing else of that key",
    create: (fail: Fail) => {
      const answered = new Map<string, { seq: number; position: number }>();
      // The simulation puts the key into each op's args (note: api:KEY), so the log tells the keys apart.
      const keyOf = (e: LogEntry) => (e.client === SERVER_CLIENT ? (e.args as { note?: string } | null)?.note : undefined);
      return {
        apiAnswered(s, key, args, outcome) {
          if ('error' in outcome) {
            // Refused only because the room failed before the commit (the caller retries, same key).
            if (outcome.error !== 'storage-failed') fail(`a submit under key ${key} was refused with ${outcome.error}`);
            return;
          }
          const r = outcome.result;
          const first = answered.get(key);
          if (first && (first.seq !== r.seq || first.position !== r.position))
            fail(
              `key ${key} was answered ${SERVER_CLIENT}:${r.seq} at ${r.position}, and before ${SERVER_CLIENT}:${first.seq} at ${first.position}: ordered twice`,
            );
          if (first && !r.duplicate) fail(`key ${key} was answered as a new op twice`);
          const g = s.global[r.position - 1];
          if (!g || g.client !== SERVER_CLIENT || g.seq !== r.seq || g.author !== API_AUTHOR || !isDeepStrictEqual(g.args, args))
            fail(
              `key ${key} was answered ${SERVER_CLIENT}:${r.seq} at ${r.position}; the committed log has ${g ? `${idOf(g)} by ${g.author}` : 'nothing'} there`,
            );
          answered.set(key, { seq: r.seq, position: r.position });
        },
        sequenced(s, e) {
          const key = keyOf(e);
          if (key !== undefined && s.global.some((g) => keyOf(g) === key))
            fail(`${key} was ordered twice: ${idOf(e)} at ${e.pos}, after an entry of the same key`);
        },
      };
    },
  },
  {
    rule: 'PRESENCE-EPHEMERAL',
    description:
      "presence never enters an op, the log, a store or a view; once faults stop every client shows exactly the others' latest presence, and none of a client that is gone",
    create: (fail: Fail) => {
      const MARK = 'presence:';
      return {
        clientSent(_s, c, msg) {
          if (msg.t === 'ops' && JSON.stringify(msg.ops).includes(MARK)) fail(`${c.id} sent presence inside an op`);
        },
        sequenced(_s, e) {
          if (JSON.stringify(e.args ?? null).includes(MARK)) fail(`presence entered the log at ${e.pos}`);
        },
        end(s, timedOutMs) {
          if (!s.presenceOn || timedOutMs !== undefined) return;
          if (s.serverUp && JSON.stringify(s.server.durableState()).includes(MARK)) fail('presence is in what the server stores');
          for (const c of s.clients) {
            const room = c.room!;
            for (const v of VIEWS) if (JSON.stringify(room.getState(v)).includes(MARK)) fail(`presence is in ${c.id}'s ${v} view`);
            const shown = room.presence.others();
            const want = [...s.presenceNow].filter(([id]) => id !== c.id);
            const ok = shown.length === want.length && want.every(([id, v]) => shown.some((p) => p.client === id && isDeepStrictEqual(p.value, v)));
            if (!ok) fail(`after quiescence ${c.id} shows presence ${JSON.stringify(shown)}, where the others last set ${JSON.stringify(want)}`);
          }
        },
      };
    },
  },
  {
    rule: 'DUR-DELIVERED',
    description: 'every op a client disk confirmed reaches the global log',
    create: (fail: Fail) => ({
      end(s) {
        for (const id of s.durableEver) if (!s.posOf.has(id)) fail(`durable op ${id} never reached the global log`);
      },
    }),
  },
  {
    rule: 'CLUSTER-ONE-SEQUENCER',
    description: 'cluster mode: no two nodes hold a claim of one epoch, and no two nodes announce the room under one epoch',
    create: (fail: Fail) => {
      /** Which node announced under each epoch. */
      const announcer = new Map<number, string>();
      return {
        step(s) {
          const owners = s.owners();
          for (let i = 0; i < owners.length; i++)
            for (let j = i + 1; j < owners.length; j++)
              if (owners[i].epoch === owners[j].epoch) fail(`nodes ${owners[i].node} and ${owners[j].node} both hold a claim of epoch ${owners[i].epoch}`);
        },
        announced(_s, node, epoch, msg) {
          if (msg.t !== 'log' && msg.t !== 'welcome') return;
          if (epoch === undefined) fail(`node ${node} sent a ${msg.t} while it holds no claim on the room's shard`);
          const was = announcer.get(epoch);
          if (was !== undefined && was !== node) fail(`nodes ${was} and ${node} both announced the room under epoch ${epoch}`);
          announcer.set(epoch, node);
        },
      };
    },
  },
  {
    rule: 'CLUSTER-CHAIN',
    description:
      "cluster mode: a node that loads the room under the last claim starts from the chain's head: its checkpoint is the chain's fold up to it, its suffix the chain after it",
    create: (fail: Fail) => ({
      roomLoaded(s, node, claim, lastClaim, loaded) {
        if (claim !== lastClaim) return; // another claim followed: its host fails at its first append
        const { checkpoint, suffix } = loaded.durable;
        const head = checkpoint.pos + suffix.length;
        if (head !== s.global.length) fail(`node ${node} (claim at ${claim}) loaded the room at head ${head}; the chain has ${s.global.length} entries`);
        if (!same(checkpoint.state as LedgerState, s.oracle[checkpoint.pos]))
          fail(`node ${node} loaded a checkpoint at ${checkpoint.pos} that is not the chain's fold up to it`);
        suffix.forEach((e, i) => {
          const g = s.global[checkpoint.pos + i];
          if (!g || g.client !== e.client || g.seq !== e.seq || g.pos !== e.pos)
            fail(`node ${node} loaded entry ${e.client}:${e.seq} at ${e.pos}; the chain has ${g ? `${g.client}:${g.seq}` : 'nothing'} there`);
        });
      },
    }),
  },
  // The collaborative text's (issue 38): text-checkers.ts.
  ...TEXT_CHECKERS,
  // The rich text's (issue 38): rich-checkers.ts.
  ...RICH_CHECKERS,
  ...RECEIPT_CHECKERS,
  // The ack timeout on a busy server (issue 43): vis-checkers.ts.
  ...VIS_CHECKERS,
  // The room service's (issue 36): sec-checkers.ts.
  ...SEC_CHECKERS,
];

type HookName = keyof Hooks;

/** One run's checkers, their hooks grouped by kind so each call runs only the checkers that have it. */
export class Checks {
  readonly byRule = new Map<string, Hooks>();
  private readonly hooks: { [K in HookName]: NonNullable<Hooks[K]>[] } = {
    step: [],
    sequenced: [],
    sent: [],
    clientSent: [],
    clientStarted: [],
    serverStarted: [],
    submitted: [],
    warned: [],
    resynced: [],
    fatal: [],
    end: [],
    roomLoaded: [],
    announced: [],
    apiAnswered: [],
    opened: [],
    delivered: [],
    read: [],
    roomJoined: [],
    roomInput: [],
    closed: [],
    revoked: [],
    hostileOpened: [],
  };
  private readonly memo = new Map<ClientState, unknown[]>();

  constructor(checkers: readonly Checker[] = CHECKERS) {
    for (const ck of checkers) {
      const h = ck.create((message) => {
        throw new Violation(ck.rule, message);
      });
      this.byRule.set(ck.rule, h);
      for (const k of Object.keys(this.hooks) as HookName[]) {
        const fn = h[k];
        if (fn) (this.hooks[k] as unknown[]).push(fn.bind(h));
      }
    }
  }

  step(s: SimState, deep: boolean): void {
    if (this.hooks.step.length === 0) return;
    const st = observe(s, deep, this.memo);
    for (const f of this.hooks.step) f(s, st);
  }
  sequenced(s: SimState, e: LogEntry, reference: string | undefined): void {
    for (const f of this.hooks.sequenced) f(s, e, reference);
  }
  sent(s: SimState, conn: string, client: string, msg: ServerMessage): void {
    for (const f of this.hooks.sent) f(s, conn, client, msg);
  }
  clientSent(s: SimState, c: ClientState, msg: ClientMessage, conn?: string): void {
    for (const f of this.hooks.clientSent) f(s, c, msg, conn);
  }
  clientStarted(s: SimState, c: ClientState, room: Room): void {
    for (const f of this.hooks.clientStarted) f(s, c, room);
  }
  serverStarted(s: SimState, restore: RoomDurableState | undefined): void {
    for (const f of this.hooks.serverStarted) f(s, restore);
  }
  submitted(s: SimState, c: ClientState, a: Attempt): void {
    for (const f of this.hooks.submitted) f(s, c, a);
  }
  warned(s: SimState, c: ClientState, m: string): void {
    for (const f of this.hooks.warned) f(s, c, m);
  }
  resynced(s: SimState, c: ClientState, reason: string): void {
    for (const f of this.hooks.resynced) f(s, c, reason);
  }
  fatal(s: SimState, c: ClientState, code: string, m: string): void {
    for (const f of this.hooks.fatal) f(s, c, code, m);
  }
  end(s: SimState, timedOutMs: number | undefined): void {
    for (const f of this.hooks.end) f(s, timedOutMs);
  }
  roomLoaded(s: SimState, node: string, claim: number | undefined, lastClaim: number, loaded: LoadedRoom): void {
    for (const f of this.hooks.roomLoaded) f(s, node, claim, lastClaim, loaded);
  }
  announced(s: SimState, node: string, epoch: number | undefined, msg: ServerMessage): void {
    for (const f of this.hooks.announced) f(s, node, epoch, msg);
  }
  apiAnswered(s: SimState, key: string, args: unknown, outcome: ApiOutcome): void {
    for (const f of this.hooks.apiAnswered) f(s, key, args, outcome);
  }
  opened(s: SimState, conn: string, cred: Credential | undefined): void {
    for (const f of this.hooks.opened) f(s, conn, cred);
  }
  delivered(s: SimState, conn: string, msg: ClientMessage): void {
    for (const f of this.hooks.delivered) f(s, conn, msg);
  }
  read(s: SimState, conn: string, msg: ClientMessage): void {
    for (const f of this.hooks.read) f(s, conn, msg);
  }
  roomJoined(s: SimState, conn: string, user: string | undefined): void {
    for (const f of this.hooks.roomJoined) f(s, conn, user);
  }
  roomInput(s: SimState, conn: string, frame: unknown): void {
    for (const f of this.hooks.roomInput) f(s, conn, frame);
  }
  closed(s: SimState, conn: string, by: ClosedBy, error?: { code: string; fatal: boolean }): void {
    for (const f of this.hooks.closed) f(s, conn, by, error);
  }
  revoked(s: SimState, user: string, cut: number): void {
    for (const f of this.hooks.revoked) f(s, user, cut);
  }
  hostileOpened(s: SimState, conn: string, kind: string, expect: readonly string[]): void {
    for (const f of this.hooks.hostileOpened) f(s, conn, kind, expect);
  }
}
