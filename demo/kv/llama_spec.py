"""The small Llama of the MLX hand-off demo: config, weights, tokens, manifest.

Everything both hosts must agree on, with numpy only (no torch, no MLX), so
the torch prefill host (llama_model.py) and the MLX decode host
(decode_mlx.py) build the same model from the same numbers:

- `LlamaConfig`: geometry, seed and the KV cache dtype; `mlx_lm_args` is
  the same model as mlx-lm's ``llama.ModelArgs``.
- `init_weights`: every parameter drawn from the seed with numpy's PCG64,
  named as mlx-lm's Llama names them (``model.layers.0.self_attn.q_proj.weight``,
  ...), float32, ``[out, in]`` for linear layers. The torch model wraps these
  arrays; the MLX model loads them with ``load_weights``.
- The prompt convention of demo/kv/model.py: byte tokens, the cache holds
  ``prompt[:-1]`` and the decoder feeds ``prompt[-1]`` first (`split_prompt`),
  `token_digest` over int64 little-endian ids (the same bytes as model.py's).
- `manifest_geometry`: the "model.*" facts the consumer checks, and
  `kv_manifest`: the "kv.*" keys mcdma.mlx reads to convert the layers.

The architecture is mlx-lm's Llama: pre-norm blocks with RMSNorm, rotary
position embeddings in mlx-lm's default convention (``rope_traditional``
False: dimension i rotates with dimension i + head_dim/2, frequencies
``rope_theta ** (-2i / head_dim)``), grouped-query attention (query head h
reads KV head ``h // (n_heads / n_kv_heads)``), a SwiGLU MLP
(``down(silu(gate(x)) * up(x))``) and an untied LM head (a tied head with
random weights mostly predicts the token it was fed, so a decoder that
ignored the shipped cache could still look right).

KV cache layout: per layer one block ``kv[2][n_kv_heads][max_seq][head_dim]``
(index 0 K after the rotary embedding, 1 V), row-major, in ``config.dtype``:
mcdma.mlx's head-major layout, the order of mlx-lm's ``KVCache`` arrays.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
from typing import Dict, List, Sequence, Tuple

import numpy as np

# Bump when the architecture or the weight initialisation changes: it is part
# of the config fingerprint, so old and new hosts refuse each other.
MODEL_FORMAT = "mcdma-demo-llama/1"
KV_LAYOUT = "kv[2][kv_heads][seq][head_dim]"  # mcdma.mlx.HEAD_MAJOR
DTYPE_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
DEFAULT_PROMPT = (
    "Host A runs the prefill of a small Llama in torch and writes each "
    "layer's keys and values into shared memory; the daemons carry every "
    "layer to host B while the next one computes, and host B decodes with "
    "mlx-lm from the cache it received."
)


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Model geometry, weights seed and KV cache dtype; immutable and hashable."""

    vocab_size: int = 512  # token ids are 0..vocab_size-1
    hidden_size: int = 256  # residual width
    n_layers: int = 8  # one KV layer block per transformer layer
    n_heads: int = 8  # query heads; head_dim = hidden_size / n_heads
    n_kv_heads: int = 2  # key/value heads (grouped-query attention)
    intermediate_size: int = 768  # SwiGLU hidden width
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq: int = 512  # cache capacity in positions (prompt + generated)
    dtype: str = "float32"  # KV cache storage dtype: float32, bfloat16 or float16
    seed: int = 0  # weights come only from this seed

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "n_layers", "n_heads", "n_kv_heads",
                     "intermediate_size", "max_seq"):
            if getattr(self, name) <= 0:
                raise ValueError(f"LlamaConfig.{name} must be positive")
        if self.hidden_size % self.n_heads != 0:
            raise ValueError("LlamaConfig.hidden_size must be divisible by n_heads")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError("LlamaConfig.n_heads must be divisible by n_kv_heads")
        if self.head_dim % 2 != 0:
            raise ValueError("LlamaConfig: the head size must be even (rotary embedding)")
        if self.dtype not in DTYPE_ITEMSIZE:
            raise ValueError(f"LlamaConfig.dtype must be one of {sorted(DTYPE_ITEMSIZE)}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_heads

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces) including MODEL_FORMAT."""
        fields = dataclasses.asdict(self)
        fields["format"] = MODEL_FORMAT
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def fingerprint(self) -> str:
        """sha256 hex of `to_json`: same fingerprint means same intended weights."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    def mlx_lm_args(self) -> Dict[str, object]:
        """The same model as mlx-lm's ``llama.ModelArgs.from_dict`` arguments."""
        return {
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.n_layers,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.n_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            "vocab_size": self.vocab_size,
            "rope_theta": self.rope_theta,
            "rope_traditional": False,
            "max_position_embeddings": self.max_seq,
            "tie_word_embeddings": False,
        }


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """Model flags; both hosts must pass the same ones (the manifest checks)."""
    g = parser.add_argument_group("model (a small Llama, random weights from --seed)")
    g.add_argument("--layers", type=int, default=8, help="transformer layers")
    g.add_argument("--hidden", type=int, default=256, help="residual width")
    g.add_argument("--heads", type=int, default=8, help="query heads")
    g.add_argument("--kv-heads", type=int, default=2, help="key/value heads")
    g.add_argument("--max-seq", type=int, default=512, help="KV cache positions")
    g.add_argument("--dtype", choices=sorted(DTYPE_ITEMSIZE), default="float32",
                   help="KV cache dtype")
    g.add_argument("--seed", type=int, default=0, help="weights seed")


