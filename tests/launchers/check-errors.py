#!/usr/bin/env python3
"""The test launchers-errors (TAP): what cuv-launchers refuses and what it writes.

  check-errors.py GENERATOR CASES_DIR CC...

bad/*.cu: each first line says `// expect: LINE: TEXT`; the generator (given bad/NAME.ptx too
when there is one) must fail, print NAME.cu:LINE: error: and TEXT, and write nothing.
good/*.cu (with --include good/NAME.h when there is one): the generator must succeed, its header
must contain every `// expect: TEXT` line of the file and no `// absent: TEXT` one, and compile
(CC -fsyntax-only, cuv's headers). Where nvcc is (CUVT_NVCC), it compiles the case first, and the
generator checks the signatures against its PTX and writes the source whose static assertions
compare the C types with it, compiled too. Include folders: CUVT_INCLUDES."""

import glob
import os
import subprocess
import sys
import tempfile

INCLUDES = os.environ.get('CUVT_INCLUDES', '').split(os.pathsep)


class Check:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def result(self, ok, name, detail=''):
        self.n += 1
        print('%s %d - %s' % ('ok' if ok else 'not ok', self.n, name))
        if not ok:
            self.failed += 1
            for line in detail.splitlines():
                print('# ' + line)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def generate(gen, cu, out_dir, ptx=None):
    """Runs the generator on cu (with NAME.ptx beside it, or ptx, and NAME.h beside it)."""
    header = os.path.join(out_dir, 'out.h')
    cmd = [gen, cu, '--header', header]
    ptx = ptx or (cu[:-3] + '.ptx' if os.path.exists(cu[:-3] + '.ptx') else None)
    if ptx:
        cmd += ['--source', os.path.join(out_dir, 'out.c'), '--ptx', ptx]
    types = cu[:-3] + '.h'
    if os.path.exists(types):
        cmd += ['--include', os.path.abspath(types)]
    return run(cmd), header


def bad_case(check, gen, cu, tmp):
    with open(cu) as f:
        first = f.readline()
    line, text = first.split('expect:', 1)[1].strip().split(': ', 1)
    proc, header = generate(gen, cu, tmp)
    want = '%s:%s: error: ' % (cu, line)
    ok = proc.returncode == 1 and want in proc.stderr and text in proc.stderr
    written = os.listdir(tmp)
    check.result(ok and not written, 'refused: ' + os.path.basename(cu),
                 'exit %d, stderr:\n%s\nwanted %r and %r; files written: %s'
                 % (proc.returncode, proc.stderr, want, text, written))
    for name in written:
        os.unlink(os.path.join(tmp, name))


def good_case(check, gen, cc, nvcc, cu, tmp):
    """Generates (from nvcc's PTX too where nvcc is), looks for the notes, compiles."""
    name = os.path.basename(cu)
    ptx = None
    if nvcc:
        ptx = os.path.join(tmp, 'kernels.ptx')
        proc = run([nvcc, '-ptx', '-o', ptx, cu] + ['-I' + d for d in INCLUDES if d])
        check.result(proc.returncode == 0, 'nvcc compiles: ' + name, proc.stderr)
    proc, header = generate(gen, cu, tmp, ptx)
    if proc.returncode != 0:
        check.result(False, 'accepted: ' + name, proc.stderr)
        check.result(False, 'compiles: ' + name)
        return
    with open(header) as f:
        text = ' '.join(f.read().split())
    with open(cu) as f:
        notes = [line[3:].strip() for line in f if line.startswith('// ')]
    missing = [n[7:].strip() for n in notes if n.startswith('expect:')
               and ' '.join(n[7:].split()) not in text]
    present = [n[7:].strip() for n in notes if n.startswith('absent:') and n[7:].strip() in text]
    check.result(not missing and not present, 'accepted: ' + name,
                 'missing: %s\npresent: %s' % (missing, present))
    source = os.path.join(tmp, 'use.c')
    with open(source, 'w') as f:
        f.write('#include "out.h"\n')
    sources = [source] + ([os.path.join(tmp, 'out.c')] if ptx else [])
    errors = ''
    for c in sources:
        proc = run(cc + ['-std=gnu11', '-Wall', '-Wextra', '-pedantic-errors', '-Werror',
                         '-fsyntax-only', c] + ['-I' + d for d in INCLUDES if d])
        errors += proc.stdout + proc.stderr
    check.result(not errors, 'compiles: ' + name + (' (with the PTX checks)' if ptx else ''),
                 errors)


def main(argv):
    gen, cases, cc = argv[0], argv[1], argv[2:]
    bad = sorted(glob.glob(os.path.join(cases, 'bad', '*.cu')))
    good = sorted(glob.glob(os.path.join(cases, 'good', '*.cu')))
    nvcc = os.environ.get('CUVT_NVCC')
    print('1..%d' % (len(bad) + (3 if nvcc else 2) * len(good)))
    check = Check()
    for cu in bad:
        with tempfile.TemporaryDirectory() as tmp:
            bad_case(check, gen, cu, tmp)
    for cu in good:
        with tempfile.TemporaryDirectory() as tmp:
            good_case(check, gen, cc, nvcc, cu, tmp)
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
