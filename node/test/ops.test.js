'use strict';
// The built-in ops on the driver of the run: results against JavaScript computations on random
// data, rejections for bad input and driver failures, and many Promises in flight at once.
const test = require('node:test');
const assert = require('node:assert');
const { cuv, skip, simOnly, random, randomFloats, assertClose, assertSaxpy, randomMlp, collect } =
  require('./fixtures/common.js');

test('upload then download gives the same floats back', { skip }, async () => {
  for (const n of [1, 255, 256, 257, 100003]) {
    const data = randomFloats(n, 1000);
    const buf = await cuv.upload(data);
    assert.strictEqual(buf.length, n);
    assert.deepStrictEqual(await cuv.download(buf), data);
  }
});

test('upload copies at once: changing the array after the call changes nothing', { skip },
  async () => {
  const data = randomFloats(1000);
  const copy = data.slice();
  const pending = cuv.upload(data);
  data.fill(7);
  assert.deepStrictEqual(await cuv.download(await pending), copy);
});

test('saxpy matches a*x + y computed in JavaScript, and resolves to y', { skip }, async () => {
  for (const n of [1, 1000, 65537]) {
    const a = random() * 8 - 4;
    const x = randomFloats(n, 100), y = randomFloats(n, 100);
    const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
    const result = await cuv.saxpy(a, dx, dy);
    assert.strictEqual(result, dy);
    assertSaxpy(assert, await cuv.download(dy), a, x, y);
    assertClose(assert, await cuv.download(dx), x, 0); // x is only read
  }
});

test('mlp matches a forward pass computed in JavaScript', { skip }, async () => {
  const shapes = [[1, [3, 2]], [5, [7, 16, 3]], [64, [64, 128, 16]], [3, [10, 32, 32, 4]]];
  for (const [rows, dims] of shapes) {
    const m = await randomMlp(rows, dims);
    const out = await cuv.mlp(m.dx, rows, m.device);
    assert.strictEqual(out.length, rows * dims[dims.length - 1]);
    assertClose(assert, await cuv.download(out), m.expected, 1e-4);
  }
});

