"""mcdma.vllm.MCDMAConnector against vLLM itself: its KVConnectorBase_V1,
its connector factory (kv_connector_module_path), its real Scheduler driving
the scheduler-side connector, and its own per-layer KV cache views (as its
model runner allocates them) on the worker side; the KV moves between two
real daemons, host-a (prefill) and host-b (decode).

What stands in for vLLM's model runner here is a few lines per step: bind
the scheduler's connector metadata, write the scheduled blocks' KV (random
bytes: the "forward"), call the connector's worker hooks in the order the
runner calls them, and answer the scheduler with a ModelRunnerOutput. No
model, no GPU.

Skipped, with the reason printed, where vLLM is not installed (it is a
multi-GB install: see docs/integrations.md), unless MCDMA_REQUIRE_VLLM=1
(then it is an error); the first test runs anyway.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Set

import pytest

torch = pytest.importorskip("torch")

try:
    import vllm  # noqa: F401
    from vllm import SamplingParams
    from vllm.config import (CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig,
                             SchedulerConfig, VllmConfig)
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                                   KVConnectorRole)
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec,
                                            KVCacheTensor)
    from vllm.v1.kv_cache_layout import KVCacheLayout
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager
    from vllm.v1.worker.utils import allocate_kv_cache
    VLLM_MISSING: Optional[str] = None
except ImportError as e:
    VLLM_MISSING = f"vLLM is not installed ({e}): the MCDMAConnector tests need it"
    if os.environ.get("MCDMA_REQUIRE_VLLM") == "1":
        raise RuntimeError(f"MCDMA_REQUIRE_VLLM=1 but {VLLM_MISSING}") from e
    print(f"test_vllm_connector: skipped: {VLLM_MISSING}", file=sys.stderr)

needs_vllm = pytest.mark.skipif(VLLM_MISSING is not None, reason=VLLM_MISSING or "")

BLOCK = 16
NUM_BLOCKS = 64
LAYERS = ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn",
          "model.layers.2.self_attn.attn"]
HEADS, HEAD_SIZE = 2, 16
EOS = 2


def test_import_without_vllm_is_a_clear_error():
    """``import mcdma`` never needs vLLM; ``import mcdma.vllm`` without it
    says what is missing."""
    code = (
        "import sys\n"
        "class NoVllm:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'vllm' or name.startswith('vllm.'):\n"
        "            raise ImportError('No module named ' + repr(name))\n"
        "sys.meta_path.insert(0, NoVllm())\n"
        "import mcdma, mcdma.kv, mcdma.kv_paged\n"
        "try:\n"
        "    import mcdma.vllm\n"
        "except ImportError as e:\n"
        "    print('IMPORT-ERROR:', e)\n"
        "else:\n"
        "    print('IMPORTED')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "IMPORT-ERROR: mcdma.vllm is a vLLM KV connector and needs vLLM" in r.stdout, r.stdout


# ---- a minimal engine around vLLM's real scheduler ----

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A model config vLLM's ModelConfig reads (no weights, no tokenizer:
    nothing is fetched)."""
    d = tmp_path_factory.mktemp("model")
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": HEADS,
        "num_hidden_layers": len(LAYERS), "vocab_size": 256, "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": EOS}))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return str(d)


def vllm_config(model_dir: str, role: str, extra: Dict[str, Any],
                failure_policy: str = "recompute") -> "VllmConfig":
    return VllmConfig(
        model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32",
                                 seed=0, max_model_len=1024),
        scheduler_config=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512,
                                         max_model_len=1024, is_encoder_decoder=False),
        cache_config=CacheConfig(block_size=BLOCK, enable_prefix_caching=True),
        kv_transfer_config=KVTransferConfig(
            kv_connector="MCDMAConnector", kv_connector_module_path="mcdma.vllm", kv_role=role,
            kv_connector_extra_config=extra, kv_load_failure_policy=failure_policy),
        device_config=DeviceConfig("cpu"))


