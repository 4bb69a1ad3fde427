#!/usr/bin/env bash
# The KV-cache hand-off demo, the README's main job:
#
#   run-kv-demo.sh BUILD_DIR [--prompt TEXT] [--tokens N] [MODEL FLAGS...]
#
# Two mcdma-rpcd daemons as two hosts on this machine (network namespaces,
# or loopback without root: ../two-hosts-lib.sh). On host-a, prefill.py runs
# a small torch transformer (random weights from a fixed seed) over the
# prompt, writing its KV cache into mcdma buffers and publishing each layer
# as soon as it is written; on host-b, decode.py pulls the layers across
# the link while prefill still runs, decodes N tokens from them and checks
# they equal a run of the whole model on host-b alone. MODEL FLAGS (see
# `prefill.py --help`) go to both sides.
#
# Exit codes: 0 tokens match, 1 any failure (mismatch included), 2 usage,
# 77 skipped: no torch or no Python bindings (the reason is printed).
# Python: $MCDMA_PYTHON, else the one the build's bindings were made for,
# else /usr/bin/python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
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
# MCDMA_PYTHON_PACKAGE=installed: use the mcdma that $py has installed
# (`pip install .`) instead of the build's.
if [ "${MCDMA_PYTHON_PACKAGE:-build}" != installed ]; then
  export PYTHONPATH=$build/bindings/python${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONDONTWRITEBYTECODE=1
# Skip (77) only when torch or the bindings are missing, not when they fail to load.
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
        skip(f"{sys.executable} cannot import {module}: {why}")
EOF

# shellcheck source-path=SCRIPTDIR source=../two-hosts-lib.sh
source "$here/../two-hosts-lib.sh"
two_hosts_init "$build"
two_hosts_start
common=(--handoff-id demo --timeout 60 "${prompt_flag[@]}" "${model_flags[@]}")

two_hosts_handoff decode.py prefill.py \
  "$py" "$here/decode.py" --socket "$dir/b.sock" --peer host-a --tokens "$tokens" "${common[@]}" \
  -- "$py" "$here/prefill.py" --socket "$dir/a.sock" --peer-host host-b "${common[@]}"

echo "== summary"
if [ "$netns" = 1 ]; then echo "  hosts: two network namespaces joined by a veth pair"; else echo "  hosts: loopback"; fi
grep -s -h -E "host-a: prefill |host-b: (opened|pull:|decode |local reference|tokens match)" \
  "$dir/a.log" "$dir/b.log" | sed 's/^/  /' || true
echo "  exit status: prefill.py $rc_a, decode.py $rc_b"
if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ] || ! grep -q "tokens match: yes" "$dir/b.log"; then
  echo "== KV hand-off demo FAILED"
  exit 1
fi
echo "== KV hand-off demo passed: host-b's tokens from host-a's KV cache equal the single-host run"
