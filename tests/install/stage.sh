#!/usr/bin/env bash
# Usage: stage.sh BUILD STAGE
# `cmake --install BUILD` into the empty directory STAGE (DESTDIR), under the
# build's configured prefix: what `make install` would put on a machine,
# for the checks and consumers beside this script.
set -euo pipefail
build=$1 stage=$2
rm -rf "$stage"
mkdir -p "$stage"
DESTDIR=$stage cmake --install "$build" >"$stage.log" 2>&1 || {
  cat "$stage.log" >&2
  echo "stage.sh: cmake --install $build failed" >&2
  exit 1
}
echo "stage.sh: $(find "$stage" -type f -o -type l | wc -l) files under $stage"
