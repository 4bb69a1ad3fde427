#!/usr/bin/python3
"""Cross-compile every product translation unit for macOS (ctest Portability.MacOS).

What it checks
    Every non-test .cpp under common/, auth/, driver/, daemon/, client/,
    tools/ and bindings/ compiles for each --targets triple (ctest:
    aarch64-macos) with zig's clang, and those that can differ by architecture (the platform
    seam, and files naming __x86_64__, __APPLE__, ...: SEAM_MARKERS) for each
    --seam-targets triple (ctest: x86_64-macos), against the macOS libc and libc++
    headers that zig ships. It prints, per target,

        N/M translation units compile for aarch64-macos

    and for each TU that does not, its path and the first lines of the
    compiler's errors. Exit status 1 when any TU fails for any target.

Why
    The Linux build never sees a macOS header, so Linux-only code (epoll,
    eventfd, futex, ...) creeps in unnoticed. The Linux-only code is meant to
    live under platform/linux/ directories, with macOS counterparts under
    platform/darwin/; this test is the only thing that compiles the latter.

Which TUs
    A glob, not a list: every *.cpp in those folders except test files
    (*_test.cpp, test_*.cpp, anything under a tests/ directory) and anything
    under a platform/linux/ directory.

Flags
    Each TU's -I/-isystem/-iquote/-D/-U/-include flags come from
    BUILD/compile_commands.json (the build sets CMAKE_EXPORT_COMPILE_COMMANDS;
    of a unity build, one entry per source: scripts/compile-db.py),
    so the include dirs, the generated protobuf/gRPC headers (BUILD/proto/gen)
    and definitions such as MCDMA_VERSION are exactly the Linux build's (the
    test fails, saying so, while those generated headers are missing). A TU
    that the Linux build does not compile (platform/darwin/ files, or a file
    newer than the compile database) borrows the flags of a sibling (see
    flag_source()). Warnings, optimisation and code-generation flags are the
    harness's own (COMPILE_FLAGS).

Third-party headers
    /usr/include itself is never on the include path: glibc's headers would
    clash with the macOS ones. Instead BUILD/portability/include holds
    symlinks to just the third-party header trees the project uses (see
    THIRD_PARTY, MERGED and UAPI_DIRS below); a flag that named a directory
    under /usr/include (python3.11, ...) is pointed at the same place in the
    staging directory. A TU that includes any other header of the Linux
    host's (<linux/futex.h>, <sys/epoll.h>, ...) fails, as it would on a Mac.

Speed
    Each TU is compiled for real, to an object (under BUILD/portability/obj), at -O0
    -g0 without zig's default UBSan instrumentation, so errors that only the
    back end sees (an x86 inline-asm mnemonic on arm64, ...) count too.
    Measured on 8 of the heaviest TUs (CPU seconds, aarch64-macos): zig's
    defaults (-O0 -g, UBSan) 48.6 s, these flags 39.3 s, clang -cc1
    -fsyntax-only 28.0 s. zig c++ itself cannot do -fsyntax-only (its driver
    then fails to move the object it expected into its cache), so that would
    mean replaying the -cc1 line of `zig c++ -###` by hand and losing zig's
    cache. As it is, the ~110 TUs of one target take about 5 CPU minutes. TUs compile --jobs at a time (default 2). zig's cache lives in
    BUILD/portability/zig-cache, so a rerun recompiles only what changed
    (seconds).

Run with Debian's /usr/bin/python3; standard library only. zig comes from
PyPI's `ziglang` in the venv that scripts/install-deps.sh creates.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]

# The folders whose code is built for macOS.
FOLDERS = ("common", "auth", "driver", "daemon", "client", "tools", "bindings")

# scripts/install-deps.sh makes this venv and installs `ziglang` into it.
ZIG_PYTHON = "/opt/mcdma-dev/venv/bin/python"

SYSTEM_INCLUDE = Path("/usr/include")
# The Linux build host's multiarch directory (x86_64-linux-gnu, ...): the
# home of a few arch-specific headers of the libraries below.
MULTIARCH = SYSTEM_INCLUDE / f"{os.uname().machine}-linux-gnu"

# The third-party header trees the project includes, each staged as one
# symlink BUILD/portability/include/<name> -> /usr/include/<name>. These are
# the Linux host's headers standing in for the Mac's (Homebrew's) copies of
# the same libraries; the arch-specific bits (MERGED below) describe an LP64
# target, which both macOS targets are too.
THIRD_PARTY = (
    "boost",       # Boost (headers only)
    "google",      # protobuf (google/protobuf/...)
    "grpc",        # gRPC core, pulled in by grpcpp
    "grpcpp",      # gRPC C++
    "grpc++",      # gRPC C++ (old spelling, still included by some headers)
    "absl",        # Abseil, pulled in by protobuf and gRPC
    "spdlog",      # logging
    "fmt",         # spdlog's formatter (SPDLOG_FMT_EXTERNAL)
    "toml++",      # daemon configuration
    "CLI",         # CLI11, command lines of mcdma-rpcd and mcdmactl
    "prometheus",  # prometheus-cpp, the daemon's metrics endpoint
    "xxhash.h",    # bindings: the KV hand-off's layer checksums
    "pybind11",    # bindings
    # rdma-core's verbs headers. A Mac's real <infiniband/verbs.h> would come
    # from Apple's SDK or from the MCDMA provider; here the verbs driver is
    # compiled against rdma-core's header as the stand-in.
    "infiniband",
    "rdma",
)

# Directories staged as a directory of per-file symlinks merged from several
# sources, later sources winning: the library's headers plus its
# arch-specific header from the multiarch directory. Python is added per
# installed version by python_merges().
MERGED = {
    # OpenSSL: include/openssl + the arch-specific configuration.h and
    # opensslconf.h that Debian keeps in the multiarch directory.
    "openssl": (SYSTEM_INCLUDE / "openssl", MULTIARCH / "openssl"),
}

# The Linux uapi headers (linux/, asm-generic/, asm/ from the multiarch
# directory) that <infiniband/verbs.h> includes. Only the files that header
# actually reaches are staged (found by preprocessing it, see
# stage_verbs_uapi()), so a TU that includes, say, <linux/futex.h> itself
# fails here as it would on a Mac.
UAPI_DIRS = {
    "linux": SYSTEM_INCLUDE / "linux",
    "asm-generic": SYSTEM_INCLUDE / "asm-generic",
    "asm": MULTIARCH / "asm",
}
UAPI_PROBE = "infiniband/verbs.h"

# Every -D of the Linux build is kept, except these, which the build sets
# only on its x86-64 Linux host: MCDMA_XXH3_DISPATCH (libmcdma calls
# libxxhash's run-time dispatch there; a Mac build inlines xxHash).
LINUX_ONLY_DEFINES = ("MCDMA_XXH3_DISPATCH",)

# Flags of our own, before the compile database's: zig's default -O0 -g plus
# UBSan is ~25% slower and adds nothing to "does it compile"; -w keeps a
# failing TU's report to its errors (macOS deprecation warnings would drown
# them).
COMPILE_FLAGS = ("-std=c++20", "-fno-color-diagnostics", "-O0", "-g0",
                 "-fno-sanitize=undefined", "-w")

# zig 0.17's headers (clang 22, libc++, a macOS 15 SDK's libc) have a bug:
# in C++20 (where __has_feature(modules) holds) Apple's <math.h> includes
# <float.h> with __need_infinity_nan, which sets libc++'s <float.h> include
# guard after clang's <float.h> defined only INFINITY and NAN, so FLT_RADIX,
# DBL_MAX & co. never get defined in a TU that includes <cmath> before
# <cfloat> (toml++ trips on it). Upstream: llvm/llvm-project PR 172539. When
# FLOAT_PROBE shows the bug, every TU force-includes FLOAT_WORKAROUND, which
# includes <float.h> whole first; INFINITY and NAN, which <math.h> then no
# longer gets, are defined as Apple's <math.h> defines them without modules.
# Drops out by itself once zig ships fixed headers.
FLOAT_PROBE = """\
#include <cmath>
#include <cfloat>
static_assert(FLT_RADIX == 2 && DBL_MAX > 0);
float probe[] = {NAN, INFINITY};
"""
FLOAT_WORKAROUND = """\
/* Written by tests/portability/cross_compile.py (see FLOAT_PROBE there). */
#include <float.h>
#ifndef INFINITY
#define INFINITY __builtin_huge_valf()
#endif
#ifndef NAN
#define NAN __builtin_nanf("0x7fc00000")
#endif
"""

ERROR_LINES = 30      # lines of compiler output shown for a failing TU
TU_TIMEOUT_S = 600    # one TU; a hung compiler fails the TU, not the test


def is_test_file(path):
    """Test files are not product code: *_test.cpp, test_*.cpp, tests/."""
    return (path.name.endswith("_test.cpp") or path.name.startswith("test_")
            or "tests" in path.parts[:-1])


def is_linux_only(path):
    """Anything under a platform/linux/ directory is Linux-only by convention."""
    parts = path.parts
    return any(parts[i] == "platform" and parts[i + 1] == "linux"
               for i in range(len(parts) - 2))


def find_tus(root):
    """The TUs to compile, as paths relative to root, sorted."""
    tus = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.cpp")):
            rel = path.relative_to(root)
            if not is_test_file(rel) and not is_linux_only(rel):
                tus.append(rel)
    return tus


# ---------------------------------------------------------------- zig

def zig_command():
    """The argv prefix that runs `zig c++`, or None when zig is not installed."""
    if not os.access(ZIG_PYTHON, os.X_OK):
        return None
    probe = subprocess.run([ZIG_PYTHON, "-m", "ziglang", "version"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return None
    return [ZIG_PYTHON, "-m", "ziglang", "c++"], probe.stdout.strip()


# ---------------------------------------------------------------- staging

def python_merges():
    """python3.X: its headers + pyconfig.h from the multiarch directory.

    Debian's /usr/include/python3.X/pyconfig.h only dispatches on
    __linux__ to the multiarch copy and #errors anywhere else."""
    merges = {}
    for pydir in sorted(SYSTEM_INCLUDE.glob("python3.*")):
        arch = MULTIARCH / pydir.name
        if pydir.is_dir() and (arch / "pyconfig.h").exists():
            merges[pydir.name] = (pydir, arch)
    return merges


