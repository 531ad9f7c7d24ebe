'use strict';
// The bench's comparison bindings (baseline.*, src/baseline.c), from the bench's addon with the
// package's API over it (cuv.js): the same results as the package's Promises, computed on the host
// from random data; the same checks of their arguments, thrown by the blocking ones and rejected
// by the thread-pool ones; and a driver failure reported with its CUresult.
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { cuv, baseline, packageDir } = require('../cuv.js');
const { skip, simOnly, randomFloats, assertClose, assertSaxpy, randomMlp, collect } =
  require(path.join(packageDir, 'test', 'fixtures', 'common.js'));

test('the bench runs the package over its own addon, which alone has baseline', () => {
  const native = require(path.join(packageDir, 'build', 'Release', 'cuv_node.node'));
  assert.strictEqual(native.baseline, baseline, "the package's addon is the bench's here");
  assert.strictEqual(cuv.sim, native.sim);
  assert.deepStrictEqual(Object.keys(baseline).sort(), ['launchSync', 'launchWork', 'mlpSync',
    'mlpWork', 'nopSync', 'nopWork', 'saxpySync', 'saxpyWork']);
  assert.strictEqual(cuv.baseline, undefined, "the package's API has no baseline");
});

test('the comparison bindings (blocking, thread pool) compute the same', { skip }, async () => {
  const x = randomFloats(100), y = randomFloats(100);
  const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
  assert.strictEqual(baseline.saxpySync(2, dx, dy), dy);
  assertSaxpy(assert, await cuv.download(dy), 2, x, y);
  const y2 = await cuv.download(dy);
  assert.strictEqual(await baseline.saxpyWork(-3, dx, dy), dy);
  assertSaxpy(assert, await cuv.download(dy), -3, x, y2);
  assert.strictEqual(baseline.nopSync(), undefined);
  assert.strictEqual(await baseline.nopWork(), undefined);
  assert.strictEqual(await cuv.nop(), undefined);
  for (const [rows, dims] of [[1, [64, 128, 16]], [7, [5, 300, 9]]]) {
    const m = await randomMlp(rows, dims);
    const sync = baseline.mlpSync(m.dx, rows, m.device);
    const work = await baseline.mlpWork(m.dx, rows, m.device);
    for (const out of [sync, work]) {
      assert.ok(out instanceof cuv.DeviceBuffer);
      assert.strictEqual(out.length, rows * dims[dims.length - 1]);
      assertClose(assert, await cuv.download(out), m.expected, 1e-4);
    }
    assert.notStrictEqual(sync, work); // each call its own output
  }
});


test('the comparison bindings launch the same kernel: blocking, and on the thread pool', { skip },
  async () => {
    const saxpy = cuv.loadModule(cuv.ptx.saxpy).kernel('saxpy', ['u32', 'f32', 'read', 'rw']);
    const n = 1000, x = randomFloats(n), y = randomFloats(n);
    const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
    assert.strictEqual(baseline.launchSync(saxpy, 8, 128, [n, 2, dx, dy]), undefined);
    assertSaxpy(assert, await cuv.download(dy), 2, x, y);
    const y2 = await cuv.download(dy);
    assert.strictEqual(await baseline.launchWork(saxpy, [8], [128, 1], [n, -3, dx, dy], 0),
      undefined);
    assertSaxpy(assert, await cuv.download(dy), -3, x, y2);
    // launch's checks, thrown by the blocking one and rejected by the other.
    const bad = { code: 'CUV_EINVAL', message: 'invalid argument: args[1] (f32) must be a number' };
    assert.throws(() => baseline.launchSync(saxpy, 1, 1, [n, '2', dx, dy]), bad);
    await assert.rejects(baseline.launchWork(saxpy, 1, 1, [n, '2', dx, dy]), bad);
    await assert.rejects(baseline.launchWork({}, 1, 1, []),
      { code: 'CUV_EINVAL', message: 'invalid argument: the kernel must be a Kernel' });
    assert.throws(() => baseline.launchSync(saxpy, 1, 1, [n, 2, dx, dy], -1),
      { code: 'CUV_EINVAL', message: 'invalid argument: sharedBytes must be a non-negative ' +
        'integer' });
    await assert.rejects(baseline.launchWork(saxpy, 1, 2048, [n, 2, dx, dy]),
      { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    saxpy.dispose();
    assert.throws(() => baseline.launchSync(saxpy, 1, 1, [n, 2, dx, dy]),
      { code: 'CUV_EINVAL', message: 'invalid argument: the Kernel was disposed' });
    assert.deepStrictEqual(await cuv.download(dx), x, 'x is only read');
  });

test('bad arguments: thrown by the blocking bindings, rejected by the pool ones', { skip },
  async () => {
    const x4 = await cuv.upload(new Float32Array(4)), y5 = await cuv.upload(new Float32Array(5));
    const w = await cuv.upload(new Float32Array(6)), b2 = await cuv.upload(new Float32Array(2));
    const gone = await cuv.upload(new Float32Array(4));
    gone.dispose();
    const bad = (detail) => ({ name: 'Error', code: 'CUV_EINVAL', errno: -22,
      message: `invalid argument: ${detail}` });
    assert.throws(() => baseline.saxpySync(2, x4, y5), bad('x and y differ in length (4 and 5)'));
    await assert.rejects(baseline.saxpyWork(2, x4, y5),
      bad('x and y differ in length (4 and 5)'));
    assert.throws(() => baseline.mlpSync(x4, 3, []),
      bad('x has 4 floats, not a multiple of 3 rows'));
    await assert.rejects(baseline.mlpWork(x4, 2, [{ weights: w, bias: b2 }]),
      bad('layers[0].weights has 6 floats, expected 4 (2 outputs x 2 inputs)'));
    await assert.rejects(baseline.mlpWork(gone, 2, [{ weights: w, bias: b2 }]),
      bad('x was disposed'));
    // Nothing was submitted for them, and the buffers are intact.
    assert.strictEqual(cuv.pending(), 0);
    assert.deepStrictEqual(await cuv.download(x4), new Float32Array(4));
  });

test('a driver failure: thrown or rejected with its CUresult; no DeviceBuffer left over', {
  skip: simOnly,
}, async () => {
  const CUDA_ERROR_INVALID_VALUE = 1;
  const x = randomFloats(8), y = randomFloats(8);
  const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
  const m = await randomMlp(2, [3, 4, 2]);
  cuv.sim.fail('cuLaunchKernel', 0, CUDA_ERROR_INVALID_VALUE);
  try {
    assert.throws(() => baseline.saxpySync(2, dx, dy),
      { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    await assert.rejects(baseline.saxpyWork(2, dx, dy),
      { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    await collect(); // what is garbage now goes before the count
    const live = cuv.liveBuffers();
    assert.throws(() => baseline.mlpSync(m.dx, 2, m.device),
      { cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    await assert.rejects(baseline.mlpWork(m.dx, 2, m.device),
      { cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    assert.strictEqual(cuv.liveBuffers(), live); // no DeviceBuffer over a failed output
  } finally {
    cuv.sim.clearFailures();
  }
  assert.strictEqual(cuv.pending(), 0);
  assert.strictEqual(baseline.saxpySync(2, dx, dy), dy);
  assertSaxpy(assert, await cuv.download(dy), 2, x, y);
});
