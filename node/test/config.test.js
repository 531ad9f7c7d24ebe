'use strict';
// cuv.config(): the configuration in force, the package's default policy over as many streams as
// the GPU has queues (CUDA_DEVICE_MAX_CONNECTIONS, else 8) where CUV_STREAMS is unset, CUV_STREAMS
// itself, the package's submission ring (CUV_SUBMIT_RING), and an invalid environment, each in a node of its own (cuv reads its configuration
// once per process).
const test = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const { cuv, skip, simOnly } = require('./fixtures/common.js');

// Runs `script` (with `cuv` required) in a child node whose environment has `env` added (a value
// of undefined removes the variable); returns its stdout parsed as JSON.
function inChild(script, env) {
  const childEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  const child = spawnSync(process.execPath, ['-e',
    `const cuv = require(${JSON.stringify(require.resolve('../index.js'))});\n${script}`],
  { encoding: 'utf8', env: childEnv });
  assert.strictEqual(child.status, 0, child.stderr);
  return JSON.parse(child.stdout);
}

test('config() tells the configuration in force', { skip }, () => {
  const c = cuv.config();
  assert.strictEqual(c.driver, cuv.driver());
  const queues = Number(process.env.CUDA_DEVICE_MAX_CONNECTIONS);
  const expected = process.env.CUV_STREAMS ? Number(process.env.CUV_STREAMS)
    : Number.isInteger(queues) && queues >= 1 && queues <= 32 ? queues : 8;
  assert.strictEqual(c.streams, expected);
  assert.ok(Number.isInteger(c.submitThreads) && c.submitThreads <= 64);
  assert.ok(['idle', 'never', 'always'].includes(c.submitInline));
  assert.ok(['off', 'spin', 'block'].includes(c.hostSync));
  assert.strictEqual(typeof c.strictHazards, 'boolean');
  for (const key of ['submitRing', 'spinBudgetUs', 'uvPollMaxUs']) {
    assert.ok(Number.isInteger(c[key]) && c[key] >= 0, key);
  }
  assert.deepStrictEqual(cuv.config(), c, 'the same at every call');
});

test('the default policy has a stream per GPU queue; CUV_STREAMS and the others are read',
  { skip }, () => {
    const script = 'console.log(JSON.stringify(cuv.config()));';
    const streams = (env) => inChild(script, { CUV_STREAMS: undefined, ...env }).streams;
    assert.strictEqual(streams({ CUDA_DEVICE_MAX_CONNECTIONS: undefined }), 8);
    for (const queues of [1, 12, 32]) {
      assert.strictEqual(streams({ CUDA_DEVICE_MAX_CONNECTIONS: String(queues) }), queues);
    }
    for (const bad of ['0', '33', '8x', '-4', ' 8', '']) {
      assert.strictEqual(streams({ CUDA_DEVICE_MAX_CONNECTIONS: bad }), 8, `"${bad}"`);
    }
    assert.strictEqual(streams({ CUDA_DEVICE_MAX_CONNECTIONS: '12', CUV_STREAMS: '3' }), 3);
    const set = inChild(script, { CUV_STREAMS: '7', CUV_SUBMIT_THREADS: '3',
      CUV_HOST_SYNC: 'block', CUV_STRICT_HAZARDS: '1', CUV_SUBMIT_INLINE: 'never' });
    assert.deepStrictEqual([set.streams, set.submitThreads, set.hostSync, set.strictHazards,
      set.submitInline], [7, 3, 'block', true, 'never']);
  });

test('the submission ring holds 16 384 where CUV_SUBMIT_RING is unset; the variable wins',
  { skip }, () => {
    const script = 'console.log(JSON.stringify(cuv.config()));';
    const ring = (env) => inChild(script, { CUV_SUBMIT_RING: undefined, ...env }).submitRing;
    assert.strictEqual(ring({}), 16384);
    assert.strictEqual(ring({ CUV_SUBMIT_RING: '' }), 16384, 'empty counts as unset');
    assert.strictEqual(ring({ CUV_STREAMS: '3' }), 16384, 'with CUV_STREAMS set too');
    assert.strictEqual(ring({ CUV_SUBMIT_RING: '1024' }), 1024);
    assert.strictEqual(ring({ CUV_SUBMIT_RING: '64', CUV_STREAMS: '3' }), 64);
  });

