#!/usr/bin/python3
"""Fail on Linux-only calls outside the platform seam (ctest Portability.LinuxOnlyCalls).

What it checks
    No source file (.cpp .hpp .h .cc .c) of common/, auth/, driver/,
    daemon/, include/, client/, tools/ and bindings/ (the folders built for
    macOS), nor of tests/, harness/, bench/ and demo/, uses a Linux-only
    interface (epoll and its EPOLL* constants, eventfd and EFD_*, accept4,
    SOCK_NONBLOCK, SOCK_CLOEXEC, MSG_NOSIGNAL, TCP_USER_TIMEOUT,
    TCP_KEEPIDLE, memfd, futex and FUTEX_*, sd_notify; see PATTERNS), except
    the platform seam's Linux files under common/platform/linux/. Test
    files in those folders are scanned too.

Why
    Everything that differs between Linux and macOS lives behind the small
    interfaces of common/platform/, one file per OS. A Linux-only call
    anywhere else either breaks the macOS build (ctest Portability.MacOS
    catches that, but only for the code it can compile) or, worse, hides
    behind an #ifdef __linux__ and silently does nothing on a Mac.

How
    Comments and string literals are blanked out first (keeping line
    numbers and the header name of an #include), so prose that mentions
    epoll is fine; then each line is searched for the tokens in PATTERNS,
    matched as identifiers (so FutexWait, the portable API's name, is not
    futex). Each hit is printed as file:line: token, then a summary line.
    Exit status 1 on any hit, 0 when there is none.

    --self-test runs the checker on a small temporary tree with known
    violations (in a comment, in a string, in code, in common/platform/linux/)
    and fails unless exactly the ones in code outside the seam are reported,
    so the check cannot pass by finding nothing.

Run with Debian's /usr/bin/python3; standard library only.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]

# The folders built for macOS, and the tests, benchmarks and demo that drive
# them: nothing in the tree reaches the OS but through the seam.
FOLDERS = ("common", "auth", "driver", "daemon", "include", "client", "tools", "bindings", "tests",
           "harness", "bench", "demo")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".c")
# The platform seam's Linux files: the only place these may appear.
ALLOWED = Path("common/platform/linux")

# One alternation, so a header name (sys/eventfd.h) is reported once rather
# than also as the identifier inside it. Case-sensitive: lower-case futex*
# are the syscall's names, FutexWait and friends are the portable API's.
PATTERNS = (
    r"sys/epoll\.h",
    r"sys/eventfd\.h",
    r"linux/futex\.h",
    r"systemd/sd-daemon\.h",        # sd_notify's header
    r"\bepoll_\w*",                 # epoll_create1, epoll_wait, epoll_event
    r"\bEPOLL\w*",                  # EPOLLIN, EPOLL_CTL_ADD, EPOLL_CLOEXEC
    r"\beventfd\w*",                # eventfd, eventfd_t, eventfd_write
    r"\bEFD_\w+",                   # EFD_CLOEXEC, EFD_NONBLOCK
    r"\baccept4\b",
    r"\bSOCK_NONBLOCK\b",           # socket(2) type flags; macOS: fcntl
    r"\bSOCK_CLOEXEC\b",
    r"\bMSG_NOSIGNAL\b",            # macOS: SO_NOSIGPIPE
    r"\bTCP_USER_TIMEOUT\b",
    r"\bTCP_KEEPIDLE\b",            # macOS: TCP_KEEPALIVE
    r"\bmemfd_\w+",                 # memfd_create
    r"\bSYS_futex\w*",
    r"\bfutex\w*",                  # futex, futex_waitv
    r"\bFUTEX_\w+",                 # FUTEX_WAIT, FUTEX_WAKE_PRIVATE
    r"\bsd_notify\w*",
)
TOKEN = re.compile("|".join(PATTERNS))

INCLUDE_DIRECTIVE = re.compile(r"^\s*#\s*(include|include_next|import)\s*$")
RAW_STRING_PREFIX = re.compile(r"\b(?:u8|u|U|L)?R$")
IDENTIFIER_CHARS = re.compile(r"[0-9A-Za-z_.]*$")


def strip_comments_and_strings(text):
    """Blank comments and string/char literals, keeping every newline.

    The header name of an #include "..." is kept (it is code, not a string).
    Handles //-comments continued by a backslash, raw strings R"d(...)d" and
    C++14 digit separators (1'000)."""
    out = []
    i, n = 0, len(text)
    line_start = 0  # index in out where the current line begins

    def blank(segment):
        out.append(re.sub(r"[^\n]", " ", segment))

    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            line_start = len(out)
        elif text.startswith("//", i):
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            blank(text[i:j])
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(text[i:j])
            i = j
        elif c == '"':
            so_far = "".join(out[line_start:])
            raw = RAW_STRING_PREFIX.search(so_far)
            if raw:
                open_paren = text.find("(", i)
                delimiter = text[i + 1:open_paren]
                end = text.find(")" + delimiter + '"', open_paren)
                j = n if end < 0 else end + len(delimiter) + 2
            else:
                j = i + 1
                while j < n and text[j] not in '"\n':
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
            if not raw and INCLUDE_DIRECTIVE.match(so_far):
                out.append(text[i:j])
            else:
                blank(text[i:j])
            i = j
        elif c == "'":
            token = IDENTIFIER_CHARS.search("".join(out[line_start:])).group()
            if token[:1].isdigit():  # a digit separator, not a literal
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] not in "'\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            blank(text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_allowed(rel):
    return rel == ALLOWED or ALLOWED in rel.parents


