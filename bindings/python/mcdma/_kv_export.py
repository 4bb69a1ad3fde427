"""The producer side of a KV hand-off: ``KVExport`` (see mcdma.kv).

The protocol runs in libmcdma (``mcdma::kv::Export``, mcdma/kv.hpp):
consumers' calls are answered in C++ on the client's library thread,
without the GIL, so a busy Python engine never delays them. One lock there
orders publication against consumer registration, so every consumer learns
of every published layer exactly once.

Threading: ``publish_layer``, ``revoke`` and ``close`` may be called from
any thread.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Union

from . import _kv_wire as wire
from . import _mcdma
from ._client import Client
from ._errors import AlreadyExists, Error, OutOfRange
from ._mcdma import Buffer

Layer = Union[Buffer, Any]  # an mcdma.Buffer, or a contiguous CPU numpy array / torch tensor


def allocate_layers(client: Client, layer_nbytes: Union[int, Sequence[int]],
                    n_layers: Optional[int] = None) -> List[Buffer]:
    """One page-aligned mcdma.Buffer per layer, for a producer to compute
    into (zero-copy: wrap each with ``torch.frombuffer``/``numpy.frombuffer``)
    or a consumer to pull into.

    `layer_nbytes` is one size for `n_layers` layers, or a size per layer.
    """
    if isinstance(layer_nbytes, int):
        if n_layers is None or n_layers < 1:
            raise ValueError("allocate_layers: give n_layers >= 1 with a single layer size")
        sizes = [layer_nbytes] * n_layers
    else:
        sizes = list(layer_nbytes)
    if not sizes or any(not isinstance(n, int) or n <= 0 for n in sizes):
        raise ValueError("allocate_layers: every layer size must be a positive int")
    return [client.alloc(n) for n in sizes]


def _bytes_view(layer: Any) -> memoryview:
    """A flat byte view of a contiguous CPU array or tensor (no copy)."""
    if hasattr(layer, "detach") and hasattr(layer, "view"):  # a torch tensor
        import torch
        if layer.device.type != "cpu" or not layer.is_contiguous():
            raise ValueError("KVExport: a torch layer must be a contiguous CPU tensor")
        layer = layer.detach().reshape(-1).view(torch.uint8).numpy()
    view = memoryview(layer)
    if not view.c_contiguous:
        raise ValueError("KVExport: a layer must be C-contiguous")
    return view.cast("B")


class KVExport:
    """Offers a KV cache of ``len(layers)`` layers to other hosts' apps under
    `handoff_id`, layer by layer (see mcdma.kv for the protocol).

    ``layers``: mcdma.Buffers (exported as they are: zero-copy; write the
    cache into them) or contiguous CPU numpy arrays / torch tensors (copied
    into buffers of their size when published). ``manifest``: JSON-
    serialisable facts a consumer checks before any byte moves (dtype,
    geometry, block layout, ``token_digest``...); the layer sizes,
    ``n_layers``, the hand-off id and the checksum algorithm are added.
    ``allowed_peers``: hosts whose apps may pull it. ``ttl``: seconds until
    it expires (None: until closed). ``checksum``: publish each layer's
    XXH3-64 so consumers can verify it (off by default: a pass over the
    cache on each end, the producer's before each layer is announced).

    Raises ValueError for a bad id, layer or manifest, TypeError for a
    manifest that is not JSON, and mcdma errors when the service or an
    export cannot be made (``AlreadyExists``: the id is in use on this host).
    """

    def __init__(self, client: Client, handoff_id: str, layers: Sequence[Layer],
                 manifest: Dict[str, Any], *, allowed_peers: Iterable[str] = (),
                 ttl: Optional[float] = 600.0, checksum: bool = False) -> None:
        self._id = wire.check_id(handoff_id)
        if not layers:
            raise ValueError("KVExport: no layers")
        manifest_json = wire.encode(dict(manifest)).decode()  # JSON, or TypeError now
        self._sources: List[Optional[memoryview]] = []
        buffers: List[Buffer] = []
        for layer in layers:
            if isinstance(layer, Buffer):
                self._sources.append(None)
                buffers.append(layer)
            else:
                view = _bytes_view(layer)
                if view.nbytes == 0:
                    raise ValueError("KVExport: an empty layer")
                self._sources.append(view)
                buffers.append(client.alloc(view.nbytes))
        self._buffers = buffers
        self._copy_lock = threading.Lock()
        self._published: Set[int] = set()
        self._core = _mcdma._KvExport(client._core, self._id, buffers, manifest_json,
                                      list(allowed_peers), ttl, checksum)
        self._manifest = wire.decode(self._core.manifest_json.encode(), "hand-off manifest")

    @property
    def handoff_id(self) -> str:
        return self._id

    @property
    def buffers(self) -> List[Buffer]:
        """The exported buffers, one per layer."""
        return list(self._buffers)

    @property
    def manifest(self) -> Dict[str, Any]:
        return dict(self._manifest)

    @property
    def state(self) -> str:
        """"open", "closed", "revoked" or "expired"."""
        return self._core.state

    def publish_layer(self, layer: int) -> None:
        """Layer `layer` is final: copies it in (array layers), checksums it
        when the hand-off was made with ``checksum=True``, and notifies every
        consumer, which may pull it at once. Raises
        ValueError for a bad or already published index, Invalid once the
        hand-off has ended."""
        if not 0 <= layer < len(self._buffers):
            raise ValueError(f"publish_layer({layer}): there are {len(self._buffers)} layers")
        source = self._sources[layer]
        if source is not None:
            with self._copy_lock:
                memoryview(self._buffers[layer])[:] = source
        try:
            self._core.publish(layer)
        except (AlreadyExists, OutOfRange) as e:
            raise ValueError(e.message) from None
        self._published.add(layer)

    def publish_all(self) -> None:
        """Publishes every layer not published yet, in order."""
        for i in range(len(self._buffers)):
            if i not in self._published:
                self.publish_layer(i)

    def wait_consumed(self, count: int = 1, timeout: Optional[float] = None) -> List[str]:
        """Waits until `count` consumers have every layer; returns their
        hosts. Raises mcdma.Timeout when they have not within `timeout` s."""
        return list(self._core.wait_consumed(count, timeout))

    def revoke(self, reason: str = "revoked by the producer") -> None:
        """Ends the hand-off: consumers still pulling fail HandoffRevoked."""
        self._core.revoke(reason)

    def close(self) -> None:
        """Ends the hand-off (consumers still pulling fail HandoffRevoked)
        and withdraws its service and exports. Idempotent."""
        try:
            self._core.close()
        except Error:
            pass  # the client is closed: the daemon reclaimed everything

    def __enter__(self) -> "KVExport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<mcdma.kv.KVExport {self._id!r} {self.state}, {len(self._buffers)} layers>"


