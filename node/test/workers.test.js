'use strict';
// Node's own loop and workers: a process (or worker) that used the addon ends on its own when its
// work is done, and not before; workers each get their own state and bridge, and one terminated
// with work in flight (a thousand ops) ends cleanly. Each case runs a fixture in a child node and
// waits for it to exit; a child that never exits makes the test runner time out.
const test = require('node:test');
const assert = require('node:assert');
const { skip, runFixture } = require('./fixtures/common.js');

const run = (fixture, ...args) => runFixture(fixture, args);

const clean = { code: 0, signal: null, stderr: '' };

test('node exits on its own once the work is done, without process.exit', { skip }, async () => {
  const { status, lines } = await run('ends-alone.js');
  assert.deepStrictEqual(status, clean);
  assert.deepStrictEqual(lines, ['first 12,24,36', 'last 13,26,39 pending 0', 'exit pending 0']);
});

test('work in flight keeps node alive until its Promise settled', { skip }, async () => {
  const { status, lines } = await run('ends-alone.js', 'slow');
  assert.deepStrictEqual(status, clean);
  assert.deepStrictEqual(lines, ['first 12,24,36', 'last 13,26,39 pending 0', 'exit pending 0']);
});

test('a worker thread gets its own bridge and ends on its own', { skip }, async () => {
  const { status, lines } = await run('worker.js', 'finish');
  assert.deepStrictEqual(status, clean);
  assert.deepStrictEqual(lines.sort(), ['main 15', 'message 6,10', 'worker exit 0']);
});

test('four workers and the main thread at once, each with its own state', { skip }, async () => {
  const { status, lines } = await run('worker.js', 'many');
  assert.deepStrictEqual(status, clean);
  // Worker id computes (3 + id) * [1, 2] + [3, 4].
  assert.deepStrictEqual(lines.sort(), ['main 15', 'message 6,10', 'message 7,12',
    'message 8,14', 'message 9,16', 'worker exit 0', 'worker exit 0', 'worker exit 0',
    'worker exit 0']);
});

test('terminating a worker with work in flight closes its bridge cleanly', { skip }, async () => {
  const { status, lines } = await run('worker.js', 'terminate');
  assert.deepStrictEqual(status, clean);
  assert.deepStrictEqual(lines.sort(), ['main 15', 'message started', 'worker exit 1']);
});

test('a worker terminated with 1,000 ops in flight ends without a crash, its work drained',
  { skip }, async () => {
    const { status, lines } = await run('worker.js', 'inflight');
    assert.deepStrictEqual(status, clean);
    // The gate, the 1,000 bumps behind it; once the worker exited, none of it is in flight.
    assert.deepStrictEqual(lines.sort(), ['main 15', 'message in flight 1001',
      'worker exit 1 in flight 0']);
  });

test('a worker terminated while thousands of Promises wait for their settling slice ends cleanly',
  { skip }, async () => {
    const { status, lines } = await run('worker.js', 'settling');
    assert.deepStrictEqual(status, clean);
    assert.deepStrictEqual(lines.sort(),
      ['main 15', 'message settling', 'worker exit 1 in flight 0']);
  });
