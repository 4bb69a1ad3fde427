"""Glue between a paged KV cache (vLLM's layout) and ``mcdma.kv`` layers.

vLLM keeps each attention layer's cache as one tensor of blocks,
``[2, num_blocks, block_size, num_kv_heads, head_size]`` (K and V; the
FlashAttention layout), and a request owns some block ids. A hand-off layer
is that request's blocks of one layer, packed in block-id order::

    nbytes = kv_paged.layer_nbytes(kv_layer, len(block_ids))
    kv_paged.pack_blocks(kv_layer, block_ids, export_buffers[i])     # producer
    kv_paged.unpack_blocks(import_buffers[i], kv_layer, block_ids)   # consumer

Both copy once, straight between the paged tensor and the shared-memory
buffer (``index_select(out=...)`` / ``index_copy_``: no staging tensor on
CPU). A CUDA paged tensor goes through one device-side gather and a
device-to-host copy; only the CPU path is tested here (see
docs/integrations.md).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

BLOCK_DIM = 1  # [2, num_blocks, ...]


def layer_nbytes(kv_layer: torch.Tensor, n_blocks: int) -> int:
    """Bytes of `n_blocks` blocks of one paged layer."""
    per_block = kv_layer.element_size() * kv_layer[:, :1].numel()
    return per_block * n_blocks


def _view(buffer: Any, kv_layer: torch.Tensor, n_blocks: int) -> torch.Tensor:
    """`buffer`'s first bytes as a [2, n_blocks, ...] tensor of the layer's
    dtype (no copy)."""
    nbytes = layer_nbytes(kv_layer, n_blocks)
    flat = torch.frombuffer(buffer, dtype=torch.uint8)
    if flat.numel() < nbytes:
        raise ValueError(f"the buffer holds {flat.numel()} bytes; {n_blocks} blocks need {nbytes}")
    shape = (kv_layer.shape[0], n_blocks, *kv_layer.shape[2:])
    return flat[:nbytes].view(kv_layer.dtype).view(shape)


def _ids(block_ids: Sequence[int], kv_layer: torch.Tensor) -> torch.Tensor:
    ids = torch.as_tensor(list(block_ids), dtype=torch.long)
    if ids.numel() == 0:
        raise ValueError("no block ids")
    n = kv_layer.shape[BLOCK_DIM]
    if int(ids.min()) < 0 or int(ids.max()) >= n:
        raise ValueError(f"block ids must be in [0, {n})")
    return ids.to(kv_layer.device)


def pack_blocks(kv_layer: torch.Tensor, block_ids: Sequence[int], buffer: Any) -> int:
    """Copies blocks `block_ids` of `kv_layer` into `buffer` (an
    mcdma.Buffer or any writable byte buffer), in that order. Returns the
    bytes written."""
    ids = _ids(block_ids, kv_layer)
    out = _view(buffer, kv_layer, len(ids))
    if kv_layer.device.type == "cpu":
        torch.index_select(kv_layer, BLOCK_DIM, ids, out=out)
    else:
        out.copy_(kv_layer.index_select(BLOCK_DIM, ids))
    return out.numel() * out.element_size()


def unpack_blocks(buffer: Any, kv_layer: torch.Tensor, block_ids: Sequence[int]) -> None:
    """Copies the packed blocks in `buffer` into blocks `block_ids` of
    `kv_layer` (the inverse of ``pack_blocks``)."""
    ids = _ids(block_ids, kv_layer)
    src = _view(buffer, kv_layer, len(ids))
    kv_layer.index_copy_(BLOCK_DIM, ids, src.to(kv_layer.device))