def kv_cache_config(layer_outermost: bool) -> "KVCacheConfig":
    """One group of full-attention layers in one allocation: each layer's
    blocks together (LBNHC), or each block's layers together (BLHNC)."""
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD_SIZE,
                             dtype=torch.float32)
    page, n = spec.page_size_bytes, len(LAYERS)
    tensor = (KVCacheTensor(size=page * NUM_BLOCKS * n, layers=list(LAYERS),
                            layer_stride=page * NUM_BLOCKS, block_stride=page)
              if layer_outermost else
              KVCacheTensor(size=page * NUM_BLOCKS * n, layers=list(LAYERS), layer_stride=page,
                            block_stride=page * n))
    return KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=[tensor],
                         kv_cache_groups=[KVCacheGroupSpec(list(LAYERS), spec)])


_hash_ready = False


def make_request(req_id: str, tokens: List[int], params: Optional[Dict[str, Any]],
                 max_tokens: int) -> "Request":
    global _hash_ready
    if not _hash_ready:
        init_none_hash(sha256)
        _hash_ready = True
    sampling = SamplingParams(max_tokens=max_tokens)
    sampling.update_from_generation_config({}, EOS)
    req = Request(request_id=req_id, prompt_token_ids=list(tokens), sampling_params=sampling,
                  pooling_params=None, mm_features=None,
                  block_hasher=get_request_block_hasher(BLOCK, sha256))
    req.kv_transfer_params = params
    return req


class Engine:
    """vLLM's Scheduler with the connector it creates, and one worker-side
    connector over vLLM-allocated per-layer KV views (CPU)."""

    def __init__(self, model_dir: str, role: str, extra: Dict[str, Any],
                 layer_outermost: bool = True, failure_policy: str = "recompute",
                 kernel_block: Optional[int] = None) -> None:
        self.config = vllm_config(model_dir, role, extra, failure_policy)
        kcc = kv_cache_config(layer_outermost)
        self.config.cache_config.num_gpu_blocks = NUM_BLOCKS
        self.scheduler = Scheduler(vllm_config=self.config, kv_cache_config=kcc,
                                   structured_output_manager=StructuredOutputManager(self.config),
                                   block_size=BLOCK, log_stats=False)
        self.worker = KVConnectorFactory.create_connector(self.config, KVConnectorRole.WORKER, kcc)
        layout = KVCacheLayout.LBNHC if layer_outermost else KVCacheLayout.BLHNC
        # kernel_block: the attention kernel's block, a fraction of vLLM's
        # (each vLLM block is several consecutive kernel blocks).
        self.ratio = BLOCK // kernel_block if kernel_block else 1
        self.kv = allocate_kv_cache(kcc, torch.device("cpu"), layout,
                                    [kernel_block] if kernel_block else None)
        self.worker.register_kv_caches(self.kv)
        self.outputs: Dict[str, Any] = {}  # request id -> its last EngineCoreOutput
        self.invalid: Set[int] = set()

    def close(self) -> None:
        self.worker.shutdown()
        self.scheduler.connector.shutdown()

    def block_ids(self, req_id: str) -> List[int]:
        return list(self.scheduler.kv_cache_manager.get_block_ids(req_id)[0])

    def kernel_ids(self, block_ids: List[int]) -> List[int]:
        return [b * self.ratio + j for b in block_ids for j in range(self.ratio)]

    def layer_bytes(self, layer: int, block_ids: List[int]) -> "torch.Tensor":
        """Blocks `block_ids` of a layer, as bytes (NaN-proof comparisons)."""
        return self.kv[LAYERS[layer]][self.kernel_ids(block_ids)].view(torch.uint8).clone()

    def step(self, on_layer=None) -> Any:
        """One engine step: schedule, the "forward" (random KV written into
        every scheduled block of every layer, after the connector loaded
        and before it saves, as attention does), the connector's worker
        hooks, and the scheduler's update."""
        so = self.scheduler.schedule()
        w = self.worker
        w.bind_connector_metadata(so.kv_connector_metadata)
        if so.has_sync_kv_loads:
            w.start_load_kv(None)
        written: Dict[str, List[int]] = {}
        for new in so.scheduled_new_reqs:
            written[new.req_id] = self.kernel_ids(list(new.block_ids[0]))
        for layer, name in enumerate(LAYERS):
            w.wait_for_layer_load(name)
            if on_layer is not None:
                on_layer(layer, so)
            for req_id, ids in written.items():
                if so.num_scheduled_tokens.get(req_id, 0) > 0 and not self._loaded_here(req_id, so):
                    gen = torch.Generator().manual_seed(hash((req_id, layer)) & 0xFFFF)
                    shape = self.kv[name][ids].view(torch.uint8).shape
                    self.kv[name].view(torch.uint8)[ids] = torch.randint(
                        0, 256, shape, dtype=torch.uint8, generator=gen)
            w.save_kv_layer(name, self.kv[name], None)
        if not so.has_sync_kv_loads:
            w.start_load_kv(None)
        w.wait_for_save()
        sending, recving = w.get_finished(so.finished_req_ids)
        invalid = w.get_block_ids_with_load_errors()
        self.invalid |= invalid
        w.clear_connector_metadata()
        req_ids = list(so.num_scheduled_tokens)
        kv_out = KVConnectorOutput(finished_sending=sending, finished_recving=recving,
                                   invalid_block_ids=invalid)
        index = {r: i for i, r in enumerate(req_ids)}
        out = ModelRunnerOutput(req_ids=req_ids, req_id_to_index=index,
                                sampled_token_ids=[[7] for _ in req_ids], logprobs=None,
                                prompt_logprobs_dict={}, pooler_output=None,
                                kv_connector_output=kv_out)
        for outputs in self.scheduler.update_from_output(so, out).values():
            for o in outputs.outputs:
                self.outputs[o.request_id] = o
        return so

    def _loaded_here(self, req_id: str, so: Any) -> bool:
        """A request whose prompt KV was loaded (its blocks hold the
        producer's bytes: the forward computes only what follows)."""
        req = self.scheduler.requests.get(req_id)
        return req is not None and req.kv_transfer_params is not None and \
            "mcdma_handoff_id" in req.kv_transfer_params

    def run_until(self, done, timeout: float = 20.0, on_layer=None) -> None:
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end, "the engine did not get there in time"
            self.step(on_layer)
            time.sleep(0.02)


