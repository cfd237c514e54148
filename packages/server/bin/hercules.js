#!/usr/bin/env node
// Libraries such as Mutative pick a faster build in production; the server is production
// unless told otherwise. Set before any of them is imported.
process.env.NODE_ENV ??= 'production';
// Runs the TypeScript CLI through tsx's loader (no build step needed).
const { register } = await import('tsx/esm/api');
register();
await import('../src/cli.ts');
