#!/usr/bin/env python3
"""Runs volley's whole test suite (the C unit binaries and the integration
tests, all collected by pytest) and ends with one line: "N passed, N failed".

Usage: tests/run.py [pytest arguments, e.g. -k ipv6 or tests/integration/test_cli.py]

The whole suite runs its test files three at a time (pytest-xdist, one file's
tests in order in one process): most of its time is spent waiting on runs of
a second or two, not on the CPU, and every test keeps its margins on a loaded
machine. VOLLEY_TEST_JOBS sets how many at once (1: one after the other).
SPDX-License-Identifier: MIT
"""
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parallel():
    """pytest-xdist's arguments for the whole suite, or none."""
    jobs = os.environ.get("VOLLEY_TEST_JOBS", "3")
    if not jobs.isdigit() or int(jobs) < 1:
        sys.exit(f"tests/run.py: VOLLEY_TEST_JOBS must be a whole number above 0, not {jobs!r}")
    if int(jobs) == 1 or importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", jobs, "--dist", "loadfile"]


def main():
    report = os.path.join(ROOT, "build", "tests", "junit.xml")
    os.makedirs(os.path.dirname(report), exist_ok=True)
    if os.path.exists(report):
        os.unlink(report)
    args = sys.argv[1:] or parallel() + [os.path.join(ROOT, "tests")]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE",
           "--junitxml=" + report] + args
    rc = subprocess.call(cmd, cwd=ROOT)
    passed = failed = 0
    if os.path.exists(report):
        for case in ET.parse(report).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None:
                # The suite has no optional parts: a test that could not run failed.
                failed += 1
            else:
                passed += 1
    if rc != 0 and failed == 0:
        failed = 1  # pytest itself failed (collection error, crash)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