test('bad arguments reject with cuv_strerror messages and CUV_* codes', { skip }, async () => {
  const x4 = await cuv.upload(new Float32Array(4)), y5 = await cuv.upload(new Float32Array(5));
  const w = await cuv.upload(new Float32Array(6)), b2 = await cuv.upload(new Float32Array(2));
  const i4 = await cuv.upload(new Int32Array(4));
  const gone = await cuv.upload(new Float32Array(4));
  gone.dispose();
  // An object that claims a number under the symbol DeviceBuffers carry theirs under.
  const forged = (real, number) => {
    const [key] = Object.getOwnPropertySymbols(real);
    return Object.defineProperty(Object.create(cuv.DeviceBuffer.prototype), key, { value: number });
  };
  const bad = (detail) => ({ name: 'Error', code: 'CUV_EINVAL', errno: -22,
    message: `invalid argument: ${detail}` });
  const cases = [
    [() => cuv.upload([1, 2, 3]), bad('expected a TypedArray')],
    [() => cuv.upload(), bad('expected a TypedArray')],
    [() => cuv.upload(new Float32Array(0)), bad('the array is empty')],
    [() => cuv.upload(new Float32Array(1), 'signal'), bad('options must be an object')],
    [() => cuv.upload(new Float32Array(1), { signal: {} }),
      bad('options.signal must be an AbortSignal')],
    [() => cuv.download(new Float32Array(4)), bad('the argument must be a DeviceBuffer')],
    [() => cuv.download({ length: 4 }), bad('the argument must be a DeviceBuffer')],
    [() => cuv.download(gone), bad('the argument was disposed')],
    [() => cuv.write(x4, [1]), bad('expected a TypedArray')],
    [() => cuv.write(x4, new Float32Array(1), { byteOffset: -4 }),
      bad('byteOffset must be a non-negative integer')],
    [() => cuv.saxpy('2', x4, x4), bad('a must be a number')],
    [() => cuv.saxpy(2, new Float32Array(4), x4), bad('x must be a DeviceBuffer')],
    [() => cuv.saxpy(2, x4, null), bad('y must be a DeviceBuffer')],
    [() => cuv.saxpy(2, x4, gone), bad('y was disposed')],
    // A number is never taken for a buffer's (src/handles.h), nor is an object that only looks
    // like a DeviceBuffer, even one carrying a number under the buffers' symbol.
    [() => cuv.saxpy(2, 0, x4), bad('x must be a DeviceBuffer')],
    [() => cuv.saxpy(2, x4, 1), bad('y must be a DeviceBuffer')],
    [() => cuv.saxpy(2, Object.create(cuv.DeviceBuffer.prototype), x4),
      bad('x must be a DeviceBuffer')],
    [() => cuv.saxpy(2, x4, forged(x4, 1e6)), bad('y must be a DeviceBuffer')],
    [() => cuv.saxpy(2, x4, forged(x4, -1)), bad('y must be a DeviceBuffer')],
    [() => cuv.saxpy(2, forged(x4, 0.5), x4), bad('x must be a DeviceBuffer')],
    [() => cuv.saxpy(2, i4, x4), bad('x must hold float32, not int32')],
    [() => cuv.saxpy(2, x4, y5), bad('x and y differ in length (4 and 5)')],
    [() => cuv.mlp(x4, 0, []), bad('rows must be a positive integer')],
    [() => cuv.mlp(x4, 3, []), bad('x has 4 floats, not a multiple of 3 rows')],
    [() => cuv.mlp(x4, 2, []), bad('layers must be a non-empty array')],
    [() => cuv.mlp(x4, 2, [{ weights: w }]),
      bad('layers[0] must be {weights, bias} of float32 DeviceBuffers')],
    [() => cuv.mlp(x4, 2, [{ weights: w, bias: b2 }, { weights: x4, bias: x4 }]),
      bad('layers[0].weights has 6 floats, expected 4 (2 outputs x 2 inputs)')],
    [() => cuv.mlp(x4, 2, [{ weights: x4, bias: b2 }, { weights: x4, bias: y5 }]),
      bad('layers[1].weights has 4 floats, expected 10 (5 outputs x 2 inputs)')],
  ];
  for (const [call, expected] of cases) {
    const promise = call();
    assert.ok(promise instanceof Promise, `${call}: returns a Promise`);
    await assert.rejects(promise, expected, `${call}`);
  }
  // Past the end of the buffer: cuv's own range check.
  await assert.rejects(cuv.write(x4, new Float32Array(2), { byteOffset: 12 }),
    { code: 'CUV_ERANGE', errno: -34 });
  // Nothing was submitted for them, and the buffers are intact.
  assert.strictEqual(cuv.pending(), 0);
  assert.deepStrictEqual(await cuv.download(x4), new Float32Array(4));
});

test('a driver failure rejects with CUV_ECUDA and the CUresult; the next call succeeds', {
  skip: simOnly,
}, async () => {
  const CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2;
  const x = randomFloats(8), y = randomFloats(8);
  const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
  cuv.sim.fail('cuLaunchKernel', 0, CUDA_ERROR_INVALID_VALUE);
  try {
    await assert.rejects(cuv.saxpy(2, dx, dy), { code: 'CUV_ECUDA', errno: -10001,
      cuResult: 'CUDA_ERROR_INVALID_VALUE', message: 'invalid argument' });
    const m = await randomMlp(2, [3, 4, 2]);
    await collect(); // what is garbage now goes before the count
    const live = cuv.liveBuffers();
    await assert.rejects(cuv.mlp(m.dx, 2, m.device), { cuResult: 'CUDA_ERROR_INVALID_VALUE' });
    assert.strictEqual(cuv.liveBuffers(), live); // no DeviceBuffer over a failed output
  } finally {
    cuv.sim.clearFailures();
  }
  cuv.sim.fail('cuMemAlloc', 0, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    await assert.rejects(cuv.upload(x), { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_OUT_OF_MEMORY',
      message: 'out of memory' });
    assert.throws(() => cuv.alloc(Float32Array, 4), { cuResult: 'CUDA_ERROR_OUT_OF_MEMORY' });
  } finally {
    cuv.sim.clearFailures();
  }
  assert.strictEqual(cuv.pending(), 0);
  await cuv.saxpy(2, dx, dy);
  assertSaxpy(assert, await cuv.download(dy), 2, x, y);
});

