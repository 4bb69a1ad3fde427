"""The pieces of mcdma.vllm's connector that both roles share: hand-off
ids and prompt digests, the connector metadata the scheduler sends the
workers each step, and the workers' per-request state.

mcdma.vllm imports this module after its import guard found vLLM and torch.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Set

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata

from . import _kv_wire as wire
from . import kv

_log = logging.getLogger("mcdma.vllm")

#: What the packed layers are, in every manifest (checked by consumers).
LAYOUT = "vllm-paged/1"


def token_digest(token_ids: Optional[Sequence[int]]) -> Optional[str]:
    """A digest of a prompt's token ids (both ends compute it: a hand-off
    for another prompt is refused before any byte moves). None for a
    prompt given as embeddings."""
    if token_ids is None:
        return None
    text = ",".join(str(int(t)) for t in token_ids)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _handoff_base(engine_id: str, request_id: str) -> str:
    """The hand-off id of a request, before a worker's ``.rN`` suffix: an
    id mcdma accepts whatever the request id holds, unique per engine."""
    digest = hashlib.sha256(f"{engine_id}/{request_id}".encode()).hexdigest()[:40]
    return f"vllm.{digest}"


def _worker_handoff(base: str, tp_rank: int) -> str:
    return wire.check_id(f"{base}.r{tp_rank}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tp_rank() -> int:
    """This worker's tensor-parallel rank (0 outside a parallel setup)."""
    try:
        from vllm.distributed.parallel_state import (get_tensor_model_parallel_rank,
                                                     model_parallel_is_initialized)
    except ImportError:
        return 0
    return get_tensor_model_parallel_rank() if model_parallel_is_initialized() else 0


# ---- connector metadata (scheduler -> workers; pickled between processes) ----

@dataclass
class _SaveSpec:
    """Producer: export blocks `block_ids` of request `req_id`."""
    req_id: str
    handoff_base: str
    block_ids: List[int]
    num_tokens: int
    token_digest: Optional[str]


@dataclass
class _LoadSpec:
    """Consumer: pull hand-off `handoff_base` from `peer` and put its packed
    blocks ``first_block .. first_block + len(block_ids)`` into `block_ids`."""
    req_id: str
    peer: str
    handoff_base: str
    block_ids: List[int]
    first_block: int
    remote_num_blocks: int
    token_digest: Optional[str]
    is_async: bool


@dataclass
class _ReleaseSpec:
    """Consumer: tell the producer its hand-off will not be pulled."""
    req_id: str
    peer: str
    handoff_base: str


class MCDMAConnectorMetadata(KVConnectorMetadata):
    """What the scheduler-side connector tells the workers for one step."""

    def __init__(self) -> None:
        self.saves: List[_SaveSpec] = []
        self.withdraws: List[str] = []  # producer requests finished without a hand-off
        self.loads: List[_LoadSpec] = []
        self.releases: List[_ReleaseSpec] = []

    def __repr__(self) -> str:
        return (f"<MCDMAConnectorMetadata saves={[s.req_id for s in self.saves]} "
                f"withdraws={self.withdraws} loads={[s.req_id for s in self.loads]} "
                f"releases={[s.req_id for s in self.releases]}>")


# ---- worker-side state ----

@dataclass
class _Layer:
    name: str
    view: torch.Tensor    # [lead, kernel_blocks, ...]: block dim 1, as kv_paged wants
    per_block: int        # bytes of one kernel block
    ratio: int            # kernel blocks per vLLM block


@dataclass
class _Save:
    spec: _SaveSpec
    export: Optional[kv.KVExport] = None
    buffers: List[Any] = field(default_factory=list)
    published: Set[int] = field(default_factory=set)


@dataclass
class _Offer:
    export: kv.KVExport
    consumed: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Load:
    spec: _LoadSpec
    cond: threading.Condition = field(default_factory=threading.Condition)
    importer: Optional[kv.KVImport] = None
    landed: Set[int] = field(default_factory=set)      # pulled and verified
    unpacked: Set[int] = field(default_factory=set)    # in the paged cache
    error: Optional[BaseException] = None
    done: bool = False
    thread: Optional[threading.Thread] = None
