#!/usr/bin/env bash
# The KV-cache hand-off demo with an MLX decoder:
#
#   run-kv-demo-mlx.sh BUILD_DIR [--prompt TEXT] [--tokens N] [MODEL FLAGS...]
#
# Two mcdma-rpcd daemons as two hosts on this machine (network namespaces,
# or loopback without root: ../two-hosts-lib.sh). On host-a,
# prefill_llama.py prefills a small Llama in torch (random weights from a
# fixed seed), writing its KV cache into mcdma buffers and publishing each
# layer as soon as it is written; on host-b, decode_mlx.py pulls the layers
# while prefill still runs, converts each into mlx-lm's own KVCache
# (mcdma.mlx), decodes N tokens with mlx-lm's Llama built from the same
# config and weights, and checks they equal a run of the prompt in MLX
# alone on host-b. MODEL FLAGS (see `prefill_llama.py --help`) go to both.
#
# Exit codes: 0 tokens match, 1 any failure (mismatch included, and MLX
# missing where it must be), 2 usage, 77 skipped (the reason is printed):
# no torch or no Python bindings for host-a, or no MLX for host-b when
# nothing demands it.
#
# Host-a's Python: $MCDMA_PYTHON, else the one the build's bindings were
# made for, else /usr/bin/python3. Host-b's (it needs mlx and mlx-lm):
# $MCDMA_MLX_PYTHON, else the dev venv's /opt/mcdma-dev/venv/bin/python
# when it exists, else host-a's. MLX is demanded, so its absence fails the
# demo, when MCDMA_REQUIRE_MLX=1, or when MCDMA_REQUIRE_MLX is unset and
# host-b's Python is the dev venv's while scripts/install-deps.sh pins
# mlx-lm for it (that venv should have it: rerun scripts/install-deps.sh).
# MCDMA_REQUIRE_MLX=0 never demands it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
build=${1:-build}
[ $# -gt 0 ] && shift
prompt=
tokens=32
model_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prompt) prompt=${2:?--prompt needs a value}; shift 2 ;;
    --tokens) tokens=${2:?--tokens needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) model_flags+=("$1"); shift ;;
  esac
done
prompt_flag=()
if [ -n "$prompt" ]; then prompt_flag=(--prompt "$prompt"); fi

if [ ! -x "$build/daemon/mcdma-rpcd" ]; then echo "no mcdma-rpcd in build dir '$build'" >&2; usage >&2; exit 2; fi
build=$(cd "$build" && pwd)
py=${MCDMA_PYTHON:-$(sed -n 's/^MCDMA_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null)}
py=${py:-/usr/bin/python3}
dev_venv_python=/opt/mcdma-dev/venv/bin/python
if [ -n "${MCDMA_MLX_PYTHON:-}" ]; then
  py_b=$MCDMA_MLX_PYTHON
elif [ -x "$dev_venv_python" ]; then
  py_b=$dev_venv_python
else
  py_b=$py
fi
case "${MCDMA_REQUIRE_MLX:-}" in
  1) require_mlx=1; why_required="MCDMA_REQUIRE_MLX=1" ;;
  0) require_mlx=0; why_required= ;;
  "")
    pin=$(grep -o 'mlx-lm==[^ )]*' "$here/../../scripts/install-deps.sh" 2>/dev/null | head -1 || true)
    if [ "$py_b" = "$dev_venv_python" ] && [ -n "$pin" ]; then
      require_mlx=1
      why_required="scripts/install-deps.sh installs $pin into the dev venv; rerun it"
    else
      require_mlx=0
      why_required=
    fi ;;
  *) echo "MCDMA_REQUIRE_MLX must be 0 or 1, not '$MCDMA_REQUIRE_MLX'" >&2; exit 2 ;;
