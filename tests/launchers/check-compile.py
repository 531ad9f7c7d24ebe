#!/usr/bin/env python3
"""The test launchers-compile (TAP): a wrong use of a generated launcher does not compile.

  check-compile.py CC...     (CUVT_INCLUDES: folders holding cuv's headers and kinds_launchers.h)

One small C file per case calls kinds.cu's launchers; the right calls compile without a warning
(-Wall -Wextra -Werror), and each wrong call is refused by the compiler, which names its line (C's
constraint violations, errors under -pedantic-errors: GCC before 14 only warns about some of them
by default, clang and GCC 14 refuse them)."""

import os
import subprocess
import sys
import tempfile

INCLUDES = os.environ.get('CUVT_INCLUDES', '').split(os.pathsep)

PRELUDE = '''#include "kinds_launchers.h"

struct other_module {
  cuv_kernel_t *k_odd;
};

cuv_op_t *use(const kinds_module_t *m, cuv_buffer_t *x, cuv_buffer_t *y, float *host,
              cuv_kernel_t *kernel, const struct other_module *other);
cuv_op_t *use(const kinds_module_t *m, cuv_buffer_t *x, cuv_buffer_t *y, float *host,
              cuv_kernel_t *kernel, const struct other_module *other) {
  cuv_launch_config_t cfg = cuv_for_num_elems(100);
  unsigned n = 100;
  float s = 2.0f;
  kinds_pair_t pair = {1.0f, 2};
  kinds_big_t big = {3.0, 4};
  cuv_double2_t d2 = {1.0, 2.0};
  cuv_float4_t f4 = {1.0f, 2.0f, 3.0f, 4.0f};
  cuv_uchar3_t c3 = {1, 2, 3};
  cuv_short2_t s2 = {1, 2};
  cuv_longlong4_32a_t l4 = {1, 2, 3, 4};
  cuv_half_t h = {0x3c00};
  (void)x, (void)host, (void)kernel, (void)other, (void)cfg, (void)n, (void)s, (void)pair;
  (void)big, (void)d2, (void)f4, (void)c3, (void)s2, (void)l4, (void)h;
'''

RIGHT = [
    'k_odd_launch(m, cfg, n, s, x, y)',
    'k_odd_launch_at(m, cfg, n, s, x, 4, y, 8)',
    'k_structs_launch(m, cfg, n, pair, big, x, y)',
    'k_vectors_launch(m, cfg, d2, f4, c3, s2, l4, h, y)',
    'k_xor_launch(m, cuv_for_num_elems_block(n, 128), n, x, 7u, y)',
]

WRONG = [
    ('a host pointer for a buffer', 'k_odd_launch(m, cfg, n, s, host, y)'),
    ('an integer for a buffer', 'k_odd_launch(m, cfg, n, s, 5, y)'),
    ('a float for a buffer', 'k_odd_launch(m, cfg, n, s, s, y)'),
    ('a buffer for a scalar', 'k_odd_launch(m, cfg, x, s, x, y)'),
    ('an argument missing', 'k_odd_launch(m, cfg, n, s, x)'),
    ('an argument too many', 'k_odd_launch(m, cfg, n, s, x, y, y)'),
    ('the offset form without offsets', 'k_odd_launch_at(m, cfg, n, s, x, y)'),
    ('a kernel for the module', 'k_odd_launch(kernel, cfg, n, s, x, y)'),
    ("another module's struct", 'k_odd_launch(other, cfg, n, s, x, y)'),
    ('a dim3 for the configuration', 'k_odd_launch(m, CUV_DIM1(1), n, s, x, y)'),
    ('one struct for another', 'k_structs_launch(m, cfg, n, big, big, x, y)'),
    ('a scalar for a struct', 'k_structs_launch(m, cfg, n, s, big, x, y)'),
    ('one vector type for another', 'k_vectors_launch(m, cfg, f4, f4, c3, s2, l4, h, y)'),
    ('a float for a __half', 'k_vectors_launch(m, cfg, d2, f4, c3, s2, l4, 1.0f, y)'),
]


def compile_call(cc, tmp, call, flags):
    """(status, output, line of the call) of compiling PRELUDE + `return CALL;`."""
    path = os.path.join(tmp, 'use.c')
    with open(path, 'w') as f:
        f.write(PRELUDE + '  return ' + call + ';\n}\n')
    line = PRELUDE.count('\n') + 1
    proc = subprocess.run(cc + ['-std=gnu11', '-fsyntax-only'] + flags + [path] +
                          ['-I' + d for d in INCLUDES if d], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    return proc.returncode, proc.stdout, '%s:%d:' % (path, line)


def main(cc):
    print('1..%d' % (len(RIGHT) + len(WRONG)))
    n = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for call in RIGHT:
            rc, out, _ = compile_call(cc, tmp, call, ['-Wall', '-Wextra', '-pedantic-errors',
                                                      '-Werror'])
            n += 1
            ok = rc == 0 and not out
            failed += not ok
            print('%s %d - compiles: %s' % ('ok' if ok else 'not ok', n, call))
            if not ok:
                print('\n'.join('# ' + line for line in out.splitlines()))
        for what, call in WRONG:
            rc, out, at = compile_call(cc, tmp, call, ['-pedantic-errors'])
            n += 1
            ok = rc != 0 and 'error' in out and any(line.startswith(at)
                                                   for line in out.splitlines())
            failed += not ok
            print('%s %d - refused: %s: %s' % ('ok' if ok else 'not ok', n, what, call))
            if not ok:
                print('# wanted an error at %s; got status %d:' % (at, rc))
                print('\n'.join('# ' + line for line in out.splitlines()))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
