/**
 * The leader tab's side of a shared client (tabs.ts): it submits the followers' requests to its
 * own room, once each, and tells them their ops' stages and its views. A request is submitted
 * only if it is the next of its tab: `next` starts from the store's marks (the highest request of
 * each tab written with an op), so a request the previous leader had already made durable is
 * never submitted again, and one it had not is submitted now (exactly once across a handover).
 */
import { VIEWS, type ErrorCode, type HerculesError, type OpHandle, type ViewName } from '@hercules/core';
import type { ConnectedRoom } from '../room.ts';
import type { OpTag, StoredClient } from '../storage.ts';
import type { FollowerMessage, LeaderMessage, StageMessage, TabRequest } from './messages.ts';
import type { TabPresences } from './presence.ts';
import { TextClocks } from './text-clocks.ts';

export interface LeaderOptions {
  /** This tab's id. */
  tab: string;
  post(m: LeaderMessage): void;
  /** What the store held when this leader opened it. */
  loaded: Pick<StoredClient, 'marks' | 'tags'> | undefined;
  /** Filled here, read by the tagging store: the (tab, req) of each op submitted for a tab, by seq. */
  tagsBySeq: Map<number, OpTag>;
  /** Call `gone` once tab `tab` has closed or crashed (its Web Lock is free: tabs.ts). */
  watch(tab: string, gone: () => void): void;
  /** A follower's presence the connection refused (e.g. more tabs than MAX_PRESENCE_KEYS). */
  warn(e: unknown): void;
}

/**
 * What the leader does with request `req` of a tab whose highest submitted request is `top`:
 * one already submitted is only answered; a later one is submitted. A tab's requests reach a
 * leader in order (a BroadcastChannel keeps each sender's order, a tab sends to a new leader only
 * after its announcement, and then first all it has not heard are durable), so a later one is
 * never followed by an earlier one. A later one need not be the next: a request the leader
 * refused before submitting it (an op its machine lacks, after a deploy) leaves a hole that no
 * store write closes. The simulator's model of the handover (packages/sim/src/tabs.ts) runs
 * this same function.
 */
export function admit(top: number, req: number): 'repeat' | 'submit' {
  return req <= top ? 'repeat' : 'submit';
}

export class LeaderService {
  readonly #room: ConnectedRoom<any>;
  readonly #o: LeaderOptions;
  readonly #next = new Map<string, number>();
  /** Requests whose handles are not settled yet, by `${tab}/${req}`. */
  readonly #live = new Map<string, OpHandle>();
  readonly #dirty = new Set<ViewName>();
  readonly #clocks = new TextClocks();
  #scheduled = false;
  #failure: { code: ErrorCode; message: string } | undefined;
  readonly #offs: (() => void)[] = [];
  /** Each tab's own presence (presence.ts), a new object on each change; the tabs watched for closing. */
  #tabs: TabPresences = {};
  readonly #watched = new Set<string>();
  #closed = false;

  constructor(room: ConnectedRoom<any>, o: LeaderOptions) {
    this.#room = room;
    this.#o = o;
    for (const [tab, req] of Object.entries(o.loaded?.marks ?? {})) this.#next.set(tab, req);
    const bySeq = new Map(room.pending().map((h) => [h.seq, h]));
    for (const tag of o.loaded?.tags ?? []) {
      const h = bySeq.get(tag.seq);
      if (h) this.#watch(tag.tab, tag.req, h);
    }
    for (const v of VIEWS) this.#offs.push(room.subscribe(v, () => this.#changed(v)));
    this.#offs.push(room.onStatus(() => this.#changed()));
    this.#offs.push(room.onMembers(() => this.#changed()));
    this.#offs.push(room.presence.subscribe(() => this.#changed()));
    this.#offs.push(room.onProgress(() => this.#changed()));
    room.whenOnline().catch((e: HerculesError) => {
      if (e?.code === 'closed') return;
      this.#failure = { code: e?.code ?? 'internal', message: e?.message ?? String(e) };
      this.#changed();
    });
  }

  /** Say this leader is ready, with its whole views. */
  announce(): void {
    this.#o.post({ t: 'leader', leader: this.#o.tab });
    this.#postViews(true);
  }

