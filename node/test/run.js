'use strict';
// npm test: the package's tests (test/*.test.js) with node --test, on the CPU simulator
// (CUV_DRIVER=sim), then on the GPU where a CUDA driver loads. `--driver sim` or `--driver cuda`
// runs one of the two (cuv's meson.build does, per suite); other arguments are node --test's
// (--test-reporter=tap, --test-name-pattern=...).
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const files = fs.readdirSync(__dirname).filter((f) => f.endsWith('.test.js')).sort()
  .map((f) => path.join(__dirname, f));

const args = process.argv.slice(2);
const at = args.indexOf('--driver');
const only = at >= 0 ? args.splice(at, 2)[1] : null;

function run(driver) {
  console.error(`cuv: node --test with CUV_DRIVER=${driver}`); // stdout: TAP's alone
  // Modules loaded eagerly, as cuv's gpu suite runs (tests/meson.build): with lazy loading, the
  // first launch of a kernel waits for the gate kernel (fixtures/common.js) that is running.
  const env = { CUDA_MODULE_LOADING: 'EAGER', ...process.env, CUV_DRIVER: driver };
  const child = spawnSync(process.execPath, ['--test', ...args, ...files],
    { stdio: 'inherit', env });
  return child.status === null ? 1 : child.status;
}

function cudaLoads() {
  const probe = spawnSync(process.execPath, ['-p', `require(${JSON.stringify(
    path.dirname(__dirname))}).driver()`], { encoding: 'utf8',
    env: { ...process.env, CUV_DRIVER: 'cuda' } });
  return probe.stdout.trim() === 'cuda';
}

if (only) {
  process.exitCode = run(only);
} else {
  const status = run('sim');
  if (cudaLoads()) process.exitCode = run('cuda') || status;
  else console.error('cuv: no CUDA driver loads here: the GPU run is skipped');
  process.exitCode ||= status;
}
