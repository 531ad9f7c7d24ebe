'use strict';
// The CUDA toolkit, as cuv's meson.build finds it: CUDA_PATH, else CUDA_HOME, else /usr/local/cuda.
// The addon needs only cuda.h, and cuv carries its own declarations of the driver API it uses
// (internal/cuda/cuda.h) for machines without the toolkit; nvcc, where it is, compiles the
// kernels to PTX.
//   CUV_CUDA_HEADERS  auto (the default: the toolkit's cuda.h where there is one), system or
//                     bundled, as cuv's option cuda-headers (its build passes its choice)
//   CUV_NODE_NVCC     nvcc to compile the kernels with; "none": none (cuv's build passes its own)
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

function cudaRoot() {
  const from = process.env.CUDA_PATH ? 'CUDA_PATH' : process.env.CUDA_HOME ? 'CUDA_HOME' : null;
  return { root: from ? process.env[from] : '/usr/local/cuda', from: from || 'the default' };
}

// The folder with the cuda.h to compile with, and what it is (for the build's log line).
function cudaHeaders(cuvRoot) {
  const want = process.env.CUV_CUDA_HEADERS || 'auto';
  if (!['auto', 'system', 'bundled'].includes(want)) {
    throw new Error(`CUV_CUDA_HEADERS=${want}: expected auto, system or bundled`);
  }
  const { root, from } = cudaRoot();
  const system = path.join(root, 'include');
  if (want !== 'bundled' && fs.existsSync(path.join(system, 'cuda.h'))) {
    return { dir: system, what: `${system} (from ${from})` };
  }
  if (want === 'system') {
    throw new Error(`cuda.h not found under ${system} (from ${from}), and ` +
      'CUV_CUDA_HEADERS=system asks for it: set CUDA_PATH or CUDA_HOME to a CUDA toolkit, or ' +
      'leave CUV_CUDA_HEADERS unset');
  }
  return { dir: path.join(cuvRoot, 'internal', 'cuda'), what: 'cuv\'s own (internal/cuda)' };
}

// nvcc: CUV_NODE_NVCC's, else beside the toolkit's headers, else on the PATH; null when there is
// none or CUV_NODE_NVCC is "none".
function findNvcc() {
  const wanted = process.env.CUV_NODE_NVCC;
  if (wanted) return wanted === 'none' ? null : wanted;
  const candidates = [path.join(cudaRoot().root, 'bin', 'nvcc')];
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

// Whether nvcc was turned off on purpose (then its absence is no news to report).
function nvccDisabled() {
  return process.env.CUV_NODE_NVCC === 'none';
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

module.exports = { cudaHeaders, findNvcc, nvccDisabled, compilePtx };