esac
# MCDMA_PYTHON_PACKAGE=installed: use the mcdma that the interpreters have
# installed (`pip install .`) instead of the build's.
if [ "${MCDMA_PYTHON_PACKAGE:-build}" != installed ]; then
  export PYTHONPATH=$build/bindings/python${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONDONTWRITEBYTECODE=1

# Host-a: skip (77) only when torch or the bindings are missing, not when
# they fail to load.
if [ ! -x "$py" ]; then echo "SKIP: no Python interpreter at $py"; exit 77; fi
"$py" - <<'EOF' || exit $?
import sys
def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)
for module, why in (("torch", "Debian: apt-get install python3-torch"),
                    ("mcdma", "the Python bindings were not built (they need pybind11 and python3-dev)"),
                    ("mcdma.kv", "the mcdma bindings have no KV hand-off")):
    try:
        __import__(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise  # present but broken: a failure, not a skip
        skip(f"host-a: {sys.executable} cannot import {module}: {why}")
EOF

# Host-b: MLX missing is a skip only when nothing demands it.
mlx_missing() {
  if [ "$require_mlx" = 1 ]; then
    echo "FAILED: $1; MLX is required here ($why_required)" >&2
    exit 1
  fi
  echo "SKIP: $1 (set MCDMA_MLX_PYTHON to a Python with mlx and mlx-lm, e.g. the dev venv of scripts/install-deps.sh)"
  exit 77
}
if [ ! -x "$py_b" ]; then mlx_missing "no Python interpreter at $py_b"; fi
rc=0
check=$("$py_b" - <<'EOF' 2>&1
import os, sys
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
for module, why in (("numpy", "Debian: apt-get install python3-numpy"),
                    ("mlx.core", "pip install 'mlx[cpu]' (Linux) or mlx (macOS)"),
                    ("mlx_lm", "pip install mlx-lm"),
                    ("mcdma", "the Python bindings were not built (they need pybind11 and python3-dev)"),
                    ("mcdma.kv", "the mcdma bindings have no KV hand-off"),
                    ("mcdma.mlx", "the built mcdma package has no mlx.py (rebuild)")):
    try:
        __import__(module)
    except ImportError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise  # present but broken: a failure, not a skip
        print(f"MISSING {sys.executable} cannot import {module}: {why}")
        sys.exit(3)
import mlx.core as mx, mlx_lm
print(f"mlx {mx.__version__}, mlx-lm {mlx_lm.__version__} ({sys.executable})")
EOF
) || rc=$?
case "$rc" in
  0) echo "== host-b's Python: $check" ;;
  3) mlx_missing "host-b: ${check#MISSING }" ;;
  *) echo "$check" >&2; echo "FAILED: $py_b cannot load MLX or mcdma (exit status $rc)" >&2; exit 1 ;;
esac

# shellcheck source-path=SCRIPTDIR source=../two-hosts-lib.sh
source "$here/../two-hosts-lib.sh"
two_hosts_init "$build"
two_hosts_start
common=(--handoff-id demo-mlx --timeout 60 "${prompt_flag[@]}" "${model_flags[@]}")

two_hosts_handoff decode_mlx.py prefill_llama.py \
  "$py_b" "$here/decode_mlx.py" --socket "$dir/b.sock" --peer host-a --tokens "$tokens" \
  "${common[@]}" \
  -- "$py" "$here/prefill_llama.py" --socket "$dir/a.sock" --peer-host host-b "${common[@]}"

echo "== summary"
if [ "$netns" = 1 ]; then echo "  hosts: two network namespaces joined by a veth pair"; else echo "  hosts: loopback"; fi
grep -s -h -E "host-a: prefill |host-b: (opened|pull:|decode |local reference|received K/V|tokens match)" \
  "$dir/a.log" "$dir/b.log" | sed 's/^/  /' || true
echo "  exit status: prefill_llama.py $rc_a, decode_mlx.py $rc_b"
if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ] || ! grep -q "tokens match: yes" "$dir/b.log"; then
  echo "== MLX KV hand-off demo FAILED"
  exit 1
fi
echo "== MLX KV hand-off demo passed: host-b's mlx-lm tokens from host-a's torch KV cache equal the local MLX run"
