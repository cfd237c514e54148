/**
 * What the tabs of one shared client say to each other over their BroadcastChannel (tabs.ts).
 * The leader tab holds the connection and the store; a follower tab submits through it and
 * mirrors its views. Every message names its sender; a follower's requests are numbered per
 * tab from 1, in submission order, and that (tab, req) pair is the request's idempotency token.
 */
import type { ErrorCode, PeerPresence, Stage, ViewName, ViewPositions } from '@hercules/core';
import type { ConnectionStatus } from '../transport.ts';

/** One op a follower asks the leader to submit. */
export interface TabRequest {
  req: number;
  name: string;
  args: unknown;
  /** The tab's highest request its view reflected when it made this one (text-clocks.ts). */
  seen?: number;
  /** Its tab's requests above `seen` that failed to run in that view: their characters were not in it. */
  failed?: number[];
}

/** A follower's request moved on: its seq once submitted, then each stage; 'stable' last. */
export interface StageMessage {
  t: 'stage';
  tab: string;
  req: number;
  seq: number;
  stage: Stage | 'stable';
  error?: string;
  refused?: boolean;
  position?: number;
}

/** The leader's views and connection, sent whole on `full`, else only the views that changed. */
export interface ViewsMessage {
  t: 'views';
  leader: string;
  full: boolean;
  clientId: string;
  states: Partial<Record<ViewName, unknown>>;
  positions: ViewPositions;
  /** Per tab, the highest request submitted to the leader's room (so inside its Submitted view). */
  reflected: Record<string, number>;
  members: readonly string[];
  /** The server's peers (other clients, or their tabs). */
  others: readonly PeerPresence<unknown>[];
  /** Each tab's own presence, by tab id (presence.ts): a tab shows its siblings' as peers. */
  tabs: Readonly<Record<string, unknown>>;
  status: ConnectionStatus;
  /** Why the connection stopped for good (status 'failed'). */
  failure?: { code: ErrorCode; message: string };
  access: 'read' | 'write';
}

export type LeaderMessage =
  /** A leader is ready: followers (re)send every request it has not confirmed durable. */
  { t: 'leader'; leader: string } | ViewsMessage | StageMessage;

export type FollowerMessage =
  /** A new tab: the leader answers with `leader` and a full `views`. */
  | { t: 'join'; tab: string }
  | { t: 'submit'; to: string; tab: string; reqs: TabRequest[] }
  /** This tab's presence (null: cleared, or the tab closes): the leader sets it under the tab's id (presence.ts). */
  | { t: 'presence'; to: string; tab: string; value: unknown };

export type TabMessage = LeaderMessage | FollowerMessage;

/** The part of BroadcastChannel used (Node 18+ and browsers have it; tests may pass another). */
export interface ChannelLike {
  postMessage(message: unknown): void;
  onmessage: ((ev: { data: unknown }) => void) | null;
  close(): void;
}
