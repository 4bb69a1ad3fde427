"""The scheduler side of mcdma.vllm's connector: ``_SchedulerSide``, the
methods vLLM's scheduler calls on its ``KVConnectorRole.SCHEDULER``
connector, which decide what moves (see mcdma.vllm).

mcdma.vllm imports this module after its import guard found vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from . import _kv_wire as wire
from ._client import Client
from ._errors import Error
from ._vllm_meta import (MCDMAConnectorMetadata, _cdiv, _handoff_base, _LoadSpec, _log,
                         _ReleaseSpec, _SaveSpec, token_digest)

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request


class _SchedulerSide:
    """The scheduler-side methods of ``mcdma.vllm.MCDMAConnector``. Its
    state is set by ``MCDMAConnector.__init__``."""

    _socket: Optional[str]
    _app_name: str
    _async_load: bool
    _engine_id: str
    _block_size: int
    _tp_size: int
    _host_id: Optional[str]
    _to_save: Dict[str, "Request"]
    _block_ids: Dict[str, List[int]]
    _saved: Dict[str, _SaveSpec]
    _matched: Dict[str, int]
    _pending_meta: MCDMAConnectorMetadata

    @staticmethod
    def _remote_params(request: "Request") -> Optional[Dict[str, Any]]:
        """The request's mcdma pull parameters when it is to be loaded from a
        producer and they are well formed; None otherwise (logged)."""
        params = request.kv_transfer_params
        if not params or not params.get("do_remote_prefill"):
            return None
        host, base = params.get("mcdma_host"), params.get("mcdma_handoff_id")
        tokens, blocks = params.get("remote_num_tokens"), params.get("remote_num_blocks")
        ok = (isinstance(host, str) and host and isinstance(base, str)
              and isinstance(tokens, int) and tokens > 0 and isinstance(blocks, int) and blocks > 0)
        if ok:
            try:
                wire.check_id(f"{base}.r0")
            except ValueError:
                ok = False
        if not ok:
            _log.warning("request %s: kv_transfer_params %s are not an mcdma hand-off; "
                         "prefilling locally", request.request_id, params)
            return None
        return params

    def get_num_new_matched_tokens(self, request: "Request",
                                   num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        """The prompt tokens a producer holds for `request` beyond the
        `num_computed_tokens` computed here, and whether they load
        asynchronously. (0, False) for any other request."""
        params = self._remote_params(request)
        if params is None:
            return 0, False
        if int(params.get("tp_size", 1)) != self._tp_size:
            _log.warning("request %s: the producer runs %s tensor-parallel workers, this "
                         "instance %s; prefilling locally", request.request_id,
                         params.get("tp_size"), self._tp_size)
            return 0, False
        prompt = len(request.prompt_token_ids or [])
        # A synchronous load leaves the prompt's last token to this step's
        # forward (vLLM schedules at least one token); an asynchronous one
        # may cover the whole prompt (vLLM then recomputes the last token).
        usable = prompt if self._async_load else prompt - 1
        count = min(int(params["remote_num_tokens"]), usable) - num_computed_tokens
        if count <= 0:
            return 0, False
        # Where the load starts (the local prefix ends), for
        # update_state_after_alloc, which follows in the same pass.
        self._matched[request.request_id] = num_computed_tokens
        return count, self._async_load

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks",
                                 num_external_tokens: int) -> None:
        """Producer: remember a request to export. Consumer: note the local
        blocks the producer's tokens go into (or that none will be pulled)."""
        params = request.kv_transfer_params
        if not params:
            return
        if params.get("do_remote_decode"):
            if request.request_id not in self._saved:  # not again after a preemption
                self._to_save[request.request_id] = request
            return
        remote = self._remote_params(request)
        if remote is None:
            return
        # One transfer per request: a second call (blocks for the rest of
        # the request, after the load) finds this False.
        params["do_remote_prefill"] = False
        base, peer = remote["mcdma_handoff_id"], remote["mcdma_host"]
        if num_external_tokens <= 0:
            self._pending_meta.releases.append(_ReleaseSpec(request.request_id, peer, base))
            return
        all_ids = list(blocks.get_block_ids()[0])
        local = self._matched.pop(request.request_id, None)
        if local is None:  # not asked first: the local prefix is what is cached
            local = (len(all_ids) - len(blocks.get_unhashed_block_ids())) * self._block_size
        local_hits = local // self._block_size  # a cached prefix is whole blocks
        end = _cdiv(local + num_external_tokens, self._block_size)
        digest = token_digest((request.prompt_token_ids or [])[:int(remote["remote_num_tokens"])]
                              if request.prompt_token_ids is not None else None)
        self._pending_meta.loads.append(_LoadSpec(
            req_id=request.request_id, peer=peer, handoff_base=base,
            block_ids=all_ids[local_hits:end], first_block=local_hits,
            remote_num_blocks=int(remote["remote_num_blocks"]), token_digest=digest,
            is_async=self._async_load))

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        """This step's metadata: the exports of requests whose prompt
        completes in this step, hand-offs to withdraw, loads, releases."""
        meta, self._pending_meta = self._pending_meta, MCDMAConnectorMetadata()
        computed: Dict[str, int] = {}
        for new in scheduler_output.scheduled_new_reqs:
            if new.req_id in self._to_save:
                self._block_ids[new.req_id] = list(new.block_ids[0])
                computed[new.req_id] = new.num_computed_tokens
        cached = scheduler_output.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", set())
        for i, req_id in enumerate(cached.req_ids):
            if req_id not in self._to_save:
                continue
            new_ids = cached.new_block_ids[i]
            ids = list(new_ids[0]) if new_ids is not None else []
            if req_id in resumed:
                self._block_ids[req_id] = ids
            else:
                self._block_ids.setdefault(req_id, []).extend(ids)
            computed[req_id] = cached.num_computed_tokens[i]
        for req_id, before in computed.items():
            request = self._to_save[req_id]
            scheduled = scheduler_output.num_scheduled_tokens.get(req_id, 0)
            prompt = request.num_prompt_tokens
            if scheduled <= 0 or before + scheduled < prompt:
                continue  # the prompt is not complete after this step
            n_blocks = _cdiv(prompt, self._block_size)
            ids = self._block_ids.get(req_id, [])[:n_blocks]
            del self._to_save[req_id]
            self._block_ids.pop(req_id, None)
            if len(ids) < n_blocks:
                _log.warning("request %s: %d of its %d prompt blocks known; not exported",
                             req_id, len(ids), n_blocks)
                continue
            spec = _SaveSpec(req_id, _handoff_base(self._engine_id, req_id), ids, prompt,
                             token_digest(request.prompt_token_ids))
            meta.saves.append(spec)
            self._saved[req_id] = spec
        return meta

    def _producer_host(self) -> str:
        if self._host_id is None:
            with Client(socket=self._socket, app_name=self._app_name) as c:
                self._host_id = c.info.host_id
        return self._host_id

    def request_finished(self, request: "Request",
                         block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """Producer: for a request exported and finished normally, keep its
        blocks (True) until a consumer pulled them or the hand-off expired,
        and return the parameters a decode instance pulls with. Otherwise
        free them now; an export that will not be used is withdrawn."""
        from vllm.v1.request import RequestStatus

        req_id = request.request_id
        params = request.kv_transfer_params
        self._to_save.pop(req_id, None)
        self._block_ids.pop(req_id, None)
        self._matched.pop(req_id, None)
        if params and params.get("do_remote_prefill"):
            # Finished before it was scheduled: the producer is still holding.
            remote = self._remote_params(request)
            params["do_remote_prefill"] = False
            if remote is not None:
                self._pending_meta.releases.append(
                    _ReleaseSpec(req_id, remote["mcdma_host"], remote["mcdma_handoff_id"]))
            return False, None
        spec = self._saved.pop(req_id, None)
        if spec is None or not params or not params.get("do_remote_decode"):
            return False, None
        if request.status not in (RequestStatus.FINISHED_STOPPED,
                                  RequestStatus.FINISHED_LENGTH_CAPPED):
            self._pending_meta.withdraws.append(req_id)
            return False, None
        try:
            host = self._producer_host()
        except Error as e:
            _log.error("request %s: no mcdma daemon to name this host (%s); not handed off",
                       req_id, e)
            self._pending_meta.withdraws.append(req_id)
            return False, None
        return True, {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "mcdma_host": host,
            "mcdma_handoff_id": spec.handoff_base,
            "remote_num_blocks": len(spec.block_ids),
            "remote_num_tokens": spec.num_tokens,
            "token_digest": spec.token_digest,
            "remote_engine_id": self._engine_id,
            "remote_request_id": req_id,
            "tp_size": self._tp_size,
        }
