"""mcdma.mlx: hand-off layers into mlx-lm's own KV caches.

The conversion on bytes (each dtype, both layouts, casts, every refusal),
mlx-lm decoding from a cache rebuilt from bytes, a hand-off between two
real daemons converted as it streams, and the demo's torch Llama against
mlx-lm's. Skips (with the reason) where mlx, mlx-lm or torch is missing;
the import-error test runs everywhere.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import subprocess
import sys
from typing import Dict, List, Tuple

import numpy as np
import pytest

import mcdma
from mcdma import kv
from conftest import uniq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "demo" / "kv"))
import llama_spec as spec  # noqa: E402

_WHY = "needs the mlx and mlx-lm packages (the dev venv of scripts/install-deps.sh has them)"


def _mlx():
    """(mx, mcdma.mlx, mlx-lm's cache module), or a skip naming what is
    missing; with MCDMA_REQUIRE_MLX=1 a missing package fails instead."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for module, package in (("mlx.core", "mlx"), ("mlx_lm", "mlx-lm")):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            why = f"{package} is not installed for {sys.executable}: mcdma.mlx {_WHY}"
            if os.environ.get("MCDMA_REQUIRE_MLX") == "1":
                pytest.fail(f"MCDMA_REQUIRE_MLX=1 but {why}")
            pytest.skip(why)
    import mlx.core as mx
    import mcdma.mlx as kvmlx
    from mlx_lm.models import cache as mlx_cache
    return mx, kvmlx, mlx_cache


def layout_of(kvmlx, layout: str = "kv[2][kv_heads][seq][head_dim]", dtype: str = "float32",
              heads: int = 2, head_dim: int = 8, capacity: int = 16, cached: int = 11):
    return kvmlx.KVLayout(layout, dtype, heads, head_dim, capacity, cached)


def values(shape: Tuple[int, ...], seed: int) -> np.ndarray:
    """Float32 multiples of 1/8 in [-8, 8]: exact in float16 and bfloat16."""
    return np.random.default_rng(seed).integers(-64, 65, size=shape).astype(np.float32) / 8


def encode(x: np.ndarray, dtype: str) -> bytes:
    """x's bytes in dtype (bfloat16: the top half of each float32)."""
    if dtype == "bfloat16":
        return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.ascontiguousarray(x, np.dtype(dtype)).tobytes()


def as_numpy(mx, a) -> np.ndarray:
    """An mx array as float32 numpy (bfloat16 through its bits, exactly)."""
    if a.dtype == mx.bfloat16:
        bits = np.array(a.view(mx.uint16)).astype(np.uint32) << 16
        return bits.view(np.float32)
    return np.array(a.astype(mx.float32))


# ---- conversion on bytes ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_head_major_block_becomes_the_cache_as_it_is(dtype):
    mx, kvmlx, mlx_cache = _mlx()
    lay = layout_of(kvmlx, dtype=dtype)
    src = values(lay.block_shape, 1)
    buf = bytearray(encode(src, dtype)) + bytearray(100)  # a buffer may be larger
    cache = kvmlx.fill_cache(mlx_cache.KVCache(), buf, lay)
    assert cache.offset == 11 and cache.keys.shape == (1, 2, 16, 8) == cache.values.shape
    assert cache.keys.dtype == lay.mx_dtype == getattr(mx, dtype)
    assert np.array_equal(as_numpy(mx, cache.keys)[0], src[0])
    assert np.array_equal(as_numpy(mx, cache.values)[0], src[1])
    keys, vals = cache.keys_and_values()  # what attention reads: the cached rows
    assert keys.shape == (1, 2, 11, 8) and np.array_equal(as_numpy(mx, vals)[0], src[1][:, :11])
    buf[:] = bytes(len(buf))  # the cache owns a copy: the buffer may be reused
    assert np.array_equal(as_numpy(mx, cache.keys)[0], src[0])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_token_major_block_is_transposed_to_heads_first(dtype):
    mx, kvmlx, mlx_cache = _mlx()
    lay = layout_of(kvmlx, layout=kvmlx.TOKEN_MAJOR, dtype=dtype, heads=3, capacity=32, cached=32)
    assert lay.block_shape == (2, 32, 3, 8)
    src = values(lay.block_shape, 2)
    cache = kvmlx.fill_cache(mlx_cache.KVCache(), encode(src, dtype), lay)
    assert cache.keys.shape == (1, 3, 32, 8) and cache.offset == 32
    assert np.array_equal(as_numpy(mx, cache.keys)[0], src[0].transpose(1, 0, 2))
    assert np.array_equal(as_numpy(mx, cache.values)[0], src[1].transpose(1, 0, 2))


@pytest.mark.parametrize("src_dtype,to", [("float16", "float32"), ("bfloat16", "float32"),
                                          ("float32", "bfloat16")])
def test_dtype_argument_converts(src_dtype, to):
    mx, kvmlx, mlx_cache = _mlx()
    lay = layout_of(kvmlx, dtype=src_dtype)
    src = values(lay.block_shape, 3)
    cache = kvmlx.fill_cache(mlx_cache.KVCache(), encode(src, src_dtype), lay, dtype=getattr(mx, to))
    assert cache.keys.dtype == getattr(mx, to) == cache.values.dtype
    assert np.array_equal(as_numpy(mx, cache.values)[0], src[1])


def test_manifest_round_trip_and_buffers():
    mx, kvmlx, mlx_cache = _mlx()
    lay = layout_of(kvmlx, dtype="float16")
    m = lay.to_manifest()
    assert m == {"kv.layout": kvmlx.HEAD_MAJOR, "kv.dtype": "float16", "kv.n_kv_heads": 2,
                 "kv.head_dim": 8, "kv.capacity": 16, "kv.cached_len": 11}
    assert kvmlx.KVLayout.from_manifest({**m, "other": 1}) == lay
    srcs = [values(lay.block_shape, 10 + i) for i in range(3)]
    caches = kvmlx.caches_from_buffers([encode(s, "float16") for s in srcs], {**m, "n_layers": 3})
    assert all(isinstance(c, mlx_cache.KVCache) and c.offset == 11 for c in caches)
    for c, s in zip(caches, srcs):
        assert np.array_equal(as_numpy(mx, c.keys)[0], s[0])
    empty = kvmlx.empty_caches(lay, 2)
    assert [c.offset for c in empty] == [0, 0]
    assert empty[0].keys.shape == (1, 2, 16, 8) and empty[0].keys.dtype == mx.float16
    assert not as_numpy(mx, empty[1].values).any()


@pytest.mark.parametrize("change,message", [
    ({"kv.layout": "kv[2][seq][head_dim][kv_heads]"}, "cannot convert layout"),
    ({"kv.dtype": "int8"}, "cannot convert dtype 'int8'"),
    ({"kv.dtype": "torch.float16"}, "supported: bfloat16, float16, float32"),
    ({"kv.n_kv_heads": 0}, "n_kv_heads must be a positive integer"),
    ({"kv.head_dim": True}, "head_dim must be a positive integer"),
    ({"kv.capacity": 8.0}, "capacity must be a positive integer"),
    ({"kv.cached_len": 17}, r"cached_len must be an integer in \[0, capacity=16\]"),
    ({"kv.cached_len": -1}, "cached_len must be"),
])
def test_layouts_it_cannot_convert_are_refused(change, message):
    _, kvmlx, _ = _mlx()
    manifest = {**layout_of(kvmlx).to_manifest(), **change}
    with pytest.raises(ValueError, match=message):
        kvmlx.KVLayout.from_manifest(manifest)


def test_bad_buffers_caches_and_counts_are_refused():
    mx, kvmlx, mlx_cache = _mlx()
    lay = layout_of(kvmlx)
    m = lay.to_manifest()
    with pytest.raises(ValueError, match=r"lacks kv\.dtype, kv\.cached_len"):
        kvmlx.KVLayout.from_manifest({k: v for k, v in m.items() if k not in ("kv.dtype", "kv.cached_len")})
    with pytest.raises(ValueError, match=f"holds {lay.layer_nbytes - 1} bytes; .* needs {lay.layer_nbytes}"):
        kvmlx.fill_cache(mlx_cache.KVCache(), bytes(lay.layer_nbytes - 1), lay)
    with pytest.raises(TypeError, match="not RotatingKVCache"):
        kvmlx.fill_cache(mlx_cache.RotatingKVCache(max_size=16), bytes(lay.layer_nbytes), lay)
    full = bytes(lay.layer_nbytes)
    with pytest.raises(ValueError, match="2 layers, 1 caches given"):
        kvmlx.caches_from_buffers([full, full], m, caches=[mlx_cache.KVCache()])
    with pytest.raises(ValueError, match="the manifest says 3 layers, 2 buffers given"):
        kvmlx.caches_from_buffers([full, full], {**m, "n_layers": 3})
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        kvmlx.empty_caches(lay, 0)


@pytest.mark.parametrize("blocked", ["mlx", "mlx_lm"])
def test_import_without_mlx_names_the_missing_package(blocked):
    """Runs with any interpreter: the package is hidden when it is installed."""
    if blocked == "mlx_lm" and importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed: without it the import fails on mlx, not mlx-lm")
    code = f"import sys; sys.modules[{blocked!r}] = None\nimport mcdma.mlx"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    package = "mlx-lm" if blocked == "mlx_lm" else "mlx"
    assert f"ImportError: mcdma.mlx needs the '{package}' package" in r.stderr, r.stderr


# ---- mlx-lm decodes from a rebuilt cache -------------------------------------------------

SMALL = spec.LlamaConfig(vocab_size=128, hidden_size=64, n_layers=2, n_heads=4, n_kv_heads=2,
                         intermediate_size=128, max_seq=96, seed=3)
PROMPT = "A prompt of some sixty bytes for the small Llama of the tests."


def mlx_model(config: spec.LlamaConfig):
    mx, _, _ = _mlx()
    from mlx_lm.models import llama
    model = llama.Model(llama.ModelArgs.from_dict(config.mlx_lm_args()))
    model.load_weights([(k, mx.array(v)) for k, v in spec.init_weights(config).items()], strict=True)
    mx.eval(model.parameters())
    return model


def greedy(model, prompt: List[int], caches, n: int) -> List[int]:
    mx, _, _ = _mlx()
    from mlx_lm.generate import generate_step
    return [int(t) for t, _ in generate_step(mx.array(prompt), model, prompt_cache=caches, max_tokens=n)]


def mlx_prefill_blocks(model, config: spec.LlamaConfig, prefix: List[int]) -> List[bytes]:
    """A producer in MLX: prefill prefix, each layer as a head-major block's bytes."""
    mx, kvmlx, _ = _mlx()
    lay = kvmlx.KVLayout.from_manifest(spec.kv_manifest(config, len(prefix) + 1))
    caches = kvmlx.empty_caches(lay, config.n_layers)
    model(mx.array(prefix)[None], cache=caches)
    blocks = []
    for c in caches:
        block = np.stack([as_numpy(mx, c.keys)[0], as_numpy(mx, c.values)[0]])
        blocks.append(encode(block, config.dtype))
    return blocks


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_mlx_lm_decodes_from_caches_rebuilt_from_bytes(dtype):
    _, kvmlx, _ = _mlx()
    config = dataclasses.replace(SMALL, dtype=dtype)
    model = mlx_model(config)
    tokens = spec.prompt_tokens(PROMPT, config)
    prefix, last = spec.split_prompt(tokens)
    lay = kvmlx.KVLayout.from_manifest(spec.kv_manifest(config, len(tokens)))
    local = greedy(model, tokens, kvmlx.empty_caches(lay, config.n_layers), 16)
    blocks = mlx_prefill_blocks(model, config, prefix)
    caches = kvmlx.caches_from_buffers(blocks, spec.kv_manifest(config, len(tokens)),
                                       caches=model.make_cache())
    assert greedy(model, [last], caches, 16) == local
    # The cache matters: the same decode from zeroed blocks goes elsewhere.
    zeros = kvmlx.caches_from_buffers([bytes(len(b)) for b in blocks],
                                      spec.kv_manifest(config, len(tokens)))
    assert greedy(model, [last], zeros, 16) != local


# ---- across two real daemons -----------------------------------------------------------------


@pytest.fixture
def pair(two_hosts):
    a = mcdma.Client(socket=two_hosts.a.socket, app_name="mlx-producer")
    b = mcdma.Client(socket=two_hosts.b.socket, app_name="mlx-consumer")
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("layout,dtype", [("head", "bfloat16"), ("token", "float16")])
def test_handoff_streams_into_mlx_lm_caches(pair, layout, dtype):
    mx, kvmlx, mlx_cache = _mlx()
    a, b = pair
    name = kvmlx.HEAD_MAJOR if layout == "head" else kvmlx.TOKEN_MAJOR
    lay = layout_of(kvmlx, layout=name, dtype=dtype, heads=4, head_dim=32, capacity=256, cached=200)
    srcs = [values(lay.block_shape, 20 + i) for i in range(4)]
    layers = [np.frombuffer(encode(s, dtype), dtype=np.uint8) for s in srcs]
    hid = uniq("mlx")
    landed: List[int] = []
    with kv.KVExport(a, hid, layers, manifest=lay.to_manifest(), allowed_peers=["host-b"]) as exp:
        with kv.KVImport(b, "host-a", hid, expect=lay.to_manifest(), deadline=30) as imp:
            imp.start()
            exp.publish_layer(0)  # each next layer is published once this one converted

            def on_layer(i: int) -> None:
                landed.append(i)
                if i + 1 < len(layers):
                    exp.publish_layer(i + 1)

            caches = kvmlx.caches_from_import(imp, timeout=30, on_layer=on_layer)
    assert landed == [0, 1, 2, 3]
    for cache, src in zip(caches, srcs):
        assert isinstance(cache, mlx_cache.KVCache) and cache.offset == 200
        expect_k = src[0] if layout == "head" else src[0].transpose(1, 0, 2)
        expect_v = src[1] if layout == "head" else src[1].transpose(1, 0, 2)
        assert np.array_equal(as_numpy(mx, cache.keys)[0], expect_k)
        assert np.array_equal(as_numpy(mx, cache.values)[0], expect_v)


def test_mlx_lm_decodes_from_a_handoff_between_daemons(pair):
    _, kvmlx, _ = _mlx()
    a, b = pair
    config = dataclasses.replace(SMALL, dtype="bfloat16")
    model = mlx_model(config)
    tokens = spec.prompt_tokens(PROMPT, config)
    prefix, last = spec.split_prompt(tokens)
    manifest: Dict[str, object] = spec.manifest(config, tokens, spec.init_weights(config))
    blocks = [np.frombuffer(bl, dtype=np.uint8) for bl in mlx_prefill_blocks(model, config, prefix)]
    hid = uniq("mlx-decode")
    with kv.KVExport(a, hid, blocks, manifest={**manifest, "token_digest": spec.token_digest(tokens)},
                     allowed_peers=["host-b"]) as exp:
        for i in range(config.n_layers):
            exp.publish_layer(i)
        with kv.KVImport(b, "host-a", hid, expect=manifest, token_digest=spec.token_digest(tokens),
                         deadline=30) as imp:
            imp.pull()  # finished before the conversion: wait_layer returns at once
            caches = kvmlx.caches_from_import(imp, caches=model.make_cache(), timeout=5)
    lay = kvmlx.KVLayout.from_manifest(manifest)
    local = greedy(model, tokens, kvmlx.empty_caches(lay, config.n_layers), 16)
    assert greedy(model, [last], caches, 16) == local


# ---- the demo's torch Llama is mlx-lm's Llama -------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_llama_computes_what_mlx_lm_computes(dtype):
    mx, kvmlx, _ = _mlx()
    torch = pytest.importorskip("torch", reason="the demo's prefill model needs torch")
    import llama_model as lm
    config = dataclasses.replace(SMALL, dtype=dtype)
    tokens = spec.prompt_tokens(PROMPT, config)
    prefix, last = spec.split_prompt(tokens)
    tm = lm.TorchLlama(config)
    kv_torch = lm.new_kv_cache(config)
    lm.prefill(tm, prefix, kv_torch)
    model = mlx_model(config)
    mlx_blocks = mlx_prefill_blocks(model, config, prefix)
    n = len(prefix)
    manifest = spec.kv_manifest(config, len(tokens))
    torch_bytes = [layer.view(torch.uint8).reshape(-1).numpy() for layer in kv_torch]  # no copy
    from_torch = kvmlx.caches_from_buffers(torch_bytes, manifest)
    from_mlx = kvmlx.caches_from_buffers(mlx_blocks, manifest)
    tol = 1e-4 if dtype == "float32" else 5e-2  # float32 sums; one bfloat16 step at |x| < 8
    for ct, cm in zip(from_torch, from_mlx):
        for x, y in ((ct.keys, cm.keys), (ct.values, cm.values)):
            diff = np.abs(as_numpy(mx, x)[0][:, :n] - as_numpy(mx, y)[0][:, :n]).max()
            assert diff < tol
    assert greedy(model, [last], from_torch, 16) == lm.generate_local(tm, tokens, 16)


# ---- the demo's shared spec and torch prefill (no MLX needed) ------------------------------------


def test_spec_weights_are_seeded_and_named_as_mlx_lm_names_them():
    w1, w2 = spec.init_weights(SMALL), spec.init_weights(SMALL)
    assert spec.weights_digest(w1) == spec.weights_digest(w2)
    assert spec.weights_digest(spec.init_weights(dataclasses.replace(SMALL, seed=4))) != spec.weights_digest(w1)
    assert [(k, v.shape) for k, v in w1.items()] == spec.weight_shapes(SMALL)
    assert w1["model.layers.1.self_attn.k_proj.weight"].shape == (2 * 16, 64)  # GQA: 2 KV heads
    assert all(v.dtype == np.float32 for v in w1.values())
    with pytest.raises(ValueError, match="n_heads must be divisible by n_kv_heads"):
        dataclasses.replace(SMALL, n_kv_heads=3)
    with pytest.raises(ValueError, match="dtype must be one of"):
        dataclasses.replace(SMALL, dtype="int8")


def test_spec_token_digest_is_the_torch_demos():
    pytest.importorskip("torch", reason="demo/kv/model.py needs torch")
    import model as tiny
    tokens = spec.prompt_tokens(PROMPT, SMALL)
    assert spec.token_digest(tokens) == tiny.token_digest(tokens)
    assert spec.split_prompt(tokens) == (tokens[:-1], tokens[-1])
    m = spec.manifest(SMALL, tokens, spec.init_weights(SMALL))
    assert m["kv.cached_len"] == len(tokens) - 1 and m["kv.capacity"] == SMALL.max_seq
    assert m["kv.layout"] == "kv[2][kv_heads][seq][head_dim]" and m["model.n_kv_heads"] == 2


def test_torch_prefill_publishes_each_layer_final_and_in_order():
    torch = pytest.importorskip("torch", reason="the demo's prefill model needs torch")
    import llama_model as lm
    model = lm.TorchLlama(SMALL)
    kv_cache = lm.new_kv_cache(SMALL)
    prefix, _ = spec.split_prompt(spec.prompt_tokens(PROMPT, SMALL))
    seen: List[int] = []
    snapshots: List[bytes] = []

    def on_layer(i: int) -> None:
        seen.append(i)
        snapshots.append(kv_cache[i].view(torch.uint8).numpy().tobytes())
        if i + 1 < SMALL.n_layers:
            assert not kv_cache[i + 1].any()  # layer i+1 has not started

    lm.prefill(model, prefix, kv_cache, on_layer)
    assert seen == list(range(SMALL.n_layers))
    for i, layer in enumerate(kv_cache):
        assert layer[:, :, :len(prefix)].abs().sum() > 0 and not layer[:, :, len(prefix):].any()
        assert snapshots[i] == layer.view(torch.uint8).numpy().tobytes()
    with pytest.raises(ValueError, match="KV layer 0 must be a contiguous float32 tensor"):
        lm.prefill(model, prefix, [torch.zeros(1)] * SMALL.n_layers)
