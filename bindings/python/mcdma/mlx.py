"""mcdma.mlx: a KV hand-off's layers as mlx-lm's own KV caches.

The consumer side of ``mcdma.kv`` for a decoder running mlx-lm: each layer
of a ``KVImport`` becomes one ``mlx_lm.models.cache.KVCache``, the object
mlx-lm's models take as ``cache=`` (``model(tokens, cache=caches)``,
``generate_step(..., prompt_cache=caches)``), holding the prompt's K/V with
``offset`` = the cached length, so the model continues from there::

    with kv.KVImport(client, "host-a", request_id, expect=geometry,
                     token_digest=digest) as imp:
        imp.start()                              # pull on a thread of its own
        caches = mcdma.mlx.caches_from_import(imp)   # converts each layer as it lands
    for token, _ in generate_step(mx.array([last_token]), model, prompt_cache=caches):
        ...

What the producer must say in the manifest
------------------------------------------
The conversion reads these keys (`KVLayout.from_manifest`; producers
without MLX write them literally, `KVLayout.to_manifest` gives them):

``kv.layout``
    the order of one layer's block, row-major:
    ``"kv[2][kv_heads][seq][head_dim]"`` (`HEAD_MAJOR`: mlx-lm's own order;
    index 0 of the first dimension is K, 1 is V) or
    ``"kv[2][seq][kv_heads][head_dim]"`` (`TOKEN_MAJOR`: what
    ``kv_paged.pack_blocks`` packs from vLLM's paged layer
    ``[2, blocks, block_size, kv_heads, head_dim]``).
``kv.dtype``
    ``"float32"``, ``"float16"`` or ``"bfloat16"`` (torch.float32,
    torch.float16, torch.bfloat16 -> mx.float32, mx.float16, mx.bfloat16;
    bfloat16 moves as its 16-bit pattern and is reinterpreted, not
    converted).
``kv.n_kv_heads``, ``kv.head_dim``
    the key/value heads and their size (K and V alike).
``kv.capacity``
    positions in one block (the seq dimension above).
``kv.cached_len``
    positions 0..cached_len-1 hold the prompt's K/V (K after the rotary
    embedding, as mlx-lm caches it); the rest of the block is ignored.

Each buffer must hold at least ``2 * n_kv_heads * capacity * head_dim *
itemsize`` bytes (`KVLayout.layer_nbytes`); K and V of a layer become
``[1, n_kv_heads, capacity, head_dim]`` arrays (batch 1), so the decoder
appends up to ``capacity - cached_len`` tokens in place before mlx-lm
grows the cache.

Copies, per layer, of K and of V each
-------------------------------------
- ``HEAD_MAJOR``, dtype unchanged: one. The bytes go from the shared-memory
  buffer straight into an MLX array (``mx.array`` of a zero-copy numpy view
  of the buffer; K and V are each contiguous there, so nothing is staged;
  bfloat16's reinterpretation shares the array's memory).
- ``TOKEN_MAJOR``: two; the transpose to ``[kv_heads, seq, head_dim]`` is
  materialised (``mx.contiguous``) so mlx-lm can update the cache in place.
- ``dtype=`` different from ``kv.dtype``: one more (``astype``).

The arrays are evaluated before a function returns: the KV bytes are then
MLX's own, and the hand-off's buffers may be released or reused.

Supported caches: ``KVCache`` (what mlx-lm's Llama, Mistral, Qwen and most
full-attention models make with ``make_cache``). Rotating, quantized and
other cache kinds raise TypeError.

Needs the ``mlx`` and ``mlx-lm`` packages (PyPI: ``mlx`` on macOS,
``mlx[cpu]`` on Linux, and ``mlx-lm``); importing this module without them
raises ImportError naming the missing one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

try:
    import mlx.core as mx
except ModuleNotFoundError as e:  # pragma: no cover - depends on the install
    raise ImportError("mcdma.mlx needs the 'mlx' package (pip install mlx; on Linux: "
                      "pip install 'mlx[cpu]')", name=e.name) from e
try:
    from mlx_lm.models.cache import KVCache
except ModuleNotFoundError as e:  # pragma: no cover - depends on the install
    raise ImportError("mcdma.mlx needs the 'mlx-lm' package (pip install mlx-lm)",
                      name=e.name) from e

HEAD_MAJOR = "kv[2][kv_heads][seq][head_dim]"
TOKEN_MAJOR = "kv[2][seq][kv_heads][head_dim]"
LAYOUTS = (HEAD_MAJOR, TOKEN_MAJOR)

# dtype name -> (mx dtype, numpy dtype the bytes are read as, item size)
_DTYPES: Dict[str, Any] = {
    "float32": (mx.float32, np.float32, 4),
    "float16": (mx.float16, np.float16, 2),
    "bfloat16": (mx.bfloat16, np.uint16, 2),  # numpy has no bfloat16: read the bit patterns
}
_KEYS = ("kv.layout", "kv.dtype", "kv.n_kv_heads", "kv.head_dim", "kv.capacity", "kv.cached_len")


@dataclasses.dataclass(frozen=True)
class KVLayout:
    """How one hand-off layer's bytes are laid out (see the module)."""

    layout: str
    dtype: str
    n_kv_heads: int
    head_dim: int
    capacity: int
    cached_len: int

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"mcdma.mlx: cannot convert layout {self.layout!r}; "
                             f"supported: {', '.join(repr(x) for x in LAYOUTS)}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"mcdma.mlx: cannot convert dtype {self.dtype!r}; "
                             f"supported: {', '.join(sorted(_DTYPES))}")
        for name in ("n_kv_heads", "head_dim", "capacity"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"mcdma.mlx: {name} must be a positive integer, not {value!r}")
        if type(self.cached_len) is not int or not 0 <= self.cached_len <= self.capacity:
            raise ValueError(f"mcdma.mlx: cached_len must be an integer in [0, capacity="
                             f"{self.capacity}], not {self.cached_len!r}")

    @classmethod
    def from_manifest(cls, manifest: Dict[str, Any]) -> "KVLayout":
        """The layout a hand-off manifest declares under the "kv.*" keys.
        Raises ValueError naming every missing key, or the bad value."""
        missing = [k for k in _KEYS if k not in manifest]
        if missing:
            raise ValueError(f"mcdma.mlx: the manifest lacks {', '.join(missing)}: the producer "
                             f"must declare the KV layout (see mcdma.mlx)")
        return cls(*(manifest[k] for k in _KEYS))

    def to_manifest(self) -> Dict[str, Any]:
        """The "kv.*" manifest keys for this layout."""
        return dict(zip(_KEYS, dataclasses.astuple(self)))

    @property
    def mx_dtype(self) -> Any:
        """The MLX dtype of the bytes as they are."""
        return _DTYPES[self.dtype][0]

    @property
    def block_shape(self) -> tuple:
        """One layer's block shape in the producer's order."""
        if self.layout == HEAD_MAJOR:
            return (2, self.n_kv_heads, self.capacity, self.head_dim)
        return (2, self.capacity, self.n_kv_heads, self.head_dim)

    @property
    def layer_nbytes(self) -> int:
        """Bytes of one layer's block (a buffer may be larger)."""
        return 2 * self.n_kv_heads * self.capacity * self.head_dim * _DTYPES[self.dtype][2]


