"""mcdma.kv_paged: a vLLM-style paged KV layer packed into hand-off layers
and unpacked at other block ids on the other host."""

import pytest

torch = pytest.importorskip("torch")

import mcdma  # noqa: E402
from mcdma import kv, kv_paged  # noqa: E402
from conftest import uniq  # noqa: E402


def paged(num_blocks: int, dtype) -> "torch.Tensor":
    g = torch.Generator().manual_seed(num_blocks)
    return torch.randn(2, num_blocks, 16, 4, 32, generator=g).to(dtype)  # [2, blocks, bs, heads, hd]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_request_blocks_cross_into_other_block_ids(two_hosts, dtype):
    a = mcdma.Client(socket=two_hosts.a.socket)
    b = mcdma.Client(socket=two_hosts.b.socket)
    try:
        layers_a = [paged(64, dtype) for _ in range(3)]
        src_ids, dst_ids = [5, 17, 3, 40], [0, 63, 8, 9]
        nbytes = kv_paged.layer_nbytes(layers_a[0], len(src_ids))
        bufs = kv.allocate_layers(a, nbytes, len(layers_a))
        hid = uniq("paged")
        with kv.KVExport(a, hid, bufs, {"dtype": str(dtype)}, allowed_peers=["host-b"]) as exp:
            for i, layer in enumerate(layers_a):
                assert kv_paged.pack_blocks(layer, src_ids, bufs[i]) == nbytes
                exp.publish_layer(i)
            layers_b = [torch.zeros(2, 64, 16, 4, 32, dtype=dtype) for _ in layers_a]
            with kv.KVImport(b, "host-a", hid, expect={"dtype": str(dtype)}) as imp:
                imp.pull(on_layer=lambda i: kv_paged.unpack_blocks(imp.buffers[i], layers_b[i],
                                                                   dst_ids))
        for la, lb in zip(layers_a, layers_b):
            assert torch.equal(lb[:, dst_ids], la[:, src_ids])
            untouched = [i for i in range(64) if i not in dst_ids]
            assert not lb[:, untouched].any()
    finally:
        a.close()
        b.close()


def test_pack_writes_straight_into_the_buffer(client):
    layer = paged(8, torch.float32)
    buf = client.alloc(kv_paged.layer_nbytes(layer, 2))
    kv_paged.pack_blocks(layer, [6, 1], buf)
    view = torch.frombuffer(buf, dtype=torch.float32).view(2, 2, 16, 4, 32)
    assert torch.equal(view, layer[:, [6, 1]])


def test_bad_block_ids_and_small_buffers_are_refused(client):
    layer = paged(8, torch.float32)
    with pytest.raises(ValueError, match=r"block ids must be in \[0, 8\)"):
        kv_paged.pack_blocks(layer, [8], client.alloc(1 << 20))
    with pytest.raises(ValueError, match="no block ids"):
        kv_paged.pack_blocks(layer, [], client.alloc(1 << 20))
    with pytest.raises(ValueError, match="2 blocks need"):
        kv_paged.pack_blocks(layer, [0, 1], client.alloc(4096))
