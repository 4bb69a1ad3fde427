"""The endpoint processes of kv_bench.py, one per host, driven over stdin.

``kv_roles.py a ...`` runs on host A (the producer): it holds the cache
twice, as ``mcdma.kv.allocate_layers`` buffers (exported by ``KVExport``,
zero-copy) and as ordinary torch tensors (what the pickle baseline sends),
both filled with the bulk pattern that ``mcdma_bench_kv_raw serve`` writes,
and serves pickled tensors on a TCP port of its own.
``kv_roles.py b ...`` runs on host B (the consumer): it pulls.

Protocol: after start-up a role prints ``ready [PORT]``; then every stdin
line is one command and gets one stdout line of JSON, ``{"ok": true, ...}``
or ``{"ok": false, "error": "..."}``. EOF on stdin ends the role. Anything
else the role prints goes to stderr (stdout carries only answers).

Timing (consumer side, ``time.perf_counter``): ``kv-pull`` from just before
``KVImport(...)`` (the open) to ``pull()`` returning (the last layer
landed); ``pickle-pull`` from just before connecting to the producer to the
last tensor unpickled. Every byte is then checked against the pattern,
outside the clock, and a round that moved wrong bytes fails.

Threading: the main thread runs the commands; role A's pickle server runs
on one more thread, which only reads the (never modified) tensors.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import socket
import struct
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import numpy as np

# net_roles.cpp's PatternWord: word i of "round" r is
# (i + 1) * K1 ^ (r + 1) * K2 (mod 2^64); here the round is the layer index.
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = 0xD1B54A32D192ED03
_MASK = (1 << 64) - 1
_HEADER = struct.Struct("<Q")  # pickle frames: u64 length, then the pickle
MANIFEST = {"dtype": "float16", "bench": "kv_bench"}  # what B's expect= checks


def pattern(layer: int, nbytes: int) -> np.ndarray:
    """Layer `layer`'s bytes as uint64 words (nbytes is a multiple of 8)."""
    words = np.arange(1, nbytes // 8 + 1, dtype=np.uint64)
    words *= _K1  # wraps mod 2^64, as in C++
    words ^= np.uint64(((layer + 1) * _K2) & _MASK)
    return words


def check(layer: int, data: Any, nbytes: int) -> None:
    """Raises ValueError unless `data` (a buffer) holds layer `layer`'s bytes."""
    got = np.frombuffer(data, dtype=np.uint64, count=nbytes // 8)
    same = got == pattern(layer, nbytes)
    if not same.all():
        bad = int(np.argmin(same)) * 8
        raise ValueError(f"layer {layer}: bytes differ from the pattern at byte {bad}")


class Answer:
    """The role's stdout, reserved for answers; sys.stdout goes to stderr,
    and so does file descriptor 1, so that what a native library prints
    there (UCX's and NIXL's logs) cannot land among the answers."""

    def __init__(self) -> None:
        self._out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, **fields: Any) -> None:
        self._out.write(json.dumps(fields) + "\n")
        self._out.flush()

    def ready(self, extra: str = "") -> None:
        self._out.write(("ready " + extra).strip() + "\n")
        self._out.flush()


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    while view.nbytes:
        n = sock.recv_into(view, view.nbytes)
        if n == 0:
            raise ConnectionError("the producer closed the connection early")
        view = view[n:]


# ---- host A: the producer ----

def serve_pickles(listener: socket.socket, tensors: List[Any], timeout: float) -> None:
    """Per connection: wait for one request byte, then send every tensor as
    a frame: u64 length + pickle.dumps(tensor, protocol=5)."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return  # listener closed: the role is ending
        with conn:
            try:
                conn.settimeout(timeout)
                if conn.recv(1) != b"G":
                    continue
                for t in tensors:
                    data = pickle.dumps(t, protocol=5)
                    conn.sendall(_HEADER.pack(len(data)))
                    conn.sendall(data)
            except Exception as e:  # noqa: BLE001 - the consumer sees a short stream
                print(f"kv_roles a: pickle connection: {type(e).__name__}: {e}", file=sys.stderr)


def run_producer(args: argparse.Namespace, answer: Answer) -> int:
    import mcdma
    import torch
    from mcdma import kv

    client = mcdma.Client(args.socket, app_name="kv_bench-a", timeout=args.timeout)
    bufs = kv.allocate_layers(client, args.layer_bytes, args.layers)
    tensors = []
    for i, buf in enumerate(bufs):
        words = pattern(i, args.layer_bytes)
        np.frombuffer(buf, dtype=np.uint64)[:] = words
        tensors.append(torch.from_numpy(words.view(np.float16)))  # ordinary memory
    listener = socket.create_server((args.address, 0))
    threading.Thread(target=serve_pickles, args=(listener, tensors, args.timeout),
                     name="pickle-server", daemon=True).start()
    answer.ready(str(listener.getsockname()[1]))
    exports: Dict[str, Any] = {}
    for line in sys.stdin:
        cmd, *rest = line.split()
        try:
            if cmd == "kv-open":  # ID CHECKSUMS(default|on)
                sums = {"checksum": True} if rest[1] == "on" else {}  # else KVExport's default
                exports[rest[0]] = kv.KVExport(client, rest[0], layers=bufs, manifest=MANIFEST,
                                               allowed_peers=[args.peer], ttl=args.timeout,
                                               **sums)
                answer.send(ok=True)
            elif cmd == "kv-publish":  # ID DELAY_MS: publish every layer, DELAY_MS apart
                exp, delay = exports[rest[0]], float(rest[1]) / 1000
                t0 = time.perf_counter()
                for i in range(args.layers):
                    if delay and i:
                        time.sleep(delay)
                    exp.publish_layer(i)
                answer.send(ok=True, seconds=time.perf_counter() - t0)
            elif cmd == "kv-close":  # ID WAIT(0|1): close, after the consumer finished
                exp = exports.pop(rest[0])
                try:
                    done = (exp.wait_consumed(count=1, timeout=args.timeout)
                            if rest[1] == "1" else [])
                finally:
                    exp.close()
                answer.send(ok=True, consumers=done)
            else:
                answer.send(ok=False, error=f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            answer.send(ok=False, error=f"{cmd}: {type(e).__name__}: {e}")
    listener.close()
    client.close()
    return 0


# ---- host B: the consumer ----

def kv_pull(client: Any, args: argparse.Namespace, handoff_id: str, checksums: bool,
            given: Optional[List[Any]]) -> Dict[str, Any]:
    from mcdma import kv

    if given is not None:
        for buf in given:  # untimed: the pages stay resident, the bytes go
            np.frombuffer(buf, dtype=np.uint8)[:] = 0
    t0 = time.perf_counter()
    sums = {"verify": True} if checksums else {}  # else KVImport's default
    imp = kv.KVImport(client, args.peer, handoff_id, expect=MANIFEST, deadline=args.timeout,
                      buffers=given, **sums)
    try:
        stats = imp.pull()
        seconds = time.perf_counter() - t0
        if stats.bytes != args.layers * args.layer_bytes:
            raise ValueError(f"KVStats.bytes {stats.bytes}, "
                             f"expected {args.layers * args.layer_bytes}")
        for i, buf in enumerate(imp.buffers):
            check(i, buf, args.layer_bytes)
    finally:
        imp.close()
    return {"seconds": seconds, "kv_total_s": stats.total_s, "kv_open_s": stats.open_s,
            "kv_pull_s": sum(s.pull_s for s in stats.layers),
            "kv_verify_s": sum(s.verify_s for s in stats.layers),
            "kv_last_tail_s": max(s.landed_at for s in stats.layers) -
            max(s.published_at for s in stats.layers)}


def pickle_pull(args: argparse.Namespace, host: str, port: int) -> Dict[str, Any]:
    import torch

    header = bytearray(_HEADER.size)
    tensors = []
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=args.timeout) as sock:
        sock.sendall(b"G")
        for _ in range(args.layers):
            recv_exact(sock, memoryview(header))
            frame = bytearray(_HEADER.unpack(header)[0])
            recv_exact(sock, memoryview(frame))
            tensors.append(pickle.loads(frame))
    seconds = time.perf_counter() - t0
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float16 or \
                t.numel() * 2 != args.layer_bytes:
            raise ValueError(f"layer {i}: unpickled {type(t).__name__} is not the float16 "
                             "tensor sent")
        check(i, t.numpy(), args.layer_bytes)
    return {"seconds": seconds}


def raw_check(client: Any, args: argparse.Namespace, prefix: str) -> List[int]:
    """Reads the first and last of mcdma_bench_kv_raw's exported layers and
    checks them against this file's pattern: every row moves the same bytes."""
    layers = sorted({0, args.layers - 1})
    for i in layers:
        remote = client.resolve(f"{prefix}.{i}", args.peer)
        try:
            buf = client.alloc(args.layer_bytes)
            client.read(remote, 0, buf, 0, args.layer_bytes)
            check(i, buf, args.layer_bytes)
        finally:
            client.release(remote)
    return layers


def run_consumer(args: argparse.Namespace, answer: Answer) -> int:
    import mcdma
    from mcdma import kv

    client = mcdma.Client(args.socket, app_name="kv_bench-b", timeout=args.timeout)
    given: Optional[List[Any]] = None  # for "kv-pull ... 1": allocated once, reused
    answer.ready()
    for line in sys.stdin:
        cmd, *rest = line.split()
        try:
            if cmd == "kv-pull":  # ID CHECKSUMS(default|on) BUFFERS_GIVEN(0|1)
                if rest[2] == "1" and given is None:
                    given = kv.allocate_layers(client, args.layer_bytes, args.layers)
                answer.send(ok=True, **kv_pull(client, args, rest[0], rest[1] == "on",
                                               given if rest[2] == "1" else None))
            elif cmd == "raw-check":  # PREFIX: mcdma_bench_kv_raw's exports hold our pattern
                answer.send(ok=True, layers=raw_check(client, args, rest[0]))
            elif cmd == "pickle-pull":  # HOST PORT
                answer.send(ok=True, **pickle_pull(args, rest[0], int(rest[1])))
            else:
                answer.send(ok=False, error=f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            answer.send(ok=False, error=f"{cmd}: {type(e).__name__}: {e}")
    client.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("side", choices=["a", "b"])
    parser.add_argument("--socket", required=True, help="this host's daemon socket")
    parser.add_argument("--peer", required=True, help="a: host allowed to pull; b: producer host")
    parser.add_argument("--address", default="127.0.0.1", help="a: address of the pickle server")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--layer-bytes", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per operation")
    args = parser.parse_args()
    answer = Answer()
    return (run_producer if args.side == "a" else run_consumer)(args, answer)


if __name__ == "__main__":
    sys.exit(main())
