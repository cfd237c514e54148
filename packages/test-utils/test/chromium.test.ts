/** The one Chromium lookup of the browser tests: $CHROMIUM_PATH first, when it names a file; else the PATH. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findChromium, tempDir } from '../src/index.ts';

function withChromiumPath<T>(value: string | undefined, fn: () => T): T {
  const saved = process.env.CHROMIUM_PATH;
  if (value === undefined) delete process.env.CHROMIUM_PATH;
  else process.env.CHROMIUM_PATH = value;
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env.CHROMIUM_PATH;
    else process.env.CHROMIUM_PATH = saved;
  }
}

test('findChromium: $CHROMIUM_PATH wins when it names a file', () => {
  const d = tempDir('chromium');
  try {
    const fake = join(d.dir, 'my-chromium');
    writeFileSync(fake, '');
    assert.equal(
      withChromiumPath(fake, () => findChromium()),
      fake,
    );
  } finally {
    d.cleanup();
  }
});

test('findChromium: a $CHROMIUM_PATH that names no file is ignored, the PATH decides', () => {
  const fromPath = withChromiumPath(undefined, () => findChromium());
  const d = tempDir('chromium');
  try {
    assert.equal(
      withChromiumPath(join(d.dir, 'missing'), () => findChromium()),
      fromPath,
    );
  } finally {
    d.cleanup();
  }
  // On this project's machines Debian's chromium is on the PATH (scripts/ensure-chromium.sh); elsewhere none may be.
  if (fromPath !== undefined) assert.match(fromPath, /chromium/);
});