def source_files(root):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix in EXTENSIONS:
                yield path.relative_to(root)


def scan(root):
    """Returns (hits, files scanned); a hit is (path, line number, token, line)."""
    hits = []
    scanned = 0
    for rel in source_files(root):
        scanned += 1
        if is_allowed(rel):
            continue
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        code = strip_comments_and_strings(text).splitlines()
        original = text.splitlines()
        for number, line in enumerate(code, 1):
            # Each token once per line, in the order they appear.
            for token in dict.fromkeys(TOKEN.findall(line)):
                hits.append((rel, number, token, original[number - 1].strip()))
    return hits, scanned


def report(root):
    hits, scanned = scan(root)
    for rel, number, token, line in hits:
        print(f"{rel}:{number}: {token}    | {line}")
    files = len({rel for rel, *_ in hits})
    if hits:
        print(f"FAIL: {len(hits)} Linux-only uses in {files} files outside "
              f"{ALLOWED}/ ({scanned} files scanned); move them behind the "
              "platform seam (common/platform/)")
        return 1
    print(f"OK: no Linux-only calls outside {ALLOWED}/ ({scanned} files scanned)")
    return 0


# ---------------------------------------------------------------- self-test

SELF_TEST_TREE = {
    # Every use below in a comment or a string must be ignored; the ones
    # marked FLAG must be reported at exactly that line.
    "common/src/clean.cpp": """\
// epoll_wait and eventfd are only mentioned here.
/* accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
   futex(FUTEX_WAIT) */
#include "mcdma_internal/wait.hpp"
const char* kWhy = "no MSG_NOSIGNAL on macOS";
const char* kRaw = R"x(memfd_create("a", 0) sd_notify)x";
constexpr long kBig = 1'000'000;  // a separator, not a char: 'epoll_wait'
char quote = '"';  int after_quote = TCP_KEEPALIVE;
void Wait() { FutexWait(nullptr, 0); WakeAll(); }  // portable names
""",
    "daemon/src/bad.cpp": """\
#include <sys/epoll.h>
#include "linux/futex.h"
int a = epoll_create1(0);
// a comment \\
   continued: eventfd(0, 0)
int b = eventfd(0, EFD_CLOEXEC); /* SOCK_NONBLOCK */ int c = SOCK_NONBLOCK | SOCK_NONBLOCK;
long d = syscall(SYS_futex, p, FUTEX_WAKE_PRIVATE, 1);
int e = futex_waitv(nullptr, 0, 0, nullptr, 0);
""",
    # The seam's Linux files may use anything.
    "common/platform/linux/wakeup_linux.cpp": """\
#include <sys/eventfd.h>
int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
""",
    # Not a source file.
    "driver/tcp/notes.txt": "epoll_wait\n",
}

SELF_TEST_EXPECTED = [
    ("daemon/src/bad.cpp", 1, "sys/epoll.h"),
    ("daemon/src/bad.cpp", 2, "linux/futex.h"),
    ("daemon/src/bad.cpp", 3, "epoll_create1"),
    ("daemon/src/bad.cpp", 6, "eventfd"),
    ("daemon/src/bad.cpp", 6, "EFD_CLOEXEC"),
    ("daemon/src/bad.cpp", 6, "SOCK_NONBLOCK"),
    ("daemon/src/bad.cpp", 7, "SYS_futex"),
    ("daemon/src/bad.cpp", 7, "FUTEX_WAKE_PRIVATE"),
    ("daemon/src/bad.cpp", 8, "futex_waitv"),
]


def self_test():
    """Run the checker on SELF_TEST_TREE; 0 when it reports exactly SELF_TEST_EXPECTED."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="check_linux_only.") as tmp:
        root = Path(tmp)
        for rel, text in SELF_TEST_TREE.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)

        hits, scanned = scan(root)
        got = [(str(rel), number, token) for rel, number, token, _ in hits]
        if got != SELF_TEST_EXPECTED:
            failures.append("scan() reported:\n  " + "\n  ".join(map(str, got))
                            + "\nexpected:\n  " + "\n  ".join(map(str, SELF_TEST_EXPECTED)))
        if scanned != 3:
            failures.append(f"scanned {scanned} files, expected 3 (notes.txt is no source)")

        # The command line too: exit 1 and file:line output with violations...
        run = subprocess.run([sys.executable, __file__, "--root", tmp],
                             capture_output=True, text=True)
        if run.returncode != 1 or "daemon/src/bad.cpp:3: epoll_create1" not in run.stdout:
            failures.append(f"with violations: exit {run.returncode}, output:\n"
                            f"{run.stdout}{run.stderr}")
        # ...and exit 0 once they are gone.
        (root / "daemon/src/bad.cpp").unlink()
        run = subprocess.run([sys.executable, __file__, "--root", tmp],
                             capture_output=True, text=True)
        if run.returncode != 0 or "2 files scanned" not in run.stdout:
            failures.append(f"without violations: exit {run.returncode}, output:\n"
                            f"{run.stdout}{run.stderr}")

    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        return 1
    print(f"OK: self-test: {len(SELF_TEST_EXPECTED)} violations in code found; "
          "comments, strings and common/platform/linux/ ignored")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=SOURCE_ROOT,
                        help="the source tree to check (default: this repository)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on a temporary tree with known violations")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return report(args.root.resolve())


if __name__ == "__main__":
    sys.exit(main())
