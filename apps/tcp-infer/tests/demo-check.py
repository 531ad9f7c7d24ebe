#!/usr/bin/env python3
"""The test tcp-infer-demo (TAP): the demo (tools/demo.sh, tcp-infer-demo in the build tree) reads
as a guided run, with 1 s loads. Each run must say what it measures and against what, name its
driver, give both servers' figures with every reply right and their ratio, and say what to try
next; no line may look like a failure (an exit status, "error", "fail", "not installed"), and
wrk is mentioned as absent at most once.

Runs: CUV_DRIVER=sim with wrk where installed and a --baseline argument (dropped, with a note;
the cuv server with the server's own default, graphs); --no-graph, which the cuv server gets;
CUV_DRIVER unset where libcuda.so.1 does not load here, which must fall back to the simulator in
one statement that holds the loader's reason; CUV_DRIVER naming a library that does not exist,
which must exit 77 with the reason.

Usage: demo-check.py TCP_INFER_DEMO"""
import ctypes
import os
import re
import shutil
import subprocess
import sys

ALARMING = re.compile(r"status \d|error|fail|not installed|WRONG|cannot run", re.I)


def libcuda_error():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return str(e)
    return None


def demo(program, args, driver, wrk=None):
    env = dict(os.environ, TCP_INFER_DEMO_SECONDS="1")
    env.pop("CUV_DRIVER", None)
    if driver:
        env["CUV_DRIVER"] = driver
    if wrk:
        env["TCP_INFER_DEMO_WRK"] = wrk
    proc = subprocess.run([program] + args, env=env, capture_output=True, text=True,
                          timeout=150, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


class Tap:
    def __init__(self):
        self.cases = []

    def check(self, ok, what, out=""):
        self.cases.append((bool(ok), what, out))

    def report(self):
        print("1..%d" % len(self.cases))
        for n, (ok, what, out) in enumerate(self.cases, 1):
            print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
            if not ok:
                for line in out.splitlines():
                    print("#   " + line)
        return 0 if all(c[0] for c in self.cases) else 1


def guided(tap, name, status, out, err, with_wrk):
    """The checks every successful run passes."""
    text = out + err
    lines = out.splitlines()
    tap.check(status == 0 and not err, "%s: exit 0, nothing on stderr" % name, text)
    tap.check("cuv demo: tcp-infer" in out and "  thread pool  tcp-infer --baseline --loops 4 --coalesce\n" in out
              and "  load " in out, "%s: says what it measures, against what, under which load"
              % name, out)
    runs = [l for l in lines if l.startswith("  verifying client ")]
    tap.check(len(runs) == 2 and all(l.endswith("all right") for l in runs),
              "%s: both servers' verifying client, every reply right" % name, out)
    wrks = [l for l in lines if l.startswith("  wrk ")]
    tap.check(len(wrks) == (2 if with_wrk else 0), "%s: wrk's figures %s" %
              (name, "for both servers" if with_wrk else "absent"), out)
    tap.check(re.search(r"^cuv against the thread pool: \d+\.\d\dx the requests/s", out, re.M),
              "%s: the ratio of cuv to the thread pool" % name, out)
    tap.check("try next:" in out and "scripts/test" in out, "%s: what to try next" % name, out)
    alarming = [l for l in text.splitlines() if ALARMING.search(l)]
    tap.check(not alarming, "%s: no line that reads as a failure" % name, "\n".join(alarming))
    about_wrk = [l for l in lines if "wrk" in l and not l.startswith("  wrk ")
                 and not l.startswith("cuv against the thread pool:")]
    tap.check(len(about_wrk) <= 1, "%s: wrk named once, in the load, besides its figures"
              % name, out)


def outside_driver_statement(out):
    """The lines, other than the "driver:" statement (its line and the indented ones after it),
    that speak of the NVIDIA driver or CUDA being missing."""
    lines, inside, found = out.splitlines(), False, []
    for line in lines:
        inside = line.startswith("driver:") or (inside and line.startswith("        "))
        if not inside and re.search(r"libcuda|NVIDIA|no CUDA|CUDA driver|nvcc|cuda\.h", line):
            found.append(line)
    return found


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    program = argv[1]
    tap = Tap()
    with_wrk = shutil.which("wrk") is not None
    status, out, err = demo(program, ["--baseline"], "sim")
    guided(tap, "CUV_DRIVER=sim", status, out, err, with_wrk)
    tap.check("driver: cuv's CPU simulator (CUV_DRIVER=sim)\n" in out and
              "timings say nothing about cuv on a GPU" in out,
              "CUV_DRIVER=sim: names the simulator and says its timings mean nothing", out)
    tap.check("--baseline was dropped" in out and
              "\ncuv: tcp-infer --loops 4 --coalesce\n" in out,
              "CUV_DRIVER=sim: a --baseline argument is dropped, with a note", out)

    status, out, err = demo(program, ["--no-graph"], "sim", wrk="none")
    guided(tap, "--no-graph", status, out, err, False)
    tap.check("\ncuv: tcp-infer --loops 4 --coalesce --no-graph\n" in out,
              "--no-graph: the cuv server gets the argument (the plain path)", out)

    reason = libcuda_error()
    if reason:
        status, out, err = demo(program, [], None, wrk="none")
        guided(tap, "no driver", status, out, err, False)
        joined = re.sub(r"\n +", " ", out)
        tap.check("driver: cuv's CPU simulator (CUV_DRIVER=sim), since the GPU path needs an "
                  "NVIDIA driver" in joined and reason in joined and
                  "timings say nothing about cuv on a GPU" in joined,
                  "no driver: falls back to the simulator in one statement, with the loader's "
                  "reason", out)
        tap.check(outside_driver_statement(out) == [],
                  "no driver: the missing driver is mentioned in that statement alone", out)

    missing = "/nonexistent/cuv-demo/libcuda.so.1"
    status, out, err = demo(program, [], missing, wrk="none")
    tap.check(status == 77 and ('cannot load the driver "%s"' % missing) in err,
              "CUV_DRIVER=%s: exit 77 with the reason" % missing, out + err)
    return tap.report()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
