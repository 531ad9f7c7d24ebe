'use strict';
// The package the way a user gets it (cuv's meson.build runs this for its tests and bench):
// packs it into a tarball, as `npm pack` in this folder would, and installs the tarball with
// `npm install --offline` into a fresh folder, where it builds from what the tarball carries.
// Then it installs the devDependency typescript beside it, from npm's cache where it is there,
// else from the registry (tsc checks index.d.ts in test/types.test.js, which skips without it).
//
//   node scripts/pack-install.js --out DIR [--stamp FILE] [--depfile FILE] [--npm NPM]
// DIR/cuv-<version>.tgz is the tarball, DIR/install/node_modules/cuv the installed package.
// --depfile writes the files the package was made of, for the build tool; --stamp is touched
// when all went well. CUV_NODE_WERROR=1 (passed through to the install) makes warnings errors.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const sources = require('./sources.js');

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

// This node first on the PATH: npm and the install script run with it (`#!/usr/bin/env node`),
// also where the node given to cuv's build (NODE) is not the PATH's.
const env = { ...process.env,
  PATH: [path.dirname(process.execPath), process.env.PATH].filter(Boolean).join(path.delimiter) };

function run(cmd, args, cwd) {
  const result = spawnSync(cmd, args, { cwd, env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) {
    const why = result.error || `exit ${result.status}`;
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}): ${why}`);
  }
}

// The package's own files, as package.json's "files" lists them (vendor/ and ptx/ are made
// below, from the repository).
function packageFiles() {
  const pkg = require('../package.json');
  const listed = pkg.files.filter((f) => !['vendor/', 'ptx/'].includes(f));
  const walk = (rel) => {
    const full = path.join(sources.packageDir, rel);
    return fs.statSync(full).isDirectory()
      ? fs.readdirSync(full).flatMap((f) => walk(path.join(rel, f))) : [rel];
  };
  return ['package.json', 'README.md', ...listed.flatMap(walk)];
}

function stage(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  const files = packageFiles();
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(sources.packageDir, f), path.join(dir, f));
  }
  run(process.execPath, [path.join(__dirname, 'vendor.js'), dir], dir);
  const root = path.dirname(sources.packageDir);
  return [...files.map((f) => path.join(sources.packageDir, f)),
    ...sources.cuvFiles(root).all.map((f) => path.join(root, f))];
}

function install(out, npm, tarball) {
  const dir = path.join(out, 'install');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n');
  const quiet = ['--no-audit', '--no-fund', '--foreground-scripts'];
  run(npm, ['install', '--offline', ...quiet, tarball], dir);
  const typescript = `typescript@${require('../package.json').devDependencies.typescript}`;
  // Short network timeouts: a machine without the registry (a GPU machine) gives up soon.
  const got = spawnSync(npm, ['install', '--prefer-offline', '--no-save', '--fetch-retries=1',
    '--fetch-timeout=30000', ...quiet, typescript], { cwd: dir, env, stdio: 'inherit' });
  if (got.status !== 0) console.warn(`cuv: ${typescript} is not available: types.test.js skips`);
}

function main() {
  const out = path.resolve(option('out', 'pack'));
  const npm = option('npm', 'npm');
  const inputs = stage(path.join(out, 'stage'));
  for (const old of fs.readdirSync(out).filter((f) => f.endsWith('.tgz'))) {
    fs.rmSync(path.join(out, old));
  }
  run(npm, ['pack', '--ignore-scripts', '--pack-destination', out], path.join(out, 'stage'));
  const tarball = fs.readdirSync(out).find((f) => f.endsWith('.tgz'));
  install(out, npm, path.join(out, tarball));
  const depfile = option('depfile');
  const stamp = option('stamp');
  if (depfile) {
    fs.writeFileSync(depfile, `${stamp || tarball}: ${inputs.map((f) => f.replace(/ /g, '\\ '))
      .join(' \\\n  ')}\n`);
  }
  if (stamp) fs.writeFileSync(stamp, `${tarball}\n`);
}

try {
  main();
} catch (e) {
  console.error(`cuv pack-install: ${e.message}`);
  process.exitCode = 1;
}