PROMPT = [(i * 7) % 200 + 3 for i in range(40)]  # 40 tokens: 3 blocks, the last partial


def prefill(producer: Engine, req_id: str, prompt: List[int] = PROMPT) -> Dict[str, Any]:
    """Runs a request on the producer until it finished with its
    kv_transfer_params; returns them. A filler request takes the first
    blocks, so the producer's block ids differ from the consumer's."""
    producer.scheduler.add_request(make_request(f"filler-{req_id}", list(range(3, 3 + 50)),
                                                None, 1))
    producer.scheduler.add_request(make_request(req_id, prompt, {"do_remote_decode": True}, 1))
    producer.step()
    out = producer.outputs[req_id]
    assert out.finish_reason is not None, "the prefill request should finish in one step"
    assert out.kv_transfer_params is not None
    return dict(out.kv_transfer_params)


@pytest.fixture
def engines(two_hosts, model_dir):
    made: List[Engine] = []

    def make(host: str, role: str, **kw) -> Engine:
        daemon = two_hosts.a if host == "a" else two_hosts.b
        extra = {"socket": daemon.socket, **kw.pop("extra", {})}
        e = Engine(model_dir, role, extra, **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


# ---- vLLM's base class and factory ----

@needs_vllm
def test_loaded_by_vllms_factory_as_a_base_class_subclass(model_dir, tmp_path):
    from mcdma.vllm import MCDMAConnector

    assert issubclass(MCDMAConnector, KVConnectorBase_V1)
    config = vllm_config(model_dir, "kv_producer", {"socket": str(tmp_path / "none.sock")})
    assert KVConnectorFactory.get_connector_class(config.kv_transfer_config) is MCDMAConnector
    # vLLM turned its hybrid allocator off: the connector does not claim it.
    assert config.scheduler_config.disable_hybrid_kv_cache_manager
    kcc = kv_cache_config(True)
    for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
        c = KVConnectorFactory.create_connector(config, role, kcc)
        assert isinstance(c, MCDMAConnector) and c.role is role
    bad = vllm_config(model_dir, "kv_producer", {"sokcet": "/x"})
    with pytest.raises(ValueError, match="unknown kv_connector_extra_config key 'sokcet'"):
        KVConnectorFactory.create_connector(bad, KVConnectorRole.WORKER, kcc)
    bad = vllm_config(model_dir, "kv_producer", {"ttl": "soon"})
    with pytest.raises(ValueError, match=r"\['ttl'\] = 'soon' has the wrong type"):
        KVConnectorFactory.create_connector(bad, KVConnectorRole.WORKER, kcc)


@needs_vllm
def test_worker_refuses_a_layout_it_cannot_pack(model_dir, tmp_path):
    config = vllm_config(model_dir, "kv_consumer", {"socket": str(tmp_path / "none.sock")})
    c = KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER, kv_cache_config(True))
    with pytest.raises(ValueError, match=r"shape \(64, 256\) is not a paged layout"):
        c.register_kv_caches({LAYERS[0]: torch.zeros(64, 256)})
    with pytest.raises(ValueError, match="one KV cache geometry"):
        c.register_kv_caches({LAYERS[0]: torch.zeros(64, 2, 16, 32),
                              LAYERS[1]: torch.zeros(64, 4, 16, 32)})


