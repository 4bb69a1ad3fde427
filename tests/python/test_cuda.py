"""mcdma.cuda: an mcdma buffer as a CUDA tensor without a copy.

Without torch with CUDA, or without a GPU, map_buffer must fail with
mcdma.Unavailable saying why (run everywhere). With a GPU (CUDA torch and a
device; the GPU check script runs this file there), a kernel writes through
the tensor and the CPU sees the bytes in the buffer, and the reverse.
"""

import sys

import pytest

import mcdma
import mcdma.cuda

torch = pytest.importorskip("torch")

HAVE_GPU = torch.cuda.is_available()
if not HAVE_GPU:
    print("test_cuda: the GPU tests skip: torch finds no CUDA device "
          f"(torch {torch.__version__}, CUDA {torch.version.cuda})", file=sys.stderr)
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="torch finds no CUDA device")


@pytest.mark.skipif(HAVE_GPU, reason="a CUDA device is present")
def test_without_cuda_mapping_is_unavailable_saying_why(client):
    buf = client.alloc(4096)
    with pytest.raises(mcdma.Unavailable, match="mcdma.cuda: no CUDA: torch"):
        mcdma.cuda.map_buffer(buf)
    # The buffer is untouched and usable.
    memoryview(buf)[:4] = b"ok!!"
    assert bytes(memoryview(buf)[:4]) == b"ok!!"


def test_mapping_what_is_not_a_buffer_is_a_type_error():
    with pytest.raises(TypeError, match="an mcdma.Buffer"):
        mcdma.cuda.map_buffer(bytearray(4096))


@needs_gpu
def test_a_kernel_writes_the_buffer_in_place(client):
    buf = client.alloc(1 << 20)
    mapped = mcdma.cuda.map_buffer(buf)
    t = mapped.as_tensor(torch.int64)
    assert t.is_cuda and t.numel() == buf.size // 8
    t.copy_(torch.arange(t.numel(), device=t.device, dtype=torch.int64) * 3 + 1)
    torch.cuda.synchronize()
    import numpy as np
    words = np.frombuffer(memoryview(buf), dtype=np.int64)
    assert (words == np.arange(words.size, dtype=np.int64) * 3 + 1).all()


@needs_gpu
def test_a_kernel_reads_what_the_cpu_wrote_and_bfloat16_views_work(client):
    buf = client.alloc(1 << 16)
    memoryview(buf)[:] = bytes(range(256)) * (buf.size // 256)
    mapped = mcdma.cuda.map_buffer(buf)
    raw = mapped.as_tensor()
    assert int(raw[:256].sum().item()) == sum(range(256))
    bf = mapped.as_tensor(torch.bfloat16, (4, buf.size // 8))
    assert bf.shape == (4, buf.size // 8) and bf.dtype == torch.bfloat16
    assert bf.view(torch.uint8).flatten()[:256].tolist() == list(range(256))
    with pytest.raises(mcdma.Invalid, match="the buffer"):
        mapped.as_tensor(torch.float32, (buf.size,))
    del raw, bf
    mapped.unmap()
    mapped.unmap()
