"""The consumer side of a KV hand-off: ``KVImport`` (see mcdma.kv).

The protocol runs in libmcdma (``mcdma::kv::Import``, mcdma/kv.hpp); this
class gives it Python's shape: hand-off errors as their classes, figures as
dataclasses, ``start`` on a thread of its own.

Buffers: by default the layers land in buffers from the client's pool
(``pool_for``): a hand-off reuses the buffers of an earlier one that
nobody holds any more (no view, no reference), because the first touch of
fresh shared memory costs more than moving the bytes into it. Give
``buffers`` to choose them, or ``pool=None`` for fresh ones.

Threading: ``pull`` runs on the calling thread (or, after ``start``, on a
thread of its own); ``wait_layer``, ``stats`` and ``close`` may be called
from any thread.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from . import _kv_wire as wire
from . import _mcdma
from ._client import Client
from ._errors import Error
from ._mcdma import Buffer

#: Free pooled bytes a client keeps by default (more are handed back).
DEFAULT_POOL_IDLE_BYTES = 4 << 30
_DEFAULT = object()
_pools: "weakref.WeakKeyDictionary[Client, BufferPool]" = weakref.WeakKeyDictionary()
_pools_lock = threading.Lock()


class BufferPool:
    """Buffers for imports to land in, reused across hand-offs (see the
    module). A buffer is free again once nothing holds it (no mcdma.Buffer,
    memoryview, numpy array or torch tensor over it); at most
    `max_idle_bytes` of free buffers are kept."""

    def __init__(self, client: Client, max_idle_bytes: int = DEFAULT_POOL_IDLE_BYTES) -> None:
        self._core = _mcdma._KvPool(client._core, max_idle_bytes)

    def trim(self) -> None:
        """Hands every free buffer back to the daemon."""
        self._core.trim()

    @property
    def counters(self) -> Dict[str, int]:
        """buffers (held), free_bytes, hits (reuses), misses (allocations)."""
        buffers, free_bytes, hits, misses = self._core.counters()
        return {"buffers": buffers, "free_bytes": free_bytes, "hits": hits, "misses": misses}


def pool_for(client: Client) -> BufferPool:
    """The client's default pool (made on first use)."""
    with _pools_lock:
        pool = _pools.get(client)
        if pool is None:
            pool = _pools[client] = BufferPool(client)
        return pool


@dataclass
class LayerStats:
    """One layer's timings, in seconds; ``*_at`` count from the open."""
    index: int
    nbytes: int
    published_at: float = 0.0  # its layer event arrived
    pull_s: float = 0.0        # the read, from its start to its end
    verify_s: float = 0.0      # the checksum
    landed_at: float = 0.0     # pulled and verified


@dataclass
class KVStats:
    """A whole import's figures (seconds, bytes)."""
    open_s: float = 0.0    # open call, manifest checks, allocation
    total_s: float = 0.0   # open start -> last layer landed
    bytes: int = 0
    layers: List[LayerStats] = field(default_factory=list)

    @property
    def gbytes_per_s(self) -> float:
        """Bytes / total_s, in 10^9 B/s."""
        return self.bytes / self.total_s / 1e9 if self.total_s > 0 else 0.0


def _handoff(call: Callable[[], Any]) -> Any:
    """`call()`, with libmcdma's hand-off failures raised as their classes."""
    try:
        return call()
    except Error as e:
        converted = wire.handoff_error(e)
        if converted is e:
            raise
        raise converted from None


