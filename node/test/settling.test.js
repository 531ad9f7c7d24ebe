'use strict';
// Settling in slices (the bridge's turn budget, src/scope.h): thousands of completions that reach the loop at once settle
// over several loop turns, a bounded slice per turn, so that immediates and timers run between
// the slices; every Promise still settles exactly once, in completion order.
const test = require('node:test');
const assert = require('node:assert');
const { cuv, skip, until, gate } = require('./fixtures/common.js');

const N = 5000;
// The gates here end by timing out: with N ops waiting behind a gate on every stream, its open()
// could not reach it (fixtures/common.js). Long enough to submit the N ops first.
const GATE_MS = 3000;

// Counts loop turns (setImmediate) and 1 ms timers until stop(), each noting how many of the
// Promises had settled when it ran.
function watchLoop(settledCount) {
  const seen = { immediates: [], timers: [] };
  let on = true;
  const tick = () => {
    seen.immediates.push(settledCount());
    if (on) setImmediate(tick);
  };
  const timer = setInterval(() => seen.timers.push(settledCount()), 1);
  setImmediate(tick);
  seen.stop = () => {
    on = false;
    clearInterval(timer);
  };
  return seen;
}

const between = (counts) => counts.filter((c) => c > 0 && c < N).length;

test('thousands of cancellations delivered at once settle in slices, once each, in order',
  { skip }, async () => {
    const g = await gate(GATE_MS);
    const trace = cuv.alloc(Uint32Array, 1);
    const controllers = Array.from({ length: N }, () => new AbortController());
    const order = [];
    const all = controllers.map((c, i) => g.bump(trace, { signal: c.signal }).then(
      () => assert.fail(`bump ${i} resolved`), (e) => {
        assert.strictEqual(e.name, 'AbortError');
        order.push(i);
      }));
    await new Promise(setImmediate); // the bumps are submitted
    const seen = watchLoop(() => order.length);
    // One task cancels them all: the bridge's next drain delivers the N cancellations at once,
    // in cancellation order.
    for (const c of controllers) c.abort();
    await Promise.all(all);
    seen.stop();
    assert.deepStrictEqual(order, Array.from({ length: N }, (_, i) => i), 'in order, once each');
    assert.ok(between(seen.immediates) >= 2,
      `immediates ran between slices (settled counts seen: ${seen.immediates.slice(0, 20)})`);
    await g.closed;
    await until(() => cuv.pending() === 0);
  });

test('thousands of completions at once resolve once each, with their values, between turns',
  { skip }, async () => {
    // Uploaded first: an upload after the gate could land on the gate's stream and wait for it,
    // and the saxpys would then be submitted only once it had timed out.
    const ys = await Promise.all(Array.from({ length: 64 }, () => cuv.upload(new Float32Array(1))));
    const g = await gate(GATE_MS, new Float32Array(1));
    let settled = 0;
    const values = new Array(N);
    // Each reads the gate's state, so waits for it.
    const all = Array.from({ length: N }, (_, i) => cuv.saxpy(1, g.state, ys[i % 64]).then((v) => {
      assert.strictEqual(values[i], undefined, 'settled once');
      values[i] = v;
      settled++;
    }));
    await new Promise(setImmediate);
    assert.strictEqual(settled, 0, 'held behind the gate');
    assert.ok(cuv.pending() >= N, 'counted in flight');
    const seen = watchLoop(() => settled);
    await Promise.all(all); // the gate times out: they all complete in a burst
    seen.stop();
    assert.strictEqual(settled, N);
    values.forEach((v, i) => assert.strictEqual(v, ys[i % 64], `saxpy ${i} resolves with its y`));
    assert.ok(between(seen.immediates) >= 2, 'immediates ran while they settled');
    await until(() => cuv.pending() === 0);
  });