# ---- the scheduler side, per vLLM's contract ----

@needs_vllm
def test_scheduler_side_contract(model_dir, tmp_path):
    config = vllm_config(model_dir, "kv_consumer", {"socket": str(tmp_path / "none.sock")})
    c = KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER,
                                            kv_cache_config(True))
    plain = make_request("plain", PROMPT, None, 4)
    assert c.get_num_new_matched_tokens(plain, 0) == (0, False)
    params = {"do_remote_prefill": True, "do_remote_decode": False, "mcdma_host": "host-a",
              "mcdma_handoff_id": "vllm.0123", "remote_num_blocks": 3, "remote_num_tokens": 40,
              "tp_size": 1}
    remote = make_request("remote", PROMPT, dict(params), 4)
    assert c.get_num_new_matched_tokens(remote, 0) == (40, True)
    assert c.get_num_new_matched_tokens(remote, 32) == (8, True)
    assert c.get_num_new_matched_tokens(remote, 40) == (0, False)
    # Side-effect free: asking again gives the same answer.
    assert c.get_num_new_matched_tokens(remote, 0) == (40, True)
    for broken in ({"mcdma_host": None}, {"mcdma_handoff_id": "bad id!"},
                   {"remote_num_tokens": 0}, {"tp_size": 2}):
        odd = make_request("odd", PROMPT, {**params, **broken}, 4)
        assert c.get_num_new_matched_tokens(odd, 0) == (0, False), broken
    sync = vllm_config(model_dir, "kv_consumer", {"socket": "/x", "async_load": False})
    s = KVConnectorFactory.create_connector(sync, KVConnectorRole.SCHEDULER, kv_cache_config(True))
    # Synchronous: the last prompt token is left for the step's forward.
    sync_req = make_request("r", PROMPT, dict(params), 4)
    assert s.get_num_new_matched_tokens(sync_req, 0) == (39, False)
    # A request that finishes before it was scheduled frees nothing of its
    # own and tells the producer (in the next metadata) it will not pull.
    remote.status = RequestStatus.FINISHED_ABORTED
    assert c.request_finished(remote, []) == (False, None)
    from vllm.v1.core.sched.output import SchedulerOutput
    meta = c.build_connector_meta(SchedulerOutput.make_empty())
    assert [(r.req_id, r.peer, r.handoff_base) for r in meta.releases] == \
        [("remote", "host-a", "vllm.0123")]
    assert c.request_finished(plain, [1, 2]) == (False, None)


