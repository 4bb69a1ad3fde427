"""The NIXL endpoints of kv_bench.py: the same cache moved by NIXL's READ,
one role per host, driven over stdin like kv_roles.py.

``kv_nixl.py a ...`` runs on host A (the producer): it holds the cache as
ordinary float16 torch tensors in DRAM, filled with kv_roles.py's pattern
(layer i as round i: the bytes every other row moves), registers them with
a NIXL agent (UCX backend) and serves, on a TCP port of its own, its agent
metadata and the layers' descriptors (the side channel NIXL leaves to the
application). ``kv_nixl.py b ...`` runs on host B (the consumer): it holds
one float16 torch tensor per layer, allocated and registered once.

Protocol (as kv_roles.py): after start-up a role prints ``ready [PORT]``;
then every stdin line is one command and gets one stdout line of JSON,
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``. EOF on stdin
ends the role. B's commands:

* ``nixl-connect HOST PORT``: fetch A's metadata and descriptors from the
  side channel, ``add_remote_agent``, ``prep_xfer_dlist`` of both sides and
  ``make_connection`` (once, before the rounds; answers its seconds, the
  metadata size and the NIXL and UCX versions).
* ``nixl-pull``: one round. The tensors are zeroed (untimed), then timed
  with ``time.perf_counter`` from just before ``make_prepped_xfer("READ",
  every layer)`` until ``check_xfer_state`` says DONE: the last layer in
  hand. Every byte is then checked against the pattern, outside the clock.

Transport: UCX over TCP only (``UCX_TLS=tcp``), on the interface that
carries the host's address (``UCX_NET_DEVICES``, from ``--device``). Both
hosts are namespaces of one machine, so UCX's shared-memory transports
would otherwise reach across them and skip the network every other row
crosses.

Progress: each agent runs NIXL's UCX progress thread, which sleeps in
poll() on the worker's event descriptor. The ``nixl_agent`` wrapper fixes
that poll's timeout (``pthrDelay``) at 0, which makes the thread spin a
core even when idle, so the agent is given a bindings configuration with
the timeout at ``PROGRESS_WAKE_US``: events still wake it at once; the
timeout only bounds the wait when none come. B waits for DONE by asking
``check_xfer_state`` every ``POLL_S`` (sleeping between), so a round's time
is late by at most that much.

Threading: the main thread runs the commands; A's side channel runs on one
more thread (it only reads bytes fixed at start-up); NIXL's progress thread
per agent.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import os
import socket
import struct
import sys
import threading
import time
from typing import Any, Dict, List

import numpy as np

from kv_roles import Answer, check, pattern, recv_exact

PROGRESS_WAKE_US = 1000  # the progress thread's poll() timeout (see above)
POLL_S = 0.0005  # B: how often it asks whether the READ is done
_FRAME = struct.Struct("<Q")  # side channel frames: u64 length, then the bytes
_DESC = np.dtype("<u8")  # descriptors on the side channel: (address, length, device) rows


def use_tcp(device: str) -> None:
    """UCX over TCP on `device` only; set before the agent reads UCX's config."""
    os.environ["UCX_TLS"] = "tcp"
    os.environ["UCX_NET_DEVICES"] = device
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")


def make_agent(name: str) -> Any:
    """A ``nixl_agent`` with the UCX backend and a progress thread that
    sleeps between events (see the module docstring)."""
    import nixl._bindings as bindings
    from nixl._api import nixl_agent, nixl_agent_config, nixl_thread_sync_t

    # The wrapper with no backend yet: its own bindings agent starts nothing.
    agent = nixl_agent(name, nixl_agent_config(enable_prog_thread=True, backends=[]))
    config = bindings.nixlAgentConfig()
    config.useProgThread = True
    config.useListenThread = False
    config.pthrDelay = PROGRESS_WAKE_US
    config.syncMode = nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE.value  # the wrapper's own choice
    agent.agent = bindings.nixlAgent(name, config)
    agent.create_backend("UCX", {})
    return agent


def versions() -> Dict[str, str]:
    """NIXL's version, the backend package it loaded and the UCX it runs on."""
    import nixl._api

    out = {"nixl": importlib.metadata.version("nixl"),
           "nixl_package": nixl._api.nixl_agent.__module__.split(".")[0], "ucx": "?"}
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "libucp" in line and "/" in line}
    for lib in libs:
        try:
            get = ctypes.CDLL(lib).ucp_get_version_string
        except (OSError, AttributeError):
            continue
        get.restype = ctypes.c_char_p
        out["ucx"] = get().decode()
        break
    return out


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_FRAME.pack(len(data)) + data)


def recv_frame(sock: socket.socket, limit: int) -> bytes:
    header = bytearray(_FRAME.size)
    recv_exact(sock, memoryview(header))
    n = _FRAME.unpack(header)[0]
    if n > limit:
        raise ValueError(f"side channel frame of {n} B, more than {limit}")
    data = bytearray(n)
    recv_exact(sock, memoryview(data))
    return bytes(data)


def descriptors(tensors: List[Any]) -> np.ndarray:
    """(address, length, device 0) per tensor: NIXL's Nx3 DRAM descriptors."""
    return np.array([(t.data_ptr(), t.numel() * t.element_size(), 0) for t in tensors],
                    dtype=_DESC)


# ---- host A: the producer ----

