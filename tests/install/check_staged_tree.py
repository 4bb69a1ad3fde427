#!/usr/bin/python3
"""Checks that a staged install holds exactly the files the README lists.

Usage: check_staged_tree.py README STAGE PREFIX ETC LIB PY VERSION

The README's Install section lists every installed file between the lines
`<!-- installed files: begin -->` and `<!-- installed files: end -->`, one
path a line, written with the names PREFIX, ETC (the config directory's
parent), LIB (the library directory), PY (the Python directory) and VERSION;
a `*` stands for any characters within a name (the extension's ABI tag).
Each name is replaced with this build's value (the arguments), and the
staged tree STAGE (DESTDIR) must hold those files and no others. Prints the
differences; exits 1 if there are any.
"""
import fnmatch
import os
import re
import sys


def main():
    readme, stage, prefix, etc, lib, py, version = sys.argv[1:8]
    text = open(readme).read()
    m = re.search(r"<!-- installed files: begin -->(.*?)<!-- installed files: end -->", text, re.S)
    if not m:
        print(f"FAIL {readme} has no installed-files list")
        return 1
    names = {"PREFIX": prefix, "ETC": etc, "LIB": lib, "PY": py, "VERSION": version}
    listed = []
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("```"):
            continue
        path = re.sub(r"\b(PREFIX|ETC|LIB|PY|VERSION)\b", lambda t: names[t.group(1)], line)
        listed.append(path)
    staged = set()
    for root, dirs, files in os.walk(stage):
        for f in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            staged.add("/" + os.path.relpath(os.path.join(root, f), stage))
    errors = []
    matched = set()
    for pattern in listed:
        hits = {p for p in staged if fnmatch.fnmatchcase(p, pattern)}
        if not hits:
            errors.append(f"listed in the README, not installed: {pattern}")
        matched |= hits
    for path in sorted(staged - matched):
        errors.append(f"installed, not listed in the README: {path}")
    print(f"{len(staged)} files staged, {len(listed)} listed in the README")
    for e in errors:
        print("FAIL", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
