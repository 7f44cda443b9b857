"""What a distribution packager relies on: the manual page documents exactly
the options --help lists, every environment variable volley reads and the
names --engine takes, and man finds nothing to warn about; the release
tarball holds the tracked files, builds in parallel without .git, passes its
own tests there and gives the same tarball and the same binary again; make
install and uninstall honour DESTDIR and the directory variables and leave
nothing behind; make static links LuaJIT, OpenSSL, libev and libnghttp2 in; user flags
reach every compile and link; PUC Lua 5.1 can stand in for LuaJIT.
SPDX-License-Identifier: MIT
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT, clean_env, volley

MAN_SOURCE = os.path.join(ROOT, "docs", "volley.1")
SWEEP_MAN_SOURCE = os.path.join(ROOT, "docs", "volley-sweep.1")
SWEEP_SOURCE = os.path.join(ROOT, "scripts", "volley-sweep")
PLOT_MAN_SOURCE = os.path.join(ROOT, "docs", "volley-plot.1")
PLOT_SOURCE = os.path.join(ROOT, "scripts", "volley-plot")
KUBE_MAN_SOURCE = os.path.join(ROOT, "docs", "volley-kube.1")
REPORT_MAN_SOURCE = os.path.join(ROOT, "docs", "volley-report.1")
REPORT_SOURCE = os.path.join(ROOT, "scripts", "volley-report")
KUBE_SOURCE = os.path.join(ROOT, "scripts", "volley-kube")

# Exercises the whole hook and thread API; the checks below read its output.
SCRIPT = r"""
function init(args)
   wrk.headers["X-Arg"] = args[1]
   io.write(("init %s\n"):format(wrk.thread.addr))
end

function request()
   return wrk.format(nil, "/r" .. id)
end

responses = 0
function response(status, headers, body)
   responses = responses + 1
end

function setup(thread)
   thread:set("id", 7)
   threads = threads or {}
   table.insert(threads, thread)
end

function done(summary, latency, requests)
   local seen = 0
   for _, t in ipairs(threads) do
      seen = seen + t:get("responses")
   end
   io.write(("done %d %d %d %d\n"):format(summary.requests, seen, latency:percentile(100),
                                         latency.max))
end
"""


def make(cwd, *args, timeout=300):
    proc = subprocess.run(["make", *args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def version():
    with open(os.path.join(ROOT, "Makefile")) as f:
        return re.search(r"^VERSION = (\S+)$", f.read(), re.M).group(1)


def tree_files(root):
    """Every file under root, relative to it."""
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files)


def run_against_testd(testd, binary, *args):
    srv = testd()
    proc = subprocess.run([binary, "-t1", "-c2", "-d1s", *args, srv.url + "/", "--", "hello"],
                          capture_output=True, text=True, timeout=60)
    return proc, srv


def check_script_run(proc, srv):
    """The SCRIPT ran in full: init saw the address, every request the server
    got came from request() with init's header, done() saw the counts."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"init 127.0.0.1:{srv.port}\n" in proc.stdout
    reported = int(re.search(r"^  (\d+) requests in ", proc.stdout, re.M).group(1))
    m = re.search(r"^done (\d+) (\d+) (\d+) (\d+)$", proc.stdout, re.M)
    assert m, proc.stdout
    assert int(m.group(1)) == reported == int(m.group(2)) and reported > 0
    assert int(m.group(3)) == int(m.group(4)) > 0  # percentile(100) is the maximum
    log = srv.log()
    assert reported <= len(log) <= reported + 2  # at most one in flight per connection
    assert {r["target"] for r in log} == {"/r7"}
    assert all(["X-Arg", "hello"] in r["headers"] for r in log)


# --------------------------------------------------------------------------
# The manual page
# --------------------------------------------------------------------------

def help_options(*command):
    """(group, short, long, argument) for every option line of --help."""
    run = volley(*command, "--help")
    assert run.returncode == 0, run
    options, group = [], None
    for line in run.stdout.splitlines():
        m = re.fullmatch(r"  (\w+):", line)
        if m:
            group = m.group(1)
            continue
        m = re.match(r" {4}(?:-(\w), | {4})--([a-z0-9][a-z0-9_-]*) *(?:<(\w)>)? {2,}\S", line)
        if m:
            options.append((group,) + m.groups())
    return options


