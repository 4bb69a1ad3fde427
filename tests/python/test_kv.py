"""mcdma.kv: KV-cache hand-offs between two real daemons (host-a produces,
host-b consumes), and on one host."""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import mcdma
from mcdma import _kv_wire as kv_wire
from mcdma import kv
from conftest import uniq

MIB = 1 << 20


def pattern(buf, layer: int) -> None:
    """Fills `buf` with 8-byte words that name their layer and position."""
    words = np.frombuffer(buf, dtype=np.uint64)
    words[:] = np.arange(words.size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(layer)


def reads_on(hosts, daemon, peer: str) -> int:
    """The link counter of remote transfers `daemon` started toward `peer`."""
    out = subprocess.run([hosts.ctl, "--socket", daemon.socket, "links", "--json"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    link = next(l for l in json.loads(out)["links"] if l["peer"] == peer)
    return int(link.get("counters", {}).get("reads", 0))


@pytest.fixture
def pair(two_hosts):
    """(producer client on host-a, consumer client on host-b)."""
    a = mcdma.Client(socket=two_hosts.a.socket, app_name="kv-producer")
    b = mcdma.Client(socket=two_hosts.b.socket, app_name="kv-consumer")
    yield a, b
    a.close()
    b.close()


def test_half_gibibyte_cache_crosses_byte_identical(pair):
    a, b = pair
    hid = uniq("big")
    layers, nbytes = 8, 64 * MIB  # 512 MiB
    bufs = kv.allocate_layers(a, nbytes, layers)
    for i, buf in enumerate(bufs):
        pattern(buf, i)
    manifest = {"dtype": "uint64", "geometry": {"layers": layers, "words": nbytes // 8},
                "token_digest": "d" * 64}
    with kv.KVExport(a, hid, bufs, manifest, allowed_peers=["host-b"]) as exp:
        publisher = threading.Thread(target=exp.publish_all)
        publisher.start()
        with kv.KVImport(b, "host-a", hid, expect={"dtype": "uint64"}, token_digest="d" * 64,
                         deadline=300) as imp:
            stats = imp.pull()
            publisher.join()
            assert stats.bytes == layers * nbytes
            assert [s.nbytes for s in stats.layers] == [nbytes] * layers
            assert all(s.landed_at >= s.published_at > 0 for s in stats.layers)
            for i in range(layers):
                assert np.array_equal(np.frombuffer(imp.buffers[i], np.uint64),
                                      np.frombuffer(bufs[i], np.uint64)), f"layer {i} differs"
        assert exp.wait_consumed(1, timeout=10) == ["host-b"]


def test_first_layer_is_pulled_before_the_last_is_published(pair):
    a, b = pair
    hid = uniq("stream")
    n = 6
    bufs = kv.allocate_layers(a, MIB, n)
    events, lock = [], threading.Lock()
    first_pulled = threading.Event()

    def log(what: str) -> None:
        with lock:
            events.append(what)

    def on_layer(i: int) -> None:
        log(f"pulled {i}")
        if i == 0:
            first_pulled.set()

    with kv.KVExport(a, hid, bufs, {"dtype": "uint8"}, allowed_peers=["host-b"]) as exp:
        with kv.KVImport(b, "host-a", hid, deadline=60) as imp:
            imp.start(on_layer)
            for i in range(n):
                if i == n - 1:
                    # A consumer that waited for the whole cache would never
                    # pull layer 0 here, and the order below would fail.
                    first_pulled.wait(30)
                pattern(bufs[i], i)
                log(f"published {i}")
                exp.publish_layer(i)
            imp.wait(timeout=60)
    assert events.index("pulled 0") < events.index(f"published {n - 1}"), events
    assert [e for e in events if e.startswith("pulled")] == [f"pulled {i}" for i in range(n)]
    for i in range(n):
        assert bytes(imp.buffers[i]) == bytes(bufs[i])


@pytest.mark.parametrize("case", ["manifest", "digest"])
def test_mismatch_fails_before_any_byte_moves(two_hosts, pair, case):
    a, b = pair
    hid = uniq(case)
    bufs = kv.allocate_layers(a, MIB, 2)
    with kv.KVExport(a, hid, bufs, {"dtype": "bfloat16", "shape": [2, 8, 64],
                                    "token_digest": "ab" * 32}, allowed_peers=["host-b"]) as exp:
        exp.publish_all()
        before = reads_on(two_hosts, two_hosts.b, "host-a")
        if case == "manifest":
            with pytest.raises(kv.ManifestMismatch, match=r"dtype: producer 'bfloat16', expected "
                                                          r"'float16'.*shape") as err:
                kv.KVImport(b, "host-a", hid, expect={"dtype": "float16", "shape": [2, 8, 32]})
            assert isinstance(err.value, mcdma.Invalid)
        else:
            with pytest.raises(kv.DigestMismatch, match="is not this prompt's"):
                kv.KVImport(b, "host-a", hid, token_digest="cd" * 32)
        assert reads_on(two_hosts, two_hosts.b, "host-a") == before


def test_expired_handoff_is_refused_with_its_reason(pair):
    a, b = pair
    hid = uniq("ttl")
    bufs = kv.allocate_layers(a, MIB, 2)
    exp = kv.KVExport(a, hid, bufs, {}, allowed_peers=["host-b"], ttl=0.3)
    try:
        exp.publish_layer(0)
        deadline = time.monotonic() + 10
        while exp.state != "expired" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert exp.state == "expired"
        with pytest.raises(kv.HandoffExpired, match="TTL"):
            kv.KVImport(b, "host-a", hid)
        with pytest.raises(mcdma.Invalid, match="expired"):
            exp.publish_layer(1)
    finally:
        exp.close()
    with pytest.raises(kv.ProducerGone):
        kv.KVImport(b, "host-a", hid)  # closed: nothing serves it any more


def test_revoked_mid_pull_fails_the_import(pair):
    a, b = pair
    hid = uniq("revoke")
    bufs = kv.allocate_layers(a, MIB, 4)
    with kv.KVExport(a, hid, bufs, {}, allowed_peers=["host-b"]) as exp:
        exp.publish_layer(0)
        imp = kv.KVImport(b, "host-a", hid, deadline=60)
        imp.start()
        imp.wait_layer(0, timeout=30)
        exp.revoke("the engine restarted")
        with pytest.raises(kv.HandoffRevoked, match="the engine restarted"):
            imp.wait(timeout=30)
        imp.close()


def test_checksums_are_the_producers_choice(pair):
    """KVExport publishes no checksums unless asked: the manifest says so,
    and the consumer (verify=True, its default) has nothing to check."""
    a, b = pair
    hid = uniq("nosum")
    bufs = kv.allocate_layers(a, MIB, 2)
    for i, buf in enumerate(bufs):
        np.frombuffer(buf, np.uint8)[:] = i + 1
    with kv.KVExport(a, hid, bufs, {}, allowed_peers=["host-b"]) as exp:
        exp.publish_all()
        with kv.KVImport(b, "host-a", hid, deadline=60) as imp:
            assert imp.manifest["checksum"] is None
            stats = imp.pull()
            assert stats.bytes == 2 * MIB
            assert [layer.verify_s for layer in stats.layers] == [0.0, 0.0]
            assert bytes(imp.buffers[1]) == bytes(bufs[1])


def test_corrupted_layer_fails_its_checksum(pair):
    a, b = pair
    hid = uniq("corrupt")
    bufs = kv.allocate_layers(a, MIB, 2)
    with kv.KVExport(a, hid, bufs, {}, allowed_peers=["host-b"], checksum=True) as exp:
        exp.publish_all()
        np.frombuffer(bufs[1], np.uint8)[100] ^= 0xFF  # changed after publication
        with kv.KVImport(b, "host-a", hid, deadline=60) as imp:
            with pytest.raises(kv.ChecksumMismatch, match="layer 1 checksum"):
                imp.pull()
        with kv.KVImport(b, "host-a", hid, deadline=60, verify=False) as imp:
            assert imp.pull().bytes == 2 * MIB  # the caller chose not to check


def test_killed_producer_fails_the_import_within_its_deadline(two_hosts, pair):
    _, b = pair
    hid = uniq("killed")
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "kv_producer.py"),
                             two_hosts.a.socket, hid, "3", str(MIB), "1"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "READY"
        imp = kv.KVImport(b, "host-a", hid, deadline=20)
        imp.start()
        imp.wait_layer(0, timeout=20)
        killed = time.monotonic()
        proc.kill()
        with pytest.raises((kv.ProducerGone, kv.HandoffRevoked)) as err:
            imp.wait(timeout=30)
        assert time.monotonic() - killed < 20
        assert "hand-off " + hid in str(err.value)
        imp.close()
    finally:
        proc.kill()
        proc.wait()


def test_dropped_link_fails_the_import(fresh_two_hosts):
    hosts = fresh_two_hosts
    a = mcdma.Client(socket=hosts.a.socket)
    b = mcdma.Client(socket=hosts.b.socket)
    try:
        hid = uniq("link")
        bufs = kv.allocate_layers(a, MIB, 3)
        exp = kv.KVExport(a, hid, bufs, {}, allowed_peers=["host-b"])
        exp.publish_layer(0)
        imp = kv.KVImport(b, "host-a", hid, deadline=30)
        imp.start()
        imp.wait_layer(0, timeout=20)
        hosts.a.kill()  # host-a's daemon and its end of the link are gone
        with pytest.raises((kv.HandoffLinkDown, kv.ProducerGone)) as err:
            imp.wait(timeout=40)
        assert isinstance(err.value, kv.HandoffError)
        imp.close()
    finally:
        b.close()
        a.close()


def test_same_host_handoff_with_array_layers_and_torch_views(client, connect):
    torch = pytest.importorskip("torch")
    consumer = connect(app_name="kv-local-consumer")
    hid = uniq("local")
    layers = [torch.arange(4096, dtype=torch.float32) * (i + 1) for i in range(3)]
    with kv.KVExport(client, hid, layers, {"dtype": "float32"}) as exp:
        exp.publish_all()
        with kv.KVImport(consumer, None, hid, expect={"dtype": "float32", "n_layers": 3}) as imp:
            imp.pull()
            for i, want in enumerate(layers):
                got = torch.frombuffer(imp.buffers[i], dtype=torch.float32)
                assert got.data_ptr() == imp.buffers[i].address  # a view, not a copy
                assert torch.equal(got, want)


def test_bad_arguments_are_refused(client):
    with pytest.raises(ValueError, match="hand-off id"):
        kv.KVExport(client, "bad id!", kv.allocate_layers(client, 4096, 1), {})
    with pytest.raises(ValueError, match="no layers"):
        kv.KVExport(client, uniq("empty"), [], {})
    with pytest.raises(TypeError):
        kv.KVExport(client, uniq("json"), kv.allocate_layers(client, 4096, 1), {"x": object()})
    hid = uniq("twice")
    with kv.KVExport(client, hid, kv.allocate_layers(client, 4096, 2), {}) as exp:
        exp.publish_layer(0)
        with pytest.raises(ValueError, match="already published"):
            exp.publish_layer(0)
        with pytest.raises(ValueError, match="there are 2 layers"):
            exp.publish_layer(2)
        with pytest.raises(mcdma.AlreadyExists):
            kv.KVExport(client, hid, kv.allocate_layers(client, 4096, 1), {})


@pytest.mark.parametrize("reply", [{}, {"published": 5}, {"published": [7]},
                                   {"published": [{"layer": 2}]}])
def test_open_reply_without_valid_layer_events_is_invalid(reply):
    # A producer's open reply lacking its list of layer events, or holding
    # something else in it, is refused as Invalid (KVImport took it apart
    # unchecked; found by fuzz/fuzz_kv_manifest.py).
    with pytest.raises(mcdma.Invalid, match="hand-off"):
        kv_wire.check_published(reply, 2)
    assert kv_wire.check_published({"published": [{"layer": 1, "checksum": None}]}, 2) == [
        {"layer": 1, "checksum": None}]
