"""Tests for demo/kv/model.py: the prefill/decode model of the KV hand-off demo.

The central property: decoding from a KV cache that was prefilled elsewhere
and copied byte for byte into separately allocated memory gives exactly the
tokens of a single-host run. Sizes are small so the file runs in seconds on
two CPU cores.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
from typing import List

import pytest

torch = pytest.importorskip("torch", reason="the KV demo model needs torch (apt-get install python3-torch)")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "demo" / "kv"))
import model as kvm  # noqa: E402

SMALL = kvm.ModelConfig(
    vocab_size=512, d_model=64, n_layers=4, n_heads=4, d_ff=128, max_seq=160, seed=7
)
PROMPT_TEXT = "The quick brown fox jumps over the lazy dog; a prompt of about one hundred bytes, give or take."


@pytest.fixture(scope="module")
def small_model() -> kvm.TinyTransformer:
    return kvm.TinyTransformer(SMALL)


def prompt(config: kvm.ModelConfig = SMALL) -> torch.Tensor:
    return kvm.prompt_tokens(PROMPT_TEXT, config)


class BytearrayAlloc:
    """alloc callback backed by bytearrays it keeps alive: the 'remote' memory."""

    def __init__(self) -> None:
        self.buffers: List[bytearray] = []
        self.tensors: List[torch.Tensor] = []

    def __call__(self, nbytes: int) -> torch.Tensor:
        buf = bytearray(nbytes)
        self.buffers.append(buf)
        self.tensors.append(torch.frombuffer(buf, dtype=torch.uint8))
        return self.tensors[-1]


def ship(config: kvm.ModelConfig, src: List[torch.Tensor]) -> List[torch.Tensor]:
    """Simulates the transfer: copies each layer's bytes into fresh memory."""
    dst = kvm.new_kv_cache(config, alloc=BytearrayAlloc())
    for s, d in zip(src, dst):
        kvm.kv_layer_as_bytes(d).copy_(kvm.kv_layer_as_bytes(s))
    return dst


def remote_decode(model: kvm.TinyTransformer, tokens: torch.Tensor, n_tokens: int) -> List[int]:
    """Host A prefills the prefix, the bytes move, host B decodes."""
    prefix, last = kvm.split_prompt(tokens)
    kv_a = kvm.new_kv_cache(model.config)
    kvm.prefill(model, prefix, kv_a)
    kv_b = ship(model.config, kv_a)
    return kvm.decode(model, kv_b, len(tokens), last, n_tokens)


def test_decode_from_shipped_cache_matches_local_run(small_model: kvm.TinyTransformer) -> None:
    tokens = prompt()
    assert 90 <= len(tokens) <= 110
    local = kvm.generate_local(small_model, tokens, 32)
    assert len(local) == 32
    assert remote_decode(small_model, tokens, 32) == local


def test_decode_depends_on_shipped_bytes(small_model: kvm.TinyTransformer) -> None:
    tokens = prompt()
    local = kvm.generate_local(small_model, tokens, 16)
    empty = kvm.new_kv_cache(SMALL)  # a transfer that moved nothing
    assert kvm.decode(small_model, empty, len(tokens), int(tokens[-1]), 16) != local


def test_decode_from_bfloat16_cache_matches_local_run() -> None:
    config = kvm.ModelConfig(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_seq=160, dtype=torch.bfloat16)
    model = kvm.TinyTransformer(config)
    tokens = prompt(config)
    assert remote_decode(model, tokens, 16) == kvm.generate_local(model, tokens, 16)


def test_one_token_prompt_ships_an_empty_prefix(small_model: kvm.TinyTransformer) -> None:
    tokens = kvm.prompt_tokens("x", SMALL)
    calls: List[int] = []
    prefix, _ = kvm.split_prompt(tokens)
    assert kvm.prefill(small_model, prefix, kvm.new_kv_cache(SMALL), calls.append) is None
    assert calls == list(range(SMALL.n_layers))
    assert remote_decode(small_model, tokens, 8) == kvm.generate_local(small_model, tokens, 8)


def test_on_layer_is_called_in_order_with_the_layer_final(small_model: kvm.TinyTransformer) -> None:
    kv = kvm.new_kv_cache(SMALL)
    seen: List[int] = []
    snapshots: List[bytes] = []

    def on_layer(i: int) -> None:
        seen.append(i)
        snapshots.append(kvm.kv_layer_as_bytes(kv[i]).numpy().tobytes())
        if i + 1 < SMALL.n_layers:  # layer i+1 has not started yet
            assert not kv[i + 1].any()

    prefix, _ = kvm.split_prompt(prompt())
    kvm.prefill(small_model, prefix, kv, on_layer)
    assert seen == list(range(SMALL.n_layers))
    for i, layer in enumerate(kv):
        assert layer[:, :, : len(prefix)].abs().sum() > 0
        assert not layer[:, :, len(prefix) :].any()  # rows past the prefix untouched
        assert snapshots[i] == kvm.kv_layer_as_bytes(layer).numpy().tobytes()


def test_prefill_then_decode_step_matches_one_prefill(small_model: kvm.TinyTransformer) -> None:
    tokens = prompt()
    full = kvm.prefill(small_model, tokens, kvm.new_kv_cache(SMALL))
    kv = kvm.new_kv_cache(SMALL)
    kvm.prefill(small_model, tokens[:-1], kv)
    with torch.no_grad():
        step = small_model.run(tokens[-1:], kv, len(tokens) - 1)
    assert torch.allclose(full, step, atol=1e-4, rtol=1e-4)


def test_same_seed_gives_same_weights_and_tokens() -> None:
    a, b = kvm.TinyTransformer(SMALL), kvm.TinyTransformer(SMALL)
    assert kvm.weights_digest(a) == kvm.weights_digest(b)
    tokens = prompt()
    assert kvm.generate_local(a, tokens, 16) == kvm.generate_local(b, tokens, 16)