def man_text():
    with open(MAN_SOURCE) as f:
        return f.read()


def unescape(roff):
    return re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-")


def man_options(name="OPTIONS"):
    """(group, short, long, argument) for every tag under the section name."""
    text = man_text()
    section = text[text.index(f"\n.SH {name}\n"):]
    section = section[:section.index("\n.SH ", 1)]
    options, group, lines = [], None, section.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SS "):
            group = line[4:].strip()
        elif line == ".TP":
            tag = unescape(lines[i + 1])
            m = re.fullmatch(r"(?:-(\w), )?--([a-z0-9][a-z0-9_-]*)(?: (\w))?", tag)
            assert m, f"unexpected option tag: {lines[i + 1]!r}"
            options.append((group,) + m.groups())
    return options


def test_man_page_documents_exactly_the_options_of_help():
    listed = help_options()
    assert len(listed) >= 21, listed
    assert man_options() == listed


def test_man_page_documents_exactly_the_options_of_merge_help():
    listed = help_options("merge")
    assert len(listed) == 6, listed
    assert man_options("MERGING RESULTS") == listed


def test_readme_usage_is_the_help_text():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    block = []
    for line in readme[readme.index("\n## Usage\n"):].splitlines()[3:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    assert "\n".join(block).strip("\n") == volley("--help").stdout.rstrip("\n")


def test_json_doc_describes_every_error_cause(testd, tmp_path):
    out = tmp_path / "r.json"
    assert volley("-d100ms", "--json", out, testd().url).returncode == 0
    with open(out) as f:
        causes = json.load(f)["error_causes"]
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        rows = re.findall(r"^\| `([a-z0-9_]+)` \| (?:read|write|connect|timeout)", f.read(), re.M)
    assert sorted(rows) == sorted(causes)


def test_json_doc_describes_every_figure_of_the_table():
    """Every counter, breakdown and distribution of src/stats.h's tables (volley
    --list-fields) is described in docs/json.md: its key in the document
    (and the object it sits in) among the fields of --json, its timeline
    key among those of a timeline record, and how volley merge adds it up."""
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        text = f.read()
    document, timeline = text.split("\n## Results over time")
    merged = document[document.index("\n### A merged result"):document.index("\n### Totals")]
    lines = volley("--list-fields").stdout.splitlines()
    assert len(lines) >= 20, lines
    for line in lines:
        kind, path, column, *_ = line.split()
        *objects, key = path.split(".")
        for name in objects + [key]:
            assert f"`{name}`" in document, path
        if column != "-":
            assert f"`{column.split('.')[-1]}`" in timeline, column
        # a distribution, or a counter written as a count, is named in the
        # merged result's table by its key (or its object's)
        assert any(f"`{name}" in merged for name in objects + [key]), path


def test_json_doc_describes_every_tls_handshake_failure(nginx, certs, tmp_path):
    server = nginx(tls=True, server=f"""
        ssl_certificate {certs["server.pem"]};
        ssl_certificate_key {certs["server.key"]};
        location / {{ return 200 "ok\\n"; }}
    """)
    out = tmp_path / "r.json"
    run = volley("-t1", "-c1", "-d100ms", "--json", out, f"https://127.0.0.1:{server.port}/")
    assert run.returncode == 0, run
    with open(out) as f:
        reasons = json.load(f)["tls"]["handshake_failures"]
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        table = f.read().split("| Reason | Meaning |", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"^\| `([a-z_]+)` \|", table, re.M)) == sorted(reasons)


def test_man_page_names_no_option_volley_lacks():
    known = {o[2] for o in help_options()}
    named = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9_-]*)", unescape(man_text())))
    assert named and named <= known, named - known


def man_entry(tag, section="OPTIONS"):
    """The text of the entry under section whose tag line holds tag,
    formatting left out: up to the next entry or section."""
    text = man_text()
    part = text[text.index(f"\n.SH {section}\n"):]
    part = part[:part.index("\n.SH ", 1)]
    entries = part.split("\n.TP\n")
    found = [e for e in entries
             if tag in re.findall(r"[\w-]+", unescape(e.split("\n", 1)[0]))]
    assert len(found) == 1, (tag, found)
    return unescape(re.sub(r"^\.\w+ ?", "", found[0].split("\n.SS ")[0], flags=re.M))


def readme_paragraph(start):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    return readme[readme.index(start):].split("\n\n")[0]


