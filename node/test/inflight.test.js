'use strict';
// Many calls in flight (src/jobs.c): they reach the GPU in the order they were made; 5 000 made at
// once leave their driver calls to the engine's threads; a buffer disposed right after a call
// stays until its op ran; a call cuv refuses while many are in flight rejects without waiting for
// the GPU, also when buffers are collected meanwhile; node still exits by itself, and only once
// every call settled.
const test = require('node:test');
const assert = require('node:assert');
const { cuv, skip, simOnly, random, collect, until, gate, runFixture } =
  require('./fixtures/common.js');

const LANES = 64;
const ROUNDS = 20;
const N = 32;
const GARBAGE = 8; // DeviceBuffers let go of while the gate is closed

// Integers, so that every sum below is exact whatever the kernel's rounding.
const ints = (n) => Float32Array.from({ length: n }, () => Math.floor(random() * 2001) - 1000);

test('with many calls in flight they run in the order they were made', { skip }, async () => {
    const x = ints(N);
    const dx = await cuv.upload(x);
    const ys = await Promise.all(Array.from({ length: LANES },
      () => cuv.upload(new Float32Array(N))));
    // Each round, per lane and without waiting in between: write y, two saxpys on it, read it
    // back (every other lane with a signal, which takes a ticket). Out of order, a write would
    // land after a saxpy, or a read before.
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) {
      const a = Math.floor(random() * 9) - 4, b = Math.floor(random() * 9) - 4;
      for (let l = 0; l < LANES; l++) {
        const fresh = ints(N);
        const want = fresh.map((v, i) => v + a * x[i] + b * x[i]);
        const done = Promise.all([cuv.write(ys[l], fresh), cuv.saxpy(a, dx, ys[l]),
          cuv.saxpy(b, dx, ys[l]),
          l % 2 ? cuv.download(ys[l], { signal: new AbortController().signal })
            : cuv.download(ys[l])]);
        rounds.push(done.then(([, , , got]) => assert.deepStrictEqual(got, want,
          `round ${r}, lane ${l}`)));
      }
    }
    await Promise.all(rounds);
    assert.strictEqual(cuv.pending(), 0);
  });

test('5 000 calls made at once leave every driver call to the engine', { skip }, async () => {
    // The package's ring (16 384, src/instance.c) holds them all: had it filled, a call would
    // have run the oldest one's driver calls on this thread (engineHelped).
    const CALLS = 5000, YS = 16;
    const x = ints(N);
    const dx = await cuv.upload(x);
    const ys = Array.from({ length: YS }, () => ints(N));
    const dys = await Promise.all(ys.map((y) => cuv.upload(y)));
    const a = Array.from({ length: CALLS }, () => Math.floor(random() * 5) - 2);
    const before = cuv.stats();
    const calls = a.map((ai, i) => cuv.saxpy(ai, dx, dys[i % YS]));
    await Promise.all(calls);
    const after = cuv.stats();
    assert.strictEqual(after.engineHelped - before.engineHelped, 0);
    assert.strictEqual(after.submitted - before.submitted, CALLS);
    assert.strictEqual((after.engineInline - before.engineInline) +
      (after.engineQueued - before.engineQueued), CALLS, 'every call ran once, on some thread');
    for (let j = 0; j < YS; j++) {
      const want = ys[j].slice();
      for (let i = j; i < CALLS; i += YS) for (let k = 0; k < N; k++) want[k] += a[i] * x[k];
      assert.deepStrictEqual(await cuv.download(dys[j]), want, `y ${j}`);
      dys[j].dispose();
    }
    dx.dispose();
  });

test('buffers disposed right after the call stay until its op ran', { skip }, async () => {
    const calls = Array.from({ length: 200 }, () => ({ x: ints(N), y: ints(N) }));
    const bufs = await Promise.all(calls.map(async ({ x, y }) =>
      ({ dx: await cuv.upload(x), dy: await cuv.upload(y) })));
    // Each x disposed at once: only the reference the call took keeps it.
    const done = calls.map(({ x, y }, i) => {
      const { dx, dy } = bufs[i];
      const p = cuv.saxpy(3, dx, dy).then(() => cuv.download(dy));
      dx.dispose();
      return p.then((got) => ({ got, want: y.map((v, k) => v + 3 * x[k]), dy }));
    });
    for (const [i, r] of (await Promise.all(done)).entries()) {
      assert.deepStrictEqual(r.got, r.want, `call ${i}`);
      r.dy.dispose();
    }
  });

test('a call cuv refuses behind calls in flight rejects, without waiting for the GPU',
  { skip: simOnly }, async () => {
    await collect(); // the earlier tests' garbage: the buffers collected below are this test's
    await until(() => cuv.stats().releasing === 0);
    const freesBefore = cuv.sim.calls('cuMemFree');
    // Three bumps behind the gate make four calls in flight; more would block every stream open() writes on (fixtures/common.js), and the gate would
    // end only at its timeout, which only a failing test waits for.
    const g = await gate(60000);
    const trace = cuv.alloc(Uint32Array, 1);
    const behind = Array.from({ length: 3 }, () => g.bump(trace));
    // A signature that disagrees with the kernel's parameter sizes: cuv_launch makes an error op,
    // which cuv_submit refuses.
    const wide = cuv.loadModule(cuv.ptx.saxpy).kernel('saxpy', ['u64', 'f32', 'read', 'rw']);
    const x = cuv.alloc(Float32Array, 4);
    const live = cuv.liveBuffers();
    Array.from({ length: GARBAGE }, () => cuv.alloc(Float32Array, 4));
    assert.strictEqual(cuv.liveBuffers(), live + GARBAGE);
    const rejected = assert.rejects(wide.launch(1, 1, [4, 1, x, x]), { code: 'CUV_EARGS' });
    // Collected while the refusal comes back: freeing their memory waits for the gate, and were
    // that on this thread (their finalizers run here), the rejection would wait for it too.
    await collect();
    assert.strictEqual(cuv.liveBuffers(), live, 'the garbage buffers were finalized');
    await rejected;
    assert.ok(cuv.pending() >= behind.length, 'the gate is still closed');
    await g.open();
    await Promise.all([...behind, g.closed]);
    // The gate adds 1 when opened (2 at its timeout), each bump 4.
    const want = 1 + 4 * behind.length;
    assert.deepStrictEqual(await cuv.download(g.state), Uint32Array.of(want),
      'open() ended the gate, and every bump ran after it');
    assert.deepStrictEqual(await cuv.download(trace), Uint32Array.of(want), 'the last bump');
    await until(() => cuv.stats().releasing === 0);
    assert.strictEqual(cuv.sim.calls('cuMemFree'), freesBefore + GARBAGE,
      'the garbage buffers\' memory was freed, once the GPU let it');
    assert.strictEqual(cuv.pending(), 0);
    x.dispose();
  });

test('node exits by itself once every call in flight settled', { skip }, async () => {
  const { status, lines } = await runFixture('ends-alone.js', ['many']);
  assert.deepStrictEqual(status, { code: 0, signal: null, stderr: '' });
  assert.deepStrictEqual(lines, ['many 200 right', 'exit pending 0']);
});
