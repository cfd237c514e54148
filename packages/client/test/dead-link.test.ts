/**
 * A link that dies without a word: a real server, a real client, and between them a loopback
 * proxy that stops forwarding without a FIN or a reset (a proxy or NAT gone silent; a frozen
 * server looks the same to the client). Neither end's kernel notices: only the watchdogs can.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from '@hercules/server';
import { faultProxy, tempDir } from '@hercules/test-utils';
import { connect, type ConnectionStatus } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';

/** Resolve with `p`, or fail naming `what` after `ms` (a deadline, not a timing claim). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

// spec: LIVE-DEAD-LINK
test('a link gone silent without a FIN: the client says offline and reconnects within its watchdog period, not after a closing handshake; the server lets its side go', async (t) => {
  const { dir, cleanup } = tempDir('dead-link');
  // Server pings every 200 ms, so a 2 s client watchdog never fires on a live link.
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent', heartbeatMs: 200 });
  const proxy = await faultProxy(srv.port);
  t.after(async () => {
    await proxy.close();
    await srv.close();
    cleanup();
  });
  const WATCHDOG_MS = 2000;
  const statuses: ConnectionStatus[] = [];
  let offline: () => void = () => {};
  const wentOffline = new Promise<void>((r) => (offline = r));
  const room = await connect({
    url: `ws://127.0.0.1:${proxy.port}`,
    room: 'silent-link',
    machine: chat,
    watchdogMs: WATCHDOG_MS,
    backoff: { minMs: 10, maxMs: 100 },
    onError: () => {},
    onStatus: (s) => {
      statuses.push(s);
      if (s === 'offline') offline();
    },
  });
  t.after(() => room.close());
  await room.whenOnline({ timeoutMs: 10_000 });
  await within(room.ops.say({ text: 'before' }).authoritative, 10_000, 'an op before the cut');

  const cut = proxy.silence();
  assert.equal(cut.links, 1, 'the one link is silenced');
  statuses.length = 0;
  const during = room.ops.say({ text: 'during' }); // sent into the void: the proxy drops it
  // The last frame came at most a ping (200 ms) before the cut: offline by the watchdog's period
  // after it. The margin is generous for a loaded machine and still far below ws's 30 s close
  // timeout, which the old watchdog waited out (offline 32 s after the cut here).
  const MARGIN_MS = 8000;
  await within(wentOffline, WATCHDOG_MS + MARGIN_MS, 'offline after the link went silent');
  assert.equal(room.status() === 'online', false, 'the status no longer says online');
  await room.whenOnline({ timeoutMs: MARGIN_MS });
  assert.deepEqual(statuses.slice(0, 2), ['offline', 'connecting'], `then reconnecting (${statuses.join(' ')})`);
  // The op the silent link swallowed goes out on the new link, once.
  await within(during.authoritative, 10_000, 'the op sent into the silent link, after the reconnect');
  assert.deepEqual(
    room.getState('authoritative').messages.map((m) => m.text),
    ['before', 'during'],
  );
  // The server's heartbeat (two intervals, 400 ms) terminates its side of the silent link; a
  // clean close would wait ws's 30 s for a closing handshake that cannot come.
  await within(cut.targetClosed, MARGIN_MS, "the server's side of the silent link closed");
});
