"""Across a link: two daemons ("host-a", "host-b") linked on loopback.

An app on host-a serves, subscribes and exports; an app on host-b calls,
notifies, resolves with peer="host-a" and moves bytes with one-sided reads
and writes through both daemons.
"""

import numpy as np
import pytest

import mcdma
from conftest import uniq

SIZE = 4 << 20


@pytest.fixture
def apps(two_hosts):
    a = mcdma.Client(two_hosts.a.socket, app_name="app-a")
    b = mcdma.Client(two_hosts.b.socket, app_name="app-b")
    yield a, b
    a.close()
    b.close()


def pattern(seed: int, n: int = SIZE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_each_app_sees_its_own_host(apps):
    a, b = apps
    assert (a.info.host_id, b.info.host_id) == ("host-a", "host-b")


def test_call_and_async_call_across_the_link(apps):
    a, b = apps
    service = uniq("echo")
    a.serve(service, lambda req, info: b"host-a heard " + req)
    assert b.call(f"host-a/{service}", b"hi") == b"host-a heard hi"
    assert b.call_async(f"host-a/{service}", b"later").result(20) == b"host-a heard later"
    with pytest.raises(mcdma.NotFound):
        b.call(f"host-a/{uniq('missing')}")


def test_notification_across_the_link_reaches_a_subscription(apps):
    a, b = apps
    service = uniq("events")
    sub = a.subscribe(service)
    b.notify(f"host-a/{service}", b"block 7 ready")
    assert sub.wait(20) == b"block 7 ready"


@pytest.fixture
def exported(apps):
    """host-a's Buffer exported read/write to host-b, and host-b's handle."""
    a, b = apps
    buf = a.alloc(SIZE)
    name = uniq("kv")
    a.export(buf, name, allow_read=True, allow_write=True, allowed_peers=["host-b"])
    return buf, b.resolve(name, peer="host-a")


def test_remote_buffer_names_its_peer(exported):
    _, remote = exported
    assert remote.peer == "host-a" and remote.length == SIZE
    assert remote.readable and remote.writable
    assert "peer='host-a'" in repr(remote)


def test_read_across_the_link_sees_bytes_written_through_numpy(apps, exported):
    _, b = apps
    buf, remote = exported
    np.frombuffer(buf, np.uint8)[:] = pattern(10)
    dst = b.alloc(SIZE)
    assert b.read(remote, 0, dst, 0, SIZE) == SIZE
    assert np.array_equal(np.asarray(dst), pattern(10))


def test_write_across_the_link_shows_through_the_existing_view(apps, exported):
    _, b = apps
    buf, remote = exported
    view = np.frombuffer(buf, np.uint8)
    src = b.alloc(SIZE)
    np.asarray(src)[:] = pattern(11)
    assert b.write(remote, 0, src, 0, SIZE) == SIZE
    assert np.array_equal(view, pattern(11))


def test_torch_views_on_both_ends(apps, exported):
    torch = pytest.importorskip("torch", reason="torch is not installed (python3-torch)")
    _, b = apps
    buf, remote = exported
    owner_view = torch.from_dlpack(buf)
    src = b.alloc(SIZE)
    torch.frombuffer(src, dtype=torch.float32).copy_(torch.arange(SIZE // 4, dtype=torch.float32))
    b.write(remote, 0, src, 0, SIZE)
    assert torch.equal(owner_view.view(torch.float32), torch.arange(SIZE // 4, dtype=torch.float32))


def test_async_and_batched_transfers_across_the_link(apps, exported):
    _, b = apps
    buf, remote = exported
    src, dst = b.alloc(SIZE), b.alloc(SIZE)
    np.asarray(src)[:] = pattern(12)
    half = SIZE // 2
    assert b.write_async(remote, 0, src, 0, half).result(20) == half
    assert b.write_batch([(src, half, remote, half, half // 2),
                          (src, half + half // 2, remote, half + half // 2, half // 2)]) == half
    assert np.array_equal(np.asarray(buf), pattern(12))
    assert b.read_async(remote, 0, dst, 0, half).result(20) == half
    assert b.read_batch([(dst, half, remote, half, half)]) == half
    assert np.array_equal(np.asarray(dst), pattern(12))


def test_errors_across_the_link(apps, exported):
    a, b = apps
    _, remote = exported
    local = b.alloc(4096)
    with pytest.raises(mcdma.OutOfRange):
        b.read(remote, SIZE - 1, local, 0, 2)
    with pytest.raises(mcdma.NotFound):
        b.resolve(uniq("missing"), peer="host-a")
    private = uniq("private")  # no allowed_peers: host-a's apps only
    a.export(a.alloc(4096), private)
    with pytest.raises((mcdma.PermissionDenied, mcdma.NotFound)):
        b.resolve(private, peer="host-a")
    read_only = uniq("ro")
    a.export(a.alloc(4096), read_only, allowed_peers=["host-b"])
    with pytest.raises(mcdma.PermissionDenied):
        b.write(b.resolve(read_only, peer="host-a"), 0, local, 0, 16)
    with pytest.raises(mcdma.NotFound):
        b.resolve(read_only, peer="host-nowhere")