def symlink(target, link):
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def stage_merged(staging, name, sources):
    for source in sources:
        for entry in sorted(source.iterdir()):
            link = staging / name / entry.name
            if link.is_symlink():
                link.unlink()
            symlink(entry, link)


def stage_verbs_uapi(staging, zig, targets, workdir):
    """Stage the uapi headers that <infiniband/verbs.h> reaches on any target.

    Preprocesses the header against a probe directory holding the whole
    linux/, asm-generic/ and asm/ trees, and links just the files of those
    trees that the preprocessor opened."""
    probe = workdir / "uapi-probe"
    shutil.rmtree(probe, ignore_errors=True)
    for name, source in UAPI_DIRS.items():
        if source.is_dir():
            symlink(source, probe / name)
    source_file = workdir / "uapi-probe.cpp"
    source_file.write_text(f"#include <{UAPI_PROBE}>\n")
    reached = set()
    for target in targets:
        result = subprocess.run(
            zig + ["-target", target, "-std=c++20", "-isystem", str(staging),
                   "-isystem", str(probe), "-E", "-o", "-", str(source_file)],
            capture_output=True, text=True, env=zig_env(workdir))
        if result.returncode != 0:
            # Reported by the TUs that include verbs.h; staging goes on.
            print(f"note: preprocessing <{UAPI_PROBE}> for {target} failed:\n"
                  + first_lines(result.stderr), file=sys.stderr)
            continue
        for match in re.finditer(r'^# \d+ "([^"]+)"', result.stdout, re.M):
            path = Path(os.path.normpath(match.group(1)))
            if probe in path.parents:
                reached.add(path.relative_to(probe))
    for rel in sorted(reached):
        symlink(UAPI_DIRS[rel.parts[0]].joinpath(*rel.parts[1:]), staging / rel)
    shutil.rmtree(probe)
    source_file.unlink()
    return sorted(reached)