def _check_cache(cache: Any) -> None:
    if not isinstance(cache, KVCache):
        raise TypeError(f"mcdma.mlx fills mlx_lm.models.cache.KVCache objects, not "
                        f"{type(cache).__name__}")


def fill_cache(cache: Any, buffer: Any, layout: KVLayout, *, dtype: Any = None) -> Any:
    """Sets `cache` (a KVCache) to the K/V of one layer's `buffer` (an
    mcdma.Buffer or any object with the buffer protocol) laid out as
    `layout`: ``keys``/``values`` ``[1, n_kv_heads, capacity, head_dim]``,
    ``offset`` = ``layout.cached_len``. `dtype`: the MLX dtype to store
    (None: the hand-off's). Returns the cache. Raises ValueError when the
    buffer is smaller than the layout, TypeError for another cache kind.
    Copies: see the module."""
    _check_cache(cache)
    mx_dtype, np_dtype, _ = _DTYPES[layout.dtype]
    raw = np.frombuffer(buffer, dtype=np.uint8)  # zero-copy view of the buffer
    if raw.size < layout.layer_nbytes:
        raise ValueError(f"mcdma.mlx: the buffer holds {raw.size} bytes; the layout "
                         f"{layout.block_shape} {layout.dtype} needs {layout.layer_nbytes}")
    block = raw[:layout.layer_nbytes].view(np_dtype).reshape(layout.block_shape)
    halves = []
    for half in (block[0], block[1]):  # K, V: each contiguous in the buffer
        a = mx.array(half)  # the one copy: shared memory -> MLX's allocator
        if layout.dtype == "bfloat16":
            a = a.view(mx.bfloat16)  # same bits, shares a's memory
        if layout.layout == TOKEN_MAJOR:
            a = mx.contiguous(a.transpose(1, 0, 2))  # [seq, heads, hd] -> [heads, seq, hd]
        if dtype is not None and dtype != mx_dtype:
            a = a.astype(dtype)
        halves.append(mx.expand_dims(a, 0))
    keys, values = halves
    mx.eval(keys, values)
    cache.state = (keys, values, layout.cached_len)
    if cache.offset != layout.cached_len or cache.keys is not keys:
        raise RuntimeError("mcdma.mlx: this mlx-lm's KVCache.state does not take "
                           "(keys, values, offset); mcdma.mlx was written for mlx-lm 0.32")
    return cache


