/** Prometheus metrics for one server (its own registry, so several servers can share a process). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ErrorCode } from '@hercules/core';

/**
 * Connections closed without an error frame, because they cannot be told: their link is dead or
 * clogged, or they never became a WebSocket. Every other close is counted under the error code
 * it was sent (docs/errors.md).
 */
export const SILENT_CLOSE_REASONS = ['slow-consumer', 'heartbeat-timeout', 'upgrade-timeout'] as const;
/** The `reason` label of hercules_connections_refused_total: a closed set, like the codes. */
export type RefusalReason = ErrorCode | (typeof SILENT_CLOSE_REASONS)[number];
/** A counter whose only label is a RefusalReason, so no call site can count under a free-form string. */
type ReasonCounter = Omit<Counter<'reason'>, 'inc'> & { inc(labels: { reason: RefusalReason }, value?: number): void };

export function createMetrics() {
  const registry = new Registry();
  // prom-client's default metrics are already named process_* and nodejs_*: prefix only the product.
  collectDefaultMetrics({ register: registry, prefix: 'hercules_' });
  // Registered in this order, which is the order a scrape lists them in.
  return { registry, ...counters(registry), ...gauges(registry), ...histograms(registry) };
}

/** The counters, and frameSent, which counts frames by type between scrapes. */
function counters(registry: Registry) {
  /**
   * Frames sent, by message type, counted in a plain map and handed to the counter at scrape
   * time: a labelled inc on every frame would cost the hot path a label lookup.
   */
  const sentByType = new Map<string, number>();
  return {
    opsSequenced: new Counter({ name: 'hercules_ops_sequenced_total', help: 'Ops ordered and durably committed', registers: [registry] }),
    opsRejected: new Counter({
      name: 'hercules_ops_rejected_total',
      help: 'Ops that threw (or were unknown) at their place in the order',
      registers: [registry],
    }),
    framesIn: new Counter({ name: 'hercules_frames_received_total', help: 'Frames received from clients', registers: [registry] }),
    framesOut: new Counter({ name: 'hercules_frames_sent_total', help: 'Frames sent to clients', registers: [registry] }),
    framesOutByType: new Counter({
      name: 'hercules_frames_sent_by_type_total',
      help: 'Frames sent to clients, by message type (log, stable, visible, welcome, members, presence, error, deregister, ping)',
      labelNames: ['type'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [type, n] of sentByType) this.inc({ type }, n);
      },
    }),
    /** Count one frame sent of this message type (hercules_frames_sent_by_type_total). */
    frameSent(type: string): void {
      sentByType.set(type, (sentByType.get(type) ?? 0) + 1);
    },
    bytesIn: new Counter({ name: 'hercules_bytes_received_total', help: 'Bytes received in frames', registers: [registry] }),
    bytesOut: new Counter({ name: 'hercules_bytes_sent_total', help: 'Bytes sent in frames', registers: [registry] }),
    malformed: new Counter({ name: 'hercules_frames_malformed_total', help: 'Frames refused as malformed', registers: [registry] }),
    refusedConnections: new Counter({
      name: 'hercules_connections_refused_total',
      help: 'Connections refused or closed for a reason, by reason: the error code sent to the client (unauthenticated, forbidden, bad-room, room-full, machine-mismatch, client-too-old, server-too-old, protocol-version, malformed-frame, not-ready, hello-timeout, rate-limited, server-full, encode-failed, storage-failed, internal, and the fatal errors a room gives: seq-gap, replaced, client-id-conflict), or slow-consumer, heartbeat-timeout and upgrade-timeout (not told); see docs/errors.md',
      labelNames: ['reason'] as const,
      registers: [registry],
    }) as ReasonCounter,
    webhookDeliveries: new Counter({
      name: 'hercules_webhook_deliveries_total',
      help: 'Webhook requests by result: ok (2xx), failed (another status, a network error or a timeout; retried)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'hercules_rate_limited_total',
      help: 'Times a connection was paused for going over its op or byte rate',
      registers: [registry],
    }),
    slowConsumers: new Counter({
      name: 'hercules_slow_consumers_total',
      help: 'Connections cut because their send buffer passed the limit',
      registers: [registry],
    }),
    opsRefused: new Counter({
      name: 'hercules_ops_refused_total',
      help: 'Ops refused before ordering (read-only access, schema, authorize hook)',
      registers: [registry],
    }),
    outputFailures: new Counter({
      name: 'hercules_failures_total',
      help: 'Failures contained to one room or connection, by stage: serialize (an output that cannot be stored), commit (a room whose writes the database refused), encode (a message that cannot be encoded for a connection), deliver, tick, close, frame, and unexpected ones elsewhere',
      labelNames: ['stage'] as const,
      registers: [registry],
    }),
    storageErrors: new Counter({ name: 'hercules_storage_errors_total', help: 'Failed storage commits', registers: [registry] }),
  };
}