def config_from_args(args: argparse.Namespace) -> LlamaConfig:
    return LlamaConfig(n_layers=args.layers, hidden_size=args.hidden, n_heads=args.heads,
                       n_kv_heads=args.kv_heads, intermediate_size=3 * args.hidden,
                       max_seq=args.max_seq, dtype=args.dtype, seed=args.seed)


def describe(config: LlamaConfig) -> str:
    kib = kv_layer_nbytes(config) / 1024
    return (f"Llama: {config.n_layers} layers, hidden {config.hidden_size}, {config.n_heads} "
            f"query / {config.n_kv_heads} KV heads of {config.head_dim}, seed {config.seed}; "
            f"KV cache {config.n_layers} x {kib:.0f} KiB {config.dtype}")


# ---- weights -----------------------------------------------------------------------


def weight_shapes(config: LlamaConfig) -> List[Tuple[str, Tuple[int, ...]]]:
    """Every parameter's mlx-lm name and shape, in the order they are drawn."""
    d, hd, i_size = config.hidden_size, config.head_dim, config.intermediate_size
    shapes: List[Tuple[str, Tuple[int, ...]]] = [("model.embed_tokens.weight", (config.vocab_size, d))]
    for i in range(config.n_layers):
        p = f"model.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (d,)),
            (p + "self_attn.q_proj.weight", (config.n_heads * hd, d)),
            (p + "self_attn.k_proj.weight", (config.n_kv_heads * hd, d)),
            (p + "self_attn.v_proj.weight", (config.n_kv_heads * hd, d)),
            (p + "self_attn.o_proj.weight", (d, config.n_heads * hd)),
            (p + "post_attention_layernorm.weight", (d,)),
            (p + "mlp.gate_proj.weight", (i_size, d)),
            (p + "mlp.up_proj.weight", (i_size, d)),
            (p + "mlp.down_proj.weight", (d, i_size)),
        ]
    shapes += [("model.norm.weight", (d,)), ("lm_head.weight", (config.vocab_size, d))]
    return shapes


def init_weights(config: LlamaConfig) -> Dict[str, np.ndarray]:
    """Every parameter as a float32 numpy array, drawn from config.seed.

    Standard normals from ``np.random.default_rng(seed)`` in `weight_shapes`
    order, scaled: embeddings by 1, norm weights as 1 + 0.1 * N (not all
    ones, so swapped norms would show), linear layers by 1/sqrt(fan_in),
    and the two projections back into the residual stream (o_proj,
    down_proj) by a further 1/sqrt(2 * n_layers) so its scale stays flat
    with depth. About 50 ms for the default config.
    """
    rng = np.random.default_rng(config.seed)
    residual = np.float32(1.0 / math.sqrt(2 * config.n_layers))
    weights: Dict[str, np.ndarray] = {}
    for name, shape in weight_shapes(config):
        w = rng.standard_normal(shape, dtype=np.float32)
        if name.endswith("norm.weight"):
            w = np.float32(1.0) + np.float32(0.1) * w
        elif name != "model.embed_tokens.weight":
            w *= np.float32(1.0 / math.sqrt(shape[1]))
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                w *= residual
        weights[name] = w
    return weights


