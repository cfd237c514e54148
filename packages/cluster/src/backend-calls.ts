/**
 * Backend calls between nodes, over core NATS: the admin API on node E for a room whose shard
 * node O owns is answered by O's service (located-backend.ts in @hercules/server), as O answers
 * it. A call and its answer are JSON, sent in parts no larger than the NATS payload limit (an
 * import may be 64 MiB; NATS takes 1 MiB by default):
 *
 *   <p>.backend.<O>   E -> O   part i of n of a call, headers Hc-Call (id), Hc-Part, Hc-Parts; reply to E's inbox
 *   <E's inbox>       O -> E   part i of n of the answer: {ok: true, value} | {ok: false, code, message}
 *
 * Core NATS delivers at most once: a lost part leaves the call unanswered, and the caller's
 * timeout rejects it with `unreachable` (the admin API answers 503; the backend retries).
 */
import { HerculesError, isErrorCode } from '@hercules/core';
import type { BackendCall } from '@hercules/server/core';
import { createInbox, headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

const H_CALL = 'Hc-Call';
const H_PART = 'Hc-Part';
const H_PARTS = 'Hc-Parts';
/** What a part leaves of the payload limit for its headers and subject. */
const HEADROOM = 4096;

type Answer = { ok: true; value: unknown } | { ok: false; code: string; message: string };

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Answer the calls sent to `nodeId` with `run` (this node's service). Returns the subscription. */
export function serveBackendCalls(
  nc: NatsConnection,
  prefix: string,
  nodeId: string,
  run: (call: BackendCall) => Promise<unknown>,
  onWarning: (m: string) => void,
): Subscription {
  const partial = new Parts();
  return nc.subscribe(`${prefix}.backend.${nodeId}`, {
    callback: (err, m) => {
      if (err || !m.reply) return;
      const whole = partial.add(m);
      if (whole === undefined) return;
      const reply = m.reply;
      void answer(run, whole).then((a) => {
        try {
          sendParts(nc, reply, m.headers?.get(H_CALL) ?? '', enc.encode(JSON.stringify(a)));
        } catch (e) {
          onWarning(`backend call: answering failed: ${(e as Error).message}`);
        }
      });
    },
  });
}

async function answer(run: (call: BackendCall) => Promise<unknown>, body: Uint8Array): Promise<Answer> {
  try {
    const value = await run(JSON.parse(dec.decode(body)) as BackendCall);
    return { ok: true, value: value === undefined ? null : value };
  } catch (e) {
    if (e instanceof HerculesError) return { ok: false, code: e.code, message: e.message };
    return { ok: false, code: 'internal', message: `the node serving the room failed on this call: ${(e as Error).message}` };
  }
}

/** Send `call` to node `node` and resolve with its answer, or reject with the error it threw there. */
export async function callBackend(nc: NatsConnection, prefix: string, node: string, call: BackendCall, timeoutMs: number): Promise<unknown> {
  const inbox = createInbox();
  const id = inbox.slice(inbox.lastIndexOf('.') + 1);
  const partial = new Parts();
  let sub: Subscription | undefined;
  const got = new Promise<Uint8Array>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new HerculesError('unreachable', `node ${node}, which serves this room, did not answer within ${timeoutMs} ms; try again`)),
      timeoutMs,
    );
    sub = nc.subscribe(inbox, {
      callback: (err, m) => {
        const whole = err ? undefined : partial.add(m);
        if (whole === undefined) return;
        clearTimeout(timer);
        resolve(whole);
      },
    });
  });
  try {
    sendParts(nc, `${prefix}.backend.${node}`, id, enc.encode(JSON.stringify(call)), inbox);
    const a = JSON.parse(dec.decode(await got)) as Answer;
    if (a.ok) return a.value;
    throw new HerculesError(isErrorCode(a.code) ? a.code : 'internal', a.message);
  } finally {
    sub?.unsubscribe();
  }
}

function sendParts(nc: NatsConnection, subject: string, id: string, body: Uint8Array, reply?: string): void {
  const size = Math.max(1024, (nc.info?.max_payload ?? 1024 * 1024) - HEADROOM);
  const n = Math.max(1, Math.ceil(body.length / size));
  for (let i = 0; i < n; i++) {
    const h = natsHeaders();
    h.set(H_CALL, id);
    h.set(H_PART, String(i));
    h.set(H_PARTS, String(n));
    nc.publish(subject, body.subarray(i * size, (i + 1) * size), { headers: h, ...(reply ? { reply } : {}) });
  }
}

/** Parts of calls (or answers) being received, by call id: the whole body once its last part is in. */
class Parts {
  private readonly open = new Map<string, { parts: Uint8Array[]; at: number }>();

  add(m: Msg): Uint8Array | undefined {
    const id = m.headers?.get(H_CALL) ?? '';
    const i = Number(m.headers?.get(H_PART) ?? 0);
    const n = Number(m.headers?.get(H_PARTS) ?? 1);
    if (n <= 1) return m.data;
    this.forgetStale();
    const call = this.open.get(id) ?? { parts: [], at: Date.now() };
    this.open.set(id, call);
    // Parts come in order (one publisher); a missing one leaves the call unfinished, forgotten below.
    if (i !== call.parts.length) return undefined;
    call.parts.push(m.data);
    if (call.parts.length < n) return undefined;
    this.open.delete(id);
    return Buffer.concat(call.parts);
  }

  /** Calls whose parts stopped coming a minute ago: their caller has given up. */
  private forgetStale(): void {
    const old = Date.now() - 60_000;
    for (const [id, c] of this.open) if (c.at < old) this.open.delete(id);
  }
}