def float_workaround(zig, targets, workdir):
    """The -include flags that work around zig's <float.h> bug, if it has it."""
    probe = workdir / "float-probe.cpp"
    probe.write_text(FLOAT_PROBE)
    shim = workdir / "float-workaround.h"
    shim.write_text(FLOAT_WORKAROUND)

    def compiles(extra):
        return all(subprocess.run(
            zig + ["-target", target, *COMPILE_FLAGS, *extra, "-c", "-o",
                   str(workdir / f"float-probe-{target}.o"), str(probe)],
            capture_output=True, env=zig_env(workdir)).returncode == 0
            for target in targets)

    try:
        if compiles([]):
            return [], None
        if compiles(["-include", str(shim)]):
            return ["-include", str(shim)], "<float.h> workaround on (see FLOAT_PROBE)"
        return [], "<cmath> + <cfloat> do not compile even with the <float.h> workaround"
    finally:
        probe.unlink()


def stage(build, zig, targets):
    """(Re)create BUILD/portability/include; returns (staging, extra flags, notes)."""
    workdir = build / "portability"
    staging = workdir / "include"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    notes = []
    for name in THIRD_PARTY:
        source = SYSTEM_INCLUDE / name
        if source.exists():
            symlink(source, staging / name)
        else:
            notes.append(f"{source} not installed (TUs that include it fail)")
    for name, sources in {**MERGED, **python_merges()}.items():
        present = [s for s in sources if s.is_dir()]
        if present:
            stage_merged(staging, name, present)
        else:
            notes.append(f"{sources[0]} not installed (TUs that include it fail)")
    uapi = stage_verbs_uapi(staging, zig, targets, workdir)
    notes.append(f"{len(uapi)} uapi headers staged for <{UAPI_PROBE}>")
    extra, note = float_workaround(zig, targets, workdir)
    if note:
        notes.append(note)
    return staging, extra, notes


