#!/usr/bin/env bash
# Configures and builds everything (daemon, library, tools, tests, benches)
# into ./build (or $1). Two parallel jobs: the machines this is tested on
# have two cores and gRPC's generated code is heavy to compile.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "${MCDMA_BUILD_JOBS:-2}"
