'use strict';
// The benches' command lines (options.js): a bad option stops them with exit status 2 and a line
// saying what the option takes, before any GPU work; a good one runs.
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { packageDir } = require('../cuv.js');
const { skip, runFixture } = require(path.join(packageDir, 'test', 'fixtures', 'common.js'));

// runFixture takes a script relative to the package's test/fixtures.
const fixtures = path.join(packageDir, 'test', 'fixtures');
const bench = path.relative(fixtures, path.join(__dirname, '..', 'bench.js'));
const threads = path.relative(fixtures, path.join(__dirname, '..', 'threads.js'));

const refused = [
  [bench, ['--rounds', '0'], '--rounds takes a whole number of at least 1, not 0'],
  [bench, ['--calls', 'abc'], '--calls takes a whole number of at least 1, not abc'],
  [bench, ['--warm', '-1'], '--warm takes a whole number of at least 0, not -1'],
  [bench, ['--flight', '2.5'], '--flight takes a whole number of at least 1, not 2.5'],
  [bench, ['--inflight'], '--inflight takes a whole number of at least 1, not nothing'],
  [bench, ['--parts', 'roundtrip,foo'], '--parts takes a comma-separated subset of'],
  [threads, ['--op', 'saxpy2'], '--op takes one of saxpy, nop, not saxpy2'],
  [threads, ['--rows', '0'], '--rows takes a whole number of at least 1, not 0'],
];

for (const [script, args, message] of refused) {
  test(`${script.split('/').pop()} ${args.join(' ')}: refused`, async () => {
    const { status, lines } = await runFixture(script, args);
    assert.strictEqual(status.code, 2, status.stderr);
    assert.ok(status.stderr.startsWith(`bench: ${message}`), status.stderr);
    assert.deepStrictEqual(lines, [''], 'nothing measured');
  });
}

test('threads.js with good options prints its rows', { skip }, async () => {
  const args = ['--op', 'nop', '--rows', '2', '--calls', '200', '--inflight', '8'];
  const { status, lines } = await runFixture(threads, args);
  assert.strictEqual(status.code, 0, status.stderr);
  assert.match(lines[0], /^threads: nop, 200 calls per row, 8 in flight/);
  assert.strictEqual(lines.filter((l) => /^row \d+: \d+ ops\/s/.test(l)).length, 2);
});