function gauges(registry: Registry) {
  return {
    rooms: new Gauge({ name: 'hercules_rooms_loaded', help: 'Rooms held in memory', registers: [registry] }),
    connections: new Gauge({ name: 'hercules_connections', help: 'Open client connections', registers: [registry] }),
    pendingConnections: new Gauge({
      name: 'hercules_connections_pending',
      help: 'TCP connections accepted whose first request (a WebSocket upgrade) is not in yet (bounded by limits.upgradeTimeoutMs and limits.maxPendingConnections)',
      registers: [registry],
    }),
    members: new Gauge({ name: 'hercules_visibility_members', help: 'Members of visibility sets, over all rooms', registers: [registry] }),
    unstable: new Gauge({ name: 'hercules_unstable_ops', help: 'Ops after the stable frontier held in memory, over all rooms', registers: [registry] }),
    sendBuffer: new Gauge({ name: 'hercules_send_buffer_bytes', help: 'Bytes queued in WebSocket send buffers', registers: [registry] }),
    inputQueued: new Gauge({
      name: 'hercules_input_queued_bytes',
      help: 'Bytes of frames received and not yet handled, over all connections (each is paused while its input waits)',
      registers: [registry],
    }),
    inputDecoding: new Gauge({
      name: 'hercules_input_decoding_bytes',
      help: 'Bytes of large frames decoded and being handled, over the server (bounded by limits.maxDecodingBytes)',
      registers: [registry],
    }),
    inputWaiting: new Gauge({ name: 'hercules_input_waiting_connections', help: 'Connections with input waiting for a turn', registers: [registry] }),
    pendingOutputs: new Gauge({ name: 'hercules_commit_queue_depth', help: 'Room outputs waiting for the next group commit', registers: [registry] }),
  };
}

function histograms(registry: Registry) {
  return {
    commitSeconds: new Histogram({
      name: 'hercules_commit_seconds',
      help: 'Duration of a group commit: the database write (for SQLite, before the fsync of hercules_commit_sync_seconds)',
      buckets: [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1],
      registers: [registry],
    }),
    commitSyncSeconds: new Histogram({
      name: 'hercules_commit_sync_seconds',
      help: "Duration of each fsync of SQLite's WAL after a group commit (or an import, delete or unload), off the event loop; the commit's appends settle after it",
      buckets: [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3],
      registers: [registry],
    }),
    commitOps: new Histogram({
      name: 'hercules_commit_ops',
      help: 'Ops per group commit',
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000],
      registers: [registry],
    }),
    authoritativeDelay: new Histogram({
      name: 'hercules_authoritative_delay_seconds',
      help: 'Server side: frame received to Notify-Auth sent (includes the commit)',
      buckets: [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1],
      registers: [registry],
    }),
    visibleDelay: new Histogram({
      name: 'hercules_visible_delay_seconds',
      help: 'Server side: op ordered to Notify-Visible sent',
      buckets: [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10],
      registers: [registry],
    }),
    opPath: new Histogram({
      name: 'hercules_op_path_seconds',
      help: 'Where an ops frame spends its time on the server, by stage: queued (arrived, waiting for its turn), decode, engine (order), tentative (send to other members ahead of the commit), apply (run the ops, after those sends), commit_wait (for its group commit to start), commit (the store write), send (encode and write to every member)',
      labelNames: ['stage'] as const,
      buckets: [0.00001, 0.00003, 0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 1],
      registers: [registry],
    }),
    stableDelay: new Histogram({
      name: 'hercules_stable_advance_seconds',
      help: 'Time between stable frontier advances per room',
      buckets: [0.001, 0.01, 0.03, 0.1, 0.3, 1, 3, 10],
      registers: [registry],
    }),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
