"""The fuzz targets (tests/fuzz/fuzz_*.c) built without libFuzzer, replayed
over their seed corpus and over every input a fuzzing run found a bug with
(tests/fuzz/regressions/<target>/), so that a fixed bug stays fixed.
SPDX-License-Identifier: MIT
"""
import os
import subprocess

import pytest

from conftest import BUILD, ROOT, check_sanitizer

TARGETS = ("response", "url", "units", "request", "h2req", "jdoc", "hdr", "h2", "tunnel")


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_inputs_replay_clean(target):
    binary = os.path.join(BUILD, "tests", f"fuzz_{target}-replay")
    dirs = [os.path.join(ROOT, "tests", "fuzz", d, target) for d in ("corpus", "regressions")]
    inputs = sum(len(os.listdir(d)) for d in dirs if os.path.isdir(d))
    assert inputs > 0
    proc = subprocess.run([binary] + [d for d in dirs if os.path.isdir(d)],
                          capture_output=True, text=True, timeout=120, errors="replace")
    last = proc.stdout.splitlines()[-2:] if proc.stdout else []
    check_sanitizer(f"{target} replay (last input: {last})", proc.stderr)
    assert proc.returncode == 0, f"last input: {last}\n{proc.stderr}"
    assert proc.stdout.endswith(f"replayed {inputs} inputs\n")
