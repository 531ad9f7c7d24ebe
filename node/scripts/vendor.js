'use strict';
// Before packing (npm's prepack and prepare): copies the cuv sources the package compiles into
// vendor/cuv, and the kernels' PTX, compiled by nvcc now, into ptx/, so that the tarball builds
// on its own: `npm install <tarball>` needs no checkout of cuv, and no nvcc (the PTX is shipped).
//
//   node scripts/vendor.js [DEST]   DEST: the package folder to fill (default: this package)
// Outside a checkout of cuv (a tarball being installed) there is nothing to copy: it does nothing.
const fs = require('node:fs');
const path = require('node:path');
const sources = require('./sources.js');
const cuda = require('./cuda.js');

function copyFile(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

// ptx/<module>.ptx for each kernel module; without nvcc, none (install then needs nvcc, or runs
// the kernels on the simulator only), and says so unless CUV_NODE_NVCC=none asked for that.
function compileKernels(root, dest) {
  const nvcc = cuda.findNvcc();
  const dir = path.join(dest, 'ptx');
  fs.rmSync(dir, { recursive: true, force: true });
  if (!nvcc) {
    if (!cuda.nvccDisabled()) {
      console.warn('cuv vendor: no nvcc: the package ships no PTX (install needs nvcc for a GPU)');
    }
    return [];
  }
  fs.mkdirSync(dir, { recursive: true });
  return sources.kernelModules.map((kernel) => {
    const { cu } = sources.kernelPaths(root, kernel);
    cuda.compilePtx(nvcc, cu, path.join(dir, `${kernel.name}.ptx`), root);
    return cu;
  });
}

function main(dest) {
  const repo = path.dirname(sources.packageDir);
  if (!fs.existsSync(path.join(repo, 'include', 'cuv.h'))) return;
  const files = sources.cuvFiles(repo).all;
  const vendor = path.join(dest, 'vendor', 'cuv');
  fs.rmSync(vendor, { recursive: true, force: true });
  for (const file of files) copyFile(path.join(repo, file), path.join(vendor, file));
  const compiled = compileKernels(repo, dest);
  console.log(`cuv vendor: ${files.length} files of cuv into ${vendor}, ${compiled.length} ` +
    'kernel modules as PTX');
}

main(path.resolve(process.argv[2] || sources.packageDir));