def zig_env(workdir):
    env = dict(os.environ)
    cache = str(workdir / "zig-cache")
    env["ZIG_GLOBAL_CACHE_DIR"] = cache
    env["ZIG_LOCAL_CACHE_DIR"] = cache
    return env


# ---------------------------------------------------------------- flags

def per_file_db(build):
    """BUILD/compile-db/compile_commands.json, one entry per source file even
    in a unity build (scripts/compile-db.py writes it from CMake's)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "compile-db.py"
    subprocess.run([sys.executable, str(script), str(build)], check=True)
    return build / "compile-db" / "compile_commands.json"


def load_compile_db(build):
    """{absolute source path: argv} from the build's per-file database."""
    with open(per_file_db(build)) as f:
        entries = json.load(f)
    db = {}
    for entry in entries:
        directory = Path(entry["directory"])
        argv = entry.get("arguments") or shlex.split(entry["command"])
        path = (directory / entry["file"]).resolve()
        db.setdefault(path, (directory, argv))
    return db


def map_include_dir(path, staging):
    """Where an include dir of the Linux build points for macOS, or None.

    /usr/include and the multiarch dir are dropped (the staging dir stands in
    for the third-party part of them); /usr/include/X becomes staging/X
    when X is staged (python3.11) and is dropped otherwise (libnl3, which
    nothing includes directly)."""
    path = Path(path)
    if path in (SYSTEM_INCLUDE, MULTIARCH):
        return None
    if SYSTEM_INCLUDE in path.parents:
        staged = staging / path.relative_to(SYSTEM_INCLUDE)
        return str(staged) if staged.exists() else None
    return str(path)


# Flags copied from the compile database: name -> takes a path.
KEPT_FLAGS = {"-I": True, "-isystem": True, "-iquote": True, "-idirafter": True,
              "-include": True, "-D": False, "-U": False}


def macos_flags(directory, argv, staging):
    """The -I/-isystem/-D/... flags of one compile database entry, for macOS."""
    flags = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        for name, is_path in KEPT_FLAGS.items():
            if arg == name and i < len(argv):
                value = argv[i]
                i += 1
            elif arg.startswith(name) and arg != name and name != "-include":
                value = arg[len(name):]
            else:
                continue
            if is_path:
                value = map_include_dir(directory / value, staging)
                if value is None:
                    break
            elif name == "-D" and value.split("=")[0] in LINUX_ONLY_DEFINES:
                break
            flags += [name, value]
            break
    return flags


def linux_counterpart(path):
    """platform/darwin/x_darwin.cpp -> platform/linux/x_linux.cpp."""
    parts = ["linux" if part == "darwin" else part for part in path.parent.parts]
    return Path(*parts) / path.name.replace("darwin", "linux")


