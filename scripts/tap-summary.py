#!/usr/bin/env python3
"""Counts test cases in Meson test logs and prints `N passed, N failed, N skipped`.

usage: tap-summary.py [--quiet] [LABEL=]testlog.json ...

Meson's testlog.json holds one JSON object per test executable, with its stdout. cuv's tests
speak TAP (cmocka with CMOCKA_MESSAGE_OUTPUT=TAP), so each TEST CASE is counted, not each
executable:
  - `ok N ...` is passed, `not ok N ...` failed, and either with a `# SKIP` directive skipped
    (cmocka 1.1.5 writes skipped cases as `not ok N # SKIP`);
  - a whole-file skip (`1..0 # SKIP why`, Meson's SKIP result, or exit status 77, the design's
    "no GPU" status, which Meson's TAP parser calls an error) with no case lines is 1 skipped;
  - an executable that Meson judged failed (crash, timeout, bad exit status) without any
    `not ok` line of its own adds 1 failed, so a crash is never hidden by the cases before it;
  - a test without TAP output (protocol exitcode) counts as 1, by Meson's result.
With several logs (one per build: plain, sanitizers) a line per log is printed, then the sum.
The last line is always the sum. Exit status: 1 when anything failed (or a log is missing), else 0.
"""
import json
import re
import sys

CASE = re.compile(r"^(not )?ok\b(.*)$")
SKIP = re.compile(r"#\s*skip", re.IGNORECASE)
PLAN_SKIP = re.compile(r"^1\.\.0\b.*#\s*skip", re.IGNORECASE)
BAD_RESULTS = {"FAIL", "ERROR", "TIMEOUT", "UNEXPECTEDPASS", "INTERRUPT"}
# What a failed case said, printed under its name: node --test's YAML keys after `not ok`, and
# cmocka's `# ` comment lines before it (CI's log keeps only the summary's lines in view).
DETAIL_KEY = re.compile(r"^(error|message|expected|actual|location|code):")
MAX_DETAIL = 6


def failure_detail(lines, at):
    """Up to MAX_DETAIL lines that say why the case at lines[at] failed."""
    detail = []
    before = at - 1
    while (before >= 0 and lines[before].strip().startswith("#") and
           not lines[before].strip().startswith("# Subtest") and len(detail) < MAX_DETAIL):
        detail.insert(0, lines[before].strip())
        before -= 1
    for line in lines[at + 1:]:
        text = line.strip()
        if CASE.match(text) or text == "...":
            break
        if DETAIL_KEY.match(text) and len(detail) < MAX_DETAIL:
            detail.append(text[:300])
    return detail


def count_test(entry):
    """(passed, failed, skipped, failed case names) for one executable's log entry."""
    passed = failed = skipped = 0
    names = []
    result = entry.get("result", "")
    cases = 0
    plan_skip = False
    lines = (entry.get("stdout") or "").splitlines()
    for at, line in enumerate(lines):
        line = line.strip()
        if PLAN_SKIP.match(line):
            plan_skip = True
            continue
        m = CASE.match(line)
        if not m:
            continue
        cases += 1
        if SKIP.search(m.group(2)):
            skipped += 1
        elif m.group(1):
            failed += 1
            name = m.group(2).lstrip(" 0123456789-").strip() or line
            names.append("\n      ".join([name] + failure_detail(lines, at)))
        else:
            passed += 1
    if cases == 0:
        if plan_skip or result == "SKIP" or entry.get("returncode") == 77:
            return 0, 0, 1, []
        if result in BAD_RESULTS:
            return 0, 1, 0, ["(no test output: %s)" % result.lower()]
        return (1, 0, 0, []) if result in ("OK", "EXPECTEDFAIL") else (0, 1, 0, [result])
    if result in BAD_RESULTS and failed == 0:
        failed += 1
        names.append("(%s after %d cases)" % (result.lower(), cases))
    return passed, failed, skipped, names


def summarize(path):
    """([passed, failed, skipped], failure lines) for one testlog.json."""
    totals = [0, 0, 0]
    failures = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        return [0, 1, 0], ["FAILED cannot read %s: %s" % (path, e.strerror)]
    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        entry = json.loads(raw)
        p, f, s, names = count_test(entry)
        totals[0] += p
        totals[1] += f
        totals[2] += s
        failures += ["FAILED %s: %s" % (entry.get("name", "?"), name) for name in names]
    return totals, failures


def line(t):
    return "%d passed, %d failed, %d skipped" % tuple(t)


def main(argv):
    quiet = "--quiet" in argv
    logs = [a for a in argv if a != "--quiet"]
    if not logs:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    total = [0, 0, 0]
    for arg in logs:
        label, _, path = arg.partition("=") if "=" in arg else ("", "", arg)
        t, failures = summarize(path)
        if len(logs) > 1:
            print("  %s: %s" % (label or path, line(t)))
        if not quiet:
            for failure in failures:
                print(("    " if len(logs) > 1 else "") + failure)
        total = [a + b for a, b in zip(total, t)]
    print(line(total))
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
