#!/usr/bin/env python3
"""One compile database entry per source file, from a unity build's.

    scripts/compile-db.py BUILD

A unity build (CMAKE_UNITY_BUILD) compiles a target's sources a few at a
time through generated files, BUILD/.../Unity/unity_N_cxx.cxx, which
#include them; its compile_commands.json names only those. Tools that
take one file at a time (clang-tidy, the macOS cross-compile check,
clangd) need an entry per source. This writes
BUILD/compile-db/compile_commands.json: each unity entry is replaced by one
entry per source it includes, with the same command (the same target's
flags) and the source in place of the unity file; other entries are kept.
It is written again only when its content changes.

Exit codes: 0 written or current, 2 usage or no compile_commands.json.
"""
import json
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^#include\s+"([^"]+)"', re.M)


def expand(entries):
    out = []
    for entry in entries:
        unity = Path(entry["file"])
        if "Unity" not in unity.parts or not unity.name.startswith("unity_"):
            out.append(entry)
            continue
        obj = unity.name + ".o"  # the unity object: each source names its own
        for source in INCLUDE.findall(unity.read_text()):
            one = dict(entry)
            one["file"] = source
            own = Path(source).name + ".o"
            if "command" in one:
                one["command"] = one["command"].replace(str(unity), source).replace(obj, own)
            if "arguments" in one:
                one["arguments"] = [source if a == str(unity) else a.replace(obj, own)
                                    for a in one["arguments"]]
            if "output" in one:
                one["output"] = one["output"].replace(obj, own)
            out.append(one)
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    build = Path(argv[1])
    db = build / "compile_commands.json"
    if not db.is_file():
        print(f"compile-db.py: {db} not found (configure the build first)", file=sys.stderr)
        return 2
    text = json.dumps(expand(json.loads(db.read_text())), indent=1) + "\n"
    target = build / "compile-db" / "compile_commands.json"
    if not target.is_file() or target.read_text() != text:
        target.parent.mkdir(exist_ok=True)
        target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
