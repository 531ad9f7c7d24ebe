'use strict';
// The CUDA toolkit, as cuv's meson.build finds it: CUDA_PATH, else CUDA_HOME, else /usr/local/cuda
// (cuda.h is all the addon needs; nvcc, where it is, compiles the kernels to PTX).
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

function cudaRoot() {
  const from = process.env.CUDA_PATH ? 'CUDA_PATH' : process.env.CUDA_HOME ? 'CUDA_HOME' : null;
  const root = from ? process.env[from] : '/usr/local/cuda';
  if (!fs.existsSync(path.join(root, 'include', 'cuda.h'))) {
    throw new Error(`cuda.h not found under ${root}/include (from ${from || 'the default'}): ` +
      'cuv needs the CUDA headers; set CUDA_PATH or CUDA_HOME to a CUDA toolkit');
  }
  return root;
}

// nvcc beside the headers, else on the PATH; null when there is none.
function findNvcc(root) {
  const candidates = [];
  if (root) candidates.push(path.join(root, 'bin', 'nvcc'));
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir) candidates.push(path.join(dir, 'nvcc'));
  }
  return candidates.find((file) => {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }) || null;
}

// Compiles `cu` to PTX at `out`, seeing cuv's include folder (cuv/kernel.h's CUV_OUT markers);
// throws with nvcc's output when it fails.
function compilePtx(nvcc, cu, out, cuvRoot) {
  const args = ['-ptx', '-I', path.join(cuvRoot, 'include'), '-o', out, cu];
  const result = spawnSync(nvcc, args, { encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`${nvcc} -ptx ${cu} failed:\n${result.stderr || result.error}`);
  }
}

module.exports = { cudaRoot, findNvcc, compilePtx };
