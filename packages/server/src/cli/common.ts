/** What the hercules command's parts share: how they fail, how they read a number, the cluster package. */

/** A usage error (bad option or value): one line, exit 2. */
export function fail(msg: string): never {
  console.error(`hercules: ${msg} (hercules --help lists every option)`);
  process.exit(2);
}

/** The arguments were fine but the command could not do its work (data directory, port, server): one line, exit 1. */
export function cannotStart(msg: string): never {
  console.error(`hercules: ${msg}`);
  process.exit(1);
}

export function num(name: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) fail(`--${name} must be a non-negative number, got ${JSON.stringify(v)}`);
  return n;
}

/** What the CLI uses of @hercules/cluster, loaded only in cluster mode (a package of its own: its NATS clients are not everyone's). */
export interface ClusterModule {
  createClusterNode(
    opts: Record<string, unknown>,
  ): Promise<{ close(): Promise<void>; service: { log: { info(o: object, m: string): void; error(o: object, m: string): void } } }>;
  startNatsCluster(opts: { nodes?: number; dir?: string }): Promise<{ urls: string[]; dir: string; close(): Promise<void> }>;
  auditRoomOnNats(opts: { nats: string[]; room: string; prefix?: string; shards?: number }): Promise<{ problems: string[] }>;
}

export async function loadCluster(): Promise<ClusterModule> {
  const name = '@hercules/cluster';
  try {
    return (await import(name)) as ClusterModule;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((e as Error).message).includes(name))
      cannotStart(`cluster mode needs the ${name} package: npm install ${name}`);
    throw e;
  }
}
