"""The shape of the source, checked: no two modules of src/ (a .c file with
its header) depend on each other in a loop, whether by an #include or by a
call (read from the symbols each object of build/ defines and uses, with
nm); no source file is over 1,000 lines; the protocols a run may speak (the
run spec's protocols) are read in at most three files besides the command
line's parser; and HACKING.md names every file of src/ and names no file
that is not there.
SPDX-License-Identifier: MIT
"""
import glob
import os
import re
import subprocess

from conftest import ROOT

SRC = os.path.join(ROOT, "src")
BUILD = os.path.join(ROOT, "build")


def module(path):
    return os.path.splitext(os.path.basename(path))[0]


def sources(pattern="*.[ch]"):
    return sorted(glob.glob(os.path.join(SRC, pattern)))


def dependencies():
    """{module: {module it depends on: [why]}}: its #includes of src/'s
    headers, and the symbols its object uses that another defines."""
    deps = {}

    def add(a, b, why):
        if a != b:
            deps.setdefault(a, {}).setdefault(b, []).append(why)

    for path in sources():
        with open(path) as f:
            for name in re.findall(r'^#include "([\w.]+)\.h"', f.read(), re.M):
                if os.path.exists(os.path.join(SRC, name + ".h")):
                    add(module(path), name, "#include")
    defined, used = {}, {}
    for path in sources("*.c"):
        obj = os.path.join(BUILD, module(path) + ".o")
        assert os.path.exists(obj), f"{obj}: make tests builds it"
        out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True,
                             timeout=60).stdout
        for line in out.splitlines():
            name, kind = line.split()[:2]
            if kind in "TDBRC":
                defined[name] = module(path)
            elif kind == "U":
                used.setdefault(module(path), set()).add(name)
    for mod, names in used.items():
        for name in names:
            if name in defined:
                add(mod, defined[name], name)
    return deps


def cycles(deps):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in deps.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(deps) | {w for d in deps.values() for w in d}):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_depend_on_each_other_in_a_loop():
    deps = dependencies()
    assert len(deps) > 30 and "conn" in deps["worker"], deps.get("worker")
    loops = cycles(deps)
    assert not loops, "\n".join(
        f"{' <-> '.join(c)}: " + "; ".join(f"{a} -> {b} ({', '.join(sorted(deps[a][b])[:3])})"
                                           for a in c for b in c if b in deps.get(a, {}))
        for c in loops)


def test_the_loop_check_finds_a_loop():
    """A call back up, as script.c once called the worker that called it."""
    deps = {"script": {"xalloc": ["die"]}, "worker": {"script": ["script_request"]},
            "main": {"worker": ["worker_new"]}}
    assert cycles(deps) == []
    deps["script"]["worker"] = ["worker_fail"]
    assert cycles(deps) == [["script", "worker"]]


def test_no_source_file_is_over_1000_lines():
    sizes = {}
    for path in sources() + sources("*.lua"):
        with open(path) as f:
            sizes[os.path.basename(path)] = sum(1 for _ in f)
    assert len(sizes) > 60
    assert {name: n for name, n in sizes.items() if n > 1000} == {}


def test_the_protocols_are_read_in_three_files_besides_the_command_line():
    """spec.c (the run description: its names, its JSON), tls.c (what TLS
    offers and the start-up check) and worker.c (what each connection may
    speak); everything else asks spec.c or the connection."""
    readers = set()
    for path in sources():
        with open(path) as f:
            if re.search(r"\bspec(?:->|\.)n?protocols\b", f.read()):
                readers.add(os.path.basename(path))
    assert "cli.c" in readers
    assert readers - {"cli.c"} <= {"spec.c", "tls.c", "worker.c"}, readers


def test_hacking_names_every_source_file_and_no_file_that_is_not_there():
    with open(os.path.join(ROOT, "HACKING.md")) as f:
        text = f.read()
    # paths, but not those with a placeholder in them (tests/fuzz/corpus/<name>/)
    named = {p.rstrip("./") for p in
             re.findall(r"(?<![\w/.-])((?:src|tests|docs|deps|scripts)/[\w./<>-]*)", text)
             if "<" not in p}
    assert len(named) > 20
    placeholders = {"tests/integration/test_x.py"}  # "run one test file"
    missing = {p for p in named - placeholders if not glob.glob(os.path.join(ROOT, p))}
    assert missing == set(), missing
    files = [os.path.basename(p) for p in sources("*.c") + sources("*.lua")]
    # a header is named with its .c file; one without (chars.h) on its own
    files += [os.path.basename(p) for p in sources("*.h")
              if not os.path.exists(p[:-2] + ".c")]
    unnamed = [f for f in files if not re.search(rf"(?<![\w.]){re.escape(f)}(?!\w)", text)]
    assert unnamed == [], unnamed
