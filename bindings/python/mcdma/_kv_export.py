"""The producer side of a KV hand-off: ``KVExport`` (see mcdma.kv).

Threading: ``publish_layer``, ``revoke`` and ``close`` may be called from
any thread; consumers' calls arrive on the client's handler thread. One
lock orders publication against consumer registration, so every consumer
learns of every published layer exactly once: in its ``open`` reply, or in
a notification sent after it registered.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Union

from . import _kv_wire as wire
from ._client import Client
from ._errors import Error, Invalid, Timeout
from ._mcdma import Buffer, CallInfo, checksum

_log = logging.getLogger("mcdma.kv")

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
    XXH3-64 so consumers can verify it.

    Raises ValueError for a bad id, layer or manifest, and mcdma errors when
    the service or an export cannot be made (``AlreadyExists``: the id is
    in use on this host).
    """

    def __init__(self, client: Client, handoff_id: str, layers: Sequence[Layer],
                 manifest: Dict[str, Any], *, allowed_peers: Iterable[str] = (),
                 ttl: Optional[float] = 600.0, checksum: bool = True) -> None:
        self._client = client
        self._id = wire.check_id(handoff_id)
        if not layers:
            raise ValueError("KVExport: no layers")
        self._sources: List[Optional[memoryview]] = []
        self._buffers: List[Buffer] = []
        for layer in layers:
            if isinstance(layer, Buffer):
                self._sources.append(None)
                self._buffers.append(layer)
            else:
                view = _bytes_view(layer)
                if view.nbytes == 0:
                    raise ValueError("KVExport: an empty layer")
                self._sources.append(view)
                self._buffers.append(client.alloc(view.nbytes))
        self._manifest = dict(manifest)
        self._manifest.update({
            "format": wire.FORMAT, "handoff_id": self._id, "n_layers": len(self._buffers),
            "layer_nbytes": [len(b) for b in self._buffers],
            "checksum": "xxh3-64" if checksum else None,
        })
        wire.encode(self._manifest)  # JSON-serialisable, or TypeError now
        self._checksum = checksum
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._state = "open"  # then "closed", "revoked" or "expired"
        self._reason = ""
        self._events: List[Dict[str, Any]] = []  # layer events, in publication order
        self._published: Set[int] = set()
        self._consumers: Dict[str, str] = {}  # notify target -> host
        self._done: List[str] = []
        self._exports: List[str] = []
        try:
            for i, buffer in enumerate(self._buffers):
                name = wire.export_name(self._id, i)
                client.export(buffer, name, ttl=ttl, allow_read=True,
                              allowed_peers=list(allowed_peers))
                self._exports.append(name)
            self._service = client.serve(wire.service_name(self._id), self._serve)
        except BaseException:
            self._withdraw()
            raise
        self._timer: Optional[threading.Timer] = None
        if ttl is not None:
            self._timer = threading.Timer(ttl, self._end, args=("expired", f"its TTL of {ttl} s passed"))
            self._timer.daemon = True
            self._timer.start()

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
        return self._state

    def publish_layer(self, layer: int) -> None:
        """Layer `layer` is final: copies it in (array layers), checksums it
        and notifies every consumer, which may pull it at once. Raises
        ValueError for a bad or already published index, Invalid once the
        hand-off has ended."""
        if not 0 <= layer < len(self._buffers):
            raise ValueError(f"publish_layer({layer}): there are {len(self._buffers)} layers")
        source = self._sources[layer]
        if source is not None:
            memoryview(self._buffers[layer])[:] = source
        cs = wire.checksum_hex(checksum(self._buffers[layer]) if self._checksum else None)
        event = {"event": "layer", "layer": layer, "checksum": cs}
        with self._lock:
            if self._state != "open":
                raise Invalid(f"hand-off {self._id} is {self._state}: cannot publish")
            if layer in self._published:
                raise ValueError(f"publish_layer({layer}): already published")
            self._published.add(layer)
            self._events.append(event)
            targets = list(self._consumers)
        self._notify(targets, event)

    def publish_all(self) -> None:
        """Publishes every layer not published yet, in order."""
        for i in range(len(self._buffers)):
            if i not in self._published:
                self.publish_layer(i)

    def wait_consumed(self, count: int = 1, timeout: Optional[float] = None) -> List[str]:
        """Waits until `count` consumers have every layer; returns their
        hosts. Raises mcdma.Timeout when they have not within `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while len(self._done) < count:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"hand-off {self._id}: {len(self._done)} of {count} consumers "
                                  f"finished within {timeout} s")
                self._changed.wait(left)
            return list(self._done)

    def revoke(self, reason: str = "revoked by the producer") -> None:
        """Ends the hand-off: consumers still pulling fail HandoffRevoked."""
        self._end("revoked", reason)

    def close(self) -> None:
        """Ends the hand-off (consumers still pulling fail HandoffRevoked)
        and withdraws its service and exports. Idempotent."""
        self._end("closed", "closed by the producer")
        self._withdraw()

    def __enter__(self) -> "KVExport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<mcdma.kv.KVExport {self._id!r} {self._state} "
                f"{len(self._published)}/{len(self._buffers)} published>")

    # ---- internals ----

    def _end(self, state: str, reason: str) -> None:
        with self._lock:
            if self._state != "open":
                return
            self._state, self._reason = state, reason
            targets = [t for t, host in self._consumers.items() if host not in self._done]
            self._changed.notify_all()
        if self._timer is not None:
            self._timer.cancel()
        event = {"event": state, "reason": reason}
        self._notify(targets, event)
        # An expired or revoked hand-off keeps answering (so a late consumer
        # learns why) until close(); its bytes are withdrawn at once.
        self._withdraw(service=state == "closed")

    def _withdraw(self, service: bool = True) -> None:
        for name in self._exports:
            try:
                self._client.unexport(name)
            except Error:
                pass  # expired already, or the client is closed
        self._exports = []
        if service and getattr(self, "_service", None) is not None:
            try:
                self._client.unserve(self._service)
            except Error:
                pass
            self._service = None

    def _notify(self, targets: List[str], event: Dict[str, Any]) -> None:
        data = wire.encode(event)
        for target in targets:
            try:
                self._client.notify(target, data, timeout=5.0)
            except Error as e:  # the consumer is gone: stop telling it
                _log.info("hand-off %s: consumer %s unreachable (%s); dropped", self._id, target, e)
                with self._lock:
                    self._consumers.pop(target, None)

    def _serve(self, request: bytes, info: CallInfo) -> bytes:
        message = wire.decode(request, "hand-off request")
        op = message.get("op")
        with self._lock:
            if op == "status":
                return wire.encode({"state": self._state, "reason": self._reason})
            if op == "done":
                host = str(message.get("host", ""))[:128]
                self._done.append(host)
                self._changed.notify_all()
                return wire.encode({"state": self._state})
            if op != "open":
                raise Invalid(f"hand-off {self._id}: unknown op {op!r}")
            if self._state != "open":
                return wire.encode({"state": self._state, "reason": self._reason})
            host, notify = message.get("host"), message.get("notify")
            if not isinstance(host, str) or not isinstance(notify, str) or not notify:
                raise Invalid("hand-off open: host and notify must be strings")
            local = host == self._client.info.host_id
            self._consumers[notify if local else f"{host}/{notify}"] = host
            return wire.encode({"state": "open", "manifest": self._manifest,
                                "published": list(self._events)})
