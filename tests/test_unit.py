"""Every case of every C unit-test binary (tests/unit/test_*.c, built by
`make tests` into build/tests/) as one pytest test.
SPDX-License-Identifier: MIT
"""
import glob
import os
import subprocess

import pytest

from conftest import BUILD, check_sanitizer

BINARIES = sorted(glob.glob(os.path.join(BUILD, "tests", "test_*")))


def cases():
    for binary in BINARIES:
        if not os.access(binary, os.X_OK):
            continue
        names = subprocess.run([binary, "--list"], capture_output=True, text=True,
                               check=True).stdout.split()
        for name in names:
            yield pytest.param(binary, name, id=f"{os.path.basename(binary)}::{name}")


def test_unit_binaries_built():
    assert BINARIES, "no unit-test binaries: run `make tests` first"


@pytest.mark.parametrize("binary,name", list(cases()))
def test_unit(binary, name):
    proc = subprocess.run([binary, name], capture_output=True, text=True, timeout=120)
    check_sanitizer(name, proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