  handle(m: FollowerMessage): void {
    if (m.t === 'join') return this.announce();
    if (m.to !== this.#o.tab) return; // to a leader that is gone: resent on this one's announce
    if (m.t === 'presence') {
      try {
        this.setTabPresence(m.tab, m.value);
      } catch (e) {
        this.#o.warn(e);
      }
      return;
    }
    this.submit(m.tab, m.reqs);
  }

  /**
   * Show tab `tab`'s own presence on the connection, under the tab's id (protocol 8), and tell
   * the tabs; null clears it, as the tab's closing does (watched by its Web Lock). Throws as
   * presence.set for a value the connection refuses, changing nothing.
   */
  setTabPresence(tab: string, value: unknown): void {
    if (this.#closed) return;
    const clear = value === null || value === undefined;
    if (clear && !(tab in this.#tabs)) return;
    this.#room.setPresenceOf(tab, clear ? null : (value as never));
    const { [tab]: _old, ...rest } = this.#tabs;
    this.#tabs = clear ? rest : { ...rest, [tab]: value };
    if (tab !== this.#o.tab && !this.#watched.has(tab)) {
      this.#watched.add(tab);
      this.#o.watch(tab, () => {
        this.#watched.delete(tab);
        this.setTabPresence(tab, null);
      });
    }
    this.#changed();
  }

  /** The tabs' own presence values, by tab id (the same object until one changes). */
  tabPresence(): TabPresences {
    return this.#tabs;
  }

  /** Submit each request that is the next of its tab; repeat the stage of one already submitted. */
  submit(tab: string, reqs: readonly TabRequest[]): void {
    for (const r of reqs) {
      if (admit(this.#next.get(tab) ?? 0, r.req) === 'repeat') {
        this.#repeat(tab, r.req);
        continue;
      }
      this.#next.set(tab, r.req);
      let h: OpHandle;
      try {
        h = this.#room.submit(r.name, this.#textArgs(tab, r));
      } catch (e) {
        this.#stage({ t: 'stage', tab, req: r.req, seq: 0, stage: 'rejected', error: (e as Error)?.message ?? String(e), refused: true });
        continue;
      }
      this.#o.tagsBySeq.set(h.seq, { seq: h.seq, tab, req: r.req });
      this.#watch(tab, r.req, h);
    }
    this.#changed('submitted');
  }

  /** A tab's text op, its clocks moved past those other tabs took meanwhile (text-clocks.ts). */
  #textArgs(tab: string, r: TabRequest): unknown {
    const room = this.#room;
    return this.#clocks.rewrite(tab, r, () => room.getState('submitted'), room.clientId, room.textClockFloor());
  }

  close(): void {
    this.#closed = true;
    for (const off of this.#offs.splice(0)) off();
  }

  #repeat(tab: string, req: number): void {
    const h = this.#live.get(`${tab}/${req}`);
    // Not live: confirmed by the server and inside the store's base since (or rejected, which
    // the follower was told when it happened).
    if (!h) return this.#stage({ t: 'stage', tab, req, seq: 0, stage: 'stable' });
    this.#stage({ t: 'stage', tab, req, seq: h.seq, stage: h.stage, ...(h.position !== undefined ? { position: h.position } : {}) });
  }

  #watch(tab: string, req: number, h: OpHandle): void {
    const key = `${tab}/${req}`;
    this.#live.set(key, h);
    const say = (stage: StageMessage['stage']) => () =>
      this.#stage({ t: 'stage', tab, req, seq: h.seq, stage, ...(h.position !== undefined ? { position: h.position } : {}) });
    say(h.stage)();
    h.durable.then(say('durable'), () => {});
    h.authoritative.then(say('authoritative'), () => {
      this.#live.delete(key);
      this.#stage({ t: 'stage', tab, req, seq: h.seq, stage: 'rejected', error: h.error ?? 'rejected', refused: h.refused ?? false });
    });
    h.visible.then(say('visible'), () => {});
    h.stable.then(
      () => {
        this.#live.delete(key);
        say('stable')();
      },
      () => {},
    );
  }

  #stage(m: StageMessage): void {
    this.#o.post(m);
  }

  #changed(view?: ViewName): void {
    if (view) this.#dirty.add(view);
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#postViews(false);
    });
  }

  #postViews(full: boolean): void {
    const room = this.#room;
    const views = full ? VIEWS : [...this.#dirty];
    this.#dirty.clear();
    this.#o.post({
      t: 'views',
      leader: this.#o.tab,
      full,
      clientId: room.clientId,
      states: Object.fromEntries(views.map((v) => [v, room.getState(v)])),
      positions: room.positions(),
      reflected: Object.fromEntries(this.#next),
      members: room.members(),
      others: room.presence.others(),
      tabs: this.#tabs,
      status: room.status(),
      ...(this.#failure ? { failure: this.#failure } : {}),
      access: room.access(),
    });
  }
}
