/**
 * One interface for every system the benchmarks compare (Hercules and its peers), so the same
 * workload runs through the same delay proxy against each. A "cell" is a key in a shared map
 * (the spreadsheet typing workload): set it on one client, see it arrive on the others.
 *
 * Signals, mapped to Hercules' views:
 *   set() returns          -> local apply (Submitted)
 *   acked(key, value)      -> the server has the edit (Authoritative; Fluid: 'saved'); undefined
 *                             when the system has no such signal (then it is reported as n/a)
 *   onRemote(key, value)   -> delivered at another client (what Visible waits for)
 */
export interface PeerServer {
  /** TCP port on 127.0.0.1 the clients (through the proxy) connect to. */
  port: number;
  /** Process id of the server process, to read its CPU time. */
  pid: number;
  stop(): Promise<void>;
}

export interface PeerClient {
  /** Apply a local edit of one cell; returns once it is applied locally. */
  set(key: string, value: string): void;
  /** Resolves when the server acknowledged this edit; absent if the system has no such signal. */
  acked?: (key: string, value: string) => Promise<void>;
  /** Called for every edit made by another client, when it arrives here. */
  onRemote(fn: (key: string, value: string) => void): void;
  close(): Promise<void>;
}

export interface PeerSystem {
  /** e.g. 'Yjs 13.6 + y-websocket 3.0' (versions read from node_modules). */
  name: string;
  /** Start the system's server in its own process on a free loopback port. */
  startServer(): Promise<PeerServer>;
  /**
   * Connect one client to document/room `doc` through `host:port` (the delay proxy). Resolves
   * once the client has joined and synced the document, so edits can start.
   */
  connect(host: string, port: number, doc: string, clientName: string): Promise<PeerClient>;
}
