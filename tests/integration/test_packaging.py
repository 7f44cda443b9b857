"""The distribution packages under packaging/ agree with the tree: each
packages the Makefile's version from the same upstream address, installs
what make install installs, parses with its format's own tools where this
machine has them (rpmspec, bash, dash, ruby), and names the release
tarball's checksums as make pkg-sums writes them. Building the packages
(make deb, lintian, autopkgtest, rpmbuild, makepkg) takes minutes and is
left to .ci/run.
SPDX-License-Identifier: MIT
"""
import functools
import hashlib
import os
import re
import subprocess
from fnmatch import fnmatch

from conftest import ROOT, VOLLEY
from test_dist import make, tree_files, unpack, version

PACKAGING = os.path.join(ROOT, "packaging")
DEBIAN = os.path.join(PACKAGING, "debian")
SPEC = os.path.join(PACKAGING, "rpm", "volley.spec")
PKGBUILD = os.path.join(PACKAGING, "arch", "PKGBUILD")
APKBUILD = os.path.join(PACKAGING, "alpine", "APKBUILD")
FORMULA = os.path.join(PACKAGING, "homebrew", "volley.rb")
UPSTREAM = "https://github.com/volley-bench/volley"
# Each system library deps/libs.mk links (by its variables' prefix), as each
# format names it.
LIBRARIES = {
    "LUA": {"debian": "libluajit-5.1-dev", "rpm": "pkgconfig(luajit)", "arch": "luajit",
            "alpine": "luajit-dev", "homebrew": "luajit"},
    "SSL": {"debian": "libssl-dev", "rpm": "pkgconfig(openssl)", "arch": "openssl",
            "alpine": "openssl-dev", "homebrew": "openssl@3"},
    "EV": {"debian": "libev-dev", "rpm": "libev-devel", "arch": "libev",
           "alpine": "libev-dev", "homebrew": "libev"},
    "NGHTTP2": {"debian": "libnghttp2-dev", "rpm": "pkgconfig(libnghttp2)",
                "arch": "libnghttp2", "alpine": "nghttp2-dev", "homebrew": "libnghttp2"},
    # HTTP/3's (optional: deps/libs.mk builds without them)
    "NGTCP2": {"debian": "libngtcp2-crypto-gnutls-dev", "rpm": "pkgconfig(libngtcp2_crypto_gnutls)",
               "arch": "libngtcp2", "alpine": "ngtcp2-dev", "homebrew": "libngtcp2"},
    "NGHTTP3": {"debian": "libnghttp3-dev", "rpm": "pkgconfig(libnghttp3)",
                "arch": "libnghttp3", "alpine": "nghttp3-dev", "homebrew": "libnghttp3"},
    "GNUTLS": {"debian": "libgnutls28-dev", "rpm": "pkgconfig(gnutls)", "arch": "gnutls",
               "alpine": "gnutls-dev", "homebrew": "gnutls"},
    "SNAPPY": {"debian": "libsnappy-dev", "rpm": "snappy-devel", "arch": "snappy",
               "alpine": "snappy-dev", "homebrew": "snappy"},
    # Linux's alone: Homebrew's formula asks for it on Linux only.
    "URING": {"debian": "liburing-dev", "rpm": "pkgconfig(liburing)", "arch": "liburing",
              "alpine": "liburing-dev"},
}


def libraries(fmt):
    return {names[fmt] for names in LIBRARIES.values() if fmt in names}


def read(path):
    with open(path) as f:
        return f.read()


def run(*args, **kwargs):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, **kwargs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def shell_vars(shell, path, names):
    """The values of names after sourcing path in shell (bash for PKGBUILD,
    POSIX sh for APKBUILD; an array's items joined by spaces), and under
    "functions" which of build, check and package it defines."""
    expand = "${%s[*]}" if shell == "bash" else "${%s}"
    script = [f'. "{path}"']
    script += [f'printf "%s=%s\\0" {n} "{expand % n}"' for n in names]
    script += ['printf "functions=%s\\0" "$(for f in build check package; do '
               'command -v $f; done)"']
    out = run(shell, "-euc", "\n".join(script), cwd=os.path.dirname(path))
    values = dict(item.split("=", 1) for item in out.split("\0")[:-1])
    values["functions"] = set(values["functions"].split())
    return values


