#!/usr/bin/env node
// `npm run build [-- FILE]`: transpile the kernel component into gen/ (see
// src/component.js for where it is looked up and how the folder is keyed).
import { componentPath, transpileComponent } from '../src/component.js';

const path = componentPath(process.argv[2]);
try {
  const dir = await transpileComponent(path);
  console.log(`transpiled ${path} -> ${dir}`);
} catch (e) {
  console.error(`gak transpile: ${e.message}`);
  process.exit(1);
}
