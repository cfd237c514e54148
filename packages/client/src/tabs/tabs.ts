/**
 * One client per browser profile and room (docs/tabs.md): the tabs of an origin that open the
 * same room elect a leader with a Web Lock; the leader is a normal connect()ed client (one
 * WebSocket, one IndexedDB store, one client id) and the others submit through it and mirror its
 * views over a BroadcastChannel. When the leader tab closes or crashes the browser releases its
 * lock, the next tab in the lock's queue opens the same store (so the same client id and ops,
 * as a restart would) and the followers resend what it may lack.
 *
 * Exactly once across a handover: the leader writes each follower op with its (tab, request)
 * tag in the op's own store write (storage.ts, OpTag), and sends an op only once it is durable
 * (sendAhead off), so the server never has an op the store lacks. The next leader then knows
 * from the store alone which requests it holds; it submits only the others (leader.ts).
 */
import { HerculesError, type Machine } from '@hercules/core';
import { connect, type ConnectOptions } from '../connect.ts';
import { indexedDbStorage, type StoreLocks } from '../indexeddb-storage.ts';
import type { ConnectedRoom } from '../room.ts';
import type { ClientStorage, OpTag, StoredClient } from '../storage.ts';
import { FollowerMirror } from './follower.ts';
import { LeaderService } from './leader.ts';
import type { ChannelLike, FollowerMessage, LeaderMessage, TabMessage } from './messages.ts';
import { TabRoom } from './tab-room.ts';

export interface ConnectTabsOptions<M extends Machine<any, any>> extends Omit<ConnectOptions<M>, 'storage' | 'transport' | 'sendAhead'> {
  /** What the tabs share one client for. Default `<machine name>/<room>`. */
  key?: string;
  /**
   * The store the leader opens (each leader in turn opens it again). It must keep op tags
   * (`keepsTags`). Default: indexedDbStorage(`hercules-tabs-<key>`).
   */
  storage?: () => ClientStorage;
  /** Default navigator.locks. */
  locks?: StoreLocks;
  /** Default `new BroadcastChannel(name)`. */
  channel?: (name: string) => ChannelLike;
}

const newTabId = () => globalThis.crypto.randomUUID();
/** The Web Lock each tab holds while it is open (a leader waits on it to see the tab go). */
const tabLockName = (key: string, tab: string) => `hercules-tab:${key}:${tab}`;
/** How long a tab that failed to open the store waits before it lets the next tab try. */
const RETRY_MS = 1000;

/**
 * Connect this tab to the room's shared client: it leads (holds the connection and the store)
 * or follows the tab that does. Resolves once the views are there: at once as the leader, or at
 * the leader's first answer.
 */
export async function connectTabs<M extends Machine<any, any>>(opts: ConnectTabsOptions<M>): Promise<ConnectedRoom<M>> {
  const g = globalThis as { navigator?: { locks?: StoreLocks }; BroadcastChannel?: new (name: string) => ChannelLike };
  const locks = opts.locks ?? g.navigator?.locks;
  const Channel = g.BroadcastChannel;
  if (!locks || (!opts.channel && !Channel))
    throw new HerculesError(
      'bad-argument',
      'connectTabs needs Web Locks and BroadcastChannel (a browser, or pass `locks` and `channel`); use connect() elsewhere',
    );
  const key = opts.key ?? `${opts.machine.name}/${opts.room}`;
  const tabs = new SharedTab(opts, key, locks, opts.channel ?? ((name) => new Channel!(name)));
  return tabs.start();
}

