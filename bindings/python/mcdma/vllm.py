"""mcdma.vllm: a vLLM v1 KV connector that hands a prefill's KV cache to a
decode instance on another host through ``mcdma.kv``.

Load it by module path (vLLM imports this module when it reads the config)::

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "MCDMAConnector",
        "kv_connector_module_path": "mcdma.vllm", "kv_role": "kv_producer",
        "kv_connector_extra_config": {"allowed_peers": ["host-b"]}}'

It is a pull model, like vLLM's NIXL connector:

* The prefill instance (``kv_producer``) gets requests whose
  ``kv_transfer_params`` hold ``{"do_remote_decode": true}``. In the step
  that completes such a request's prompt, the worker packs the prompt's
  blocks of each layer into mcdma buffers (``mcdma.kv_paged.pack_blocks``),
  layer by layer in ``save_kv_layer`` as attention writes them, and offers
  them as one ``mcdma.kv.KVExport`` hand-off per worker. The hand-off id
  is derived from the engine id and the request id. ``request_finished``
  returns ``True`` (vLLM keeps the blocks) and the parameters the decode
  instance needs: ``mcdma_host``, ``mcdma_handoff_id``,
  ``remote_num_blocks``, ``remote_num_tokens``, ``token_digest``... The
  request is reported "finished sending" (its blocks freed) once a consumer
  has pulled every layer, or the hand-off expired (``ttl``).
* The decode instance (``kv_consumer``) gets the request with those
  parameters and ``do_remote_prefill: true``. ``get_num_new_matched_tokens``
  counts the prompt tokens the producer holds, ``update_state_after_alloc``
  notes the local blocks they go into, and the connector metadata carries
  them to the workers. Each worker pulls its hand-off with
  ``mcdma.kv.KVImport`` (the manifest is checked before any byte moves:
  dtype, block geometry, layer names, prompt digest) and scatters each
  layer into its blocks (``mcdma.kv_paged.unpack_blocks``). A pull that
  fails (producer gone, hand-off revoked or expired, link down, checksum,
  mismatch) reports the request's blocks through
  ``get_block_ids_with_load_errors``: with vLLM's
  ``kv_load_failure_policy: "recompute"`` the decode instance then
  prefills them itself.

By default a load is asynchronous (vLLM schedules the request once it has
landed). With ``"async_load": false`` it is synchronous: the request runs
in the step that loads it and ``wait_for_layer_load`` waits for each layer
before its attention reads it, so layer i+1 crosses while layer i computes.

Extra config (``kv_connector_extra_config``), all optional:

``socket``         the daemon's socket (default: ``$MCDMA_SOCKET``, else the
                   standard path);
``allowed_peers``  host ids whose apps may pull this producer's hand-offs
                   (default none: only apps on this host);
``ttl``            seconds a producer offers a hand-off, and so holds its
                   blocks, before it expires (default 120);
``deadline``       seconds a consumer's pull may take (default 60);
``open_wait``      seconds a consumer retries a hand-off not offered yet
                   (default 5);
``async_load``     see above (default true).

Paged layouts: a layer's cache is ``[num_blocks, heads, block_size, C]``
(vLLM's per-layer view since its KV cache layouts were unified, any stride
order) or ``[2, num_blocks, ...]`` (K and V first, FlashAttention's older
layout). The packed bytes are the request's blocks in order, in logical
order, so the two ends may use different physical layouts but must agree on
dtype and block geometry. One KV cache group only (vLLM turns its hybrid
allocator off for this connector).

Importing this module needs vLLM; ``import mcdma`` does not.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Dict, List, Optional, Set

try:
    import torch  # noqa: F401 - the worker side needs it
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )
except ImportError as e:  # pragma: no cover - exercised without vLLM
    raise ImportError(
        f"mcdma.vllm is a vLLM KV connector and needs vLLM (pip install vllm): {e}") from e

# The connector's parts import vLLM and torch too: only after the guard above.
from ._client import Client
from ._vllm_meta import LAYOUT, _handoff_base  # noqa: F401 - part of this module's namespace
from ._vllm_meta import (MCDMAConnectorMetadata, _Layer, _Load, _Offer, _Save, _SaveSpec,
                         token_digest)
from ._vllm_scheduler import _SchedulerSide
from ._vllm_worker import _WorkerSide

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

__all__ = ["MCDMAConnector", "MCDMAConnectorMetadata", "token_digest"]

_EXTRA_KEYS = {
    "socket": str, "allowed_peers": list, "ttl": (int, float), "deadline": (int, float),
    "open_wait": (int, float), "async_load": bool, "app_name": str,
}


class MCDMAConnector(_SchedulerSide, _WorkerSide, KVConnectorBase_V1):
    """vLLM v1 KV connector over mcdma hand-offs (see the module doc).

    One object per role: the scheduler's (``KVConnectorRole.SCHEDULER``)
    decides what moves; each worker's (``KVConnectorRole.WORKER``) moves
    it, through its own ``mcdma.Client`` session. Raises ValueError for a
    bad ``kv_connector_extra_config``.
    """

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: "Optional[KVCacheConfig]" = None) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        tc = self._kv_transfer_config
        extra = dict(tc.kv_connector_extra_config or {})
        for key, value in extra.items():
            kinds = _EXTRA_KEYS.get(key)
            if kinds is None:
                raise ValueError(f"MCDMAConnector: unknown kv_connector_extra_config key {key!r} "
                                 f"(known: {', '.join(sorted(_EXTRA_KEYS))})")
            if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
                raise ValueError(f"MCDMAConnector: kv_connector_extra_config[{key!r}] = {value!r} "
                                 "has the wrong type")
        self._socket: Optional[str] = extra.get("socket")
        self._allowed_peers = list(extra.get("allowed_peers", []))
        if not all(isinstance(p, str) and p for p in self._allowed_peers):
            raise ValueError("MCDMAConnector: allowed_peers must be a list of host ids")
        self._ttl = float(extra.get("ttl", 120.0))
        self._deadline = float(extra.get("deadline", 60.0))
        self._open_wait = float(extra.get("open_wait", 5.0))
        self._async_load = bool(extra.get("async_load", True))
        self._app_name = extra.get("app_name") or f"vllm-{str(tc.kv_role or 'kv')}"
        for key in ("ttl", "deadline"):
            if getattr(self, f"_{key}") <= 0:
                raise ValueError(f"MCDMAConnector: {key} must be > 0")
        if self._open_wait < 0:
            raise ValueError("MCDMAConnector: open_wait must be >= 0")
        self._engine_id = str(tc.engine_id)
        self._block_size = int(vllm_config.cache_config.block_size)
        self._tp_size = int(vllm_config.parallel_config.tensor_parallel_size)
        self._num_blocks = int(getattr(kv_cache_config, "num_blocks", 0) or 0)
        self._client_lock = threading.Lock()
        self._client: Optional[Client] = None

        # Scheduler side.
        self._host_id: Optional[str] = None
        self._to_save: Dict[str, "Request"] = {}       # producer: waiting for the prompt's end
        self._block_ids: Dict[str, List[int]] = {}     # producer: each such request's blocks
        self._saved: Dict[str, _SaveSpec] = {}         # producer: exported, not finished yet
        self._matched: Dict[str, int] = {}             # consumer: local prefix tokens
        self._pending_meta = MCDMAConnectorMetadata()  # next step's metadata

        # Worker side.
        self._layers: List[_Layer] = []
        self._layer_index: Dict[str, int] = {}
        self._tp_rank = 0
        self._applied: Optional[KVConnectorMetadata] = None
        self._saving: Dict[str, _Save] = {}            # this step's exports, being written
        self._exports: Dict[str, _Offer] = {}          # offered, until consumed or expired
        self._failed_saves: Set[str] = set()
        self._finished: Set[str] = set()               # requests vLLM said are finished
        self._loads: Dict[str, _Load] = {}
        self._load_errors: Set[int] = set()

    # ---- shared ----

    def _session(self) -> Client:
        with self._client_lock:
            if self._client is None or self._client.closed:
                self._client = Client(socket=self._socket, app_name=self._app_name)
            return self._client

    def shutdown(self) -> None:
        """Ends every hand-off and the mcdma session."""
        for save in self._saving.values():
            if save.export is not None:
                save.export.close()
        self._saving.clear()
        for offer in self._exports.values():
            offer.export.close()
        self._exports.clear()
        for load in list(self._loads.values()):
            if load.importer is not None:
                load.importer.close()
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None