def flag_source(tu, root, db):
    """The compile database entry whose flags TU uses: its own, else a sibling's.

    A sibling is, in this order: the Linux counterpart of a darwin file (built
    in the same target), a TU in the same folder, a TU in the counterpart
    folder, the TU sharing the longest leading path with it."""
    path = (root / tu).resolve()
    if path in db:
        return path
    if "darwin" in tu.parts and linux_counterpart(path) in db:
        return linux_counterpart(path)
    product = [p for p in db if root in p.parents
               and p.relative_to(root).parts[0] in FOLDERS
               and not is_test_file(p.relative_to(root))]
    siblings = [p for p in product if p.parent == path.parent]
    if not siblings and "darwin" in tu.parts:
        siblings = [p for p in product if p.parent == linux_counterpart(path).parent]
    if not siblings:
        def shared(p):
            return len(os.path.commonpath([p, path]))
        best = max((shared(p) for p in product), default=0)
        siblings = [p for p in product if shared(p) == best]
    return min(siblings) if siblings else None


# ---------------------------------------------------------------- compile

def first_lines(text, count=ERROR_LINES):
    lines = text.rstrip().splitlines()
    shown = lines[:count]
    if len(lines) > count:
        shown.append(f"... ({len(lines) - count} more lines)")
    return "\n".join("    " + line for line in shown)


def object_path(env, target, tu):
    """Where a TU's object goes: under the build's portability folder. (zig
    writes NAME.o into its working directory when told -o /dev/null.)"""
    out = Path(env["ZIG_LOCAL_CACHE_DIR"]).parent / "obj" / target
    out.mkdir(parents=True, exist_ok=True)
    return out / (str(tu).replace("/", "_") + ".o")


# What can make one macOS target's build differ from another's: both are
# LP64 with the same libc and libc++ headers, so only the platform seam and
# code that branches on the architecture or the OS.
SEAM_MARKERS = ("__APPLE__", "__aarch64__", "__arm64__", "__x86_64__", "__MACH__", "TARGET_OS_")


def is_seam_tu(root, tu):
    """True for the TUs a --seam-targets triple compiles."""
    if "platform" in Path(tu).parts:
        return True
    text = (root / tu).read_text(errors="replace")
    return any(marker in text for marker in SEAM_MARKERS)


def compile_tu(zig, target, flags, tu, root, env):
    """Compile one TU; returns (ok, seconds, compiler output)."""
    argv = zig + ["-target", target, *COMPILE_FLAGS, *flags,
                  "-c", "-o", str(object_path(env, target, tu)), str(tu)]
    start = time.monotonic()
    try:
        result = subprocess.run(argv, cwd=root, env=env, capture_output=True,
                                text=True, timeout=TU_TIMEOUT_S)
        ok, output = result.returncode == 0, result.stdout + result.stderr
    except subprocess.TimeoutExpired:
        ok, output = False, f"timed out after {TU_TIMEOUT_S} s"
    return ok, time.monotonic() - start, output


def stale_compile_db_note(root, build):
    """A note when a CMakeLists.txt is newer than the compile database."""
    db_time = (build / "compile_commands.json").stat().st_mtime
    lists = [root / "CMakeLists.txt"] + [p for folder in FOLDERS + ("proto",)
                                         for p in (root / folder).rglob("CMakeLists.txt")]
    newer = [p.relative_to(root) for p in lists if p.stat().st_mtime > db_time]
    if newer:
        return (f"{', '.join(map(str, newer))} newer than compile_commands.json: "
                "flags may be stale until the build reconfigures")
    return None