# ---- end to end through two daemons ----

@needs_vllm
@pytest.mark.parametrize("geometry", ["other-layouts", "kernel-blocks"])
def test_prefill_on_host_a_decode_on_host_b(engines, geometry):
    if geometry == "other-layouts":  # each side its own physical layout
        producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"]})
        consumer = engines("b", "kv_consumer", layer_outermost=False)
    else:  # vLLM blocks of 16 tokens, attention blocks of 8
        producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"]},
                           kernel_block=8)
        consumer = engines("b", "kv_consumer", kernel_block=8)
        assert consumer.kv[LAYERS[0]].shape[0] == 2 * NUM_BLOCKS
    params = prefill(producer, "req-1")
    assert params["mcdma_host"] == "host-a"
    assert params["remote_num_blocks"] == 3 and params["remote_num_tokens"] == len(PROMPT)
    assert params["do_remote_prefill"] is True
    src_ids = producer.block_ids("req-1")[:3]
    src = [producer.layer_bytes(i, src_ids) for i in range(len(LAYERS))]
    assert any(s.any() for s in src)
    # vLLM keeps the blocks while the hand-off is offered, however long.
    for _ in range(3):
        producer.step()
    assert "req-1" in producer.scheduler.requests

    consumer.scheduler.add_request(make_request("dec-1", PROMPT, params, 4))
    consumer.step()
    req = consumer.scheduler.requests["dec-1"]
    assert req.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    dst_ids = consumer.block_ids("dec-1")[:3]
    assert dst_ids != src_ids, "the test wants different block ids on each side"
    consumer.run_until(lambda: req.status == RequestStatus.RUNNING)
    assert not consumer.invalid
    assert req.num_computed_tokens >= len(PROMPT) - 1
    for i in range(len(LAYERS)):
        got = consumer.layer_bytes(i, dst_ids)
        assert torch.equal(got, src[i]), f"layer {i} differs"

    # The consumer pulled every layer: the producer frees the blocks.
    free_before = producer.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
    producer.run_until(lambda: "req-1" not in producer.scheduler.requests)
    assert producer.scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == free_before + 3


@needs_vllm
def test_local_prefix_hit_pulls_only_the_rest(engines):
    producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"]})
    consumer = engines("b", "kv_consumer")
    params = prefill(producer, "req-2")
    src_ids = producer.block_ids("req-2")[:3]
    src = [producer.layer_bytes(i, src_ids) for i in range(len(LAYERS))]

    # The consumer already computed a request with the same first 2 blocks.
    consumer.scheduler.add_request(make_request("local", PROMPT[:32] + [9] * 5, None, 1))
    local_ids = list(consumer.step().scheduled_new_reqs[0].block_ids[0][:2])
    consumer.scheduler.add_request(make_request("dec-2", PROMPT, params, 4))
    consumer.step()
    req = consumer.scheduler.requests["dec-2"]
    assert req.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    ids = consumer.block_ids("dec-2")[:3]
    assert ids[:2] == local_ids, "the consumer's own prefix blocks are reused"
    cached = [consumer.layer_bytes(i, ids[:2]) for i in range(len(LAYERS))]
    consumer.run_until(lambda: req.status == RequestStatus.RUNNING)
    assert not consumer.invalid
    for i in range(len(LAYERS)):
        assert torch.equal(consumer.layer_bytes(i, ids[:2]), cached[i]), "local blocks overwritten"
        assert torch.equal(consumer.layer_bytes(i, ids[2:3]), src[i][2:3]), f"layer {i} differs"
    producer.run_until(lambda: "req-2" not in producer.scheduler.requests)


