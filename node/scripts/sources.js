'use strict';
// Where the package finds cuv's sources, and which of them it compiles. One place for the layout,
// read by build.js (the install build) and vendor.js (the copy a tarball carries).
//
// In the repository the package folder sits at the top, so cuv is its parent folder; in a tarball
// cuv is the copy under vendor/cuv that vendor.js made when the package was packed. The lists of C
// files come from cuv's own meson.build files (lib/ and sim/), so a file added to the library is
// picked up here without a second list to keep.
const fs = require('node:fs');
const path = require('node:path');

const packageDir = path.resolve(__dirname, '..');
const vendorDir = path.join(packageDir, 'vendor', 'cuv');

// The kernel modules embedded as PTX: a .cu compiled by nvcc, and the listing of its entry names
// that libcuv-sim accepts where nvcc is absent (not loadable by a GPU). `from: 'cuv'` files are
// cuv's, `from: 'package'` ones the package's own (kernels/: copies of cuv's saxpy sample
// and of tcp-infer's dense layer, so that the package builds from node/ alone; kernels/README.md
// says what must match their origins, which cuv's test node-kernels checks).
const kernelModules = [
  { name: 'saxpy', from: 'package', cu: 'kernels/saxpy.cu', listing: 'kernels/saxpy-sim.ptx' },
  { name: 'mlp', from: 'package', cu: 'kernels/mlp.cu', listing: 'kernels/mlp-sim.ptx' },
  { name: 'testing', from: 'package', cu: 'kernels/testing.cu',
    listing: 'kernels/testing-sim.ptx' },
];

function isCuvRoot(dir) {
  return fs.existsSync(path.join(dir, 'include', 'cuv.h')) &&
    fs.existsSync(path.join(dir, 'lib', 'meson.build'));
}

// cuv's root folder: the repository around the package, else the vendored copy.
function cuvRoot() {
  const repo = path.dirname(packageDir);
  if (isCuvRoot(repo)) return repo;
  if (isCuvRoot(vendorDir)) return vendorDir;
  throw new Error(`cuv's sources are neither around ${packageDir} (a checkout of the repository) ` +
    `nor in ${vendorDir} (a packed tarball): pack the package with npm pack, which vendors them`);
}

// The quoted file names of `NAME = files(...)` in a meson.build, comments dropped.
function mesonFiles(root, file, name) {
  const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/#.*$/gm, '');
  const match = new RegExp(`${name}\\s*=\\s*files\\(([^)]*)\\)`).exec(text);
  if (!match) throw new Error(`${file}: no "${name} = files(...)" to read the sources from`);
  const dir = path.dirname(file);
  return [...match[1].matchAll(/'([^']+)'/g)].map((m) => path.join(dir, m[1]));
}

// cuv's version (the project() of the top meson.build), for cuv/version.h and the sim's soname.
function cuvVersion(root) {
  const text = fs.readFileSync(path.join(root, 'meson.build'), 'utf8');
  const match = /project\([^)]*?version:\s*'(\d+)\.(\d+)\.(\d+)'/s.exec(text);
  if (!match) throw new Error('meson.build: no project version');
  const [major, minor, patch] = match.slice(1, 4).map(Number);
  return { major, minor, patch, string: `${major}.${minor}.${patch}` };
}

function listDir(root, dir, suffixes) {
  const full = path.join(root, dir);
  return fs.readdirSync(full).filter((f) => suffixes.some((s) => f.endsWith(s)))
    .sort().map((f) => path.join(dir, f));
}

// Every file of cuv the package compiles or includes, relative to the root; `lib` and `sim` are
// the translation units of libcuv and libcuv-sim, `addon` those compiled into the addon beside
// lib.
function cuvFiles(root) {
  const lib = mesonFiles(root, 'lib/meson.build', 'cuv_sources');
  const sim = mesonFiles(root, 'sim/meson.build', 'cuv_sim_sources');
  const addon = ['uv/bridge.c'];
  const headers = [
    ...listDir(root, 'lib', ['.h']), ...listDir(root, 'sim', ['.h']),
    ...listDir(root, 'internal', ['.h']), ...listDir(root, 'internal/cuda', ['.h']),
    ...listDir(root, 'include', ['.h']),
    ...listDir(root, 'include/cuv', ['.h', '.h.in']),
  ];
  const kernels = kernelModules.filter((k) => k.from === 'cuv').flatMap((k) => [k.cu, k.listing]);
  const meta = ['meson.build', 'lib/meson.build', 'sim/meson.build', 'LICENSE'];
  return { lib, sim, addon, all: [...lib, ...sim, ...addon, ...headers, ...kernels, ...meta] };
}

// A kernel module's files as absolute paths.
function kernelPaths(root, kernel) {
  const base = kernel.from === 'cuv' ? root : packageDir;
  return { cu: path.join(base, kernel.cu), listing: path.join(base, kernel.listing) };
}

module.exports = {
  packageDir, vendorDir, kernelModules, cuvRoot, cuvFiles, cuvVersion, kernelPaths,
};