test('mlp allocates its layers stream-ordered: no cuMemAlloc, a failed cuMemAllocAsync rejects', {
  skip: simOnly,
}, async () => {
  const CUDA_ERROR_OUT_OF_MEMORY = 2;
  const m = await randomMlp(3, [5, 9, 4]);
  const [sync, async] = [cuv.sim.calls('cuMemAlloc'), cuv.sim.calls('cuMemAllocAsync')];
  cuv.sim.fail('cuMemAlloc', 0, CUDA_ERROR_OUT_OF_MEMORY); // every cuMemAlloc from now on
  try {
    const out = await cuv.mlp(m.dx, 3, m.device);
    assert.strictEqual(out.length, 3 * 4);
    assertClose(assert, await cuv.download(out), m.expected, 1e-4);
    out.dispose();
  } finally {
    cuv.sim.clearFailures();
  }
  assert.strictEqual(cuv.sim.calls('cuMemAlloc') - sync, 0);
  assert.strictEqual(cuv.sim.calls('cuMemAllocAsync') - async, 2); // one per layer
  await collect(); // what is garbage now (out, and earlier tests' buffers) goes before the count
  const live = cuv.liveBuffers();
  for (const nth of [1, 2]) { // the first layer's output, then the second's
    cuv.sim.fail('cuMemAllocAsync', nth, CUDA_ERROR_OUT_OF_MEMORY);
    try {
      await assert.rejects(cuv.mlp(m.dx, 3, m.device),
        { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_OUT_OF_MEMORY' });
    } finally {
      cuv.sim.clearFailures();
    }
  }
  assert.strictEqual(cuv.liveBuffers(), live); // no DeviceBuffer over a failed output
  assert.strictEqual(cuv.pending(), 0);
  const again = await cuv.mlp(m.dx, 3, m.device); // the next call succeeds
  assertClose(assert, await cuv.download(again), m.expected, 1e-4);
});

test('a thousand Promises in flight at once all resolve correctly', { skip }, async () => {
  const n = 1000;
  const jobs = Array.from({ length: n }, (_, i) => ({
    a: i % 7 - 3, x: randomFloats(1 + (i % 97)), y: randomFloats(1 + (i % 97)),
  }));
  const results = await Promise.all(jobs.map(async ({ a, x, y }) => {
    const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
    return cuv.download(await cuv.saxpy(a, dx, dy));
  }));
  results.forEach((got, i) => assertSaxpy(assert, got, jobs[i].a, jobs[i].x, jobs[i].y));
  // And a thousand submitted in one go, without awaiting between them.
  const nops = await Promise.all(Array.from({ length: n }, () => cuv.nop()));
  assert.strictEqual(nops.length, n);
  assert.strictEqual(cuv.pending(), 0);
});

test('saxpys on one y in flight together are applied in order, none lost', { skip }, async () => {
  // Small integers: every sum is exact, so y must be exactly x * count, whatever the order.
  const n = 4096, count = 200;
  const x = Float32Array.from({ length: n }, (_, i) => (i % 5) - 2);
  const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(new Float32Array(n))]);
  const all = await Promise.all(Array.from({ length: count }, () => cuv.saxpy(1, dx, dy)));
  assert.ok(all.every((r) => r === dy));
  assert.deepStrictEqual(await cuv.download(dy), x.map((v) => v * count));
});

test('libuv: the addon runs on the libuv of the node process', () => {
  // Compiled against the uv.h of Node's headers; uv_* resolve to node's own libuv at load time.
  const major = (v) => v.split('.').slice(0, 2).join('.');
  assert.strictEqual(major(cuv.uvVersion.header), major(cuv.uvVersion.runtime));
  assert.strictEqual(cuv.uvVersion.runtime, process.versions.uv);
});
