/** Core NATS in memory, for relay tests (no server). */
import type { Msg, NatsConnection } from '@nats-io/transport-node';

type Handler = (err: Error | null, m: Msg) => void;

/** Core NATS in memory: exact subjects and `a.*.c` wildcards, delivery on a microtask, a switch to drop what one subject receives. */
export class Bus {
  private readonly subs: { subject: string; fn: Handler }[] = [];
  readonly drop = new Set<string>();
  connection(): NatsConnection {
    return {
      subscribe: (subject: string, opts: { callback: Handler }) => {
        const sub = { subject, fn: opts.callback };
        this.subs.push(sub);
        return { unsubscribe: () => this.subs.splice(this.subs.indexOf(sub), 1) };
      },
      publish: (subject: string, data?: Uint8Array | string, opts?: { headers?: Msg['headers'] }) => this.deliver(subject, data, opts?.headers),
      request: (subject: string, data: string) =>
        new Promise((resolve) => this.deliver(subject, data, undefined, (s: string) => resolve({ json: () => JSON.parse(s) }))),
    } as unknown as NatsConnection;
  }
  private deliver(subject: string, data: Uint8Array | string | undefined, headers: Msg['headers'], respond?: (s: string) => void): void {
    if (this.drop.has(subject)) return;
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : (data ?? new Uint8Array(0));
    const m = { subject, data: bytes, headers, json: () => JSON.parse(new TextDecoder().decode(bytes)), respond } as unknown as Msg;
    for (const s of [...this.subs]) if (matches(s.subject, subject)) queueMicrotask(() => s.fn(null, m));
  }
}

function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.'),
    s = subject.split('.');
  return p.length === s.length && p.every((t, i) => t === '*' || t === s[i]);
}
