'use strict';
// TypedArrays in and out, and DeviceBuffer lifetimes: every element type round trips exactly,
// downloads land in pinned memory handed to JavaScript without a copy (or copied where external
// buffers are refused), pinned arrays upload in place, write() fills part of a buffer, and a
// buffer's reference goes when it is disposed or collected (lifetimes.test.js: not its memory
// while work in flight uses it).
const test = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const { cuv, skip, random, randomFloats, collect, assertSaxpy } =
  require('./fixtures/common.js');

// n random elements of the array type `T`, over its whole range.
function randomArray(T, n) {
  const bytes = new Uint8Array(n * T.BYTES_PER_ELEMENT);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  const array = new T(bytes.buffer);
  if (T === Float32Array || T === Float64Array) { // NaN payloads need not survive a copy
    for (let i = 0; i < n; i++) if (Number.isNaN(array[i])) array[i] = i;
  }
  return array;
}

const types = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
  Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array];

test('every TypedArray type round trips exactly, its type and length kept', { skip }, async () => {
  for (const T of types) {
    for (const n of [1, 7, 4099]) {
      const data = randomArray(T, n);
      const buf = await cuv.upload(data);
      assert.ok(buf instanceof cuv.DeviceBuffer);
      assert.strictEqual(buf.length, n);
      assert.strictEqual(buf.byteLength, n * T.BYTES_PER_ELEMENT);
      assert.strictEqual(buf.type, T.name.replace('Array', '').toLowerCase());
      const back = await cuv.download(buf);
      assert.ok(back instanceof T, `${T.name} back`);
      assert.deepStrictEqual(back, data);
    }
  }
});

test('a download is pinned memory, given to JavaScript without a copy', { skip }, async () => {
  const data = randomFloats(1000);
  const back = await cuv.download(await cuv.upload(data));
  assert.ok(cuv.isPinned(back));
  assert.ok(!cuv.isPinned(data));
  assert.ok(!cuv.isPinned(back.slice()), 'a copy is ordinary memory');
  assert.deepStrictEqual(back, data);
});

test('pinned arrays upload in place and can be reused once the upload settled', { skip },
  async () => {
    const a = cuv.pinned(Float32Array, 4096);
    assert.ok(cuv.isPinned(a));
    assert.deepStrictEqual(a, new Float32Array(4096), 'zeroed');
    const first = randomFloats(4096), second = randomFloats(4096);
    a.set(first);
    const d1 = await cuv.upload(a);
    a.set(second); // after the upload settled: d1 keeps the first data
    const d2 = await cuv.upload(a);
    // A view into the middle uploads its own range.
    const view = new Float32Array(a.buffer, 400, 10);
    assert.ok(cuv.isPinned(view));
    const d3 = await cuv.upload(view);
    assert.deepStrictEqual(await cuv.download(d1), first);
    assert.deepStrictEqual(await cuv.download(d2), second);
    assert.deepStrictEqual(await cuv.download(d3), second.subarray(100, 110));
  });

test('write() puts an array\'s bytes at a byte offset, resolving with the buffer', { skip },
  async () => {
    const base = randomFloats(64), part = randomFloats(10);
    const buf = await cuv.upload(base);
    assert.strictEqual(await cuv.write(buf, part, { byteOffset: 20 }), buf);
    const want = base.slice();
    want.set(part, 5);
    assert.deepStrictEqual(await cuv.download(buf), want);
    const pinnedPart = cuv.pinned(Float32Array, 3);
    pinnedPart.set([1, 2, 3]);
    await cuv.write(buf, pinnedPart);
    want.set([1, 2, 3], 0);
    assert.deepStrictEqual(await cuv.download(buf), want);
  });

test('alloc makes a buffer of a type and length; bad types and lengths throw', { skip },
  async () => {
    const buf = cuv.alloc(Int16Array, 5);
    assert.strictEqual(buf.type, 'int16');
    assert.strictEqual(buf.byteLength, 10);
    const data = Int16Array.of(-5, 4, -3, 2, -1);
    await cuv.write(buf, data);
    assert.deepStrictEqual(await cuv.download(buf), data);
    const bad = (detail) => ({ code: 'CUV_EINVAL', message: `invalid argument: ${detail}` });
    assert.throws(() => cuv.alloc(Array, 4), bad('the type must be a TypedArray constructor'));
    assert.throws(() => cuv.pinned(DataView, 4), bad('the type must be a TypedArray constructor'));
    for (const length of [0, -1, 1.5, NaN, '4', 2 ** 62]) {
      assert.throws(() => cuv.alloc(Float32Array, length), bad('the length must be a positive ' +
        'integer'), `length ${length}`);
    }
    assert.throws(() => new cuv.DeviceBuffer(), bad('DeviceBuffer objects come from cuv.upload ' +
      'or cuv.alloc'));
    assert.throws(() => buf.setHazardMode('sometimes'),
      bad('the mode must be "order", "strict" or "none"'));
    assert.strictEqual(buf.setHazardMode('strict'), buf);
  });