def serve_metadata(listener: socket.socket, frames: List[bytes], timeout: float) -> None:
    """Per connection: wait for one request byte, then send every frame."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return  # listener closed: the role is ending
        with conn:
            try:
                conn.settimeout(timeout)
                if conn.recv(1) != b"M":
                    continue
                for frame in frames:
                    send_frame(conn, frame)
            except OSError as e:  # the consumer sees a short stream
                print(f"kv_nixl a: side channel: {type(e).__name__}: {e}", file=sys.stderr)


def run_producer(args: argparse.Namespace, answer: Answer) -> int:
    import torch

    agent = make_agent(args.name)
    tensors = [torch.from_numpy(pattern(i, args.layer_bytes).view(np.float16))
               for i in range(args.layers)]
    registered = agent.register_memory(tensors)
    frames = [agent.get_agent_metadata(), descriptors(tensors).tobytes()]
    listener = socket.create_server((args.address, 0))
    threading.Thread(target=serve_metadata, args=(listener, frames, args.timeout),
                     name="side-channel", daemon=True).start()
    answer.ready(str(listener.getsockname()[1]))
    for line in sys.stdin:
        cmd = line.split()[0] if line.split() else ""
        answer.send(ok=False, error=f"unknown command {cmd!r}")
    listener.close()
    agent.deregister_memory(registered)
    return 0


# ---- host B: the consumer ----

class Consumer:
    """B's agent, its registered tensors and, after connect, A's layers."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.args = args
        self.agent = make_agent(args.name)
        self.tensors = [torch.zeros(args.layer_bytes // 2, dtype=torch.float16)
                        for _ in range(args.layers)]  # pages touched once, untimed
        self.registered = self.agent.register_memory(self.tensors)
        self.local = self.agent.prep_xfer_dlist("NIXL_INIT_AGENT", self.tensors)
        self.remote_name = ""
        self.remote: Any = None

    def connect(self, host: str, port: int) -> Dict[str, Any]:
        if self.remote is not None:
            raise RuntimeError("already connected")
        t0 = time.perf_counter()
        with socket.create_connection((host, port), timeout=self.args.timeout) as sock:
            sock.sendall(b"M")
            metadata = recv_frame(sock, 64 << 20)
            rows = recv_frame(sock, self.args.layers * 3 * _DESC.itemsize)
        descs = np.frombuffer(rows, dtype=_DESC).reshape(-1, 3)
        if len(descs) != self.args.layers or (descs[:, 1] != self.args.layer_bytes).any():
            raise ValueError(f"the producer offers {len(descs)} layers of "
                             f"{sorted(set(descs[:, 1].tolist()))} B, expected "
                             f"{self.args.layers} of {self.args.layer_bytes}")
        name = self.agent.add_remote_agent(metadata)
        self.remote_name = name.decode() if isinstance(name, bytes) else name
        self.remote = self.agent.prep_xfer_dlist(self.remote_name, descs.copy(), "DRAM")
        self.agent.make_connection(self.remote_name)
        return {"seconds": time.perf_counter() - t0, "remote": self.remote_name,
                "metadata_bytes": len(metadata), **versions()}

    def pull(self) -> Dict[str, Any]:
        if self.remote is None:
            raise RuntimeError("nixl-pull before nixl-connect")
        for t in self.tensors:  # untimed: the pages stay resident, the bytes go
            t.zero_()
        layers = list(range(self.args.layers))
        t0 = time.perf_counter()
        handle = self.agent.make_prepped_xfer("READ", self.local, layers, self.remote, layers)
        try:
            state = self.agent.transfer(handle)
            posted = time.perf_counter() - t0
            polls = 0
            deadline = t0 + self.args.timeout
            while state == "PROC":
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"the READ not done within {self.args.timeout:g} s")
                time.sleep(POLL_S)
                state = self.agent.check_xfer_state(handle)
                polls += 1
            seconds = time.perf_counter() - t0
            if state != "DONE":
                raise RuntimeError(f"the READ ended in state {state}")
        finally:
            self.agent.release_xfer_handle(handle)
        for i, t in enumerate(self.tensors):
            check(i, t.numpy(), self.args.layer_bytes)
        return {"seconds": seconds, "nixl_post_s": posted, "nixl_polls": polls}

    def close(self) -> None:
        if self.remote is not None:
            self.agent.release_dlist_handle(self.remote)
            self.agent.remove_remote_agent(self.remote_name)
        self.agent.release_dlist_handle(self.local)
        self.agent.deregister_memory(self.registered)


def run_consumer(args: argparse.Namespace, answer: Answer) -> int:
    consumer = Consumer(args)
    answer.ready()
    for line in sys.stdin:
        cmd, *rest = line.split() or [""]
        try:
            if cmd == "nixl-connect":  # HOST PORT
                answer.send(ok=True, **consumer.connect(rest[0], int(rest[1])))
            elif cmd == "nixl-pull":
                answer.send(ok=True, **consumer.pull())
            else:
                answer.send(ok=False, error=f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            answer.send(ok=False, error=f"{cmd}: {type(e).__name__}: {e}")
    consumer.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("side", choices=["a", "b"])
    parser.add_argument("--name", help="the NIXL agent's name (default: host-SIDE)")
    parser.add_argument("--address", default="127.0.0.1", help="a: address of the side channel")
    parser.add_argument("--device", required=True,
                        help="the network interface UCX may use (UCX_NET_DEVICES)")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--layer-bytes", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per operation")
    args = parser.parse_args()
    if args.layers < 1 or args.layer_bytes < 8 or args.layer_bytes % 8:
        parser.error("--layers must be >= 1 and --layer-bytes a positive multiple of 8")
    args.name = args.name or f"host-{args.side}"
    answer = Answer()  # before NIXL is imported: its log handler binds sys.stdout
    use_tcp(args.device)
    return (run_producer if args.side == "a" else run_consumer)(args, answer)


if __name__ == "__main__":
    sys.exit(main())
