'use strict';
// index.d.ts against the package: tsc compiles types/usage.ts (the README's uses, and misuses that
// must fail) without an error, and the declarations name exactly what index.js exports. tsc is
// typescript from npm, a devDependency: found beside the package (its devDependencies, or the
// folder it was installed into, where scripts/test puts it) or at CUV_NODE_TYPESCRIPT.
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { cuv, packageDir } = require('./fixtures/common.js');

function loadTypescript() {
  try {
    return require(process.env.CUV_NODE_TYPESCRIPT ||
      require.resolve('typescript', { paths: [packageDir] }));
  } catch {
    return null;
  }
}

const ts = loadTypescript();
const noTsc = ts ? false : 'typescript is not installed (npm install --no-save typescript)';

const usage = path.join(__dirname, 'types', 'usage.ts');
const dts = path.join(packageDir, 'index.d.ts');
// No @types/node (types: []): index.d.ts needs nothing of Node's, and a TypeScript user without
// them still compiles. TypeScript's own lib files are not checked again (skipDefaultLibCheck).
const program = ts && ts.createProgram([usage, dts], {
  strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS,
  lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'], types: [], skipDefaultLibCheck: true,
});

test('tsc compiles the usage file against index.d.ts, misuses rejected', { skip: noTsc }, () => {
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) =>
    ts.formatDiagnostic(d, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => packageDir,
      getNewLine: () => '\n' }));
  assert.deepStrictEqual(diagnostics, []);
});

test('index.d.ts declares exactly what index.js exports', { skip: noTsc }, () => {
  const checker = program.getTypeChecker();
  const declared = checker.getExportsOfModule(checker.getSymbolAtLocation(
    program.getSourceFile(dts)));
  // Types have no value at run time; every declared value must be exported, and vice versa.
  const values = declared.filter((s) => s.flags & ts.SymbolFlags.Value).map((s) => s.getName());
  assert.deepStrictEqual(values.sort(), Object.keys(cuv).sort());
});
