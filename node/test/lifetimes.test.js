'use strict';
// AbortSignal and what the GPU keeps: aborting rejects at once with an AbortError while the work
// runs on, holding its memory until it is done; a disposed buffer's memory waits for the work
// that uses it, and dispose() itself waits for nothing. The gate of kernels/testing.cu holds work in flight for as long as a test needs,
// on the simulator and on a GPU alike.
const test = require('node:test');
const assert = require('node:assert');
const { cuv, skip, simOnly, driver, collect, until, gate } = require('./fixtures/common.js');

const GATE_MS = 60000; // only a failing test waits for it

// cuMemFree calls so far, on the simulator (on a GPU nothing can count them: -1).
const frees = () => (driver === 'sim' ? cuv.sim.calls('cuMemFree') : -1);

test('an aborted call rejects with an AbortError at once; its work still runs, holding its memory',
  { skip }, async () => {
    await collect(); // no garbage DeviceBuffer left to free memory meanwhile
    const trace = await cuv.upload(new Uint32Array(1)); // first: not behind the gate's stream
    const g = await gate(GATE_MS);
    const before = frees();
    const controller = new AbortController();
    const bumped = g.bump(trace, { signal: controller.signal });
    trace.dispose(); // the bump alone holds its memory now
    controller.abort();
    await assert.rejects(bumped, (e) => e instanceof cuv.AbortError && e.name === 'AbortError' &&
      e.code === 'ABORT_ERR' && e.cause === controller.signal.reason);
    // The gate is still closed: the bump has not run, and cuv still counts it.
    assert.strictEqual(cuv.pending(), 2, 'the gate and the cancelled bump');
    assert.strictEqual(frees(), before, 'the cancelled bump still holds trace');
    await g.open();
    await g.closed;
    await until(() => cuv.pending() === 0);
    assert.deepStrictEqual(await cuv.download(g.state), Uint32Array.of(1 + 4),
      'the gate opened, then the cancelled bump ran');
    if (driver === 'sim') await until(() => frees() === before + 1);
  });

test('a signal aborted before the call rejects at once; after completion it changes nothing',
  { skip }, async () => {
    const controller = new AbortController();
    controller.abort(new Error('why'));
    const pendingBefore = cuv.pending();
    await assert.rejects(cuv.nop({ signal: controller.signal }),
      (e) => e.name === 'AbortError' && e.cause.message === 'why');
    await assert.rejects(cuv.upload(Float32Array.of(1), { signal: controller.signal }),
      { name: 'AbortError' });
    assert.strictEqual(cuv.pending(), pendingBefore, 'nothing was submitted');
    const late = new AbortController();
    const buf = await cuv.upload(Float32Array.of(1, 2), { signal: late.signal });
    late.abort();
    assert.deepStrictEqual(await cuv.download(buf, { signal: late.signal }).catch((e) => e.name),
      'AbortError');
    const fresh = new AbortController();
    const back = await cuv.download(buf, { signal: fresh.signal });
    fresh.abort();
    assert.deepStrictEqual(back, Float32Array.of(1, 2));
  });

test('every asynchronous call takes a signal, and rejects when aborted in flight', { skip },
  async () => {
    const y = cuv.alloc(Float32Array, 1), trace = cuv.alloc(Uint32Array, 1);
    const w = await cuv.upload(Float32Array.of(1)), b = await cuv.upload(Float32Array.of(0));
    const kernel = cuv.loadModule(cuv.ptx.testing).kernel('cuv_node_bump', ['rw', 'write']);
    // Each call reads or writes the gate's state (a float32 here), so waits behind it.
    const calls = {
      launch: (state, signal) => kernel.launch(1, 1, [state, trace], { signal }),
      write: (state, signal) => cuv.write(state, Float32Array.of(2), { signal }),
      download: (state, signal) => cuv.download(state, { signal }),
      saxpy: (state, signal) => cuv.saxpy(1, state, y, { signal }),
      mlp: (state, signal) => cuv.mlp(state, 1, [{ weights: w, bias: b }], { signal }),
    };
    for (const [name, call] of Object.entries(calls)) {
      const g = await gate(GATE_MS, new Float32Array(1));
      const controller = new AbortController();
      const promise = call(g.state, controller.signal);
      controller.abort();
      await assert.rejects(promise, { name: 'AbortError' }, name);
      await g.open();
      await g.closed;
      await until(() => cuv.pending() === 0);
    }
    // Calls that touch nothing in flight: aborted before, they reject; after, nothing changes.
    const aborted = AbortSignal.abort();
    await assert.rejects(cuv.upload(Float32Array.of(1), { signal: aborted }),
      { name: 'AbortError' });
    await assert.rejects(cuv.nop({ signal: aborted }), { name: 'AbortError' });
    const { signal } = new AbortController();
    assert.strictEqual(await cuv.nop({ signal }), undefined);
    assert.ok((await cuv.upload(Float32Array.of(1), { signal })) instanceof cuv.DeviceBuffer);
  });

test('a disposed buffer\'s memory is freed only once the work using it is done', {
  skip: simOnly,
}, async () => {
  await collect();
  // No free of an earlier test's buffer to come: the releasing thread idle, nothing in flight.
  await until(() => cuv.stats().releasing === 0 && cuv.stats().inFlight === 0);
  const trace = await cuv.upload(new Uint32Array(1)); // first: not behind the gate's stream
  const g = await gate(GATE_MS);
  const before = frees();
  const bumped = g.bump(trace);
  trace.dispose();
  await collect(); // and the object itself collected: still nothing freed
  assert.strictEqual(frees(), before);
  await g.open();
  await bumped;
  await until(() => frees() === before + 1);
  assert.deepStrictEqual(await cuv.download(g.state), Uint32Array.of(1 + 4));
});

test('dispose() while the GPU is busy returns at once; the memory is freed once the GPU let it', {
  skip: simOnly,
}, async () => {
  await collect();
  await until(() => cuv.stats().releasing === 0 && cuv.stats().inFlight === 0);
  const launched = cuv.sim.calls('cuLaunchKernel'); // no other launch is made meanwhile
  const g = await gate(GATE_MS);
  // Work behind the gate (hazards on its state): once its launch is being made, the gate's was
  // made before it, so a free from here on waits for the gate. gate() alone returns before its
  // launch may have been made (another thread may make it), and then nothing would wait.
  const trace = cuv.alloc(Uint32Array, 1);
  const bumped = g.bump(trace);
  await until(() => cuv.sim.calls('cuLaunchKernel') >= launched + 2);
  const bufs = Array.from({ length: 4 }, () => cuv.alloc(Float32Array, 4));
  const before = frees();
  for (const b of bufs) b.dispose(); // each the last reference: its free waits for the gate
  assert.ok(cuv.stats().releasing > 0, 'the frees wait for the gate, on the releasing thread');
  await g.open();
  await g.closed;
  await bumped;
  assert.deepStrictEqual(await cuv.download(g.state), Uint32Array.of(1 + 4),
    'open() ended the gate, not its timeout: dispose() did not wait for it');
  await until(() => cuv.stats().releasing === 0);
  assert.strictEqual(frees(), before + bufs.length);
});
