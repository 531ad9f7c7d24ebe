#!/usr/bin/env python3
"""Writes the README's example program to a C file, for the test `readme-example`.

Usage: readme-example.py README.md OUT.c

The example is the first fenced C block (```c) after the line `<!-- readme-example -->`; only
blank lines may come between the two. Fails (status 1, a message naming the README's line) when
there is no such marker, no C block after it, or the block never closes, so that a README whose
example was moved or renamed fails the build instead of testing nothing."""
import sys

MARKER = "<!-- readme-example -->"


def extract(lines):
    """The lines of the block after the marker, or raises ValueError saying what is missing."""
    try:
        at = next(i for i, line in enumerate(lines) if line.strip() == MARKER)
    except StopIteration:
        raise ValueError("no line %r" % MARKER)
    i = at + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or lines[i].strip() != "```c":
        raise ValueError("line %d: the marker is not followed by a ```c block" % (at + 1))
    body = []
    for line in lines[i + 1:]:
        if line.strip() == "```":
            return body
        body.append(line)
    raise ValueError("line %d: the ```c block never closes" % (i + 1))


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        body = extract(lines)
    except ValueError as e:
        print("readme-example: %s: %s" % (argv[1], e), file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write("/* Extracted from README.md by tests/readme-example.py: edit it there. */\n")
        f.write("\n".join(body) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
