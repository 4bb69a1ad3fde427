#!/usr/bin/env bash
# Usage: run_with_daemon.sh DAEMON PROGRAM [ARGS...]
# Starts a real mcdma-rpcd on a fresh socket, runs PROGRAM with
# MCDMA_SOCKET pointing at it, stops the daemon (SIGTERM, which must exit 0)
# and returns PROGRAM's exit status (or 1 if the daemon did not stop cleanly).
set -uo pipefail
daemon=$1
shift
dir=$(mktemp -d /tmp/mcdma-test.XXXXXX)
export MCDMA_SOCKET=$dir/rpcd.sock
"$daemon" --socket "$MCDMA_SOCKET" --log-level warn &
dpid=$!
trap 'kill -9 $dpid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -S "$MCDMA_SOCKET" ] && break; sleep 0.05; done
if [ ! -S "$MCDMA_SOCKET" ]; then echo "run_with_daemon: daemon did not start" >&2; exit 1; fi
"$@"
rc=$?
kill -TERM $dpid
wait $dpid
drc=$?
if [ $drc -ne 0 ]; then echo "run_with_daemon: daemon exited $drc after SIGTERM" >&2; exit 1; fi
exit $rc
