/**
 * The relay between nodes, over core NATS: a client connected to node E for a room whose shard
 * node O owns is served by O's room service through a `Connection` that carries its frames over
 * NATS. Frames are the client's own (the wire protocol is unchanged); E only forwards bytes.
 *
 *   <p>.relay.<O>.open   request  {id, edge, url, headers, remote, acceptedAt} -> {ok} | {ok: false, owner?, message}
 *   <p>.relay.<O>.in     E -> O   a client frame, headers Hc-Id and Hc-N (per connection, from 0)
 *   <p>.relay.<E>.out    O -> E   a frame for the client, same headers
 *   (either way)                  a close: headers Hc-Id, Hc-Close (code), Hc-Reason
 *   O -> E, E -> O                the owner's heartbeat: Hc-Ping (E pings the client's WebSocket),
 *                                 Hc-Pong (the client answered): an idle relayed client that
 *                                 sends no frame is alive as on a direct connection
 *   <p>.node.<id>.beat   every node, every `beatMs`: proof of life (body `drain` while it drains)
 *
 * Core NATS delivers at most once, in order per publisher: a gap in Hc-N, or a peer node whose
 * heartbeats stop, closes the connection (the client reconnects and resumes exactly once, as
 * after any cut).
 *
 * Flow control, so that a slow client or a slow link is bounded as on a direct connection (the
 * room service's own bounds apply to what the owner sees):
 *   - the owner counts the bytes it sent; the edge reports (headers Hc-Id, Hc-Delivered: bytes
 *     it handed to the client's socket, Hc-Buffered: the socket's unsent bytes) every
 *     REPORT_BYTES delivered and every heartbeat. The relayed connection's `bufferedAmount` is
 *     what is still on the way plus what the client's socket holds: the service's slow-consumer
 *     cut (maxSendBufferBytes) and presence holding act on it. An edge that stops reporting
 *     (frozen, or a slow link) lets it grow, and the connection is cut like a slow reader;
 *   - the service's `pause()` / `resume()` (its input bound) go to the edge (Hc-Flow: pause or
 *     resume), which stops reading the client's socket. A pause is sent again every heartbeat
 *     while it holds; an edge that hears none for 3 heartbeats resumes (a resume may be lost:
 *     core NATS delivers at most once).
 */
