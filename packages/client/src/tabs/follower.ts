/**
 * A follower tab's copy of the shared client (tabs.ts): the leader's views as it last sent them,
 * and this tab's own requests. The Submitted view is the leader's with this tab's requests the
 * leader has not yet reflected applied on top, here, so a submit shows in this tab at once
 * (without a round trip to the leader). A request is resent to each new leader until it is known
 * durable; the leader keeps it once (leader.ts).
 */
import {
  HerculesError,
  applyOp,
  deepFreeze,
  TEXT_DELETE,
  TEXT_INSERT,
  VIEWS,
  type Machine,
  type PeerPresence,
  type ViewName,
  type ViewPositions,
} from '@hercules/core';
import type { ConnectionStatus } from '../transport.ts';
import type { FollowerMessage, LeaderMessage, ViewsMessage } from './messages.ts';
import { OthersOfTab } from './presence.ts';
import { TabHandle } from './tab-handle.ts';

export class FollowerMirror {
  leader: string | undefined;
  clientId = '';
  status: ConnectionStatus = 'connecting';
  access: 'read' | 'write' = 'write';
  failure: HerculesError | undefined;
  members: readonly string[] = [];
  others: readonly PeerPresence<unknown>[] = [];
  readonly ready: Promise<void>;
  #isReady!: () => void;
  #states: Partial<Record<ViewName, unknown>> = {};
  #positions: ViewPositions = { submitted: 0, durable: 0, authoritative: 0, visible: 0, stable: 0 };
  /** This tab's requests not settled yet, in request order. */
  #own: TabHandle[] = [];
  #reflected = 0;
  #nextReq = 0;
  #submitted: { state: unknown; positions: ViewPositions; failed: number[] } | undefined;
  /** Told each of this tab's requests the leader rejected (set by the TabRoom: its onRejected). */
  rejected: (h: TabHandle) => void = () => {};
  /** Told a leader announced itself (set by the TabRoom: it sends this tab's presence again). */
  leaderChanged: () => void = () => {};
  readonly #others = new OthersOfTab();

  constructor(
    readonly machine: Machine<any, any>,
    readonly tab: string,
    readonly send: (m: FollowerMessage) => void,
    /** Views that changed (none: the connection, members or presence). */
    readonly changed: (views: readonly ViewName[]) => void,
  ) {
    this.ready = new Promise((res) => {
      this.#isReady = res;
    });
  }

  state(view: ViewName): unknown {
    if (view === 'submitted') return this.#withOwn().state;
    return this.#states[view] ?? this.machine.initial;
  }

  positions(): ViewPositions {
    return this.#withOwn().positions;
  }

  pending(): TabHandle[] {
    return [...this.#own];
  }

  submit(name: string, args: unknown): TabHandle {
    if (!this.machine.opNames.has(name))
      throw new HerculesError('unknown-op', `unknown op ${JSON.stringify(name)}; the machine has ${[...this.machine.opNames].join(', ')}`);
    const invalid = this.machine.validate(name, args);
    if (invalid !== undefined) throw new HerculesError('bad-argument', `${name}: ${invalid}`);
    const h = new TabHandle(
      ++this.#nextReq,
      name,
      args,
      () => this.clientId,
      () => performance.now(),
    );
    h.seen = this.#reflected;
    // Only text ops name characters by clock; the view they were made on is cached (the handle read it).
    const failed = name === TEXT_INSERT || name === TEXT_DELETE ? this.#withOwn().failed : [];
    if (failed.length) h.failed = failed;
    this.#own.push(h);
    this.#submitted = undefined;
    // To the leader first, then this tab's listeners: its delivery waits for nothing here.
    if (this.leader)
      this.send({ t: 'submit', to: this.leader, tab: this.tab, reqs: [{ req: h.req, name, args, seen: h.seen, ...(h.failed ? { failed: h.failed } : {}) }] });
    this.changed(['submitted']);
    return h;
  }

  /** The requests not known durable: what a new leader is sent. */
  unconfirmed() {
    return this.#own
      .filter((h) => h.times.durable === undefined)
      .map((h) => ({ req: h.req, name: h.name, args: h.args, seen: h.seen, ...(h.failed ? { failed: h.failed } : {}) }));
  }

  handle(m: LeaderMessage): void {
    if (m.t === 'leader') {
      this.leader = m.leader;
      this.#resend();
      return this.leaderChanged();
    }
    if (m.t === 'views') return this.#views(m);
    if (m.tab !== this.tab) return;
    const h = this.#own.find((o) => o.req === m.req);
    if (!h) return;
    const before = h.stage;
    h.moved(m);
    if (h.settled) this.#own = this.#own.filter((o) => o !== h);
    if (h.stage === 'rejected' && before !== 'rejected') {
      this.#submitted = undefined;
      this.changed(['submitted']);
      this.rejected(h);
    }
  }

  #resend(): void {
    const reqs = this.unconfirmed();
    if (this.leader && reqs.length) this.send({ t: 'submit', to: this.leader, tab: this.tab, reqs });
  }

  #views(m: ViewsMessage): void {
    if (!m.full && m.leader !== this.leader) return; // a late frame of a leader that is gone
    if (m.full) this.leader = m.leader;
    this.clientId = m.clientId;
    const views = Object.keys(m.states) as ViewName[];
    for (const v of views) this.#states[v] = deepFreeze(m.states[v]);
    this.#positions = m.positions;
    this.members = m.members;
    this.others = this.#others.of(m.others, m.clientId, m.tabs, this.tab);
    this.status = m.status;
    if (m.failure) this.failure = new HerculesError(m.failure.code, m.failure.message);
    this.access = m.access;
    this.#reflected = m.reflected[this.tab] ?? 0;
    this.#submitted = undefined;
    this.changed(m.full ? VIEWS : views.includes('submitted') ? views : [...views, 'submitted']);
    if (m.full) this.#isReady();
  }

  /** The leader's Submitted view and positions, with this tab's unreflected requests applied. */
  #withOwn(): { state: unknown; positions: ViewPositions; failed: number[] } {
    if (this.#submitted) return this.#submitted;
    let state = this.#states.submitted ?? this.machine.initial;
    let n = 0;
    const failed: number[] = [];
    for (const h of this.#own) {
      if (h.req <= this.#reflected || h.stage === 'rejected') continue;
      const op = { client: this.clientId, seq: 0, name: h.name, args: h.args, author: this.clientId };
      const r = applyOp(this.machine, state, op, this.#positions.submitted + n);
      // A text insert whose clock the leader's view took (text-clocks.ts) fails here until it comes back moved.
      if (r.error !== undefined) failed.push(h.req);
      state = r.state;
      n++;
    }
    const positions = n ? { ...this.#positions, submitted: this.#positions.submitted + n } : this.#positions;
    this.#submitted = { state, positions, failed };
    return this.#submitted;
  }
}
