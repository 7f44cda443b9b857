"""make lint (tests/lint.mk): it passes on the tree as it is and finds every
kind of file it should; it fails on one finding of each of its tools: a
misformatted C line, a cppcheck error, a shellcheck warning and an unused
Python import; make format undoes the misformatted line. Each case runs in a
copy of the tree, never in the tree itself, and the cases with a finding
lint one file of each kind, the broken one among them, to stay fast.
Also: the tests HACKING.md tells contributors to copy exist.
SPDX-License-Identifier: MIT
"""
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, clean_env


def source_files():
    """The tree's files: those git tracks or would add (not what it ignores,
    such as build/), or in an unpacked tarball those its MANIFEST lists."""
    if os.path.exists(os.path.join(ROOT, ".git")):
        names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True, timeout=60).stdout.split("\0")
    else:
        with open(os.path.join(ROOT, "MANIFEST")) as f:
            names = f.read().split()
    return [n for n in names if n and os.path.isfile(os.path.join(ROOT, n))]


@pytest.fixture
def tree(tmp_path):
    """A copy of the source tree (no build products), to break at will."""
    for name in source_files():
        dest = tmp_path / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), dest)
    return tmp_path


def make(tree, *targets):
    proc = subprocess.run(["make", *targets], cwd=tree, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    return proc, proc.stdout + proc.stderr


def lint_only(tree, c="src/units.c", sh="tests/demo.sh", py="tests/run.py", target="lint"):
    """make lint (or target) on one file of each kind."""
    return make(tree, target, f"LINT_C={c}", f"LINT_SH={sh}", f"LINT_PY={py}")


def command_line(output, tool):
    """The arguments of the command make ran for tool."""
    lines = [l for l in output.splitlines() if l.startswith(tool + " ")]
    assert len(lines) == 1, output
    return lines[0].split()


def edit(path, old, new):
    text = path.read_text()
    assert old in text, path
    path.write_text(text.replace(old, new, 1))


def append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_lint_passes_on_the_tree_and_checks_every_kind_of_file(tree):
    proc, out = make(tree, "lint")
    assert proc.returncode == 0, out
    formatted = command_line(out, "clang-format")
    assert {"src/conn.c", "src/conn.h", "tests/unit/unit.h", "tests/fuzz/replay.c",
            "tests/server/testd.c"} <= set(formatted)
    analysed = command_line(out, "cppcheck")
    assert {"src/conn.c", "tests/unit/test_http.c", "tests/server/testd.c"} <= set(analysed)
    # Shell and Python scripts are found by their first line too.
    assert {".ci/run", "deps/install.sh", "tests/demo.sh"} <= set(command_line(out, "shellcheck"))
    checked = set(command_line(out, "pyflakes3") if "\npyflakes3 " in out
                  else command_line(out, "pyflakes"))
    assert {"scripts/volley-sweep", "tests/run.py", "tests/conftest.py",
            "tests/integration/test_cli.py", "tests/bench/bench.py"} <= checked
    assert not any(f.startswith("build/") for f in formatted + analysed)


def test_lint_fails_on_a_misformatted_c_line_and_format_repairs_it(tree):
    source = tree / "src" / "url.c"
    original = source.read_text()
    edit(source, "    if (", "    if(")
    proc, out = lint_only(tree, c="src/url.c")
    assert proc.returncode != 0, out
    assert "src/url.c:" in out and "clang-format-violations" in out, out

    proc, out = lint_only(tree, c="src/url.c", target="format")
    assert proc.returncode == 0, out
    assert source.read_text() == original
    proc, out = lint_only(tree, c="src/url.c")
    assert proc.returncode == 0, out


def test_lint_fails_on_a_cppcheck_error(tree):
    append(tree / "src" / "url.c", "\nint url_lint_probe(void)\n{\n    int *p = NULL;\n"
                                   "    return *p;\n}\n")
    proc, out = lint_only(tree, c="src/url.c")
    assert proc.returncode != 0, out
    assert "src/url.c:" in out and "[nullPointer]" in out, out


def test_lint_fails_on_a_shellcheck_finding(tree):
    script = ".ci/run"
    append(tree / script, 'echo $1\n')
    proc, out = lint_only(tree, sh=script)
    assert proc.returncode != 0, out
    assert f"In {script} line" in out and "SC2086" in out, out


def test_lint_fails_on_an_unused_python_import(tree):
    script = "scripts/volley-sweep"
    append(tree / script, "import colorsys\n")
    proc, out = lint_only(tree, py=script)
    assert proc.returncode != 0, out
    assert f"{script}:" in out and "'colorsys' imported but unused" in out, out


def test_the_tests_hacking_md_points_to_exist():
    with open(os.path.join(ROOT, "HACKING.md")) as f:
        text = f.read()
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", text)
    assert len(named) >= 5, named
    for module, test in named:
        found = glob.glob(os.path.join(ROOT, "tests", "**", module), recursive=True)
        assert len(found) == 1, module
        with open(found[0]) as f:
            assert re.search(rf"^def {test}\(", f.read(), re.M), f"{module}::{test}"
    paths = re.findall(r"`(tests/[\w./-]+)`", text)
    assert len(paths) >= 5, paths
    for path in paths:
        assert os.path.exists(os.path.join(ROOT, path)), path