def empty_caches(layout: KVLayout, n_layers: int, *, dtype: Any = None) -> List[Any]:
    """n_layers KVCaches with room for ``layout.capacity`` positions of
    ``layout``'s dtype (or `dtype`) and offset 0: a local prefill into them
    stores its K/V exactly as a hand-off of that layout would (the fallback
    when a hand-off fails, or a reference run)."""
    if n_layers < 1:
        raise ValueError("mcdma.mlx: n_layers must be >= 1")
    shape = (1, layout.n_kv_heads, layout.capacity, layout.head_dim)
    store = layout.mx_dtype if dtype is None else dtype
    caches = []
    for _ in range(n_layers):
        cache = KVCache()
        keys, values = mx.zeros(shape, store), mx.zeros(shape, store)
        mx.eval(keys, values)
        cache.state = (keys, values, 0)
        caches.append(cache)
    return caches


def _caches_for(n_layers: int, caches: Optional[Sequence[Any]]) -> List[Any]:
    if caches is None:
        return [KVCache() for _ in range(n_layers)]
    caches = list(caches)
    if len(caches) != n_layers:
        raise ValueError(f"mcdma.mlx: the hand-off has {n_layers} layers, {len(caches)} caches given")
    for cache in caches:
        _check_cache(cache)
    return caches


def caches_from_buffers(buffers: Sequence[Any], manifest: Dict[str, Any], *,
                        caches: Optional[Sequence[Any]] = None, dtype: Any = None) -> List[Any]:
    """One filled KVCache per buffer, by the manifest's "kv.*" layout
    (`fill_cache` each). `caches`: fill these (e.g. ``model.make_cache()``)
    instead of new ones. Raises ValueError for a layout, dtype, buffer or
    layer count it cannot convert."""
    layout = KVLayout.from_manifest(manifest)
    n_layers = manifest.get("n_layers", len(buffers))
    if n_layers != len(buffers):
        raise ValueError(f"mcdma.mlx: the manifest says {n_layers} layers, {len(buffers)} buffers given")
    out = _caches_for(len(buffers), caches)
    for cache, buffer in zip(out, buffers):
        fill_cache(cache, buffer, layout, dtype=dtype)
    return out


def caches_from_import(imp: Any, *, caches: Optional[Sequence[Any]] = None, dtype: Any = None,
                       timeout: Optional[float] = None,
                       on_layer: Optional[Callable[[int], None]] = None) -> List[Any]:
    """One filled KVCache per layer of a ``kv.KVImport`` that was started
    (``start()``) or pulled (``pull()``): waits for each layer in order
    (``wait_layer(i, timeout)``) and converts it as soon as it landed, so
    conversion overlaps the rest of the pull; calls ``on_layer(i)`` after
    layer i's cache is filled. Raises the pull's hand-off error, or
    mcdma.Timeout when a layer does not land within `timeout` seconds, and
    ValueError as `caches_from_buffers`."""
    layout = KVLayout.from_manifest(imp.manifest)
    buffers = imp.buffers
    out = _caches_for(len(buffers), caches)
    for i, (cache, buffer) in enumerate(zip(out, buffers)):
        imp.wait_layer(i, timeout)
        fill_cache(cache, buffer, layout, dtype=dtype)
        if on_layer is not None:
            on_layer(i)
    return out


__all__ = ["HEAD_MAJOR", "TOKEN_MAJOR", "LAYOUTS", "KVLayout", "fill_cache", "empty_caches",
           "caches_from_buffers", "caches_from_import"]
