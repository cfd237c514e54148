/**
 * Cluster metrics, in the node's Prometheus registry (beside the room service's): ownership,
 * lease age, append latency on the replicated log, pipeline breaks (fence losses), claims,
 * shards given up, relayed connections, and reads that went on message by message.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ClusterStoreObserver } from './cluster-store.ts';

export interface ClusterMetricSources {
  owned(): number[];
  leaseAges(): { shard: number; ms: number }[];
  relayCounts(): { edge: number; owner: number };
  readStats(): { reads: number; byGet: number };
}

/** Register the cluster's metrics in `registry`; the observer it returns feeds the store's events into them. */
export function registerClusterMetrics(registry: Registry, src: ClusterMetricSources): Required<ClusterStoreObserver> {
  new Gauge({
    name: 'hercules_cluster_shards_owned',
    help: 'Shards this node owns now (holds the lease of, within its deadline)',
    registers: [registry],
    collect() {
      this.set(src.owned().length);
    },
  });
  new Gauge({
    name: 'hercules_cluster_lease_age_seconds',
    help: 'Per owned shard, seconds since the last lease write that succeeded was sent (renewed every third of the lease; near the lease length means renewals are failing)',
    labelNames: ['shard'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const a of src.leaseAges()) this.set({ shard: String(a.shard) }, a.ms / 1000);
    },
  });
  new Gauge({
    name: 'hercules_cluster_relayed_connections',
    help: 'Client connections relayed between nodes: side="edge" here for a room another node owns, side="owner" here for a client on another node',
    labelNames: ['side'] as const,
    registers: [registry],
    collect() {
      const c = src.relayCounts();
      this.set({ side: 'edge' }, c.edge);
      this.set({ side: 'owner' }, c.owner);
    },
  });
  let reads = 0,
    byGet = 0;
  new Counter({
    name: 'hercules_cluster_reads_total',
    help: 'Reads of a room or of claims from the shard streams; via="get" went message by message because a consumer could not be set up in time',
    labelNames: ['via'] as const,
    registers: [registry],
    collect() {
      const r = src.readStats();
      this.inc({ via: 'consumer' }, r.reads - r.byGet - (reads - byGet));
      this.inc({ via: 'get' }, r.byGet - byGet);
      reads = r.reads;
      byGet = r.byGet;
    },
  });
  const appendSeconds = new Histogram({
    name: 'hercules_cluster_append_seconds',
    help: 'From publishing an append to the shard stream to its confirmation (its ack and every earlier one as predicted)',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const breaks = new Counter({
    name: 'hercules_cluster_pipeline_breaks_total',
    help: 'Times a shard pipeline broke and the shard was claimed again: cause="fenced" the stream was not at the predicted sequence (another writer, or a lost ack), cause="failed" any other error (a timeout, no leader)',
    labelNames: ['cause'] as const,
    registers: [registry],
  });
  const claims = new Counter({
    name: 'hercules_cluster_claims_total',
    help: 'Shard claims written (taking a shard, or claiming it again after a break)',
    registers: [registry],
  });
  const lost = new Counter({
    name: 'hercules_cluster_shards_lost_total',
    help: 'Shards given up (lease taken, or not renewed within the grace period)',
    registers: [registry],
  });
  const batchRecords = new Counter({
    name: 'hercules_cluster_batch_records_total',
    help: "Log records published in batch messages (a shard's appends of one event-loop turn); over hercules_cluster_batch_messages_total, the records a message holds on average",
    registers: [registry],
  });
  const batchMessages = new Counter({
    name: 'hercules_cluster_batch_messages_total',
    help: 'Messages published for batches of log records (batch messages, records too large for one, and the checkpoints that follow them)',
    registers: [registry],
  });
  return {
    batchFlushed: (records, messages) => {
      batchRecords.inc(records);
      batchMessages.inc(messages);
    },
    appendConfirmed: (ms) => appendSeconds.observe(ms / 1000),
    pipelineBroken: (cause) => breaks.inc({ cause }),
    claimed: () => claims.inc(),
    shardLost: () => lost.inc(),
  };
}
