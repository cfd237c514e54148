/**
 * Replaying a concurrent editing trace (Joseph Gentle's `editing-traces`, CC BY 4.0; the
 * `friendsforever` trace by Joseph Gentle) by its agents as Hercules clients through a server:
 * issue 38, item 4 (d). Used by text-trace.test.ts (`npm run test:text-trace`).
 *
 * Each transaction's positions are relative to the document after its `parents` (all the
 * transactions they descend from, merged). Its agent's client turns them into anchors against
 * exactly that version, as the agent's editor would have seen it, and submits the ops
 * (`textInsert`/`textDelete`, `room.submit`) while the other agent's ops are in flight: the server
 * orders them as they come. The version is a reference text per agent (`ref`), holding exactly
 * the transactions its agent has seen, built with the ops already submitted; before a
 * transaction that depends on the other agent's, its client waits until it has received them
 * (its Authoritative log reaches their position), as a real editor could not have typed it sooner.
 */
import { gunzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { applyOp, createText, defineMachine, deleteArgs, insertArgs, textOps, type OpHandle, type Text } from '@hercules/core';

export type Patch = readonly [pos: number, del: number, ins: string];
export interface ConcurrentTrace {
  kind: 'concurrent';
  endContent: string;
  numAgents: number;
  txns: { parents: number[]; agent: number; patches: Patch[] }[];
}

export const textTraceMachine = defineMachine({ name: 'text-trace', version: 1, initial: { doc: createText() }, ops: { ...textOps() } });

export function readConcurrentTrace(file: string): ConcurrentTrace {
  const t = JSON.parse(gunzipSync(readFileSync(file)).toString('utf8')) as ConcurrentTrace;
  if (t.kind !== 'concurrent') throw new Error(`${file} is not a concurrent trace`);
  if (/[\u{10000}-\u{10FFFF}]/u.test(JSON.stringify(t))) throw new Error(`${file} has characters outside the BMP; convert its positions first`);
  return t;
}

/** What an agent's client is to the replay: a room's id, submit and positions. */
export interface AgentRoom {
  readonly clientId: string;
  submit(name: string, args?: unknown): OpHandle;
  positions(): Readonly<Record<string, number>>;
  onProgress(listener: (p: Readonly<Record<string, number>>) => void): () => void;
}

type Op = { name: string; args: unknown };
type State = { doc: Text };

/** One agent's view: the transactions it has seen, applied in trace order to `state`. */
class AgentView {
  state: State = textTraceMachine.initial;
  readonly seen = new Set<number>();
  last = -1;
  /** The lowest clock its next insert may take: its ids never repeat, whatever `ref` holds. */
  clock = 0;
  private seq = 0;
  constructor(readonly room: AgentRoom) {}

  apply(op: Op, client: string): void {
    this.seq++;
    const e = { client, seq: this.seq, author: client, name: op.name, args: op.args };
    const r = applyOp(textTraceMachine, this.state, e, this.seq);
    if (r.error) throw new Error(`replay: ${op.name} failed on an agent’s reference text: ${r.error}`);
    this.state = r.state as State;
  }
}

/**
 * The transactions of `parents`' history this view lacks, in trace order. Throws unless the view
 * is part of that history (its agent's previous transaction is in it): else the positions would
 * be relative to a version the view cannot be brought to by adding.
 */
function missing(trace: ConcurrentTrace, view: AgentView, parents: readonly number[]): number[] {
  const out: number[] = [];
  const stack = [...parents];
  const visited = new Set<number>();
  let sawLast = view.last < 0;
  while (stack.length > 0) {
    const i = stack.pop()!;
    if (visited.has(i)) continue;
    visited.add(i);
    if (view.seen.has(i)) {
      if (i === view.last) sawLast = true;
      continue;
    }
    out.push(i);
    stack.push(...trace.txns[i].parents);
  }
  if (!sawLast) throw new Error(`replay: a transaction's parents do not descend from its agent's previous one (${view.last})`);
  return out.sort((a, b) => a - b);
}

/** The ops of one transaction against `view`'s text, applied to it as they are made (a patch's positions follow the previous patch's). */
function txnOps(view: AgentView, patches: readonly Patch[]): Op[] {
  const ops: Op[] = [];
  const id = view.room.clientId;
  const add = (op: Op) => {
    view.apply(op, id);
    ops.push(op);
  };
  for (const [pos, del, ins] of patches) {
    if (del > 0) add({ name: 'textDelete', args: deleteArgs(view.state.doc, 'doc', pos, del) });
    if (ins.length > 0) {
      const args = insertArgs(view.state.doc, 'doc', id, pos, ins, view.clock);
      view.clock = args.k + ins.length;
      add({ name: 'textInsert', args });
    }
  }
  return ops;
}

/** Resolves once `room` has received the log up to `pos` (its Authoritative view reaches it). */
function received(room: AgentRoom, pos: number): Promise<void> {
  if (room.positions().authoritative >= pos) return Promise.resolve();
  return new Promise((resolve) => {
    const off = room.onProgress((p) => {
      if (p.authoritative >= pos) {
        off();
        resolve();
      }
    });
  });
}

export interface ReplayStats {
  txns: number;
  ops: number;
  /** Transactions that had to wait for the other agent's ops to arrive first. */
  waits: number;
}

/**
 * Replay `trace` by `rooms[agent]`: resolves once every op is submitted and Authoritative at its
 * author. The caller then reads each room's text.
 */
export async function replayConcurrent(trace: ConcurrentTrace, rooms: readonly AgentRoom[]): Promise<ReplayStats> {
  if (rooms.length !== trace.numAgents) throw new Error(`replay: ${trace.numAgents} agents, ${rooms.length} rooms`);
  const views = rooms.map((r) => new AgentView(r));
  const opsOf: Op[][] = [];
  const handles: OpHandle[][] = [];
  const stats: ReplayStats = { txns: trace.txns.length, ops: 0, waits: 0 };
  for (let i = 0; i < trace.txns.length; i++) {
    const { agent, parents, patches } = trace.txns[i];
    const view = views[agent];
    const add = missing(trace, view, parents);
    const remote = add.filter((j) => trace.txns[j].agent !== agent);
    if (remote.length > 0) {
      stats.waits++;
      const hs = remote.flatMap((j) => handles[j]);
      const positions = await Promise.all(hs.map((h) => h.authoritative.then(() => h.position!)));
      await received(view.room, Math.max(0, ...positions));
    }
    for (const j of add) for (const op of opsOf[j]) view.apply(op, rooms[trace.txns[j].agent].clientId);
    for (const j of add) view.seen.add(j);
    opsOf[i] = txnOps(view, patches);
    view.seen.add(i);
    view.last = i;
    handles[i] = opsOf[i].map((op) => view.room.submit(op.name, op.args));
    stats.ops += opsOf[i].length;
  }
  await Promise.all(handles.flat().map((h) => h.authoritative));
  return stats;
}
