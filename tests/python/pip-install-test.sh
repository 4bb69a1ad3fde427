#!/usr/bin/env bash
# `pip install .` into a fresh venv, then the Python suite and the KV demo
# from the installed package (ctest Python.PipInstall, label python):
#
#   pip-install-test.sh BUILD
#
# The venv (a temporary directory, outside both trees) is made from
# Debian's /usr/bin/python3 with --system-site-packages, so Debian's numpy,
# torch and pytest stay visible; pip builds the package with scikit-build-core (pyproject.toml: this
# project's CMake with MCDMA_CLIENT_ONLY=ON, component `python`), fetching
# scikit-build-core and pybind11 from PyPI. Everything then runs from a
# directory outside the source and build trees with no PYTHONPATH, against
# BUILD's daemon and mcdmactl (the daemon is a separate install).
# Exit codes: 0 pass, 1 fail.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: pip-install-test.sh BUILD}" && pwd)
log() { echo "pip-install-test: $*" >&2; }
venv=$(mktemp -d /var/tmp/mcdma-pip-venv.XXXXXX)
elsewhere=$(mktemp -d /tmp/mcdma-pip-test.XXXXXX)
trap 'rm -rf "$venv" "$elsewhere"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
log "pip install $src"
"$venv/bin/pip" install --disable-pip-version-check --no-cache-dir "$src" >"$build/pip-install.log" 2>&1 || {
  tail -40 "$build/pip-install.log" >&2
  log "FAILED: pip install"
  exit 1
}
cd "$elsewhere"
unset PYTHONPATH
export PYTHONDONTWRITEBYTECODE=1
where=$("$venv/bin/python" -c 'import mcdma, mcdma._mcdma as m; print(mcdma.__file__); print(m.__file__)')
log "imported from: $(echo "$where" | tr '\n' ' ')"
case "$where" in
  *"$venv"/lib/python3*/site-packages/mcdma/__init__.py*) ;;
  *) log "FAILED: mcdma did not come from the venv's site-packages"; exit 1 ;;
esac
if echo "$where" | grep -q -e "^$src/" -e "^$build/bindings"; then
  log "FAILED: mcdma came from the source or build tree"
  exit 1
fi
log "the Python suite (tests/python) against the installed package"
MCDMA_DAEMON=$build/daemon/mcdma-rpcd MCDMA_CTL=$build/tools/mcdmactl/mcdmactl \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python"
log "the KV demo against the installed package"
MCDMA_PYTHON=$venv/bin/python MCDMA_PYTHON_PACKAGE=installed bash "$src/demo/kv/run-kv-demo.sh" "$build"
log "pass"
