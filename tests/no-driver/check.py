#!/usr/bin/env python3
"""The test no-driver (TAP): where the driver does not load, cuv's programs (tcp-infer and the
samples) say why, not only that: their standard error carries cuv_init_error's reason, the
library tried and the dynamic loader's own words, and they exit with 77 (no driver: skipped).

For each program: with CUV_DRIVER naming a library that does not exist, one case; one with a
variable out of range (CUV_SPIN_BUDGET_US=2x), which fails cuv_init before any driver loads and
must be named; and where libcuda.so.1 does not load on this machine (no GPU driver), one with
CUV_DRIVER unset, whose standard error must hold the loader's message for libcuda.so.1 as this
process gets it.

Usage: check.py "PROGRAM [ARGS...]"...   (each program and its arguments as one word)"""
import ctypes
import os
import shlex
import subprocess
import sys

MISSING = "/nonexistent/cuv-no-driver/libcuda.so.1"


def libcuda_error():
    """The loader's message for libcuda.so.1, or None where it loads."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return str(e)
    return None


def run(argv, driver, extra=None):
    env = dict(os.environ)
    env.pop("CUV_DRIVER", None)
    if driver:
        env["CUV_DRIVER"] = driver
    env.update(extra or {})
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stderr


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    programs = [shlex.split(p) for p in argv[1:]]
    default_error = libcuda_error()
    cases = []
    for prog in programs:
        name = os.path.basename(prog[0])
        status, err = run(prog, MISSING)
        want = ['cannot load the driver "%s"' % MISSING,
                "%s: cannot open shared object file" % MISSING]
        cases.append(("%s, CUV_DRIVER=%s: exit 77, the library and the loader's reason on "
                      "stderr" % (name, MISSING), status == 77 and all(w in err for w in want),
                      status, err))
        # A variable out of range fails cuv_init before any driver: the program names it.
        status, err = run(prog, "sim", {"CUV_SPIN_BUDGET_US": "2x"})
        cases.append(("%s, CUV_SPIN_BUDGET_US=2x: a failure that names the variable" % name,
                      status not in (0, 77) and "CUV_SPIN_BUDGET_US=2x: expected" in err,
                      status, err))
        if default_error:
            status, err = run(prog, None)
            want = ['cannot load the driver "cuda" (libcuda.so.1): ', default_error]
            cases.append(("%s, the default driver: exit 77, libcuda.so.1's loader message on "
                          "stderr" % name, status == 77 and all(w in err for w in want),
                          status, err))
    print("1..%d" % len(cases))
    for number, (what, ok, status, err) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", number, what))
        if not ok:
            print("# exit status %d, stderr:" % status)
            for line in err.splitlines():
                print("#   " + line)
    return 0 if all(c[1] for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