def test_man_page_environment_names_every_variable_volley_reads():
    """Each variable src/ reads (getenv) has its ENVIRONMENT entry, and
    volley's own (VOLLEY_*) are in the README or a document of docs/ too."""
    read = set()
    for path in glob.glob(os.path.join(ROOT, "src", "*.c")):
        with open(path) as f:
            read |= set(re.findall(r'getenv\("(\w+)"\)', f.read()))
    assert {"VOLLEY_ENGINE", "VOLLEY_SHARD", "VOLLEY_SHARDS"} <= read, read
    docs = ""
    for path in [os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md")):
        with open(path) as f:
            docs += f.read()
    for name in sorted(read):
        assert man_entry(name, "ENVIRONMENT"), name
        if name.startswith("VOLLEY_"):
            assert f"`{name}`" in docs, name


def test_engines_volley_takes_are_the_ones_documented():
    """The names --engine and VOLLEY_ENGINE take (as volley's own message
    lists them) are in --help, the man page's entries and the README, and
    the ones a run can report are in docs/json.md."""
    run = volley("--engine", "none", "http://127.0.0.1:1/")
    m = re.match(r"volley: invalid --engine 'none': (.+)\n", run.stderr)
    assert run.returncode == 1 and m, run
    names = re.split(r", | or ", m.group(1))
    assert set(names) == {"epoll", "io_uring", "auto"}, names
    ran = [n for n in names if n != "auto"]  # what a run names, in its header and --json
    helped = [l for l in volley("--help").stdout.splitlines() if "--engine" in l]
    assert helped and all(n in helped[0] for n in ran), helped
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        doc = [l for l in f if l.startswith("| `engine` |")]
    assert len(doc) == 1 and all(f'`"{n}"`' in doc[0] for n in ran), doc
    for text in (man_entry("--engine"), man_entry("VOLLEY_ENGINE", "ENVIRONMENT"),
                 readme_paragraph("**`--engine epoll|io_uring`**")):
        assert all(re.search(rf"(?<![\w-]){n}(?![\w-])", text) for n in names), (names, text)


def test_man_page_has_the_sections_and_the_scripting_api():
    text = man_text()
    sections = re.findall(r"^\.SH (.+)$", text, re.M)
    for name in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SCRIPTING", "EXIT STATUS",
                 "EXAMPLES", "SEE ALSO"):
        assert name in sections, name
    plain = re.sub(r"\\f[BIRP]|^\.\w+ ?", "", text, flags=re.M)
    plain = re.sub(r"\s+", "", plain).replace('"', "").replace("\\-", "-")
    for name in ("setup(thread)", "init(args)", "delay()", "request()",
                 "response(status,headers,body)", "done(summary,latency,requests)",
                 "wrk.scheme", "wrk.host", "wrk.port", "wrk.path", "wrk.method", "wrk.headers",
                 "wrk.body", "wrk.thread", "wrk.format(method,path,headers,body)",
                 "wrk.lookup(host,service)", "wrk.connect(addr)", "thread.addr",
                 "thread:get(name)", "thread:set(name,value)", "thread:stop()",
                 "s.min", "s.max", "s.mean", "s.stdev", "s:percentile(p)", "#s", "s(i)"):
        assert name in plain, name


def test_readme_shows_the_help_as_it_is():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    block = readme[readme.index("\n## Usage\n\n") + len("\n## Usage\n\n"):]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    assert "\n".join(lines).strip("\n") + "\n" == volley("--help").stdout


def man_warnings(page, length=10000):
    """What man prints on stderr when formatting page the way lintian does
    (which must be at least length bytes of output: the whole page)."""
    env = clean_env(LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80")
    proc = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) > length
    return proc.stderr


def test_man_page_formats_without_warnings():
    assert man_warnings(MAN_SOURCE) == ""


