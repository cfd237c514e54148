/**
 * Debian's Chromium, which the browser tests drive through playwright-core (never a downloaded
 * browser; scripts/ensure-chromium.sh installs it): one lookup for the e2e tests, the consumer
 * test and @hercules/codemirror's browser test.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** $CHROMIUM_PATH when it names a file, else `chromium` on the PATH; undefined when there is none. */
export function findChromium(): string | undefined {
  const env = process.env.CHROMIUM_PATH;
  if (env && existsSync(env)) return env;
  try {
    const p = execFileSync('which', ['chromium'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return p && existsSync(p) ? p : undefined;
  } catch {
    return undefined; // `which` found nothing
  }
}

/** The flags the browser tests launch it with: no sandbox (tests run as root in containers), no background traffic, no GPU. */
export const CHROMIUM_ARGS: readonly string[] = ['--no-sandbox', '--disable-background-networking', '--disable-gpu'];