def spec_field(name):
    expanded = run("rpmspec", "-P", SPEC)
    values = re.findall(rf"^{name}:\s*(.+)$", expanded, re.M)
    assert values, name
    return values


# --------------------------------------------------------------------------
# Version and upstream
# --------------------------------------------------------------------------

def test_debian_changelog_is_at_the_makefiles_version():
    changelog = os.path.join(DEBIAN, "changelog")
    full = run("dpkg-parsechangelog", "-l", changelog, "-S", "Version").strip()
    assert re.fullmatch(rf"{re.escape(version())}-\d+", full), full
    assert run("dpkg-parsechangelog", "-l", changelog, "-S", "Source").strip() == "volley"


def test_every_format_packages_the_makefiles_version():
    v = version()
    assert spec_field("Version") == [v]
    assert shell_vars("bash", PKGBUILD, ["pkgver"])["pkgver"] == v
    assert shell_vars("dash", APKBUILD, ["pkgver"])["pkgver"] == v
    url = re.search(r'^  url "(.+)"$', read(FORMULA), re.M).group(1)
    assert url == f"{UPSTREAM}/releases/download/v{v}/volley-{v}.tar.gz"


def test_every_format_names_the_same_upstream():
    assert f"Homepage: {UPSTREAM}\n" in read(os.path.join(DEBIAN, "control"))
    assert f"Source: {UPSTREAM}\n" in read(os.path.join(DEBIAN, "copyright"))
    assert f"Repository-Browse: {UPSTREAM}\n" in read(os.path.join(DEBIAN, "upstream",
                                                                   "metadata"))
    watch = read(os.path.join(DEBIAN, "watch"))
    assert re.search(rf"^  {re.escape(UPSTREAM)}/tags \S+tar\\.gz$", watch, re.M), watch
    assert spec_field("URL") == [UPSTREAM]
    v = version()
    assert spec_field("Source0") == [f"{UPSTREAM}/releases/download/v{v}/volley-{v}.tar.gz"]
    arch = shell_vars("bash", PKGBUILD, ["url", "source"])
    assert arch["url"] == UPSTREAM
    assert arch["source"] == f"{UPSTREAM}/releases/download/v{v}/volley-{v}.tar.gz"
    alpine = shell_vars("dash", APKBUILD, ["url", "source"])
    assert alpine["url"] == UPSTREAM
    assert alpine["source"] == \
        f"volley-{v}.tar.gz::{UPSTREAM}/releases/download/v{v}/volley-{v}.tar.gz"
    assert f'  homepage "{UPSTREAM}"\n' in read(FORMULA)


# --------------------------------------------------------------------------
# Dependencies
# --------------------------------------------------------------------------

def test_every_library_the_build_links_is_known_here():
    linked = re.findall(r"^ifeq \(\$\(origin (\w+)_LIBS\),undefined\)$",
                        read(os.path.join(ROOT, "deps", "libs.mk")), re.M)
    assert sorted(linked) == sorted(LIBRARIES)


def test_every_format_builds_with_the_system_libraries():
    control = read(os.path.join(DEBIAN, "control"))
    build_depends = re.search(r"^Build-Depends:(.*?)^\S", control, re.M | re.S).group(1)
    assert "debhelper-compat (= 13)" in build_depends
    for lib in libraries("debian"):
        assert re.search(rf"[\s|]{re.escape(lib)}[\s,]", build_depends), lib
    unversioned = {re.sub(r"\s*[<>=].*", "", r) for r in spec_field("BuildRequires")}
    assert libraries("rpm") <= unversioned
    arch = shell_vars("bash", PKGBUILD, ["depends", "makedepends"])
    assert libraries("arch") | {"python"} <= set(arch["depends"].split())
    alpine = shell_vars("dash", APKBUILD, ["depends", "makedepends"])
    assert libraries("alpine") <= set(alpine["makedepends"].split())
    assert "python3" in alpine["depends"].split()
    formula = set(re.findall(r'^  depends_on "([^"]+)"$', read(FORMULA), re.M))
    assert libraries("homebrew") <= formula
    assert re.search(r'^  on_linux do\n    depends_on "liburing"\n  end$', read(FORMULA), re.M)
    # volley-sweep is Python: every format's package needs it at run time.
    assert re.search(r"^Depends: python3,", control, re.M)
    assert "python3" in spec_field("Requires")
    assert any(d.startswith("python@3") for d in formula)


