'use strict';
// Generic kernels from JavaScript: a PTX module loaded and its kernels launched with typed
// arguments, each scalar type's value reaching the kernel exactly, and arguments checked as cuv
// checks them for C (count and sizes against the kernel's parameters: CUV_EARGS).
const test = require('node:test');
const assert = require('node:assert');
const { cuv, skip, driver, random, randomFloats, assertSaxpy } = require('./fixtures/common.js');

const ECHO = ['i8', 'u8', 'i16', 'u16', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64', 'write'];

// What cuv_node_echo writes for `args`: each as 64 bits (sign-extended, or the float's bits).
function echoed(args) {
  const f32 = new DataView(new ArrayBuffer(4));
  f32.setFloat32(0, args[8], true);
  const f64 = new DataView(new ArrayBuffer(8));
  f64.setFloat64(0, args[9], true);
  return BigUint64Array.from([
    ...args.slice(0, 8).map((v) => BigInt.asUintN(64, BigInt(v))),
    BigInt(f32.getUint32(0, true)), f64.getBigUint64(0, true),
  ]);
}

const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

test('every scalar type reaches the kernel exactly (random values, and each type\'s limits)',
  { skip }, async () => {
    const mod = cuv.loadModule(cuv.ptx.testing);
    const echo = mod.kernel('cuv_node_echo', ECHO);
    assert.strictEqual(echo.name, 'cuv_node_echo');
    const out = cuv.alloc(BigUint64Array, 10);
    const cases = [
      [-128, 0, -32768, 0, -(2 ** 31), 0, -(2n ** 63n), 0n, -0, -Infinity],
      [127, 255, 32767, 65535, 2 ** 31 - 1, 2 ** 32 - 1, 2n ** 63n - 1n, 2n ** 64n - 1n,
        3.4028234663852886e38, Number.MAX_VALUE],
      [int(-128, 127), int(0, 255), int(-32768, 32767), int(0, 65535), int(-(2 ** 31), 2 ** 31 - 1),
        int(0, 2 ** 32 - 1), Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER,
        Math.fround(random() * 1e6 - 5e5), random() * 1e300],
    ];
    for (const args of cases) {
      await echo.launch(1, 1, [...args, out]);
      assert.deepStrictEqual(await cuv.download(out), echoed(args), String(args));
    }
  });

test('saxpy loaded from its PTX and launched with typed arguments matches JavaScript', { skip },
  async () => {
    const saxpy = cuv.loadModule(cuv.ptx.saxpy).kernel('saxpy', ['u32', 'f32', 'read', 'rw']);
    for (const n of [1, 300, 70000]) {
      const a = random() * 4 - 2, x = randomFloats(n), y = randomFloats(n);
      const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
      assert.strictEqual(await saxpy.launch(Math.ceil(n / 128), 128, [n, a, dx, dy]), undefined);
      assertSaxpy(assert, await cuv.download(dy), a, x, y);
      assert.deepStrictEqual(await cuv.download(dx), x, 'read only');
    }
    // Buffers at a byte offset, and dimensions as arrays: y[8..] += 2 x[4..], 8 elements.
    const x = randomFloats(16), y = randomFloats(16);
    const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
    await saxpy.launch([1, 1, 1], [8], [8, 2, { buffer: dx, byteOffset: 16 },
      { buffer: dy, byteOffset: 32 }]);
    const want = y.slice();
    for (let i = 0; i < 8; i++) want[8 + i] = Math.fround(2 * x[4 + i]) + y[8 + i];
    const got = await cuv.download(dy);
    assert.deepStrictEqual(got.subarray(0, 8), y.subarray(0, 8));
    for (let i = 8; i < 16; i++) {
      assert.ok(Math.abs(got[i] - want[i]) <= 1e-6 * (1 + Math.abs(want[i])), `element ${i}`);
    }
  });

test('bad kernels, signatures and arguments are refused with a CuvError', { skip }, async () => {
  const mod = cuv.loadModule(cuv.ptx.saxpy);
  const saxpy = mod.kernel('saxpy', ['u32', 'f32', 'read', 'rw']);
  const x = await cuv.upload(new Float32Array(4));
  const bad = (detail) => ({ code: 'CUV_EINVAL', message: `invalid argument: ${detail}` });
  // Loading and looking up.
  assert.throws(() => cuv.loadModule(''), bad('the image is empty'));
  assert.throws(() => cuv.loadModule(42), bad('the image must be PTX text or a Uint8Array'));
  assert.throws(() => mod.kernel('nope', []), { code: 'CUV_ENOTFOUND', message: /: nope$/ });
  assert.throws(() => mod.kernel('', []), bad('the kernel\'s name must be a non-empty string'));
  assert.throws(() => mod.kernel('x'.repeat(128), []), bad('the kernel\'s name is longer than ' +
    '127 bytes'));
  assert.throws(() => mod.kernel('saxpy', 'u32'), bad('the signature must be an array of ' +
    'parameter kinds'));
  assert.throws(() => mod.kernel('saxpy', ['u32', 'float', 'read', 'rw']), bad('signature[1] is ' +
    'not a kind (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 read write rw)'));
  // The kernel's parameter count, where the driver reports it (the simulator always does).
  if (driver === 'sim') {
    assert.throws(() => mod.kernel('saxpy', ['u32', 'f32', 'read']), { code: 'CUV_EARGS',
      message: /saxpy has 4 parameters, the signature lists 3/ });
  }
  assert.throws(() => new cuv.Kernel(), bad('Kernel objects come from module.kernel'));
  assert.throws(() => new cuv.Module(), bad('Module objects come from cuv.loadModule'));
  // Launching.
  const cases = [
    [[1, 1, [4, 1, x]], { code: 'CUV_EARGS', message: /3 arguments for a signature of 4/ }],
    [[0, 1, [4, 1, x, x]], bad('grid must be a positive integer or an array of one to three')],
    [[1, [1, 1, 1, 1], [4, 1, x, x]], bad('block must be a positive integer or an array of one ' +
      'to three')],
    [[1.5, 1, [4, 1, x, x]], bad('grid must be a positive integer or an array of one to three')],
    [[1, 1, 'args'], bad('the arguments must be an array')],
    [[1, 1, [-1, 1, x, x]], bad('args[0] (u32) must be an integer from 0 to 4294967295')],
    [[1, 1, [2 ** 32, 1, x, x]], bad('args[0] (u32) must be an integer from 0 to 4294967295')],
    [[1, 1, [1.5, 1, x, x]], bad('args[0] (u32) must be an integer from 0 to 4294967295')],
    [[1, 1, [4n, 1, x, x]], bad('args[0] (u32) must be a number')],
    [[1, 1, [4, '1', x, x]], bad('args[1] (f32) must be a number')],
    [[1, 1, [4, 1, x, new Float32Array(4)]], bad('args[3] (rw) must be a DeviceBuffer or ' +
      '{buffer, byteOffset}')],
    [[1, 1, [4, 1, x, { buffer: x, byteOffset: -4 }]], bad('args[3].byteOffset must be a ' +
      'non-negative integer')],
    [[1, 1, [4, 1, x, { buffer: x, byteOffset: 20 }]], { code: 'CUV_ERANGE' }],
    [[1, 2048, [4, 1, x, x]], { code: 'CUV_ECUDA', cuResult: 'CUDA_ERROR_INVALID_VALUE' }],
  ];
  for (const [args, expected] of cases) {
    await assert.rejects(saxpy.launch(...args), expected, JSON.stringify(args, (k, v) =>
      (typeof v === 'bigint' ? `${v}n` : v)));
  }
  for (const sharedBytes of [-1, 1.5, 2 ** 32, '8', NaN]) {
    await assert.rejects(saxpy.launch(1, 1, [4, 1, x, x], { sharedBytes }),
      bad('sharedBytes must be a non-negative integer'), String(sharedBytes));
  }
  const i64 = cuv.loadModule(cuv.ptx.testing).kernel('cuv_node_echo', ECHO);
  const out = cuv.alloc(BigUint64Array, 10);
  const ok = [0, 0, 0, 0, 0, 0, 0n, 0n, 0, 0, out];
  for (const [k, v, why] of [[6, 2n ** 63n, 'i64'], [7, -1n, 'u64'], [7, 2 ** 53, 'u64']]) {
    const args = ok.slice();
    args[k] = v;
    await assert.rejects(i64.launch(1, 1, args),
      { code: 'CUV_EINVAL', message: new RegExp(`args\\[${k}\\] \\(${why}\\)`) });
  }
  // A signature that disagrees with the kernel's parameter sizes: cuv_launch's own check.
  if (driver === 'sim') {
    const wide = mod.kernel('saxpy', ['u64', 'f32', 'read', 'rw']);
    await assert.rejects(wide.launch(1, 1, [4, 1, x, x]), { code: 'CUV_EARGS' });
  }
  assert.strictEqual(cuv.pending(), 0, 'nothing refused was submitted');
});

test('a disposed module or kernel refuses; a kernel keeps its module loaded', { skip },
  async () => {
    const mod = cuv.loadModule(Buffer.from(cuv.ptx.saxpy)); // an image as bytes works too
    const saxpy = mod.kernel('saxpy', ['u32', 'f32', 'read', 'rw']);
    mod[Symbol.dispose]();
    assert.throws(() => mod.kernel('saxpy', []), { code: 'CUV_EINVAL',
      message: /the Module was disposed/ });
    const x = Float32Array.of(1, 2), y = Float32Array.of(3, 4);
    const [dx, dy] = await Promise.all([cuv.upload(x), cuv.upload(y)]);
    await saxpy.launch(1, 2, [2, 3, dx, dy]);
    assert.deepStrictEqual(await cuv.download(dy), Float32Array.of(6, 10));
    const launched = saxpy.launch(1, 2, [2, 1, dx, dy]);
    saxpy.dispose(); // the launch in flight holds the kernel
    await launched;
    assert.deepStrictEqual(await cuv.download(dy), Float32Array.of(7, 12));
    await assert.rejects(saxpy.launch(1, 2, [2, 1, dx, dy]), { code: 'CUV_EINVAL',
      message: /the Kernel was disposed/ });
  });
