'use strict';
// What the package is made of: the API and nothing of cuv's bench. The bench's comparison
// bindings are built into the bench's own addon (cuv's node/bench), never into the package's:
// neither the package's exports nor its addon's have them, and its files carry no bench.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { cuv, packageDir } = require('./fixtures/common.js');

test('neither the package nor its addon exports the bench\'s bindings', () => {
  const native = require(path.join(packageDir, 'build', 'Release', 'cuv_node.node'));
  assert.strictEqual(cuv.baseline, undefined);
  assert.strictEqual(native.baseline, undefined);
  assert.ok(typeof native.saxpy === 'function' && typeof cuv.saxpy === 'function',
    'the addon loaded, with its bindings');
});

test('the package\'s files and scripts name no bench, and its sources have none', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
  assert.deepStrictEqual(pkg.files.filter((f) => /bench|baseline/.test(f)), []);
  assert.deepStrictEqual(Object.keys(pkg.scripts).filter((s) => /bench/.test(s)), []);
  const sources = fs.readdirSync(path.join(packageDir, 'src'));
  assert.ok(sources.includes('exports.c'), 'the addon\'s sources are there');
  assert.deepStrictEqual(sources.filter((f) => /baseline/.test(f)), []);
  const declared = fs.readFileSync(path.join(packageDir, 'index.d.ts'), 'utf8');
  assert.doesNotMatch(declared, /baseline/);
});
