#!/usr/bin/env python3
"""The test cuda-unreachable (TAP), registered in a build that found no CUDA toolkit: proves that
the build compiled with cuv's own cuda.h alone, whatever else the machine has installed. Every
compile command (compile_commands.json) has include folders with no cuda.h other than
internal/cuda/cuda.h; with --no-nvcc, no build command runs nvcc (build.ninja, where the PTX
targets are); and the Node package, where the build made one, took the same header and no nvcc
(its gen/build.gypi and gen/ptx.c).

Usage: unreachable.py SOURCE_ROOT BUILD_ROOT [--no-nvcc]"""
import json
import os
import re
import shlex
import sys

INCLUDE_FLAGS = ("-I", "-isystem", "-idirafter", "-iquote")


def include_dirs(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    dirs, take = [], False
    for arg in args:
        if take:
            dirs.append(arg)
            take = False
        elif arg in INCLUDE_FLAGS:
            take = True
        else:
            for flag in INCLUDE_FLAGS:
                if arg.startswith(flag) and len(arg) > len(flag):
                    dirs.append(arg[len(flag):])
    return [os.path.normpath(os.path.join(entry["directory"], d)) for d in dirs]


def foreign_headers(dirs, ours):
    """The cuda.h files these folders reach that are not cuv's own (or a copy of it: the Node
    package compiles the copy it vendored)."""
    found = set()
    for d in dirs:
        header = os.path.join(d, "cuda.h")
        if os.path.isfile(header) and not same_file(header, ours):
            found.add(header)
    return sorted(found)


def same_file(path, ours):
    if os.path.realpath(path) == os.path.realpath(ours):
        return True
    with open(path, "rb") as a, open(ours, "rb") as b:
        return a.read() == b.read()


class Tap:
    def __init__(self):
        self.cases = []

    def check(self, ok, what, details=()):
        self.cases.append((ok, what, list(details)))

    def report(self):
        print("1..%d" % len(self.cases))
        for number, (ok, what, details) in enumerate(self.cases, 1):
            print("%s %d - %s" % ("ok" if ok else "not ok", number, what))
            for line in details:
                print("# " + line)
        return 0 if all(ok for ok, _, _ in self.cases) else 1


def check_compiles(tap, build, ours):
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    bad = []
    for entry in entries:
        for header in foreign_headers(include_dirs(entry), ours):
            bad.append("%s reaches %s" % (entry["file"], header))
    tap.check(entries and not bad, "%d compile commands reach no cuda.h but cuv's own"
              % len(entries), bad[:20])


def check_nvcc(tap, build):
    with open(os.path.join(build, "build.ninja"), encoding="utf-8") as f:
        runs = [line.strip() for line in f
                if line.lstrip().startswith("command =") and re.search(r"(^|[/ ])nvcc ", line)]
    tap.check(not runs, "no build command runs nvcc", runs[:5])


def check_node(tap, build, ours, no_nvcc):
    gen = os.path.join(build, "node", "package", "install", "node_modules", "cuv", "gen")
    gypi = os.path.join(gen, "build.gypi")
    if not os.path.isfile(gypi):
        return
    with open(gypi, encoding="utf-8") as f:
        text = f.read()
    # build.gypi: "# Generated..." then the JSON; its include folders are relative to the package.
    variables = json.loads(text[text.index("{"):])["variables"]
    package = os.path.dirname(gen)
    dirs = [os.path.normpath(os.path.join(package, d)) for d in variables["cuv_includes"]]
    bad = foreign_headers(dirs, ours)
    reached = [d for d in dirs if os.path.isfile(os.path.join(d, "cuda.h"))]
    if not reached:
        bad.append("no include folder has a cuda.h: %s" % " ".join(dirs))
    if no_nvcc:
        with open(os.path.join(gen, "ptx.c"), encoding="utf-8") as f:
            if '"nvcc",' in f.read():
                bad.append("gen/ptx.c holds PTX that nvcc compiled")
    tap.check(not bad, "the Node package compiled with cuv's cuda.h%s"
              % (" and no nvcc" if no_nvcc else ""), bad)


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--no-nvcc"):
        sys.exit(__doc__)
    source, build = argv[1], argv[2]
    no_nvcc = len(argv) == 4
    ours = os.path.join(source, "internal", "cuda", "cuda.h")
    tap = Tap()
    check_compiles(tap, build, ours)
    if no_nvcc:
        check_nvcc(tap, build)
    check_node(tap, build, ours, no_nvcc)
    return tap.report()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