def sweep_help_options(*command, source=SWEEP_SOURCE):
    """(short, long) for every option volley-sweep's (or source's) argparse
    help lists."""
    proc = subprocess.run([sys.executable, source, *command, "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    options = []
    for line in proc.stdout.splitlines():
        m = re.match(r"  (?:-(\w)(?: [A-Z]+)?, )?--([a-z0-9-]+)", line)
        if m:
            options.append(m.groups())
    return options


def man_groups(path):
    """{group: [(short, long)]} for every option tag under OPTIONS of a
    script's manual page."""
    with open(path) as f:
        text = f.read()
    section = text[text.index("\n.SH OPTIONS\n"):]
    section = section[:section.index("\n.SH ", 1)]
    groups, group, lines = {}, None, section.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SS "):
            group = groups.setdefault(line[4:], [])
        elif line == ".TP":
            m = re.fullmatch(r"\.B (?:-(\w), )?--([a-z0-9-]+)(?: [a-z]+)?", unescape(lines[i + 1]))
            assert m, f"unexpected option tag: {lines[i + 1]!r}"
            group.append(m.groups())
    return groups


def test_sweep_man_page_documents_exactly_the_options_of_its_help():
    groups = man_groups(SWEEP_MAN_SOURCE)
    assert len(groups["Sweep"]) == 14, groups
    assert groups == {"Sweep": sweep_help_options(), "Diff": sweep_help_options("diff")}


def test_plot_man_page_documents_exactly_the_options_of_its_help():
    groups = man_groups(PLOT_MAN_SOURCE)
    assert groups == {"Options": sweep_help_options(source=PLOT_SOURCE)}
    assert len(groups["Options"]) == 3, groups
    assert man_warnings(PLOT_MAN_SOURCE, length=2000) == ""


def test_kube_man_page_documents_exactly_the_options_of_its_help():
    groups = man_groups(KUBE_MAN_SOURCE)
    assert len(groups["Kubernetes"]) == 13, groups
    assert groups == {"Kubernetes": sweep_help_options(source=KUBE_SOURCE)}


def test_report_man_page_documents_exactly_the_options_of_its_help():
    groups = man_groups(REPORT_MAN_SOURCE)
    assert groups == {"Report": sweep_help_options(source=REPORT_SOURCE),
                      "Compare": sweep_help_options("compare", source=REPORT_SOURCE)}
    assert len(groups["Report"]) == 3 and len(groups["Compare"]) == 3, groups
    assert man_warnings(REPORT_MAN_SOURCE, length=5000) == ""


def test_kube_man_page_formats_without_warnings():
    assert man_warnings(KUBE_MAN_SOURCE, length=5000) == ""


def test_sweep_man_page_formats_without_warnings():
    assert man_warnings(SWEEP_MAN_SOURCE, length=5000) == ""


# --------------------------------------------------------------------------
# The release tarball
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """make dist in the source tree; the tarball's path and its name as make
    dist wrote it (volley-X.Y.Z, without .tar.gz)."""
    proc = make(ROOT, "dist")
    name = re.findall(r"> (volley-\S+)\.tar\.gz$", proc.stdout, re.M)[-1]
    tarball = tmp_path_factory.mktemp("dist") / f"{name}.tar.gz"
    shutil.copy(os.path.join(ROOT, f"{name}.tar.gz"), tarball)
    return str(tarball), name


def unpack(tarball, where):
    os.makedirs(where, exist_ok=True)
    subprocess.run(["tar", "-xzf", tarball, "-C", str(where)], check=True, timeout=60)


@pytest.fixture(scope="module")
def built(dist, tmp_path_factory):
    """The tarball unpacked (no .git) and built in parallel: the tree's path
    and the build's output."""
    tarball, name = dist
    where = tmp_path_factory.mktemp("built")
    unpack(tarball, where)
    tree = str(where / name)
    proc = make(tree, "-j4", "all", "tests")
    return tree, proc.stdout


def test_tarball_holds_the_tracked_files(dist):
    tarball, name = dist
    if os.path.exists(os.path.join(ROOT, ".git")):
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True, timeout=60).stdout.split()
    else:  # this tree is itself an unpacked tarball
        with open(os.path.join(ROOT, "MANIFEST")) as f:
            tracked = f.read().split()
    expected = sorted(set(tracked) | {"MANIFEST"})
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
        files = sorted(m.name for m in members if m.isfile())
        manifest = tar.extractfile(f"{name}/MANIFEST").read().decode().split()
    assert files == [f"{name}/{f}" for f in expected]
    assert manifest == expected
    assert "docs/volley.1" in expected and "LICENSE" in expected
    # Reproducible: no owner names, one date for everything.
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert len({m.mtime for m in members}) == 1


def test_tarball_builds_in_parallel_with_every_command_visible(built):
    tree, output = built
    assert os.access(os.path.join(tree, "volley"), os.X_OK)
    assert not os.path.exists(os.path.join(tree, ".git"))
    assert re.search(r"^\S*cc .* -c -o build/cli\.o src/cli\.c$", output, re.M), output
    # Nothing was missed by the parallel build: make finds everything up to date.
    proc = subprocess.run(["make", "-q", "all", "tests"], cwd=tree, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_tarball_passes_its_own_tests(built):
    tree, _ = built
    proc = subprocess.run(["python3", "tests/run.py", "tests/test_unit.py",
                           "tests/integration/test_cli.py"], cwd=tree, env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = re.fullmatch(r"(\d+) passed, 0 failed", last)
    assert m and int(m.group(1)) > 20, last


def test_tarball_makes_the_same_tarball_again(dist, built):
    tarball, name = dist
    tree, _ = built
    make(tree, "dist")
    with open(tarball, "rb") as a, open(os.path.join(tree, f"{name}.tar.gz"), "rb") as b:
        assert a.read() == b.read()


def test_same_sources_give_the_same_binary_elsewhere(dist, built, tmp_path):
    tarball, name = dist
    tree, _ = built
    unpack(tarball, tmp_path / "elsewhere")
    other = str(tmp_path / "elsewhere" / name)
    make(other, "-j4", "volley")
    with open(os.path.join(tree, "volley"), "rb") as a, \
            open(os.path.join(other, "volley"), "rb") as b:
        assert a.read() == b.read()


# --------------------------------------------------------------------------
# The version
# --------------------------------------------------------------------------

def news_version():
    """The newest release NEWS.md describes."""
    with open(os.path.join(ROOT, "NEWS.md")) as f:
        m = re.search(r"^## (\d+\.\d+\.\d+) ", f.read(), re.M)
    assert m, "NEWS.md names no release"
    return m.group(1)


def test_one_version_in_news_version_man_page_and_tarball(dist, built):
    """The Makefile's VERSION is the only place the build takes the version
    from: the tarball's name, volley --version and the manual page built from
    that tarball all say it, and it is the newest release in NEWS.md (the
    packaging files name it too: test_packaging.py checks them)."""
    v = version()
    assert news_version() == v
    _, name = dist
    assert name == f"volley-{v}"
    tree, _ = built
    line = subprocess.run([os.path.join(tree, "volley"), "--version"], capture_output=True,
                          text=True, check=True, timeout=60).stdout
    assert line.startswith(f"volley {v} "), line
    page = subprocess.run(["man", "-l", os.path.join(tree, "build", "volley.1")],
                          capture_output=True, text=True, check=True, timeout=60,
                          env=clean_env(MANWIDTH="80", MANPAGER="cat", LC_ALL="C.UTF-8"))
    footer = page.stdout.rstrip().splitlines()[-1]
    assert re.match(rf"volley {re.escape(v)} +\S+ +VOLLEY\(1\)$", footer), footer


# --------------------------------------------------------------------------
# make install / uninstall
# --------------------------------------------------------------------------

def test_install_and_uninstall_with_destdir(built, tmp_path):
    tree, _ = built
    dest = str(tmp_path / "root")
    docdir = "usr/share/doc/volley-docs"
    make(tree, "install", f"DESTDIR={dest}", "PREFIX=/usr", f"DOCDIR=/{docdir}")

    docs = [f for f in ("README.md", "SCRIPTING.md") if os.path.exists(os.path.join(tree, f))]
    docs += [f for f in os.listdir(os.path.join(tree, "docs")) if f.endswith(".md")]
    scripts = os.path.join(tree, "scripts")
    examples = sorted(f for f in os.listdir(scripts) if f.endswith(".lua")) \
        if os.path.isdir(scripts) else []
    expected = {"usr/bin/volley": 0o755, "usr/share/man/man1/volley.1": 0o644}
    for tool in ("volley-sweep", "volley-plot", "volley-kube", "volley-report"):
        if os.path.exists(os.path.join(scripts, tool)):
            expected[f"usr/bin/{tool}"] = 0o755
            expected[f"usr/share/man/man1/{tool}.1"] = 0o644
    expected.update({f"{docdir}/{f}": 0o644 for f in docs})
    expected.update({f"{docdir}/scripts/{f}": 0o644 for f in examples})
    installed = {f: os.stat(os.path.join(dest, f)).st_mode & 0o777 for f in tree_files(dest)}
    assert installed == expected

    binary = os.path.join(dest, "usr/bin/volley")
    line = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    assert line.startswith(f"volley {version()} "), line
    # Never stripped: the symbol table and the debug information are there.
    sections = subprocess.run(["readelf", "-S", "-W", binary], capture_output=True, text=True,
                              check=True, timeout=60).stdout
    assert ".symtab" in sections and ".debug_info" in sections
    page = os.path.join(dest, "usr/share/man/man1/volley.1")
    with open(page) as f:
        assert f'"volley {version()}"' in f.read()
    assert man_warnings(page) == ""

    make(tree, "uninstall", f"DESTDIR={dest}", "PREFIX=/usr", f"DOCDIR=/{docdir}")
    assert tree_files(dest) == []
    assert not os.path.exists(os.path.join(dest, docdir))


# --------------------------------------------------------------------------
# make static, user flags, PUC Lua
# --------------------------------------------------------------------------

def test_static_binary_runs_scripts_without_the_shared_libraries(built, testd, tmp_path):
    tree, _ = built
    make(tree, "static")
    binary = os.path.join(tree, "volley-static")
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    assert "libc.so" in ldd, ldd  # glibc stays shared (see the Makefile)
    assert not re.search(r"lua|libssl|libcrypto|libev|libgcc|nghttp2", ldd), ldd
    shared = subprocess.run([os.path.join(tree, "volley"), "-v"], capture_output=True,
                            text=True, check=True, timeout=60).stdout
    static = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True,
                            timeout=60).stdout
    assert static == shared

    script = tmp_path / "api.lua"
    script.write_text(SCRIPT)
    check_script_run(*run_against_testd(testd, binary, "-s", str(script)))


def test_puc_lua_build_with_user_flags(dist, tmp_path, testd):
    """Built against Lua 5.1 instead of LuaJIT, without libsnappy and
    liburing, with a packager's flags: the flags reach every compile and link,
    wrk's scripting API works, --remote-write says in one line what it lacks,
    and the one engine is epoll."""
    tarball, name = dist
    unpack(tarball, tmp_path)
    tree = str(tmp_path / name)
    proc = make(tree, "-j4", "volley", "LUA_PKG=lua5.1", "SNAPPY=0", "URING=0", "CFLAGS=-O1 -g",
                "CPPFLAGS=-DVOLLEY_PACKAGER_FLAG", "LDFLAGS=-Wl,-z,now")
    compiles = [l for l in proc.stdout.splitlines() if " -c -o build/" in l]
    assert compiles and all("-DVOLLEY_PACKAGER_FLAG" in l and "-O1 -g" in l and
                            "lua5.1" in l for l in compiles), proc.stdout
    binary = os.path.join(tree, "volley")
    dynamic = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    assert re.search(r"\(FLAGS\)\s+BIND_NOW", dynamic), dynamic  # LDFLAGS reached the link
    assert "liblua5.1" in dynamic and "luajit" not in dynamic and "snappy" not in dynamic
    assert "liburing" not in dynamic
    no_snappy = subprocess.run([binary, "--remote-write", "http://127.0.0.1:1/w",
                                "http://127.0.0.1:1/"], capture_output=True, text=True,
                               timeout=60)
    assert no_snappy.returncode == 1 and no_snappy.stderr.splitlines()[0] == (
        "volley: --remote-write: this volley was built without libsnappy (remote write "
        "compresses with it): install libsnappy-dev (deps/install.sh does), then rebuild")

    line = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    assert " (Lua 5.1." in line, line
    script = tmp_path / "api.lua"
    script.write_text(SCRIPT)
    check_script_run(*run_against_testd(testd, binary, "-s", str(script)))
    env = {k: v for k, v in os.environ.items() if k != "VOLLEY_ENGINE"}
    srv = testd()
    run = subprocess.run([binary, "-t1", "-c2", "-n", "100", srv.url], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 0 and "  engine: epoll\n" in run.stdout, run
    run = subprocess.run([binary, "--engine", "io_uring", "-n1", srv.url], capture_output=True,
                         text=True, timeout=60, env=env)
    assert (run.returncode, run.stderr) == (1, "volley: --engine io_uring: io_uring is not "
                                               "available here (this volley was built without "
                                               "liburing)\n"), run