class SharedTab<M extends Machine<any, any>> {
  readonly tab = newTabId();
  readonly #opts: ConnectTabsOptions<M>;
  readonly #key: string;
  readonly #locks: StoreLocks;
  readonly #channel: ChannelLike;
  readonly #mirror: FollowerMirror;
  readonly #room: TabRoom<M>;
  readonly #stop = new AbortController();
  #leader: LeaderService | undefined;
  #local: ConnectedRoom<M> | undefined;
  #led!: () => void;
  readonly #leading = new Promise<void>((res) => {
    this.#led = res;
  });
  #release: () => void = () => {};
  #releaseTab: () => void = () => {};
  #closing: Promise<void> | undefined;

  constructor(opts: ConnectTabsOptions<M>, key: string, locks: StoreLocks, channel: (name: string) => ChannelLike) {
    this.#opts = opts;
    this.#key = key;
    this.#locks = locks;
    this.#channel = channel(`hercules-tabs:${key}`);
    this.#mirror = new FollowerMirror(
      opts.machine,
      this.tab,
      (m) => this.#channel.postMessage(m),
      (views) => this.#room.changed(views),
    );
    this.#room = new TabRoom(opts.room, this.#mirror, () => this.close());
  }

  async start(): Promise<ConnectedRoom<M>> {
    await this.#holdTabLock();
    this.#channel.onmessage = (ev) => this.#received(ev.data as TabMessage);
    void this.#elect();
    this.#channel.postMessage({ t: 'join', tab: this.tab } satisfies FollowerMessage);
    await Promise.race([this.#mirror.ready, this.#leading]);
    return this.#room;
  }

  #received(m: TabMessage): void {
    if (this.#closing) return;
    if (this.#leader) {
      if (m.t === 'join' || m.t === 'submit' || m.t === 'presence') this.#leader.handle(m);
      return;
    }
    if (m.t !== 'join' && m.t !== 'submit' && m.t !== 'presence') this.#mirror.handle(m);
  }

  /**
   * Hold this tab's own Web Lock until it closes: the browser frees it when the tab closes or
   * crashes, which is how a leader knows to clear the tab's presence (#watchTab).
   */
  #holdTabLock(): Promise<void> {
    return new Promise<void>((held) => {
      const hold = () => {
        held();
        return new Promise<void>((res) => {
          this.#releaseTab = res;
        });
      };
      this.#locks.request(tabLockName(this.#key, this.tab), {}, hold).catch(() => held());
    });
  }

  /** As the leader: call `gone` once tab `tab` has closed (its lock is free), unless this tab closes first. */
  async #watchTab(tab: string, gone: () => void): Promise<void> {
    try {
      await this.#locks.request(tabLockName(this.#key, tab), { signal: this.#stop.signal }, () => {
        if (!this.#closing) gone();
      });
    } catch {
      // This tab closed first (aborted): its successor watches the tab again when it sets presence.
    }
  }

  /** Queue for the leader lock; hold it, once granted, until this tab closes. */
  async #elect(): Promise<void> {
    while (!this.#closing) {
      try {
        await this.#locks.request(`hercules-leader:${this.#key}`, { signal: this.#stop.signal }, async () => {
          if (this.#closing) return;
          await this.#lead();
          await new Promise<void>((res) => {
            this.#release = res;
          });
        });
      } catch (e) {
        if (this.#closing) return;
        this.#opts.onError?.(e instanceof Error ? e : new Error(String(e)));
        await new Promise((res) => setTimeout(res, RETRY_MS));
      }
    }
  }

  /** Open the store and the connection, then serve the other tabs (and this one's earlier requests). */
  async #lead(): Promise<void> {
    const tagsBySeq = new Map<number, OpTag>();
    let loaded: StoredClient | undefined;
    const storage = tagging(this.#opts.storage?.() ?? indexedDbStorage(`hercules-tabs-${this.#key.replace(/[^A-Za-z0-9._~-]/g, '_')}`), tagsBySeq, (s) => {
      loaded ??= s;
    });
    if (!storage.keepsTags)
      throw new HerculesError('bad-argument', 'connectTabs: the storage must keep op tags (keepsTags), as indexedDbStorage and memoryStorage do');
    const { key: _key, storage: _s, locks: _l, channel: _c, ...rest } = this.#opts;
    const local = await connect({ ...rest, storage, sendAhead: false });
    if (this.#closing) return void (await local.close());
    const post = (m: LeaderMessage) => {
      this.#channel.postMessage(m);
      if (m.t === 'stage' && m.tab === this.tab) this.#mirror.handle(m);
      else if (m.t === 'views') this.#room.othersChanged();
    };
    this.#local = local;
    const watch = (tab: string, gone: () => void) => void this.#watchTab(tab, gone);
    const warn = (e: unknown) => this.#opts.onError?.(e instanceof Error ? e : new Error(String(e)));
    this.#leader = new LeaderService(local, { tab: this.tab, post, loaded, tagsBySeq, watch, warn });
    this.#room.lead(local, this.#leader);
    this.#leader.submit(this.tab, this.#mirror.unconfirmed());
    this.#leader.announce();
    this.#led();
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    const leader = this.#mirror.leader;
    // This tab's presence goes at once (the leader also sees its lock freed: #watchTab).
    if (!this.#local && leader) this.#channel.postMessage({ t: 'presence', to: leader, tab: this.tab, value: null } satisfies FollowerMessage);
    // A follower's ops are the leader's to keep once durable: wait for that, briefly.
    if (!this.#local) await Promise.race([this.#room.flushed(), new Promise((res) => setTimeout(res, 2000))]);
    this.#leader?.close();
    await this.#local?.close();
    this.#stop.abort();
    this.#release();
    this.#releaseTab();
    this.#channel.close();
  }
}

/**
 * The leader's store: each op submitted for a tab is written with its tag; what the store held
 * when opened is handed to `onLoad`.
 */
function tagging(inner: ClientStorage, tagsBySeq: Map<number, OpTag>, onLoad: (s: StoredClient) => void): ClientStorage {
  return {
    ...inner,
    async load(room) {
      const s = await inner.load(room);
      if (s) onLoad(s);
      return s;
    },
    async append(room, ops) {
      const tags = ops.flatMap((o) => tagsBySeq.get(o.seq) ?? []);
      await inner.append(room, ops, tags);
      for (const t of tags) tagsBySeq.delete(t.seq);
    },
  };
}
