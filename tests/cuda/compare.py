#!/usr/bin/env python3
"""The test cuda-abi (TAP): runs the probe built against cuv's bundled cuda.h and the one built
against the toolkit's (probe.py wrote both from the bundled header), and checks that they print
the same constants, type sizes and entry-point names. That the prototypes and typedefs agree was
checked when the toolkit's probe compiled (it declares them again, as the bundled header does).

Usage: compare.py BUNDLED_PROBE SYSTEM_PROBE"""
import subprocess
import sys

KINDS = [("value", "constants (enumerators and macros) have the toolkit's values and kinds"),
         ("type", "types have the toolkit's sizes and alignments (and enums its signedness)"),
         ("name", "entry points expand to the toolkit's versioned names"),
         ("empty", "empty macros (calling conventions) are empty in both")]


def lines(probe):
    out = subprocess.run([probe], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def by_kind(output, kind):
    return {line.split()[1]: line for line in output if line.split()[0] == kind}


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    bundled, system = lines(argv[1]), lines(argv[2])
    print("1..%d" % (1 + len(KINDS)))
    failed = 0
    heads = (bundled[:1], system[:1])
    if heads == (["header bundled"], ["header system"]):
        print("ok 1 - the probes were compiled against the bundled cuda.h and the toolkit's")
    else:
        failed += 1
        print("not ok 1 - the probes saw %s and %s, not the bundled and the toolkit's header"
              % heads)
    for number, (kind, what) in enumerate(KINDS, 2):
        ours, theirs = by_kind(bundled, kind), by_kind(system, kind)
        differ = sorted(n for n in ours if ours[n] != theirs.get(n))
        if ours and not differ and ours.keys() == theirs.keys():
            print("ok %d - %d %s" % (number, len(ours), what))
            continue
        failed += 1
        print("not ok %d - %s: %d of %d differ" % (number, what, len(differ), len(ours)))
        for n in differ:
            print("# bundled: %s" % ours[n])
            print("# toolkit: %s" % theirs.get(n, "(missing)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
