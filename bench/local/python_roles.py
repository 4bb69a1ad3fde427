"""The Python endpoints of mcdma_bench_local's "python" rows: an echo server
and a client that times round trips, both through the mcdma Python package
against the same mcdma-rpcd as the C++ rows, in the same run.

mcdma_bench_local starts this file as it starts its own C++ roles, with the
same arguments (--role, --payloads, --iterations, --warmup, --timeout-ms,
--run-limit-ms, --socket; --ready-fd and --lifeline-fd for the server,
--out for the client) and reads the client's sample file in the format of
harness/include/harness/latency.hpp: per payload, u64 payload, u64 count,
then count u64 nanoseconds, host byte order. Each reply is checked byte for byte against
its request.

Roles:
  python-server          serves bench.echo with an inline handler (the
                         library thread that reaped the call runs it)
  python-server-queued   serves it on a Python handler thread (the default
                         of Client.serve)
  python-client          calls bench.echo and times each call

Run with an interpreter that imports mcdma (PYTHONPATH=<build>/bindings/python
for a build tree).
"""

from __future__ import annotations

import argparse
import os
import select
import struct
import sys
import time
from typing import List

import mcdma

ECHO = "bench.echo"
CONNECT_RETRY_S = 10.0


def connect(socket: str, app_name: str) -> mcdma.Client:
    """The daemon may not take sessions yet when its socket appears."""
    deadline = time.monotonic() + CONNECT_RETRY_S
    while True:
        try:
            return mcdma.Client(socket, app_name)
        except mcdma.Error:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def wait_lifeline(fd: int, limit_s: float) -> None:
    """Returns when the orchestrator closes its end (or at the run limit)."""
    deadline = time.monotonic() + limit_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            return


def run_server(args: argparse.Namespace, inline: bool) -> int:
    client = connect(args.socket, "mcdma_bench_local-python-server")
    client.serve(ECHO, lambda request, info: request, inline=inline)
    os.write(args.ready_fd, b"R")
    os.close(args.ready_fd)
    wait_lifeline(args.lifeline_fd, args.run_limit_ms / 1000.0)
    client.close()
    return 0


def pattern(size: int) -> bytearray:
    return bytearray((i * 131 + 7) & 0xFF for i in range(size))


def run_client(args: argparse.Namespace) -> int:
    client = connect(args.socket, "mcdma_bench_local-python-client")
    timeout = args.timeout_ms / 1000.0
    payloads = [int(p) for p in args.payloads.split(",")]
    out = bytearray()
    for size in payloads:
        request = pattern(size)
        samples: List[int] = []
        for i in range(args.warmup + args.iterations):
            if size >= 8:
                request[:8] = struct.pack("<Q", i)  # each request differs
            t0 = time.perf_counter_ns()
            reply = client.call(ECHO, request, timeout)
            t1 = time.perf_counter_ns()
            if reply != request:
                print(f"python-client: reply {i} differs from its request "
                      f"({len(reply)} B back for {size} B)", file=sys.stderr)
                return 1
            if i >= args.warmup:
                samples.append(t1 - t0)
        out += struct.pack("=QQ", size, len(samples))
        out += struct.pack(f"={len(samples)}Q", *samples)
    with open(args.out, "wb") as f:
        f.write(out)
    client.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", required=True,
                        choices=["python-server", "python-server-queued", "python-client"])
    parser.add_argument("--payloads", required=True)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--timeout-ms", type=int, required=True)
    parser.add_argument("--run-limit-ms", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--lifeline-fd", type=int)
    parser.add_argument("--out")
    args = parser.parse_args()
    try:
        if args.role == "python-client":
            return run_client(args)
        return run_server(args, inline=args.role == "python-server")
    except mcdma.Error as e:
        print(f"{args.role}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
