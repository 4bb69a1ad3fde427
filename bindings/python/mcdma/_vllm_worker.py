"""The worker side of mcdma.vllm's connector: ``_WorkerSide``, the methods
vLLM's model runner calls on each worker's ``KVConnectorRole.WORKER``
connector, which move the KV cache: the producer packs and offers it, the
consumer pulls and scatters it into its blocks (see mcdma.vllm).

mcdma.vllm imports this module after its import guard found vLLM and torch.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from . import _kv_wire as wire
from . import kv, kv_paged
from ._errors import Error, Timeout
from ._vllm_meta import (LAYOUT, MCDMAConnectorMetadata, _Layer, _Load, _LoadSpec, _log, _Offer,
                         _ReleaseSpec, _Save, _tp_rank, _worker_handoff)

if TYPE_CHECKING:
    from ._client import Client


class _WorkerSide:
    """The worker-side methods of ``mcdma.vllm.MCDMAConnector``. Its state
    is set by ``MCDMAConnector.__init__``."""

    _allowed_peers: List[str]
    _ttl: float
    _deadline: float
    _open_wait: float
    _engine_id: str
    _num_blocks: int
    _layers: List[_Layer]
    _layer_index: Dict[str, int]
    _tp_rank: int
    _applied: Optional[KVConnectorMetadata]
    _saving: Dict[str, _Save]
    _exports: Dict[str, _Offer]
    _failed_saves: Set[str]
    _finished: Set[str]
    _loads: Dict[str, _Load]
    _load_errors: Set[int]

    if TYPE_CHECKING:  # provided by MCDMAConnector and vLLM's KVConnectorBase_V1
        def _session(self) -> Client: ...
        def has_connector_metadata(self) -> bool: ...
        def _get_connector_metadata(self) -> KVConnectorMetadata: ...

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        """Notes each layer's paged cache (see mcdma.vllm's doc for the
        layouts taken). Raises ValueError for another layout, or layers of
        different geometry."""
        layers: List[_Layer] = []
        for name, tensor in kv_caches.items():
            view, blocks_dim_size = self._paged_view(name, tensor)
            ratio = 1
            if self._num_blocks:
                if blocks_dim_size % self._num_blocks:
                    raise ValueError(f"MCDMAConnector: layer {name}: {blocks_dim_size} blocks is "
                                     f"not a multiple of the {self._num_blocks} of the KV cache")
                ratio = blocks_dim_size // self._num_blocks
            layers.append(_Layer(name, view, kv_paged.layer_nbytes(view, 1), ratio))
        if not layers:
            raise ValueError("MCDMAConnector: no KV cache layers")
        first = layers[0]
        for layer in layers[1:]:
            if (layer.view.dtype != first.view.dtype or layer.view.shape[2:] != first.view.shape[2:]
                    or layer.view.shape[0] != first.view.shape[0] or layer.ratio != first.ratio):
                raise ValueError(f"MCDMAConnector: layer {layer.name} "
                                 f"({tuple(layer.view.shape)}, {layer.view.dtype}) differs from "
                                 f"{first.name} ({tuple(first.view.shape)}, {first.view.dtype}): "
                                 "one KV cache geometry is supported")
        self._layers = layers
        self._layer_index = {layer.name: i for i, layer in enumerate(layers)}
        self._tp_rank = _tp_rank()

    def _paged_view(self, name: str, t: torch.Tensor) -> Tuple[torch.Tensor, int]:
        """`t` as a [lead, blocks, ...] view (block dimension 1) and its
        block count."""
        n = self._num_blocks
        if t.dim() == 4:  # [B, H, N, C]
            return t.unsqueeze(0), int(t.shape[0])
        if t.dim() == 5 and t.shape[0] == 2 and (not n or t.shape[1] % n == 0):
            return t, int(t.shape[1])  # [2, B, ...]
        if t.dim() == 5 and t.shape[1] == 2 and (not n or t.shape[0] % n == 0):
            return t.transpose(0, 1), int(t.shape[0])  # [B, 2, ...]
        raise ValueError(f"MCDMAConnector: layer {name}: a KV cache of shape {tuple(t.shape)} is "
                         "not a paged layout this connector takes ([B, H, N, C], [2, B, ...] "
                         "or [B, 2, ...])")

    def _geometry(self) -> Dict[str, Any]:
        """What both ends' packed layers must agree on."""
        first = self._layers[0]
        shape = [int(first.view.shape[0])] + [int(d) for d in first.view.shape[2:]]
        return {"layout": LAYOUT, "dtype": str(first.view.dtype).replace("torch.", ""),
                "block_shape": shape, "blocks_per_page": first.ratio,
                "layer_names": [layer.name for layer in self._layers], "tp_rank": self._tp_rank}

    def _kernel_ids(self, block_ids: Sequence[int], ratio: int) -> List[int]:
        if ratio == 1:
            return list(block_ids)
        return [b * ratio + j for b in block_ids for j in range(ratio)]

    def _apply_metadata(self) -> None:
        """Acts on the bound metadata once: starts this step's exports,
        withdrawals, loads and releases."""
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        if meta is self._applied or not isinstance(meta, MCDMAConnectorMetadata):
            return
        self._applied = meta
        for req_id in meta.withdraws:
            self._failed_saves.discard(req_id)
            offer = self._exports.pop(req_id, None)
            if offer is not None:
                offer.export.close()
        for spec in meta.saves:
            self._saving[spec.req_id] = _Save(spec)
        for load_spec in meta.loads:
            self._start_load(load_spec)
        for release in meta.releases:
            self._release(release)

    # ---- producer ----

    def _open_export(self, save: _Save) -> kv.KVExport:
        if save.export is None:
            spec = save.spec
            client = self._session()
            n = len(spec.block_ids)
            sizes = [layer.per_block * layer.ratio * n for layer in self._layers]
            save.buffers = kv.allocate_layers(client, sizes)
            manifest = dict(self._geometry(), num_blocks=n, num_tokens=spec.num_tokens,
                            token_digest=spec.token_digest, request_id=spec.req_id,
                            engine_id=self._engine_id)
            save.export = kv.KVExport(client, _worker_handoff(spec.handoff_base, self._tp_rank),
                                      save.buffers, manifest, allowed_peers=self._allowed_peers,
                                      ttl=self._ttl)
        return save.export

    def _save_layer(self, save: _Save, index: int) -> None:
        if index in save.published or save.spec.req_id in self._failed_saves:
            return
        try:
            export = self._open_export(save)
            layer = self._layers[index]
            kv_paged.pack_blocks(layer.view, self._kernel_ids(save.spec.block_ids, layer.ratio),
                                 save.buffers[index])
            export.publish_layer(index)
            save.published.add(index)
        except (Error, ValueError, RuntimeError) as e:
            # The engine goes on: the request is reported finished sending
            # and a consumer fails to pull it (and prefills itself).
            _log.error("request %s: exporting its KV cache failed: %s", save.spec.req_id, e)
            self._failed_saves.add(save.spec.req_id)
            if save.export is not None:
                save.export.close()

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor,
                      attn_metadata: Any, **kwargs: Any) -> None:
        """Packs and publishes layer `layer_name` of each request whose
        prompt completes in this step (consumers may pull it at once)."""
        self._apply_metadata()
        if not self._saving:
            return
        index = self._layer_index.get(layer_name)
        if index is None:
            return  # not a layer registered here (e.g. one sharing another's cache)
        for save in self._saving.values():
            self._save_layer(save, index)

    def wait_for_save(self) -> None:
        """Publishes the layers ``save_kv_layer`` did not (every byte is in
        mcdma buffers when it returns) and hands the exports over to
        ``get_finished``."""
        self._apply_metadata()
        for req_id, save in self._saving.items():
            for index in range(len(self._layers)):
                self._save_layer(save, index)
            if req_id not in self._failed_saves and save.export is not None:
                self._exports[req_id] = self._offer(save.export)
        self._saving.clear()

    def _offer(self, export: kv.KVExport) -> "_Offer":
        """Watches `export` until a consumer has every layer (a thread
        blocked in libmcdma, without the GIL, for at most the TTL)."""
        offer = _Offer(export)

        def watch() -> None:
            try:
                export.wait_consumed(1, timeout=self._ttl + 1.0)
            except Error:
                return  # expired, revoked or closed: get_finished sees the state
            offer.consumed.set()

        threading.Thread(target=watch, name=f"mcdma-vllm-offer-{export.handoff_id}",
                         daemon=True).start()
        return offer

    # ---- consumer ----

    def _start_load(self, spec: _LoadSpec) -> None:
        load = _Load(spec)
        self._loads[spec.req_id] = load
        load.thread = threading.Thread(target=self._run_load, args=(load,),
                                       name=f"mcdma-vllm-load-{spec.req_id}", daemon=True)
        load.thread.start()

    def _run_load(self, load: _Load) -> None:
        spec = load.spec
        try:
            n = len(spec.block_ids)
            if spec.first_block + n > spec.remote_num_blocks:
                raise wire.ManifestMismatch(
                    f"request {spec.req_id}: blocks {spec.first_block}..{spec.first_block + n} "
                    f"asked of a hand-off of {spec.remote_num_blocks}")
            expect = dict(self._geometry(), num_blocks=spec.remote_num_blocks)
            importer = kv.KVImport(self._session(), spec.peer,
                                   _worker_handoff(spec.handoff_base, self._tp_rank),
                                   expect=expect, token_digest=spec.token_digest,
                                   deadline=self._deadline, open_wait=self._open_wait)
            with load.cond:
                load.importer = importer

            def landed(i: int) -> None:
                if spec.is_async:
                    self._unpack(load, i)
                with load.cond:
                    load.landed.add(i)
                    load.cond.notify_all()

            importer.pull(on_layer=landed)
        except BaseException as e:  # noqa: BLE001 - every failure is a load error
            with load.cond:
                load.error = e
        finally:
            if load.importer is not None:
                load.importer.close()
            with load.cond:
                load.done = True
                load.cond.notify_all()

    def _unpack(self, load: _Load, index: int) -> None:
        """Layer `index` of the pulled hand-off into the request's blocks."""
        if index in load.unpacked:
            return
        layer = self._layers[index]
        assert load.importer is not None
        start = load.spec.first_block * layer.ratio * layer.per_block
        source = memoryview(load.importer.buffers[index])[start:]
        kv_paged.unpack_blocks(source, layer.view, self._kernel_ids(load.spec.block_ids,
                                                                    layer.ratio))
        load.unpacked.add(index)

    def _release(self, release: _ReleaseSpec) -> None:
        """Tells the producer that this consumer is done with its hand-off
        without pulling it, so it frees the blocks now rather than at expiry."""
        try:
            client = self._session()
            service = wire.service_name(_worker_handoff(release.handoff_base, self._tp_rank))
            future = client.call_async(f"{release.peer}/{service}",
                                       wire.encode({"op": "done", "host": client.info.host_id}),
                                       timeout=10.0)
        except Error as e:
            _log.info("request %s: could not release hand-off %s: %s", release.req_id,
                      release.handoff_base, e)
            return
        future.add_done_callback(lambda f: f.exception() and _log.info(
            "request %s: releasing hand-off %s: %s", release.req_id, release.handoff_base,
            f.exception()))

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Starts pulling this step's loads (each on a thread of its own)."""
        self._apply_metadata()

    def wait_for_layer_load(self, layer_name: str) -> None:
        """For synchronous loads: blocks until layer `layer_name` landed
        and is in its blocks. A failed pull does not raise: its blocks are
        reported by ``get_block_ids_with_load_errors``."""
        self._apply_metadata()
        index = self._layer_index.get(layer_name)
        if index is None:
            return
        for load in self._loads.values():
            if not load.spec.is_async:
                self._wait_layer(load, index)

    def _wait_layer(self, load: _Load, index: int) -> None:
        end = time.monotonic() + self._deadline
        with load.cond:
            while index not in load.landed and load.error is None and not load.done:
                left = end - time.monotonic()
                if left <= 0:
                    load.error = Timeout(f"request {load.spec.req_id}: layer {index} did not "
                                         f"land in {self._deadline} s")
                    break
                load.cond.wait(left)
            ready = index in load.landed and load.error is None
        if ready:
            self._unpack(load, index)

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]],
                                                                Optional[Set[str]]]:
        """Requests whose export was pulled or expired (finished sending;
        only once vLLM finished them) and whose asynchronous load ended,
        landed or failed (finished receiving)."""
        self._apply_metadata()
        self._finished |= set(finished_req_ids) & (set(self._exports) | self._failed_saves)
        sending: Set[str] = set()
        for req_id in list(self._exports):
            if req_id not in self._finished:
                continue
            offer = self._exports[req_id]
            if not offer.consumed.is_set() and offer.export.state == "open":
                continue
            offer.export.close()
            del self._exports[req_id]
            sending.add(req_id)
        for req_id in list(self._failed_saves):
            if req_id in self._finished:
                self._failed_saves.discard(req_id)
                sending.add(req_id)
        self._finished -= sending

        recving: Set[str] = set()
        for req_id, load in list(self._loads.items()):
            if not load.spec.is_async and not load.done and load.thread is not None:
                # A synchronous load ends in its step: every layer was
                # waited for, only the producer's courtesy call may remain.
                load.thread.join(self._deadline)
                with load.cond:
                    if not load.done and load.error is None:
                        load.error = Timeout(f"request {req_id}: the load did not end in "
                                             f"{self._deadline} s")
                    load.done = True
            if not load.done:
                continue
            if not load.spec.is_async:
                for index in range(len(self._layers)):
                    if index in load.landed:
                        self._unpack(load, index)  # a layer no attention waited for
            del self._loads[req_id]
            complete = load.error is None and len(load.unpacked) == len(self._layers)
            if not complete:
                _log.warning("request %s: KV load from %s failed: %s", req_id, load.spec.peer,
                             load.error)
                self._load_errors.update(load.spec.block_ids)
            if load.spec.is_async:
                recving.add(req_id)
        return sending or None, recving or None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        """The blocks of loads that failed since the last call (then forgotten)."""
        errors, self._load_errors = self._load_errors, set()
        return errors
