#!/usr/bin/python3
"""Checks the built libmcdma.so against its public headers.

Usage: check_library.py LIBRARY MCDMA_H ABI_VERSION [EXPORTS_DARWIN]

- objdump -p: the SONAME is libmcdma.so.<ABI_VERSION>.
- nm -D: every exported symbol is public API: a C function that mcdma.h
  declares, or a C++ symbol of the public classes and functions of
  mcdma/client.hpp, mcdma/kv.hpp and mcdma/status.hpp (nothing of mcdma::internal but
  ValueOfError, which Result's inline code calls; nothing of the standard
  library, gRPC, protobuf or the project's static libraries).
- every function mcdma.h declares is exported.
- with EXPORTS_DARWIN (macOS's exported-symbols list, which cannot be linked
  here): its patterns, applied to every function and object the library
  defines (its full symbol table, local symbols included), pick exactly the
  symbols the Linux library exports.
Prints what it found; exits 1 on any difference.
"""
import fnmatch
import re
import subprocess
import sys

CXX_ALLOWED = [
    r"mcdma::kv::(Export|Import|BufferPool)::",
    r"mcdma::kv::(CheckId|StateName|Checksum)\(",
    r"mcdma::(Client|Message|Buffer|ServerCall|Status)::",
    r"mcdma::Future<(mcdma::Message|unsigned long)>::",
    r"mcdma::(DefaultSocketPath|DefaultClientSocketPath)\[abi:cxx11\]\(\)$",
    r"mcdma::(CodeName|CodeFromName|ReasonName|ReasonFromName)\(",
    r"mcdma::internal::ValueOfError\(mcdma::Status const&\)$",
]


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def check_darwin_list(lib, path):
    patterns = [l.strip() for l in open(path) if l.strip() and not l.startswith("#")]
    exported = set()
    for line in run("nm", "-D", "--defined-only", lib).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] != "A":
            exported.add(parts[2].split("@")[0])
    defined = set()
    for line in run("nm", "--defined-only", lib).splitlines():
        parts = line.split()
        # GCC's split-off pieces (f.cold, f.part.0) are local labels, not
        # symbols a linker could export.
        if len(parts) >= 3 and parts[1] in "TtWwDdBbRrVv" and "." not in parts[2]:
            defined.add(parts[2].split("@")[0])
    # macOS names carry one more leading underscore.
    picked = {n for n in defined if any(fnmatch.fnmatchcase("_" + n, p) for p in patterns)}
    print(f"exports.darwin picks {len(picked)} of the {len(defined)} symbols defined")
    errors = [f"exports.darwin exports what exports.map does not: {n}"
              for n in sorted(picked - exported)]
    errors += [f"exports.darwin misses what exports.map exports: {n}"
               for n in sorted(exported - picked)]
    return errors


def main():
    lib, header, abi = sys.argv[1], sys.argv[2], sys.argv[3]
    errors = []
    soname = re.findall(r"^\s*SONAME\s+(\S+)", run("objdump", "-p", lib), re.M)
    want = f"libmcdma.so.{abi}"
    print(f"SONAME {soname}")
    if soname != [want]:
        errors.append(f"SONAME is {soname}, expected {want}")

    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    declared = set(re.findall(r"^[a-z_][a-z0-9_ *]*?\b(mcdma_[a-z0-9_]+)\(", text, re.M))
    inline = set(re.findall(r"static inline [^(]*\b(mcdma_[a-z0-9_]+)\(", text))
    declared -= inline

    exported_c, exported_cxx = set(), []
    for line in run("nm", "-D", "--defined-only", lib).splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] == "A":  # A: the version node itself
            continue
        name = parts[2].split("@")[0]
        if name.startswith("_Z"):
            exported_cxx.append(run("c++filt", name).strip())
        else:
            exported_c.add(name)
    print(f"exported: {len(exported_c)} C functions, {len(exported_cxx)} C++ symbols; "
          f"mcdma.h declares {len(declared)} functions")
    for name in sorted(exported_c - declared):
        errors.append(f"exported but not in mcdma.h: {name}")
    for name in sorted(declared - exported_c):
        errors.append(f"declared in mcdma.h but not exported: {name}")
    for sym in exported_cxx:
        if not any(re.match(p, sym) for p in CXX_ALLOWED):
            errors.append(f"exported C++ symbol outside the public API: {sym}")
    for needed in ("mcdma::Client::Connect(", "mcdma::Status::ToString", "mcdma::CodeName("):
        if not any(s.startswith(needed) for s in exported_cxx):
            errors.append(f"the public API's {needed}...) is not exported")
    if len(sys.argv) > 4:
        errors += check_darwin_list(lib, sys.argv[4])
    for e in errors:
        print("FAIL", e)
    print("ok" if not errors else f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
