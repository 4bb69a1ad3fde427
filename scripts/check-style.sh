#!/usr/bin/env bash
# Usage: check-style.sh format|tidy [BUILD_DIR]
# format: every C/C++ source matches .clang-format (prints the offenders).
# tidy:   clang-tidy with .clang-tidy over the production sources, using
#         BUILD_DIR/compile_commands.json (one entry per source, also of a
#         unity build: scripts/compile-db.py); any finding fails. The clang-tidy
#         is the dev venv's pinned one (scripts/install-deps.sh), or
#         $MCDMA_CLANG_TIDY; the checks' findings differ between versions.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?format or tidy}
build=${2:-build}
sources() {
  git ls-files -- '*.cpp' '*.hpp' '*.h' '*.c' 2>/dev/null ||
    find common auth driver daemon include client tools demo harness bench tests \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \)
}
case "$mode" in
  format)
    bad=0
    while read -r f; do
      if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run: clang-format -i $f)"
        bad=1
      fi
    done < <(sources)
    [ $bad -eq 0 ] && echo "format: all sources match .clang-format"
    exit $bad
    ;;
  tidy)
    tidy=${MCDMA_CLANG_TIDY:-/opt/mcdma-dev/venv/bin/clang-tidy}
    [ -x "$tidy" ] || { echo "tidy: $tidy not found (run scripts/install-deps.sh as root)" >&2; exit 1; }
    echo "tidy: $("$tidy" --version | grep -m1 -o 'version [0-9.]*')"
    # The platform seam's darwin files need macOS's headers: ctest
    # Portability.MacOS compiles them; clang-tidy here cannot.
    files=$(sources | grep -E '^(common|auth|driver|daemon|client|tools|demo|harness|bench|bindings)/.*\.cpp$' |
            grep -v '/platform/darwin/')
    # gpu/ where the build found the CUDA toolkit (its headers are needed).
    if [ -d "$build/gpu/CMakeFiles/mcdma_cuda.dir" ]; then
      files=$(printf '%s\n%s\n' "$files" "$(sources | grep -E '^gpu/.*\.cpp$')")
    fi
    /usr/bin/python3 scripts/compile-db.py "$build"
    out=$(echo "$files" | xargs -P "${MCDMA_BUILD_JOBS:-2}" -n 4 "$tidy" -p "$build/compile-db" --quiet 2>&1 |
          grep -E '(warning|error):' || true)
    if [ -n "$out" ]; then
      echo "$out"
      exit 1
    fi
    echo "tidy: no findings in $(echo "$files" | wc -l) files"
    ;;
  *) echo "usage: check-style.sh format|tidy [BUILD_DIR]" >&2; exit 2 ;;
esac
