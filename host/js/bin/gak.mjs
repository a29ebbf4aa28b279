#!/usr/bin/env node
// `node host/js/bin/gak.mjs demo | conformance` — the JavaScript host's
// counterpart of the `gak` binary.
import { runCli } from '../src/cli.js';

process.exitCode = await runCli(process.argv.slice(2));
