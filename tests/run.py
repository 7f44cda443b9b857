#!/usr/bin/env python3
"""Runs volley's whole test suite (the C unit binaries and the integration
tests, all collected by pytest) and ends with one line: "N passed, N failed".

Usage: tests/run.py [pytest arguments, e.g. -k ipv6 or tests/integration/test_cli.py]
SPDX-License-Identifier: MIT
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    report = os.path.join(ROOT, "build", "tests", "junit.xml")
    os.makedirs(os.path.dirname(report), exist_ok=True)
    if os.path.exists(report):
        os.unlink(report)
    args = sys.argv[1:] or [os.path.join(ROOT, "tests")]
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