test('dispose() and Symbol.dispose drop the buffer at once; later uses reject', { skip },
  async () => {
    await collect();
    const live = cuv.liveBuffers();
    const a = await cuv.upload(randomFloats(8)), b = await cuv.upload(randomFloats(8));
    a.dispose();
    b[Symbol.dispose]();
    assert.ok(a.disposed && b.disposed);
    a.dispose(); // twice: nothing more happens
    assert.strictEqual(a.length, 8, 'its description stays');
    await assert.rejects(cuv.download(a), { code: 'CUV_EINVAL', message: /was disposed/ });
    await assert.rejects(cuv.saxpy(1, b, b), { code: 'CUV_EINVAL', message: /x was disposed/ });
    assert.throws(() => b.setHazardMode('none'), { code: 'CUV_EINVAL' });
    assert.match(require('node:util').inspect(a),
      /DeviceBuffer \{ type: 'float32', length: 8, disposed \}/);
    assert.strictEqual(cuv.liveBuffers(), live + 2, 'the objects live on; their memory went');
  });

test('a collected DeviceBuffer drops its reference (finalizer)', { skip }, async () => {
  await collect();
  const before = cuv.liveBuffers();
  let handles = await Promise.all(Array.from({ length: 50 },
    () => cuv.upload(new Float32Array(16))));
  assert.strictEqual(cuv.liveBuffers(), before + 50);
  handles = null;
  await collect();
  assert.strictEqual(cuv.liveBuffers(), before, `${cuv.liveBuffers()} handles left of ${before}`);
});

test('buffers made after others were collected reuse their numbers and are found right',
  { skip }, async () => {
    // The numbers hot calls pass for buffers (src/handles.h) go back when a buffer is collected:
    // the new buffers take them, and each saxpy must still reach its own x and y.
    await collect(); /* the earlier tests' garbage goes first: ours is freed last, reused first */
    let old = await Promise.all(Array.from({ length: 40 }, () => cuv.upload(new Float32Array(4))));
    const key = Object.getOwnPropertySymbols(old[0])[0];
    const oldNumbers = new Set(old.map((b) => b[key]));
    assert.strictEqual(oldNumbers.size, 40, 'one number each');
    old = null;
    await collect();
    const cases = Array.from({ length: 40 }, () =>
      ({ a: random() * 4 - 2, x: randomFloats(4), y: randomFloats(4) }));
    const made = [];
    for (const c of cases) made.push({ dx: await cuv.upload(c.x), dy: await cuv.upload(c.y) });
    const reused = made.filter((m) => oldNumbers.has(m.dx[key]) || oldNumbers.has(m.dy[key]));
    assert.strictEqual(reused.length, 20, 'the first 40 new buffers took the collected numbers');
    await Promise.all(made.map((m, i) => cuv.saxpy(cases[i].a, m.dx, m.dy)));
    for (let i = 0; i < cases.length; i++) {
      assertSaxpy(assert, await cuv.download(made[i].dy), cases[i].a, cases[i].x, cases[i].y);
    }
  });

test('where external buffers are refused, downloads and pinned() copy instead', { skip },
  () => {
    // A child process with CUV_NODE_NO_EXTERNAL_BUFFERS=1: the addon behaves as under a runtime
    // that refuses them (Electron's memory cage).
    const script = `
      const cuv = require(${JSON.stringify(require.resolve('../index.js'))});
      (async () => {
        const data = Float64Array.from({ length: 300 }, (_, i) => i * 1.25 - 7);
        const back = await cuv.download(await cuv.upload(data));
        const p = cuv.pinned(Int32Array, 8);
        p.set([1, 2, 3, 4, 5, 6, 7, 8]);
        const again = await cuv.download(await cuv.upload(p));
        console.log(JSON.stringify({ same: back.every((v, i) => v === data[i]) &&
          back.length === data.length, pinned: cuv.isPinned(back) || cuv.isPinned(p),
          type: back.constructor.name, again: Array.from(again) }));
      })();`;
    const child = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8', env: { ...process.env, CUV_NODE_NO_EXTERNAL_BUFFERS: '1' },
    });
    assert.strictEqual(child.status, 0, child.stderr);
    assert.deepStrictEqual(JSON.parse(child.stdout), { same: true, pinned: false,
      type: 'Float64Array', again: [1, 2, 3, 4, 5, 6, 7, 8] });
  });