def missing_generated_dirs(jobs, build):
    """Include dirs inside the build tree (generated headers) that are missing or empty."""
    missing = set()
    for _, flags in jobs:
        for flag, value in zip(flags, flags[1:]):
            path = Path(value)
            if (flag in ("-I", "-isystem", "-iquote") and build in path.parents
                    and not (path.is_dir() and any(path.iterdir()))):
                missing.add(value)
    return sorted(missing)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True, type=Path,
                        help="the CMake build dir (compile_commands.json, proto/gen)")
    parser.add_argument("--source", type=Path, default=SOURCE_ROOT,
                        help="the source tree (default: this repository)")
    parser.add_argument("--targets", default="aarch64-macos,x86_64-macos",
                        help="comma-separated zig target triples")
    parser.add_argument("--seam-targets", default="",
                        help="comma-separated triples for which only the TUs that can differ "
                             "between macOS targets compile (see SEAM_MARKERS)")
    parser.add_argument("--jobs", type=int, default=2, help="TUs compiled at once")
    parser.add_argument("--only", metavar="REGEX",
                        help="only the TUs whose path matches (for debugging)")
    parser.add_argument("--verbose", action="store_true",
                        help="print each TU's time, and a failing TU's command")
    args = parser.parse_args()

    root = args.source.resolve()
    build = args.build.resolve()
    targets = [t for t in args.targets.split(",") if t]
    seam_targets = [t for t in args.seam_targets.split(",") if t]

    found = zig_command()
    if found is None:
        print(f"FAIL: zig not found: {ZIG_PYTHON} -m ziglang does not run.\n"
              "Run scripts/install-deps.sh as root: it creates /opt/mcdma-dev/venv "
              "and installs PyPI's ziglang into it.")
        return 1
    zig, zig_version = found

    if not (build / "compile_commands.json").exists():
        print(f"FAIL: {build}/compile_commands.json not found: configure the "
              "build first (CMAKE_EXPORT_COMPILE_COMMANDS is ON)")
        return 1
    db = load_compile_db(build)

    tus = find_tus(root)
    if args.only:
        tus = [tu for tu in tus if re.search(args.only, str(tu))]
    if not tus:
        print("FAIL: no translation units found")
        return 1

    staging, extra_flags, notes = stage(build, zig, targets)
    note = stale_compile_db_note(root, build)
    if note:
        notes.append(note)
    env = zig_env(build / "portability")

    jobs = []
    for tu in tus:
        source = flag_source(tu, root, db)
        if source is None:
            print(f"FAIL: no compile database entry to take flags from for {tu}")
            return 1
        directory, argv = db[source]
        flags = (extra_flags + macos_flags(directory, argv, staging)
                 + ["-isystem", str(staging)])
        if source != (root / tu).resolve():
            notes.append(f"{tu} is not in the compile database; "
                         f"flags from {source.relative_to(root)}")
        jobs.append((tu, flags))

    missing = missing_generated_dirs(jobs, build)
    if missing:
        print(f"FAIL: generated headers missing: {', '.join(missing)}; "
              f"build first (cmake --build {build})")
        return 1

    print(f"zig {zig_version}; {len(jobs)} translation units; "
          f"third-party headers staged in {staging}")
    for note in notes:
        print(f"note: {note}")

    failed_any = False
    total_start = time.monotonic()
    first_errors = {}  # TU -> output for the first target it failed on
    for target in targets + seam_targets:
        start = time.monotonic()
        target_jobs = jobs
        if target in seam_targets:
            target_jobs = [(tu, flags) for tu, flags in jobs if is_seam_tu(root, tu)]
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(compile_tu, zig, target, flags, tu, root, env)
                       for tu, flags in target_jobs]
            results = [f.result() for f in futures]
        failures = 0
        for (tu, flags), (ok, seconds, output) in zip(target_jobs, results):
            if args.verbose:
                print(f"  {target} {'ok  ' if ok else 'FAIL'} {seconds:6.1f}s {tu}")
            if ok:
                continue
            failures += 1
            if first_errors.get(tu, (None, None))[1] == output:
                print(f"FAIL [{target}] {tu}: the same errors as for {first_errors[tu][0]}")
            else:
                print(f"FAIL [{target}] {tu}:\n{first_lines(output)}")
                first_errors.setdefault(tu, (target, output))
            if args.verbose:
                print("    command: " + shlex.join(zig + ["-target", target, *COMPILE_FLAGS,
                                                          *flags, "-c", str(tu)]))
        scope = " (the TUs that can differ by architecture)" if target in seam_targets else ""
        print(f"{len(target_jobs) - failures}/{len(target_jobs)} translation units compile "
              f"for {target}{scope}")
        print(f"({target}: {time.monotonic() - start:.0f} s with {args.jobs} jobs)")
        failed_any = failed_any or failures > 0
    print(f"({len(targets) + len(seam_targets)} targets: {time.monotonic() - total_start:.0f} s)")
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