@needs_vllm
def test_synchronous_load_lands_each_layer_before_its_attention(engines):
    producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"]})
    consumer = engines("b", "kv_consumer", extra={"async_load": False})
    params = prefill(producer, "req-3")
    src_ids = producer.block_ids("req-3")[:3]
    src = [producer.layer_bytes(i, src_ids) for i in range(len(LAYERS))]
    consumer.scheduler.add_request(make_request("dec-3", PROMPT, params, 4))
    seen: List[int] = []

    def attention(layer: int, so: Any) -> None:
        if "dec-3" in so.num_scheduled_tokens and so.has_sync_kv_loads:
            ids = consumer.block_ids("dec-3")[:3]
            assert torch.equal(consumer.layer_bytes(layer, ids), src[layer]), layer
            seen.append(layer)

    so = consumer.step(on_layer=attention)
    assert so.has_sync_kv_loads and seen == list(range(len(LAYERS)))
    assert not consumer.invalid
    producer.run_until(lambda: "req-3" not in producer.scheduler.requests)


@needs_vllm
def test_expired_handoff_is_a_load_error_and_frees_the_producer(engines):
    producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"], "ttl": 0.5})
    consumer = engines("b", "kv_consumer", extra={"open_wait": 0.5})
    params = prefill(producer, "req-4")
    # Expired: vLLM gets the producer's blocks back without any consumer.
    producer.run_until(lambda: "req-4" not in producer.scheduler.requests)
    consumer.scheduler.add_request(make_request("dec-4", PROMPT, params, 4))
    consumer.step()
    req = consumer.scheduler.requests["dec-4"]
    ids = consumer.block_ids("dec-4")[:3]
    consumer.run_until(lambda: req.status != RequestStatus.WAITING_FOR_REMOTE_KVS)
    assert set(ids) <= consumer.invalid
    # kv_load_failure_policy "recompute": vLLM prefills the prompt itself.
    consumer.run_until(lambda: req.num_computed_tokens >= len(PROMPT))


@needs_vllm
def test_producer_daemon_gone_is_a_load_error(fresh_two_hosts, model_dir):
    hosts = fresh_two_hosts
    producer = Engine(model_dir, "kv_producer", {"socket": hosts.a.socket,
                                                 "allowed_peers": ["host-b"]})
    consumer = Engine(model_dir, "kv_consumer", {"socket": hosts.b.socket, "deadline": 10.0,
                                                 "open_wait": 0.0})
    try:
        params = prefill(producer, "req-5")
        hosts.a.kill()
        consumer.scheduler.add_request(make_request("dec-5", PROMPT, params, 4))
        consumer.step()
        req = consumer.scheduler.requests["dec-5"]
        ids = consumer.block_ids("dec-5")[:3]
        consumer.run_until(lambda: req.status != RequestStatus.WAITING_FOR_REMOTE_KVS,
                           timeout=30)
        assert set(ids) <= consumer.invalid
        consumer.run_until(lambda: req.num_computed_tokens >= len(PROMPT))
    finally:
        consumer.close()
        producer.close()


@needs_vllm
def test_aborted_prefill_withdraws_its_handoff(engines):
    producer = engines("a", "kv_producer", extra={"allowed_peers": ["host-b"]})
    producer.scheduler.add_request(make_request("req-6", PROMPT, {"do_remote_decode": True}, 4))
    producer.step()  # the prompt is complete: exported; the request goes on decoding
    import mcdma
    from mcdma.vllm import _handoff_base

    name = f"mcdma.kv.{_handoff_base(producer.config.kv_transfer_config.engine_id, 'req-6')}.r0.0"
    with mcdma.Client(socket=producer.worker._socket) as c:
        c.release(c.resolve(name))  # offered
        producer.scheduler.finish_requests("req-6", RequestStatus.FINISHED_ABORTED)
        assert "req-6" not in producer.scheduler.requests  # its blocks freed at once
        producer.step()
        with pytest.raises(mcdma.NotFound):
            c.resolve(name)
