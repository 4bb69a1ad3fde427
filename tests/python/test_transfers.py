"""One-sided transfers on one host: read/write, async, batches, errors, and
the zero-copy path (numpy views in, remote reads and writes out)."""

import threading

import numpy as np
import pytest

import mcdma
from conftest import uniq

SIZE = 1 << 20


@pytest.fixture
def exported(connect):
    """(owner, owner's Buffer, reader client, RemoteBuffer): read/write export."""
    owner, reader = connect(app_name="owner"), connect(app_name="reader")
    buf = owner.alloc(SIZE)
    name = uniq("bulk")
    owner.export(buf, name, allow_read=True, allow_write=True)
    return owner, buf, reader, reader.resolve(name)


def pattern(seed: int, n: int = SIZE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_remote_read_sees_bytes_written_through_numpy(exported):
    _, buf, reader, remote = exported
    np.frombuffer(buf, np.uint8)[:] = pattern(1)  # written in place, no copy
    dst = reader.alloc(SIZE)
    assert reader.read(remote, 0, dst, 0, SIZE) == SIZE
    assert np.array_equal(np.asarray(dst), pattern(1))


def test_remote_write_shows_through_the_existing_numpy_view(exported):
    _, buf, reader, remote = exported
    view = np.frombuffer(buf, np.uint8)  # made before the write, never re-made
    src = reader.alloc(SIZE)
    np.asarray(src)[:] = pattern(2)
    assert reader.write(remote, 0, src, 0, SIZE) == SIZE
    assert np.array_equal(view, pattern(2))


def test_partial_ranges_land_at_their_offsets(exported):
    _, buf, reader, remote = exported
    local = reader.alloc(8192)
    np.asarray(local)[100:200] = 7
    assert reader.write(remote, 5000, local, 100, 100) == 100
    view = np.asarray(buf)
    assert (view[5000:5100] == 7).all() and not view[:5000].any() and not view[5100:].any()


def test_torch_view_sees_a_remote_write(exported):
    torch = pytest.importorskip("torch", reason="torch is not installed (python3-torch)")
    _, buf, reader, remote = exported
    tensor = torch.from_dlpack(buf)
    src = reader.alloc(4096)
    np.asarray(src)[:] = 11
    reader.write(remote, 0, src, 0, 4096)
    assert int(tensor[:4096].sum()) == 11 * 4096 and int(tensor[4096:].sum()) == 0


def test_async_reads_and_writes_return_futures_of_byte_counts(exported):
    _, buf, reader, remote = exported
    src = reader.alloc(SIZE)
    np.asarray(src)[:] = pattern(3)
    writes = [reader.write_async(remote, offset, src, offset, 4096)
              for offset in range(0, SIZE, 4096)]
    assert all(f.result(10) == 4096 for f in writes)
    dst = reader.alloc(SIZE)
    assert reader.read_async(remote, 0, dst, 0, SIZE).result(10) == SIZE
    assert np.array_equal(np.asarray(dst), pattern(3))
    assert np.array_equal(np.asarray(buf), pattern(3))


def test_async_transfer_keeps_a_dropped_buffer_alive(exported):
    _, buf, reader, remote = exported
    np.asarray(buf)[:] = 1
    fut = reader.read_async(remote, 0, reader.alloc(SIZE), 0, SIZE)  # no reference kept
    assert fut.result(10) == SIZE


def test_async_transfer_errors_fail_the_future(exported):
    _, _, reader, remote = exported
    fut = reader.read_async(remote, SIZE, reader.alloc(4096), 0, 1)
    assert isinstance(fut.exception(10), mcdma.OutOfRange)


def test_batches_move_every_piece(exported):
    _, buf, reader, remote = exported
    src, dst = reader.alloc(SIZE), reader.alloc(SIZE)
    np.asarray(src)[:] = pattern(4)
    half = SIZE // 2
    pieces = [mcdma.Transfer(src, 0, remote, half, half), (src, half, remote, 0, half)]
    assert reader.write_batch(pieces) == SIZE
    swapped = np.concatenate([pattern(4)[half:], pattern(4)[:half]])
    assert np.array_equal(np.asarray(buf), swapped)
    assert reader.read_batch([(dst, i, remote, i, 4096) for i in range(0, SIZE, 4096)]) == SIZE
    assert np.array_equal(np.asarray(dst), swapped)
    assert reader.read_batch([]) == 0


def test_batch_raises_the_first_failing_piece_error(exported):
    _, _, reader, remote = exported
    dst = reader.alloc(4096)
    with pytest.raises(mcdma.OutOfRange):
        reader.read_batch([(dst, 0, remote, 0, 16), (dst, 0, remote, SIZE, 16)])


@pytest.mark.parametrize("piece", [(1, 2, 3), "nope", (None, 0, None, 0, 1)])
def test_malformed_batch_pieces_raise_type_error(exported, piece):
    _, _, reader, _ = exported
    with pytest.raises(TypeError):
        reader.read_batch([piece])


def test_out_of_range_transfers_raise_out_of_range(exported):
    _, _, reader, remote = exported
    dst = reader.alloc(4096)
    with pytest.raises(mcdma.OutOfRange, match="past the end of export"):
        reader.read(remote, SIZE - 10, dst, 0, 20)
    with pytest.raises(mcdma.OutOfRange, match="local range"):
        reader.read(remote, 0, dst, 4000, 200)
    with pytest.raises(mcdma.OutOfRange):
        reader.write(remote, SIZE, dst, 0, 1)


def test_zero_length_transfer_raises_invalid(exported):
    _, _, reader, remote = exported
    with pytest.raises(mcdma.Invalid):
        reader.read(remote, 0, reader.alloc(4096), 0, 0)


def test_access_rights_are_enforced(connect):
    owner, other = connect(), connect()
    buf = owner.alloc(4096)
    read_only, write_only = uniq("ro"), uniq("wo")
    owner.export(buf, read_only)  # defaults: readable, not writable
    owner.export(buf, write_only, allow_read=False, allow_write=True)
    ro, wo = other.resolve(read_only), other.resolve(write_only)
    assert (ro.readable, ro.writable, wo.readable, wo.writable) == (True, False, False, True)
    local = other.alloc(4096)
    with pytest.raises(mcdma.PermissionDenied, match="does not allow writing"):
        other.write(ro, 0, local, 0, 16)
    with pytest.raises(mcdma.PermissionDenied, match="does not allow reading"):
        other.read(wo, 0, local, 0, 16)


def test_export_errors_are_named(client):
    buf = client.alloc(4096)
    name = uniq("dup")
    client.export(buf, name)
    with pytest.raises(mcdma.AlreadyExists):
        client.export(buf, name)
    with pytest.raises(mcdma.NotFound):
        client.unexport(uniq("never"))
    with pytest.raises(mcdma.NotFound):
        client.resolve(uniq("missing"))


def test_unexported_handle_raises_revoked(connect):
    owner, other = connect(), connect()
    name = uniq("gone")
    owner.export(owner.alloc(4096), name)
    remote = other.resolve(name)
    owner.unexport(name)
    with pytest.raises(mcdma.Revoked):
        other.read(remote, 0, other.alloc(4096), 0, 16)


def test_export_ttl_expires(connect):
    owner, other = connect(), connect()
    name = uniq("ttl")
    owner.export(owner.alloc(4096), name, ttl=0.2)
    remote = other.resolve(name)
    expired = threading.Event()
    for _ in range(100):  # the daemon expires it at some point after 0.2 s
        try:
            other.read(remote, 0, other.alloc(4096), 0, 16)
        except (mcdma.Revoked, mcdma.NotFound):
            expired.set()
            break
        expired.wait(0.1)
    assert expired.is_set()