@functools.lru_cache(maxsize=None)
def debian_index():
    """Each installed package's priority, and what it depends on."""
    priority, depends = {}, {}
    for line in run("dpkg-query", "-W", "-f", "${Package}\t${Priority}\t${Pre-Depends}, "
                    "${Depends}\n").splitlines():
        package, priority[package], deps = line.split("\t")
        depends[package] = re.findall(r"(?:^|[,|]\s*)([a-z0-9][a-z0-9.+-]*)", deps)
    return priority, depends


def debian_closure(roots):
    """roots and every package they depend on (without recommends), as
    apt-get install --no-install-recommends would install them."""
    depends = debian_index()[1]
    todo, found = list(roots), set()
    while todo:
        package = todo.pop()
        if package not in found:
            found.add(package)
            todo += depends.get(package, [])
    return found


def debian_owners(paths):
    """The package that installed each of paths (through usrmerge's /lib
    links too)."""
    paths = set(paths)
    asked = sorted(paths | {os.path.realpath(p) for p in paths})
    out = subprocess.run(["dpkg", "-S", *asked], capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        package, path = line.split(": ", 1)
        owner[path] = package.split(":")[0].split(",")[0]
    found = {owner.get(os.path.realpath(p)) or owner.get(p) for p in paths}
    assert None not in found, [p for p in paths if not (owner.get(os.path.realpath(p))
                                                        or owner.get(p))]
    return found


def test_deps_installs_every_header_the_build_includes():
    """On Debian, deps/install.sh installs (with what those packages depend
    on, without recommends, as it installs them) the package of every header
    volley's sources include: a minimal Debian 12 machine builds after it."""
    script = read(os.path.join(ROOT, "deps", "install.sh"))
    apt = re.search(r'^    build="([^"]+)"', script, re.M).group(1).split()
    # and HTTP/3's, each with the oldest version it takes
    http3 = re.search(r'^    pkgs="(libngtcp2[^"]+)"', script, re.M).group(1).split()
    installed = debian_closure(apt + [p.split(":")[0] for p in http3])
    cppflags = run("make", "-s", "--no-print-directory", "--eval",
                   "print-cppflags: ; @echo $(VOLLEY_CPPFLAGS)", "print-cppflags", cwd=ROOT)
    sources = sorted(f for f in os.listdir(os.path.join(ROOT, "src")) if f.endswith(".c"))
    rules = run("gcc", "-M", "-MG", "-std=gnu11", *cppflags.split(),
                *(os.path.join("src", f) for f in sources), cwd=ROOT)
    headers = {h for h in rules.replace("\\\n", " ").split() if h.startswith("/")}
    owners = debian_owners(headers)
    assert {"libc6-dev", "libluajit-5.1-dev", "libssl-dev", "libev-dev", "libnghttp2-dev",
            "liburing-dev"} <= owners
    if "-DVOLLEY_HTTP3" in cppflags.split():
        assert {"libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libnghttp3-dev",
                "libgnutls28-dev"} <= owners
    assert owners <= installed, owners - installed


def test_deps_says_what_it_does_even_when_there_is_nothing_to_install():
    """deps/install.sh --dry-run lists what it would run, or says in one line
    that nothing is missing; never nothing at all."""
    for args, what in ((["--dry-run"], "builds"), (["--test", "--dry-run"], "builds and tests")):
        proc = subprocess.run([os.path.join(ROOT, "deps", "install.sh"), *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc
        lines = proc.stdout.splitlines()
        commands = [l for l in lines if l.startswith("+ ")]
        done = f"deps/install.sh: everything volley {what} with is installed already"
        assert (commands and done not in lines) or lines == [done], proc


def test_the_container_image_installs_every_library_volley_links():
    """The Containerfile's run-time stage installs the Debian package of each
    shared library volley links (but those debian:12-slim has), and
    ca-certificates for --verify, nothing more."""
    stage = read(os.path.join(ROOT, "Containerfile")).split("\nFROM ")[-1]
    listed = re.search(r"--no-install-recommends\s*\\\n(.*?)&&", stage, re.S).group(1).split()
    # "package/release": from that release (bookworm-backports)
    listed = [p.split("/")[0] for p in listed if p != "\\"]
    # debian:12-slim is debootstrap's minbase: the required packages and apt.
    in_slim = debian_closure(["apt"] + [p for p, priority in debian_index()[0].items()
                                        if priority == "required"])
    linked = debian_owners(re.findall(r"=> (/\S+)", run("ldd", VOLLEY)))
    # The image holds the plain build: not the sanitizers' run-time libraries.
    needed = {"ca-certificates"} | {p for p in linked - in_slim
                                    if not re.fullmatch(r"lib(asan|ubsan)\d+", p)}
    assert "libnghttp2-14" in needed
    assert sorted(listed) == sorted(needed)


# --------------------------------------------------------------------------
# What each format installs
# --------------------------------------------------------------------------

def installed_by_make(tmp_path, **dirs):
    dest = str(tmp_path / "root")
    make(ROOT, "install", f"DESTDIR={dest}", *(f"{k}={v}" for k, v in dirs.items()))
    return ["/" + f for f in tree_files(dest)]


def test_rpm_spec_lists_exactly_what_make_install_installs(tmp_path):
    expanded = run("rpmspec", "-P", SPEC)
    files = expanded[expanded.index("\n%files\n") + 7:]
    files = files[:files.index("\n%changelog")].splitlines()
    install = re.search(r"^%install\n(.*?)\n\n", expanded, re.M | re.S).group(1)
    dirs = dict(re.findall(r" (PREFIX|BINDIR|MANDIR|DOCDIR)=(\S+)", install))
    assert dirs["PREFIX"] == "/usr", install
    patterns = [f for f in files if f.startswith("/")]
    installed = installed_by_make(tmp_path, **dirs)

    def packs(pattern, path):  # a directory entry takes everything under it
        return path.startswith(pattern) if pattern.endswith("/") else fnmatch(path, pattern)

    for path in installed:
        assert any(packs(p, path) for p in patterns), f"{path} is installed, not in %files"
    for pattern in patterns:
        assert any(packs(pattern, path) for path in installed), \
            f"%files names {pattern}, which make install does not install"
    assert "%license LICENSE" in files


def test_arch_and_alpine_install_with_make_install_into_usr():
    for shell, path in (("bash", PKGBUILD), ("dash", APKBUILD)):
        assert shell_vars(shell, path, [])["functions"] == {"build", "check", "package"}, path
        assert re.search(r'^\s+make DESTDIR="\$pkgdir" PREFIX=/usr install$', read(path), re.M)


def test_debian_rules_installs_into_usr_with_the_hardening_flags():
    rules = read(os.path.join(DEBIAN, "rules"))
    assert "export DEB_BUILD_MAINT_OPTIONS = hardening=+all\n" in rules
    assert "\tdh_auto_install -- PREFIX=/usr\n" in rules
    control = read(os.path.join(DEBIAN, "control"))
    assert "\nRules-Requires-Root: no\n" in control
    assert os.access(os.path.join(DEBIAN, "rules"), os.X_OK)
    assert os.access(os.path.join(DEBIAN, "tests", "nginx"), os.X_OK)
    assert read(os.path.join(DEBIAN, "source", "format")) == "3.0 (quilt)\n"


def test_build_time_tests_are_the_same_short_subset_everywhere():
    """dh_auto_test, %check, check() and the suite name the same test files,
    and each of those exists."""
    pattern = r"tests/run\.py ((?:\S+\.py\s*(?:\\\n\s*)?)+)"
    subsets = []
    for path in (os.path.join(DEBIAN, "rules"), SPEC, PKGBUILD, APKBUILD):
        m = re.search(pattern, read(path))
        assert m, path
        subsets.append(re.sub(r"\s*\\\n\s*|\s+", " ", m.group(1)).split())
    assert all(s == subsets[0] for s in subsets), subsets
    assert all(os.path.exists(os.path.join(ROOT, f)) for f in subsets[0]), subsets[0]
    assert "ifeq (,$(filter nocheck,$(DEB_BUILD_OPTIONS)))" in read(os.path.join(DEBIAN, "rules"))


# --------------------------------------------------------------------------
# Syntax
# --------------------------------------------------------------------------

def test_debian_copyright_is_machine_readable_and_holds_the_license():
    copyright_ = read(os.path.join(DEBIAN, "copyright"))
    assert copyright_.startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    license_text = read(os.path.join(ROOT, "LICENSE"))
    body = license_text[license_text.index("Permission is hereby"):]
    expanded = re.search(r"^License: Expat\n((?: .*\n)+)", copyright_, re.M).group(1)
    unfolded = "\n".join(l[1:] if l != " ." else "" for l in expanded.splitlines())
    assert re.sub(r"\s+", " ", unfolded).strip() == re.sub(r"\s+", " ", body).strip()


def test_autopkgtest_runs_against_nginx_and_the_installed_package():
    tests = read(os.path.join(DEBIAN, "tests", "control"))
    assert "Tests: nginx\n" in tests
    assert re.search(r"^Depends: .*\bnginx\b.*\bvolley$", tests, re.M), tests
    assert read(os.path.join(DEBIAN, "tests", "nginx")).startswith("#!/usr/bin/python3\n")


def test_spec_parses_with_rpmspec():
    assert spec_field("Name") == ["volley"]
    assert spec_field("License") == ["MIT"]


def test_pkgbuild_and_apkbuild_parse_as_shell():
    run("bash", "-n", PKGBUILD)
    run("dash", "-n", APKBUILD)
    assert shell_vars("bash", PKGBUILD, ["license"])["license"] == "MIT"
    assert shell_vars("dash", APKBUILD, ["license"])["license"] == "MIT"


def test_formula_parses_with_ruby():
    assert run("ruby", "-c", FORMULA) == "Syntax OK\n"
    text = read(FORMULA)
    assert re.search(r"^class Volley < Formula$", text, re.M)
    assert '  license "MIT"\n' in text and "\n  test do\n" in text


# --------------------------------------------------------------------------
# Checksums of the release tarball
# --------------------------------------------------------------------------

def checksums(root=ROOT):
    """The PKGBUILD's and the formula's sha256 and the APKBUILD's sha512 line
    (checksum, file name) in the tree at root."""
    def at(path):
        return os.path.join(root, os.path.relpath(path, ROOT))

    sha256 = shell_vars("bash", at(PKGBUILD), ["sha256sums"])["sha256sums"]
    brew = re.search(r'^  sha256 "(.*)"$', read(at(FORMULA)), re.M).group(1)
    sha512 = shell_vars("dash", at(APKBUILD), ["sha512sums"])["sha512sums"].split()
    return sha256, brew, sha512


def test_checksums_are_of_one_tarball_and_well_formed():
    sha256, brew, sha512 = checksums()
    assert re.fullmatch(r"[0-9a-f]{64}", sha256) and brew == sha256
    assert re.fullmatch(r"[0-9a-f]{128}", sha512[0])
    assert sha512[1:] == [f"volley-{version()}.tar.gz"]


def test_pkg_sums_writes_the_checksums_of_the_release_tarball(tmp_path):
    """make pkg-sums in an unpacked release tarball writes the checksums of
    the tarball that tree makes, and changes nothing else."""
    make(ROOT, "dist")
    name = f"volley-{version()}"
    unpack(os.path.join(ROOT, f"{name}.tar.gz"), tmp_path)
    tree = str(tmp_path / name)
    make(tree, "pkg-sums")
    with open(os.path.join(tree, f"{name}.tar.gz"), "rb") as f:
        data = f.read()
    sha256, brew, sha512 = checksums(tree)
    assert sha256 == brew == hashlib.sha256(data).hexdigest()
    assert sha512 == [hashlib.sha512(data).hexdigest(), f"{name}.tar.gz"]
    def without_sums(text):
        return [line for line in text.splitlines() if not re.search(r"[0-9a-f]{64}", line)]

    for path in (PKGBUILD, FORMULA, APKBUILD):
        written = read(os.path.join(tree, os.path.relpath(path, ROOT)))
        assert without_sums(written) == without_sums(read(path)), path