class KVImport:
    """Opens hand-off `handoff_id` of an app on host `peer` (None: this
    host) and prepares to pull it.

    Before any byte moves the manifest is checked: every key of `expect`
    must be equal in it (else ``ManifestMismatch``, naming each
    difference), and its ``token_digest`` must be `token_digest` when given
    (else ``DigestMismatch``). Then the layers' buffers are prepared
    (``buffers``): the given ones (each at least the layer's size), else
    from `pool` (default: the client's, ``pool_for``; None: fresh buffers).
    `deadline`: seconds from now by which every layer must have landed.
    `verify`: check each layer's XXH3-64 when the producer published one
    (``KVExport(checksum=True)``).

    Raises ``HandoffExpired``/``HandoffRevoked`` for a hand-off that has
    ended, ``ProducerGone`` when no producer serves it (after retrying for
    `open_wait` seconds: the producer may not have started yet).
    """

    def __init__(self, client: Client, peer: Optional[str], handoff_id: str, *,
                 expect: Optional[Dict[str, Any]] = None, token_digest: Optional[str] = None,
                 deadline: float = 60.0, verify: bool = True, open_wait: float = 0.0,
                 buffers: Optional[List[Buffer]] = None,
                 pool: Union[BufferPool, None, object] = _DEFAULT) -> None:
        self._id = wire.check_id(handoff_id)
        if pool is _DEFAULT:
            pool = pool_for(client) if buffers is None else None
        expect_json = wire.encode(expect).decode() if expect else ""
        self._lock = threading.Lock()
        self._landed_cv = threading.Condition(self._lock)
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        pool_core = pool._core if isinstance(pool, BufferPool) else None
        self._core = _handoff(lambda: _mcdma._KvImport(
            client._core, peer or "", self._id, expect_json, token_digest or "", deadline,
            verify, open_wait, buffers, pool_core))
        self._manifest = json.loads(self._core.manifest_json)
        self._buffers: List[Buffer] = self._core.buffers()

    # ---- what the caller uses ----

    @property
    def manifest(self) -> Dict[str, Any]:
        return dict(self._manifest)

    @property
    def buffers(self) -> List[Buffer]:
        """One buffer per layer; layer i's bytes are final once it landed."""
        return list(self._buffers)

    @property
    def stats(self) -> KVStats:
        open_s, total_s, nbytes, layers = self._core.stats()
        return KVStats(open_s=open_s, total_s=total_s, bytes=nbytes,
                       layers=[LayerStats(*layer) for layer in layers])

    def pull(self, on_layer: Optional[Callable[[int], None]] = None) -> KVStats:
        """Pulls every layer as soon as it is published, into ``buffers``;
        calls ``on_layer(i)`` on this thread once layer i landed (verified;
        an exception it raises is raised once the pull ends). Returns the
        figures; raises the hand-off errors (see the class)."""
        try:
            _handoff(lambda: self._core.pull(on_layer))
        except BaseException as e:
            with self._lock:
                self._error = e
                self._landed_cv.notify_all()
            raise
        return self.stats

    def start(self, on_layer: Optional[Callable[[int], None]] = None) -> None:
        """``pull`` on a thread of its own; see ``wait_layer``/``wait``."""
        def run() -> None:
            try:
                self.pull(on_layer)
            except BaseException:
                pass  # kept for wait_layer/wait
        self._thread = threading.Thread(target=run, name=f"kv-import-{self._id}", daemon=True)
        self._thread.start()

    def wait_layer(self, layer: int, timeout: Optional[float] = None) -> LayerStats:
        """Blocks until layer `layer` landed; raises the pull's error, or
        mcdma.Timeout after `timeout` s."""
        return LayerStats(*_handoff(lambda: self._core.wait_layer(layer, timeout)))

    def wait(self, timeout: Optional[float] = None) -> KVStats:
        """Blocks until every layer landed (after ``start``)."""
        for i in range(len(self._buffers)):
            self.wait_layer(i, timeout)
        return self.stats

    def close(self) -> None:
        """Stops listening and hands the remote handles back (the buffers
        stay valid while referenced); a pull in progress ends with
        mcdma.Cancelled. Idempotent."""
        try:
            self._core.close()
        except Error:
            pass  # the client is closed: the daemon reclaimed everything

    def __enter__(self) -> "KVImport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