def weights_digest(weights: Dict[str, np.ndarray]) -> str:
    """sha256 hex over every parameter's name and float32 bytes, in name order.

    Stronger than the config fingerprint: it also catches two numpy builds
    that would draw different numbers from the same seed.
    """
    h = hashlib.sha256()
    for name in sorted(weights):
        h.update(name.encode("utf-8"))
        h.update(np.ascontiguousarray(weights[name], dtype=np.float32).tobytes())
    return h.hexdigest()


# ---- KV cache blocks -----------------------------------------------------------------


def kv_layer_shape(config: LlamaConfig) -> Tuple[int, int, int, int]:
    """Shape of one layer's cache block: (2, n_kv_heads, max_seq, head_dim)."""
    return (2, config.n_kv_heads, config.max_seq, config.head_dim)


def kv_layer_nbytes(config: LlamaConfig) -> int:
    """Bytes of one layer's cache block."""
    return math.prod(kv_layer_shape(config)) * DTYPE_ITEMSIZE[config.dtype]


# ---- tokens ----------------------------------------------------------------------------


def prompt_tokens(text: str, config: LlamaConfig) -> List[int]:
    """Byte-level tokenizer: UTF-8 bytes mod vocab_size (as demo/kv/model.py)."""
    data = text.encode("utf-8")
    if not data:
        raise ValueError("prompt text must not be empty")
    return [b % config.vocab_size for b in data]


def split_prompt(prompt: Sequence[int]) -> Tuple[List[int], int]:
    """(prefix the prefill host caches, last token the decoder feeds first)."""
    ids = [int(t) for t in prompt]
    if not ids:
        raise ValueError("prompt must have at least one token")
    return ids[:-1], ids[-1]


def token_digest(tokens: Sequence[int]) -> str:
    """sha256 hex of the token ids as int64 little-endian (model.py's digest)."""
    return hashlib.sha256(b"".join(int(t).to_bytes(8, "little", signed=True)
                                   for t in tokens)).hexdigest()


def detokenize(tokens: Sequence[int]) -> str:
    """Printable ASCII bytes as themselves, every other id as '?'."""
    return "".join(chr(t) if 32 <= t < 127 else "?" for t in tokens)


# ---- manifest ---------------------------------------------------------------------------


def manifest_geometry(config: LlamaConfig, prompt_len: int,
                      weights: Dict[str, np.ndarray]) -> Dict[str, object]:
    """The model facts a consumer must check before any byte moves, under
    "model.*" keys (the hand-off adds keys of its own, such as "n_layers")."""
    if not 1 <= prompt_len <= config.max_seq:
        raise ValueError(f"prompt_len must be in [1, {config.max_seq}]")
    geometry: Dict[str, object] = {
        "model_format": MODEL_FORMAT,
        "config_fingerprint": config.fingerprint(),
        "seed": config.seed,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "n_layers": config.n_layers,
        "n_heads": config.n_heads,
        "n_kv_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "rope_theta": config.rope_theta,
        "prompt_len": prompt_len,
        "weights_sha256": weights_digest(weights),
    }
    return {f"model.{k}": v for k, v in geometry.items()}


def kv_manifest(config: LlamaConfig, prompt_len: int) -> Dict[str, object]:
    """The "kv.*" keys mcdma.mlx converts the layers by (see its docstring):
    the head-major block, its dtype and geometry, and the cached length
    (prompt_len - 1: the cache holds ``prompt[:-1]``)."""
    if not 1 <= prompt_len <= config.max_seq:
        raise ValueError(f"prompt_len must be in [1, {config.max_seq}]")
    return {
        "kv.layout": KV_LAYOUT,
        "kv.dtype": config.dtype,
        "kv.n_kv_heads": config.n_kv_heads,
        "kv.head_dim": config.head_dim,
        "kv.capacity": config.max_seq,
        "kv.cached_len": prompt_len - 1,
    }


def manifest(config: LlamaConfig, tokens: Sequence[int],
             weights: Dict[str, np.ndarray]) -> Dict[str, object]:
    """What the producer publishes and the consumer expects, token digest
    aside: `manifest_geometry` and `kv_manifest` together."""
    return {**manifest_geometry(config, len(tokens), weights), **kv_manifest(config, len(tokens))}
