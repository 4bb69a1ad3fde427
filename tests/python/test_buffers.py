"""mcdma.Buffer: alignment, zero-copy views (buffer protocol, numpy, torch,
DLPack) and the lifetime of the memory behind them."""

import ctypes
import gc
import mmap

import numpy as np
import pytest

import mcdma


def torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed (python3-torch)")


def capsule_name_is(capsule, name: bytes) -> bool:
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return is_valid(capsule, name) == 1


@pytest.mark.parametrize("size", [1, 4096, 4097, 3 << 20])
def test_alloc_gives_page_aligned_zeroed_memory_of_at_least_size(client, size):
    buf = client.alloc(size)
    assert buf.address % mmap.PAGESIZE == 0
    assert buf.size >= size and buf.size % mmap.PAGESIZE == 0
    assert len(buf) == buf.size and buf.id > 0
    assert not np.asarray(buf).any()
    assert repr(buf) == f"<mcdma.Buffer id={buf.id} size={buf.size}>"


def test_alloc_errors_are_named(client):
    with pytest.raises(mcdma.Invalid):
        client.alloc(0)
    with pytest.raises(mcdma.NoMemory):
        client.alloc(1 << 60)


def test_buffer_protocol_is_writable_1d_bytes(client):
    buf = client.alloc(8192)
    view = memoryview(buf)
    assert (view.format, view.itemsize, view.ndim, view.readonly) == ("B", 1, 1, False)
    assert view.nbytes == buf.size and view.c_contiguous
    view[10:15] = b"hello"
    assert bytes(memoryview(buf)[10:15]) == b"hello"


def test_numpy_views_share_the_buffer_memory(client):
    buf = client.alloc(1 << 16)
    by_protocol = np.frombuffer(buf, dtype=np.float32)
    by_asarray = np.asarray(buf)
    assert by_protocol.ctypes.data == by_asarray.ctypes.data == buf.address
    assert by_asarray.dtype == np.uint8 and by_asarray.flags.writeable
    by_protocol[:4] = [1.0, 2.0, 3.0, 4.0]
    assert by_asarray[:16].tobytes() == np.array([1, 2, 3, 4], np.float32).tobytes()


def test_array_interface_describes_the_same_memory(client):
    buf = client.alloc(4096)
    iface = buf.__array_interface__
    assert iface["data"] == (buf.address, False)
    assert iface["shape"] == (buf.size,) and iface["typestr"] == "|u1"

    class InterfaceOnly:  # no buffer protocol: numpy must use the interface
        def __init__(self, b):
            self.b = b
            self.__array_interface__ = b.__array_interface__

    arr = np.asarray(InterfaceOnly(buf))
    assert arr.ctypes.data == buf.address
    arr[0] = 99
    assert memoryview(buf)[0] == 99


def test_torch_frombuffer_shares_the_buffer_memory(client):
    torch = torch_or_skip()
    buf = client.alloc(4096)
    t = torch.frombuffer(buf, dtype=torch.int32)
    assert t.data_ptr() == buf.address and t.numel() == buf.size // 4
    t[:3] = torch.tensor([7, 8, 9], dtype=torch.int32)
    assert np.frombuffer(buf, np.int32)[:3].tolist() == [7, 8, 9]


def test_torch_from_dlpack_shares_the_buffer_memory(client):
    torch = torch_or_skip()
    buf = client.alloc(4096)
    t = torch.from_dlpack(buf)
    assert t.data_ptr() == buf.address
    assert t.dtype == torch.uint8 and tuple(t.shape) == (buf.size,) and t.device.type == "cpu"
    t[100] = 42
    assert np.asarray(buf)[100] == 42


def test_numpy_from_dlpack_shares_the_buffer_memory(client):
    if not hasattr(np, "from_dlpack"):
        pytest.skip(f"numpy {np.__version__} has no from_dlpack")
    buf = client.alloc(4096)
    arr = np.from_dlpack(buf)
    assert arr.ctypes.data == buf.address and arr.dtype == np.uint8


def test_dlpack_capsules_legacy_and_versioned(client):
    buf = client.alloc(4096)
    assert buf.__dlpack_device__() == (1, 0)
    assert capsule_name_is(buf.__dlpack__(), b"dltensor")
    assert capsule_name_is(buf.__dlpack__(max_version=(0, 8)), b"dltensor")
    versioned = buf.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert capsule_name_is(versioned, b"dltensor_versioned")
    del versioned  # unconsumed: its deleter runs, the buffer stays
    gc.collect()
    memoryview(buf)[0] = 1


@pytest.mark.parametrize("kwargs", [{"stream": 1}, {"dl_device": (2, 0)}, {"copy": True}])
def test_dlpack_refuses_streams_devices_and_copies(client, kwargs):
    with pytest.raises(BufferError):
        client.alloc(4096).__dlpack__(**kwargs)


def test_views_keep_the_memory_alive_after_the_buffer_and_client_go(connect):
    c = connect()
    arr = np.frombuffer(c.alloc(1 << 20), dtype=np.uint8)
    view = memoryview(c.alloc(4096))
    capsule_view = np.from_dlpack(c.alloc(4096)) if hasattr(np, "from_dlpack") else arr
    gc.collect()
    c.close()
    gc.collect()
    arr[:] = 5
    view[:2] = b"ok"
    assert int(arr.sum()) == 5 * arr.size and bytes(view[:2]) == b"ok"
    assert int(capsule_view.sum()) == 0  # numpy < 2 imports DLPack read-only


def test_torch_dlpack_tensor_keeps_the_memory_alive(connect):
    torch = torch_or_skip()
    c = connect()
    t = torch.from_dlpack(c.alloc(1 << 20))
    frombuffer = torch.frombuffer(c.alloc(4096), dtype=torch.uint8)
    gc.collect()
    c.close()
    gc.collect()
    t.fill_(9)
    frombuffer.fill_(4)
    assert int(t.sum()) == 9 * t.numel() and int(frombuffer.sum()) == 4 * 4096


def test_export_resolve_release_and_unexport(client, connect):
    other = connect()
    buf = client.alloc(8192)
    name = f"exp-{buf.id}-{client.info.session_id}"
    client.export(buf, name, offset=4096, length=4096, allow_write=True)
    remote = other.resolve(name)
    assert (remote.name, remote.peer, remote.length) == (name, None, 4096)
    assert remote.readable and remote.writable and remote.handle > 0
    assert name in repr(remote)
    np.asarray(buf)[4096:4100] = [1, 2, 3, 4]
    dst = other.alloc(4096)
    assert other.read(remote, 0, dst, 0, 4) == 4
    assert bytes(memoryview(dst)[:4]) == b"\x01\x02\x03\x04"
    other.release(remote)
    with pytest.raises(mcdma.NotFound):
        other.read(remote, 0, dst, 0, 4)
    client.unexport(name)
    with pytest.raises(mcdma.NotFound):
        other.resolve(name)