test('the default policy creates that many streams, and ops spread over them', { skip: simOnly },
  () => {
    // Streams made by the first ops (the default policy is created at the first op on it), and
    // the results of as many saxpys as twice the streams, all in flight at once.
    const script = `(async () => {
      const n = 2 * cuv.config().streams;
      const before = cuv.sim.calls('cuStreamCreate');
      const xs = [], ys = [];
      for (let i = 0; i < n; i++) {
        xs.push(await cuv.upload(Float32Array.of(i)));
        ys.push(await cuv.upload(Float32Array.of(1)));
      }
      await cuv.saxpy(2, xs[0], ys[0]);
      const made = cuv.sim.calls('cuStreamCreate') - before;
      await Promise.all(xs.slice(1).map((x, i) => cuv.saxpy(2, x, ys[i + 1])));
      const got = [];
      for (const y of ys) got.push((await cuv.download(y))[0]);
      console.log(JSON.stringify({ made, got }));
    })();`;
    for (const [value, streams] of [[undefined, 11], ['5', 5]]) {
      const r = inChild(script, { CUV_STREAMS: value, CUDA_DEVICE_MAX_CONNECTIONS: '11' });
      assert.strictEqual(r.made, streams, `CUV_STREAMS=${value}`);
      assert.deepStrictEqual(r.got, Array.from({ length: 2 * streams },
        (_, i) => 2 * i + 1));
    }
  });

// A driver that does not load: the Error thrown (device()) and the one a Promise rejects with
// (upload()) both carry cuv_init_error's reason, the library tried and the loader's words, not
// only cuv_strerror's pointer to it.
test('a driver that does not load: the errors say which library and why', () => {
  const script = `(async () => {
    const out = { driver: cuv.driver() };
    try { cuv.device(); } catch (e) { out.thrown = { code: e.code, message: e.message }; }
    try {
      await cuv.upload(Float32Array.of(1));
    } catch (e) { out.rejected = { code: e.code, message: e.message }; }
    console.log(JSON.stringify(out));
  })();`;
  const path = '/nonexistent/cuv-node-test/libcuda.so.1';
  const r = inChild(script, { CUV_DRIVER: path });
  assert.strictEqual(r.driver, null);
  for (const e of [r.thrown, r.rejected]) {
    assert.strictEqual(e.code, 'CUV_ENODRIVER');
    assert.ok(e.message.includes(`cannot load the driver "${path}"`), e.message);
    assert.ok(e.message.includes(`${path}: cannot open shared object file`), e.message);
  }
  // The default driver, where it does not load here: libcuda.so.1 and the loader's reason (or,
  // where a library loads without a usable GPU, cuInit's result).
  const d = inChild(script, { CUV_DRIVER: undefined });
  const why = new RegExp('cannot load the driver "cuda" \\(libcuda\\.so\\.1\\): libcuda\\.so\\.1: |' +
    'the driver "cuda" did not start: cuInit failed');
  if (d.driver === null) {
    for (const e of [d.thrown, d.rejected]) {
      assert.strictEqual(e.code, 'CUV_ENODRIVER');
      assert.match(e.message, why);
    }
  }
});

test('an invalid CUV_STREAMS is refused with what it takes', { skip }, () => {
  const r = inChild(`let error = null;
    try { cuv.config(); } catch (e) { error = { code: e.code, message: e.message }; }
    console.log(JSON.stringify({ error, driver: cuv.driver() }));`, { CUV_STREAMS: '0' });
  assert.strictEqual(r.error.code, 'CUV_EINVAL');
  assert.match(r.error.message, /CUV_STREAMS=0: expected streams from 1 to 1024/);
  assert.strictEqual(r.driver, null, 'no driver loads with an invalid configuration');
});
