#!/usr/bin/env node
// Libraries such as Mutative pick a faster build in production; the server is production
// unless told otherwise. Set before any of them is imported.
process.env.NODE_ENV ??= 'production';
// The CLI as built JavaScript (dist/cli.js, see "imports" in package.json). Inside the Hercules
// repository, whose npm scripts set the "@hercules/source" export condition, '#cli' is the
// TypeScript source instead, run through tsx so no build is needed there.
const cli = import.meta.resolve?.('#cli') ?? '#cli';
if (cli.endsWith('.ts')) (await import('tsx/esm/api')).register();
await import(cli);
