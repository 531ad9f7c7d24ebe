'use strict';
// What the bench runs: the package's API (its index.js) over the bench's addon, and the
// comparison bindings that addon adds (`baseline`, src/baseline.c). The bench's addon is the
// package's own objects linked with the bench's entry (binding.gyp), so a Promise and its
// comparison run the same compiled cuv, in one instance of it per process. build.js puts this file
// in the bench's folder beside `package`, a link to the installed package it was built from, and
// build/Release/cuv_node_bench.node.
//
// The package's index.js loads its addon by path; the bench's addon stands in for it in require's
// cache under that path, so that index.js and everything that requires the package (the package's
// test fixtures, in the bench's tests) get the same one. The package's own addon never loads.
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

const packageLink = path.join(__dirname, 'package');
const benchAddon = path.join(__dirname, 'build', 'Release', 'cuv_node_bench.node');
if (!fs.existsSync(benchAddon) || !fs.existsSync(packageLink)) {
  throw new Error(`cuv bench: ${__dirname} has no built bench (its package link and ` +
    'build/Release/cuv_node_bench.node): run node bench/build.js --package DIR --out DIR and ' +
    'the bench from DIR (cuv\'s build does: build/node/bench)');
}
const packageDir = fs.realpathSync(packageLink);
const packageAddon = fs.realpathSync(path.join(packageDir, 'build', 'Release', 'cuv_node.node'));

const native = require(benchAddon);
const cached = require.cache[packageAddon];
if (cached && cached.exports !== native) {
  throw new Error(`cuv bench: the package's addon (${packageAddon}) was loaded before the ` +
    'bench\'s: load cuv.js first, so that one cuv runs in the process');
}
if (!cached) {
  const standIn = new Module(packageAddon, module);
  standIn.filename = packageAddon;
  standIn.loaded = true;
  standIn.exports = native;
  require.cache[packageAddon] = standIn;
}
const cuv = require(packageDir);

module.exports = { cuv, baseline: native.baseline, packageDir };