import { HerculesError } from '@hercules/core';
import type { Connection, ConnectionEvents, ConnectionRequest } from '@hercules/server/core';
import { headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

const H_ID = 'Hc-Id';
const H_N = 'Hc-N';
const H_CLOSE = 'Hc-Close';
const H_REASON = 'Hc-Reason';
const H_DELIVERED = 'Hc-Delivered';
const H_BUFFERED = 'Hc-Buffered';
const H_FLOW = 'Hc-Flow';
const H_PING = 'Hc-Ping';
const H_PONG = 'Hc-Pong';
/**
 * The edge reports its delivery at least every this many bytes: the owner's view of a relayed
 * connection's backlog is at most this far behind (against a 16 MiB maxSendBufferBytes).
 */
const REPORT_BYTES = 64 << 10;

export interface RelayOptions {
  nc: NatsConnection;
  nodeId: string;
  /** Subject prefix (default `hc`). */
  prefix?: string;
  /** Heartbeat period (default 500 ms); a node silent for 3 periods is taken for dead. */
  beatMs?: number;
  /** The owner side: serve a relayed connection (the room service's handleConnection), or refuse it. */
  accept(conn: Connection, request: ConnectionRequest, room: string): Promise<{ ok: true } | { ok: false; owner?: string; message: string }>;
  onWarning?(message: string): void;
}

/** A client socket on the edge, as the relay needs it. */
export interface EdgeSocket {
  send(frame: Uint8Array): void;
  close(code: number, reason: string): void;
  /** Bytes sent to the socket and not yet written out (a WebSocket's bufferedAmount); absent: 0. */
  readonly bufferedAmount?: number;
  /** Stop and start reading the client's frames (the owner's input bound). */
  pause?(): void;
  resume?(): void;
  /** Ask the client for a WebSocket pong. */
  ping?(): void;
}

interface Edge {
  id: string;
  owner: string;
  socket: EdgeSocket;
  nOut: number;
  nIn: number;
  closed: boolean;
  /** Bytes handed to the socket, and as last reported to the owner. */
  delivered: number;
  reported: number;
  reportedBuffered: number;
  /** Paused by the owner: when its last pause arrived (performance.now). */
  pausedAt?: number;
}

interface Relayed {
  id: string;
  edge: string;
  events?: ConnectionEvents;
  nIn: number;
  nOut: number;
  closed: boolean;
  /** Bytes sent to the edge; bytes the edge last said it delivered, and what its socket held then. */
  sent: number;
  delivered: number;
  edgeBuffered: number;
  /** The service paused its input. */
  paused: boolean;
}

export class Relay {
  readonly nodeId: string;
  private readonly nc: NatsConnection;
  private readonly p: string;
  private readonly beatMs: number;
  private readonly opts: RelayOptions;
  private readonly subs: Subscription[] = [];
  /** Client sockets here, relayed to an owner: by connection id. */
  private readonly edges = new Map<string, Edge>();
  /** Connections served here for clients on other nodes: by connection id. */
  private readonly relayed = new Map<string, Relayed>();
  /**
   * Relayed connections ended here because their edge went silent, by edge node: the edge was
   * not told (it may only have paused); it is, once it is heard again, so its clients reconnect
   * instead of waiting on a connection nobody serves.
   */
  private readonly orphans = new Map<string, string[]>();
  /** When each node's last heartbeat arrived (performance.now). */
  private readonly lastBeat = new Map<string, number>();
  /** The nodes whose last heartbeat said they drain (placement moves their shards away). */
  private readonly drainingNodes = new Set<string>();
  /** Whether this node drains: its heartbeats say so. */
  draining = false;
  private beatTimer: ReturnType<typeof setInterval> | undefined;
  private seq = 0;
  private closed = false;

  constructor(opts: RelayOptions) {
    this.opts = opts;
    this.nc = opts.nc;
    this.nodeId = opts.nodeId;
    this.p = opts.prefix ?? 'hc';
    this.beatMs = opts.beatMs ?? 500;
    const on = (subject: string, fn: (m: Msg) => void) =>
      this.subs.push(
        this.nc.subscribe(subject, {
          callback: (err, m) => {
            if (err) return;
            try {
              fn(m);
            } catch (e) {
              this.opts.onWarning?.(`relay: handling a message on ${subject} failed: ${(e as Error).message}`);
            }
          },
        }),
      );
    on(`${this.p}.relay.${this.nodeId}.open`, (m) => void this.onOpen(m));
    on(`${this.p}.relay.${this.nodeId}.in`, (m) => this.onIn(m));
    on(`${this.p}.relay.${this.nodeId}.out`, (m) => this.onOut(m));
    this.subs.push(
      this.nc.subscribe(`${this.p}.node.*.beat`, {
        callback: (err, m) => {
          if (err) return;
          const node = m.subject.split('.')[2];
          this.lastBeat.set(node, performance.now());
          if (m.data.length > 0) this.drainingNodes.add(node);
          else this.drainingNodes.delete(node);
        },
      }),
    );
    const beat = () => {
      try {
        this.nc.publish(`${this.p}.node.${this.nodeId}.beat`, this.draining ? 'drain' : undefined);
      } catch {
        /* the connection is closing */
      }
      this.checkPeers();
    };
    beat();
    this.beatTimer = setInterval(beat, this.beatMs);
    this.beatTimer.unref?.();
  }

  /**
   * Start draining, and say so at once: a drain hands shards over right away, and the node they
   * go to, hearing it only at the next heartbeat (up to `beatMs` later), would still place them
   * here meanwhile (and refuse their handoff, handoff.ts).
   */
  drain(): void {
    this.draining = true;
    try {
      this.nc.publish(`${this.p}.node.${this.nodeId}.beat`, 'drain');
    } catch {
      /* the connection is closing */
    }
  }

  /** Whether a node's heartbeats are arriving. */
  alive(node: string): boolean {
    if (node === this.nodeId) return true;
    const t = this.lastBeat.get(node);
    return t !== undefined && performance.now() - t < 3 * this.beatMs;
  }

  /** The other nodes whose heartbeats are arriving. */
  peers(): string[] {
    return [...this.lastBeat.keys()].filter((n) => n !== this.nodeId && this.alive(n));
  }

  /** The nodes heard saying they drain, this one included if it does. */
  drainingPeers(): string[] {
    return [...this.drainingNodes].filter((n) => n !== this.nodeId && this.alive(n)).concat(this.draining ? [this.nodeId] : []);
  }

  /** Relayed connections (edge side, owner side). */
  counts(): { edge: number; owner: number } {
    return { edge: this.edges.size, owner: this.relayed.size };
  }

  // ---------------------------------------------------------------- the edge side

  /**
   * Relay a client socket to `owner`. Resolves with a function that takes the client's frames
   * (call it for each one) once the owner accepted; rejects with the owner's refusal.
   */
  async open(
    owner: string,
    room: string,
    request: ConnectionRequest,
    socket: EdgeSocket,
  ): Promise<{ id: string; send(frame: Uint8Array): void; close(code: number, reason: string): void; pong(): void }> {
    const id = `${this.nodeId}/${++this.seq}`;
    const edge: Edge = { id, owner, socket, nOut: 0, nIn: 0, closed: false, delivered: 0, reported: 0, reportedBuffered: 0 };
    this.edges.set(id, edge);
    const body = {
      id,
      edge: this.nodeId,
      room,
      url: request.url,
      headers: request.headers,
      remote: request.socket?.remoteAddress ?? '?',
      // When the edge accepted the socket: the owner orders two connections of one client id by it.
      ...(request.acceptedAt !== undefined ? { acceptedAt: request.acceptedAt } : {}),
    };
    let reply: { ok: boolean; owner?: string; message?: string };
    try {
      const m = await this.nc.request(`${this.p}.relay.${owner}.open`, JSON.stringify(body), { timeout: 2 * this.beatMs });
      reply = m.json();
    } catch (e) {
      this.edges.delete(id);
      throw new HerculesError('unreachable', `node ${owner} did not answer the relay (${(e as Error).message}); route the room again`);
    }
    if (!reply.ok) {
      this.edges.delete(id);
      throw Object.assign(new HerculesError('unreachable', reply.message ?? `node ${owner} refused the relay; route the room again`), { owner: reply.owner });
    }
    return {
      id,
      send: (frame) => {
        if (edge.closed) return;
        this.publish(`${this.p}.relay.${owner}.in`, id, edge.nOut++, frame);
      },
      close: (code, reason) => {
        if (edge.closed) return;
        edge.closed = true;
        this.edges.delete(id);
        this.publishClose(`${this.p}.relay.${owner}.in`, id, code, reason);
      },
      pong: () => {
        if (!edge.closed) this.signal(`${this.p}.relay.${owner}.in`, id, H_PONG);
      },
    };
  }

  private onOut(m: Msg): void {
    const id = m.headers?.get(H_ID);
    const edge = id ? this.edges.get(id) : undefined;
    if (!edge || edge.closed) return;
    const close = m.headers?.get(H_CLOSE);
    if (close) {
      edge.closed = true;
      this.edges.delete(edge.id);
      edge.socket.close(Number(close) || 1011, m.headers?.get(H_REASON) ?? '');
      return;
    }
    const flow = m.headers?.get(H_FLOW);
    if (flow) return this.edgeFlow(edge, flow === 'pause');
    if (m.headers?.get(H_PING)) return edge.socket.ping?.();
    const n = Number(m.headers?.get(H_N));
    if (n !== edge.nIn) {
      this.cutEdge(edge, 1012, `the relay from node ${edge.owner} lost a frame (expected ${edge.nIn}, got ${n}); reconnect`);
      return;
    }
    edge.nIn++;
    edge.socket.send(m.data);
    edge.delivered += m.data.length;
    if (edge.delivered - edge.reported >= REPORT_BYTES) this.report(edge);
  }

  /** The owner paused (or resumed) the client's input. */
  private edgeFlow(edge: Edge, pause: boolean): void {
    if (pause) {
      if (edge.pausedAt === undefined) edge.socket.pause?.();
      edge.pausedAt = performance.now();
    } else if (edge.pausedAt !== undefined) {
      edge.pausedAt = undefined;
      edge.socket.resume?.();
    }
  }

  /** Tell the owner how much of its output reached the client's socket, and what the socket holds. */
  private report(edge: Edge): void {
    edge.reported = edge.delivered;
    edge.reportedBuffered = edge.socket.bufferedAmount ?? 0;
    const h = natsHeaders();
    h.set(H_ID, edge.id);
    h.set(H_DELIVERED, String(edge.delivered));
    h.set(H_BUFFERED, String(edge.reportedBuffered));
    try {
      this.nc.publish(`${this.p}.relay.${edge.owner}.in`, new Uint8Array(0), { headers: h });
    } catch {
      /* the connection is closing */
    }
  }

  /** Every heartbeat: reports that changed, and a pause the owner stopped repeating lifted. */
  private edgeTick(): void {
    for (const edge of this.edges.values()) {
      if (edge.delivered !== edge.reported || (edge.socket.bufferedAmount ?? 0) !== edge.reportedBuffered) this.report(edge);
      if (edge.pausedAt !== undefined && performance.now() - edge.pausedAt >= 3 * this.beatMs) this.edgeFlow(edge, false);
    }
  }

  private cutEdge(edge: Edge, code: number, reason: string): void {
    if (edge.closed) return;
    edge.closed = true;
    this.edges.delete(edge.id);
    this.publishClose(`${this.p}.relay.${edge.owner}.in`, edge.id, 1001, 'relay cut');
    edge.socket.close(code, reason);
  }

  // ---------------------------------------------------------------- the owner side

  private async onOpen(m: Msg): Promise<void> {
    let body: { id: string; edge: string; room: string; url?: string; headers: ConnectionRequest['headers']; remote: string; acceptedAt?: unknown };
    try {
      body = m.json();
    } catch {
      m.respond(JSON.stringify({ ok: false, message: 'malformed relay request' }));
      return;
    }
    const r: Relayed = { id: body.id, edge: body.edge, nIn: 0, nOut: 0, closed: false, sent: 0, delivered: 0, edgeBuffered: 0, paused: false };
    this.relayed.set(r.id, r);
    const conn = this.relayedConnection(r, `${body.edge}/${body.remote}`);
    let verdict: { ok: true } | { ok: false; owner?: string; message: string };
    try {
      const acceptedAt = typeof body.acceptedAt === 'number' && Number.isSafeInteger(body.acceptedAt) && body.acceptedAt >= 0 ? body.acceptedAt : undefined;
      const request = {
        url: body.url,
        headers: body.headers ?? {},
        socket: { remoteAddress: body.remote },
        ...(acceptedAt !== undefined ? { acceptedAt } : {}),
      };
      verdict = await this.opts.accept(conn, request, body.room);
    } catch (e) {
      verdict = { ok: false, message: `the owner failed to accept the relay: ${(e as Error).message}` };
    }
    if (!verdict.ok) {
      r.closed = true;
      this.relayed.delete(r.id);
    }
    m.respond(JSON.stringify(verdict));
  }

  /** The room service's side of a relayed connection. */
  private relayedConnection(r: Relayed, remote: string): Connection {
    const out = `${this.p}.relay.${r.edge}.out`;
    return {
      remote,
      get isOpen() {
        return !r.closed;
      },
      // What is on the way to the edge or unsent in the client's socket, as far as the edge's last report says.
      get bufferedAmount() {
        return r.sent - r.delivered + r.edgeBuffered;
      },
      listen: (events) => {
        r.events = events;
        // Ended before the service listened (its edge went silent while this node took the
        // shard): say so, or the service's session waits for a close that already happened.
        if (r.closed) queueMicrotask(() => events.close());
      },
      send: (frame) => {
        if (r.closed) return;
        r.sent += frame.length;
        this.publish(out, r.id, r.nOut++, frame);
      },
      close: (code, reason) => this.endRelayed(r, code, reason, true),
      terminate: () => this.endRelayed(r, 1006, 'terminated', true),
      pause: () => this.ownerFlow(r, true),
      resume: () => this.ownerFlow(r, false),
      // Without it, a relayed client with nothing to send was dropped after two heartbeats (2 s
      // on a cluster node): the edge answers WebSocket pings, and only it sees the pong.
      ping: () => {
        if (!r.closed) this.signal(out, r.id, H_PING);
      },
    };
  }

  /** The service paused (or resumed) a relayed connection's input: tell its edge. */
  private ownerFlow(r: Relayed, pause: boolean): void {
    if (r.closed) return;
    r.paused = pause;
    const h = natsHeaders();
    h.set(H_ID, r.id);
    h.set(H_FLOW, pause ? 'pause' : 'resume');
    try {
      this.nc.publish(`${this.p}.relay.${r.edge}.out`, new Uint8Array(0), { headers: h });
    } catch {
      /* the connection is closing */
    }
  }

  private onIn(m: Msg): void {
    const id = m.headers?.get(H_ID);
    const r = id ? this.relayed.get(id) : undefined;
    if (!r || r.closed) {
      // A frame for a connection this node no longer serves, which its edge does not know: say
      // so. (Connection ids are `<edge node>/<n>`.)
      const edge = id?.slice(0, id.lastIndexOf('/'));
      if (r === undefined && edge && !m.headers?.get(H_CLOSE))
        this.publishClose(`${this.p}.relay.${edge}.out`, id!, 1012, 'the node serving this room no longer serves this connection; reconnect');
      return;
    }
    if (m.headers?.get(H_CLOSE)) {
      this.endRelayed(r, 1000, 'client left', false);
      return;
    }
    if (m.headers?.get(H_PONG)) return r.events?.pong?.();
    // (A header the message lacks reads as '': every frame has none.)
    const delivered = m.headers?.get(H_DELIVERED);
    if (delivered) {
      // Reports may pass each other on the way only across a reconnect of the NATS client: keep the newest.
      if (Number(delivered) >= r.delivered) {
        r.delivered = Number(delivered);
        r.edgeBuffered = Number(m.headers?.get(H_BUFFERED)) || 0;
      }
      return;
    }
    const n = Number(m.headers?.get(H_N));
    if (n !== r.nIn) {
      this.opts.onWarning?.(`relay ${r.id}: a frame from node ${r.edge} was lost (expected ${r.nIn}, got ${n}); closing it`);
      this.endRelayed(r, 1012, 'the relay lost a frame; reconnect', true);
      return;
    }
    r.nIn++;
    r.events?.message(m.data, true);
  }

  /** The owner side of a relayed connection ends: tell the edge (if it was us), then the room service. */
  private endRelayed(r: Relayed, code: number, reason: string, tellEdge: boolean): void {
    if (r.closed) return;
    r.closed = true;
    this.relayed.delete(r.id);
    if (tellEdge) this.publishClose(`${this.p}.relay.${r.edge}.out`, r.id, code, reason);
    const events = r.events;
    queueMicrotask(() => events?.close());
  }

  // ---------------------------------------------------------------- both

  /** Peers that stopped beating: what is relayed to or from them is closed (clients reconnect). */
  private checkPeers(): void {
    this.edgeTick();
    for (const r of this.relayed.values()) if (r.paused) this.ownerFlow(r, true);
    for (const edge of [...this.edges.values()]) {
      if (!this.alive(edge.owner)) this.cutEdge(edge, 1012, `node ${edge.owner}, which served this room, stopped answering; reconnect`);
    }
    for (const r of [...this.relayed.values()]) {
      if (this.alive(r.edge)) continue;
      this.endRelayed(r, 1001, `node ${r.edge} stopped answering`, false);
      const ids = this.orphans.get(r.edge) ?? [];
      ids.push(r.id);
      this.orphans.set(r.edge, ids);
    }
    for (const [edge, ids] of [...this.orphans]) {
      if (!this.alive(edge)) continue;
      this.orphans.delete(edge);
      for (const id of ids)
        this.publishClose(`${this.p}.relay.${edge}.out`, id, 1012, `this node stopped hearing node ${edge} and ended the connection; reconnect`);
    }
  }

  private publish(subject: string, id: string, n: number, data: Uint8Array): void {
    const h = natsHeaders();
    h.set(H_ID, id);
    h.set(H_N, String(n));
    try {
      this.nc.publish(subject, data, { headers: h });
    } catch (e) {
      this.opts.onWarning?.(`relay ${id}: publishing failed: ${(e as Error).message}`);
    }
  }

  /** A header-only message (a ping or a pong) about connection `id`. */
  private signal(subject: string, id: string, header: string): void {
    const h = natsHeaders();
    h.set(H_ID, id);
    h.set(header, '1');
    try {
      this.nc.publish(subject, new Uint8Array(0), { headers: h });
    } catch {
      /* the connection is closing */
    }
  }

  private publishClose(subject: string, id: string, code: number, reason: string): void {
    const h = natsHeaders();
    h.set(H_ID, id);
    h.set(H_CLOSE, String(code));
    h.set(H_REASON, reason.slice(0, 120).replace(/[\r\n]/g, ' '));
    try {
      this.nc.publish(subject, new Uint8Array(0), { headers: h });
    } catch {
      /* the connection is closing */
    }
  }

  /** Close every relayed connection, both sides, and stop. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.beatTimer) clearInterval(this.beatTimer);
    for (const edge of [...this.edges.values()]) this.cutEdge(edge, 1001, 'node shutting down');
    for (const r of [...this.relayed.values()]) this.endRelayed(r, 1001, 'node shutting down', true);
    for (const s of this.subs) s.unsubscribe();
  }
}
