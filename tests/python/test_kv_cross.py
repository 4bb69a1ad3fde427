"""The KV hand-off across languages, between two real daemons: a C++
producer (demo/kv/kv_handoff.cpp, on libmcdma's mcdma::kv) to a Python
consumer, and a Python producer to a C++ consumer; every byte checked on
the receiving side. The C ABI's side is tests/c_abi/c_abi_kv_test.c."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from conftest import _find_tool, uniq
from mcdma import kv

import mcdma

MIB = 1 << 20
PATTERN = {"dtype": "uint64", "pattern": "mcdma-kv-handoff/1"}


def tool() -> str:
    path = _find_tool("MCDMA_KV_HANDOFF", "demo/mcdma-kv-handoff")
    if path is None:
        pytest.fail("no demo/mcdma-kv-handoff in the build: the build makes it with the daemon")
    return path


def pattern(buf, layer: int, nbytes: int) -> np.ndarray:
    words = np.frombuffer(buf, dtype=np.uint64, count=nbytes // 8)
    return np.arange(words.size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(layer)


def test_cpp_producer_to_python_consumer(two_hosts):
    hid = uniq("cpp2py")
    proc = subprocess.Popen([tool(), "produce", "--socket", two_hosts.a.socket, "--id", hid,
                             "--layers", "5", "--layer-bytes", str(3 * MIB + 4096),
                             "--allow", "host-b", "--checksum", "--timeout-ms", "30000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith(f"READY {hid}")
        b = mcdma.Client(socket=two_hosts.b.socket, app_name="kv-py-consumer")
        try:
            with kv.KVImport(b, "host-a", hid, expect=PATTERN, deadline=60, open_wait=10) as imp:
                stats = imp.pull()
                assert len(imp.buffers) == 5
                for i, buf in enumerate(imp.buffers):
                    n = imp.manifest["layer_nbytes"][i]
                    assert np.array_equal(np.frombuffer(buf, np.uint64, count=n // 8),
                                          pattern(buf, i, n)), f"layer {i} differs"
                assert stats.bytes == sum(imp.manifest["layer_nbytes"])
                assert imp.manifest["checksum"] == "xxh3-64"
        finally:
            b.close()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "CONSUMED by host-b" in out
    finally:
        proc.kill()
        proc.wait()


def test_python_producer_to_cpp_consumer(two_hosts):
    hid = uniq("py2cpp")
    a = mcdma.Client(socket=two_hosts.a.socket, app_name="kv-py-producer")
    try:
        bufs = kv.allocate_layers(a, [2 * MIB, MIB, 64 * 1024])
        for i, buf in enumerate(bufs):
            np.frombuffer(buf, np.uint64)[:] = pattern(buf, i, len(buf))
        with kv.KVExport(a, hid, bufs, PATTERN, allowed_peers=["host-b"], checksum=True) as exp:
            proc = subprocess.Popen([tool(), "consume", "--socket", two_hosts.b.socket,
                                     "--peer", "host-a", "--id", hid, "--timeout-ms", "30000"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(len(bufs)):
                exp.publish_layer(i)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert f"VERIFIED {sum(len(b) for b in bufs)} bytes in 3 layers" in out
            assert [l for l in out.splitlines() if l.startswith("landed")] == [
                f"landed {i}" for i in range(3)]
            assert exp.wait_consumed(1, timeout=10) == ["host-b"]
    finally:
        a.close()


def test_cpp_consumer_refuses_a_mismatched_manifest(two_hosts):
    hid = uniq("cppmismatch")
    a = mcdma.Client(socket=two_hosts.a.socket, app_name="kv-py-producer")
    try:
        bufs = kv.allocate_layers(a, MIB, 1)
        with kv.KVExport(a, hid, bufs, {"dtype": "float16"}, allowed_peers=["host-b"]):
            r = subprocess.run([tool(), "consume", "--socket", two_hosts.b.socket, "--peer",
                                "host-a", "--id", hid, "--timeout-ms", "10000"],
                               capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert "dtype: producer 'float16', expected 'uint64'" in r.stderr, r.stderr
        assert "pattern: producer None" in r.stderr, r.stderr
    finally:
        a.close()
