#!/usr/bin/env bash
# Builds the Debian packages (packaging/deb.cmake) from a built tree:
#
#   scripts/build-debs.sh [BUILD]      default BUILD: build (scripts/build.sh)
#
# Brings BUILD up to date (cmake --build), then CPack writes into BUILD/debs/:
#   mcdma-rpcd_VERSION-1_ARCH.deb      daemon, mcdmactl, systemd unit, /etc/mcdma
#   libmcdma1_VERSION-1_ARCH.deb       libmcdma.so.1
#   libmcdma-dev_VERSION-1_ARCH.deb    headers, CMake package, mcdma.pc
#   python3-mcdma_VERSION-1_ARCH.deb   the mcdma Python package
# The packages install under /usr whatever prefix BUILD was configured with.
# Install them with apt, which also installs their dependencies:
#   apt-get install ./BUILD/debs/*.deb
# Needs dpkg-dev (dpkg-shlibdeps; scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f "$build/CPackConfig.cmake" ]] ||
  { echo "build-debs.sh: $build is not a configured tree (run scripts/build.sh $build)" >&2; exit 1; }
command -v dpkg-shlibdeps >/dev/null ||
  { echo "build-debs.sh: dpkg-shlibdeps not found (Debian: apt-get install dpkg-dev)" >&2; exit 1; }
cmake --build "$build" -j "${MCDMA_BUILD_JOBS:-2}"
rm -rf "$build/debs"
(cd "$build" && cpack --config CPackConfig.cmake -G DEB) >"$build/cpack.log" 2>&1 || {
  cat "$build/cpack.log" >&2
  echo "build-debs.sh: cpack failed" >&2
  exit 1
}
ls -1 "$build"/debs/*.deb