def test_model_construction_leaves_global_rng_alone() -> None:
    state = torch.get_rng_state()
    kvm.TinyTransformer(SMALL)
    assert torch.equal(state, torch.get_rng_state())


def test_different_seed_changes_fingerprint_and_weights() -> None:
    other = kvm.ModelConfig(**{**SMALL.__dict__, "seed": SMALL.seed + 1})
    assert other.fingerprint() != SMALL.fingerprint()
    assert kvm.weights_digest(kvm.TinyTransformer(other)) != kvm.weights_digest(kvm.TinyTransformer(SMALL))
    assert kvm.manifest_geometry(other, 10) != kvm.manifest_geometry(SMALL, 10)


def test_manifest_geometry_describes_the_layer_block(small_model: kvm.TinyTransformer) -> None:
    geometry = kvm.manifest_geometry(SMALL, 100, small_model)
    json.dumps(geometry)
    assert geometry["layer_shape"] == [2, 4, 160, 16]
    assert geometry["layer_nbytes"] == 2 * 4 * 160 * 16 * 4 == kvm.kv_layer_nbytes(SMALL)
    assert geometry["dtype"] == "float32"
    assert geometry["prompt_len"] == 100 and geometry["cached_len"] == 99
    assert geometry["block_layout"] == "kv[2][heads][seq][head_dim] row-major"
    assert geometry["config_fingerprint"] == SMALL.fingerprint()
    assert geometry["weights_sha256"] == kvm.weights_digest(small_model)
    bf16 = kvm.ModelConfig(**{**SMALL.__dict__, "dtype": torch.bfloat16})
    assert kvm.kv_layer_nbytes(bf16) * 2 == kvm.kv_layer_nbytes(SMALL)
    with pytest.raises(ValueError):
        kvm.manifest_geometry(SMALL, SMALL.max_seq + 1)


def test_new_kv_cache_views_supplied_memory_without_copy() -> None:
    alloc = BytearrayAlloc()
    kv = kvm.new_kv_cache(SMALL, alloc=alloc)
    assert len(kv) == len(alloc.tensors) == SMALL.n_layers
    for layer, raw, buf in zip(kv, alloc.tensors, alloc.buffers):
        assert layer.shape == kvm.kv_layer_shape(SMALL) and layer.is_contiguous()
        assert layer.data_ptr() == raw.data_ptr()
        layer[1, -1, -1, -1] = 1.0  # the last element lands in the last bytes
        assert bytes(buf[-4:]) == torch.tensor([1.0]).numpy().tobytes()


def test_new_kv_cache_accepts_a_larger_buffer() -> None:
    big = torch.zeros(kvm.kv_layer_nbytes(SMALL) + 64, dtype=torch.uint8)
    assert kvm.new_kv_cache(SMALL, alloc=lambda n: big)[0].data_ptr() == big.data_ptr()


@pytest.mark.parametrize(
    "alloc",
    [
        pytest.param(lambda n: torch.zeros(n - 1, dtype=torch.uint8), id="too-small"),
        pytest.param(lambda n: torch.zeros(n // 4, dtype=torch.float32), id="not-uint8"),
        pytest.param(lambda n: torch.zeros(2 * n, dtype=torch.uint8)[::2], id="not-contiguous"),
        pytest.param(lambda n: torch.zeros(n + 1, dtype=torch.uint8)[1:], id="misaligned"),
    ],
)
def test_new_kv_cache_rejects_unusable_memory(alloc: kvm.Alloc) -> None:
    with pytest.raises(ValueError):
        kvm.new_kv_cache(SMALL, alloc=alloc)


def test_prefill_and_decode_reject_wrong_caches_and_sizes(small_model: kvm.TinyTransformer) -> None:
    other = kvm.ModelConfig(**{**SMALL.__dict__, "n_heads": 8})
    with pytest.raises(ValueError):
        kvm.prefill(small_model, [1, 2, 3], kvm.new_kv_cache(other))
    with pytest.raises(ValueError):
        kvm.decode(small_model, kvm.new_kv_cache(SMALL)[:-1], 4, 1, 1)
    with pytest.raises(ValueError):
        kvm.decode(small_model, kvm.new_kv_cache(SMALL), SMALL.max_seq, 1, 2)
    with pytest.raises(ValueError):
        kvm.prefill(small_model, [SMALL.vocab_size], kvm.new_kv_cache(SMALL))


def test_tokenizer_digest_and_detokenize() -> None:
    tokens = kvm.prompt_tokens("hi\n\xff", SMALL)
    assert tokens.dtype == torch.long and tokens.tolist() == [104, 105, 10, 0xC3, 0xBF]
    assert kvm.detokenize(tokens) == "hi???"
    assert kvm.detokenize([300, 65]) == "?A"
    tiny_vocab = kvm.ModelConfig(**{**SMALL.__dict__, "vocab_size": 100})
    assert kvm.prompt_tokens("h", tiny_vocab).tolist() == [104 % 100]
    expected = hashlib.sha256((104).to_bytes(8, "little") + (105).to_bytes(8, "little")).hexdigest()
    assert kvm.token_digest([104, 105]) == expected == kvm.token_digest(torch.tensor([104, 105]))
    with pytest.raises(ValueError):
        kvm.prompt_tokens("", SMALL)


def test_default_config_prefill_and_decode_run() -> None:
    model = kvm.TinyTransformer(kvm.ModelConfig())
    tokens = kvm.prompt_tokens(PROMPT_TEXT, model.config)
    assert remote_decode(model, tokens, 32) == kvm.generate_local(model, tokens, 32)
