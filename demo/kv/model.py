"""Tiny deterministic transformer: the model half of the KV-cache hand-off demo.

Host A prefills a prompt and publishes each layer's KV cache as soon as that
layer's K/V are written; host B receives the layers into its own memory and
decodes greedily. The demo passes if B's tokens equal a single-host run
(`generate_local`).

What host B needs besides the KV bytes
--------------------------------------
Only the prompt's LAST TOKEN (and prompt_len). The cache that is shipped holds
positions 0..prompt_len-2, i.e. the K/V of ``prompt[:-1]``; `decode` starts by
feeding ``prompt[-1]`` at position prompt_len-1. So B depends on no value A
computed other than the KV bytes (no logits, no "first token"), and B can
check it has the same prompt through `token_digest`. `split_prompt` makes the
split; `generate_local` uses the same split, so both hosts run the very same
code path on the same bytes.

KV cache layout
---------------
Per layer one contiguous tensor ``kv[2][n_heads][max_seq][head_dim]`` (index 0
is K, 1 is V), dtype ``config.dtype``, row-major. A layer is one flat block of
`kv_layer_nbytes` bytes; `new_kv_cache` can place it in caller-owned memory
(e.g. a shared-memory buffer) without copying. Rows past the cached length are
untouched by `prefill`, so the whole block can be shipped as is.

Numerics
--------
Weights and arithmetic are float32; only the cache is stored in
``config.dtype`` (float32, bfloat16 or float16), and attention always reads
K/V back from the cache, so prefill and decode see the same rounded values.
Results are bit-identical for identical inputs on one machine; two hosts with
different CPU kernels (AVX2 vs AVX-512) or thread counts may differ in the last
bits of float sums, which could flip a greedy near-tie. Run the reference
where the comparison is made, with the same torch build, to rule that out.

Threads: nothing here is thread-safe. One thread owns a model and its caches;
`prefill`'s callback runs on that thread and must not write the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

# Bump when the architecture or the weight initialisation changes: it is part
# of the config fingerprint, so old and new decoders refuse each other.
MODEL_FORMAT = "mcdma-demo-tiny-transformer/1"
KV_LAYOUT = "kv[2][heads][seq][head_dim] row-major"

_DTYPES: Dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

Tokens = Union[torch.Tensor, Sequence[int]]
LayerCallback = Callable[[int], None]
Alloc = Callable[[int], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Model geometry and weights seed; immutable and hashable."""

    vocab_size: int = 512  # token ids are 0..vocab_size-1
    d_model: int = 256  # residual width; must be divisible by n_heads
    n_layers: int = 8  # one KV layer block per transformer layer
    n_heads: int = 8
    d_ff: int = 1024  # MLP hidden width
    max_seq: int = 512  # cache capacity in positions (prompt + generated)
    dtype: torch.dtype = torch.float32  # KV cache storage dtype
    seed: int = 0  # weights come only from this seed

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ModelConfig.{name} must be positive")
        if self.d_model % self.n_heads != 0:
            raise ValueError("ModelConfig.d_model must be divisible by n_heads")
        if self.dtype not in _DTYPES.values():
            raise ValueError(f"ModelConfig.dtype must be one of {sorted(_DTYPES)}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def dtype_name(self) -> str:
        return next(name for name, dt in _DTYPES.items() if dt == self.dtype)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces) including MODEL_FORMAT."""
        fields = dataclasses.asdict(self)
        fields["dtype"] = self.dtype_name
        fields["format"] = MODEL_FORMAT
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def fingerprint(self) -> str:
        """sha256 hex of `to_json`: same fingerprint means same intended weights.

        It assumes both sides' torch draws the same numbers from the seed;
        `weights_digest` checks the weights themselves.
        """
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()


class _Block(nn.Module):
    """Pre-norm block. Split in two so the caller can publish K/V in between."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.norm_attn = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.norm_mlp = nn.LayerNorm(d)
        self.up = nn.Linear(d, config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, d, bias=False)

    def write_kv(self, x: torch.Tensor, kv: torch.Tensor, start: int) -> torch.Tensor:
        """Writes K/V of x ([T, d]) at positions start..start+T-1; returns Q [H, T, hd]."""
        t = x.shape[0]
        qkv = self.qkv(self.norm_attn(x)).view(t, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.permute(1, 2, 0, 3)  # each [H, T, hd]
        kv[0, :, start : start + t].copy_(k)
        kv[1, :, start : start + t].copy_(v)
        return q

    def finish(self, x: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, start: int) -> torch.Tensor:
        """Causal attention over cache positions 0..start+T-1, then the MLP."""
        t = x.shape[0]
        end = start + t
        keys = kv[0, :, :end].float()
        values = kv[1, :, :end].float()
        scores = (q @ keys.transpose(-1, -2)) / math.sqrt(self.head_dim)  # [H, T, end]
        query_pos = torch.arange(start, end).unsqueeze(1)
        key_pos = torch.arange(end).unsqueeze(0)
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ values  # [H, T, hd]
        x = x + self.proj(attn.transpose(0, 1).reshape(t, -1))
        return x + self.down(F.gelu(self.up(self.norm_mlp(x))))


class TinyTransformer(nn.Module):
    """Decoder-only transformer with learned positions and a separate LM head.

    The head is untied on purpose: with random weights a tied head mostly
    predicts the token it was fed, and a demo that prints "zzzz..." would pass
    even if the decoder ignored the shipped cache.

    Weights are drawn from a private generator seeded with config.seed, in a
    fixed order, so construction is deterministic and leaves torch's global
    RNG alone. The model is built in eval mode with gradients off.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # torch's default initialisers draw from the global RNG; restore it after.
        with torch.random.fork_rng(devices=[]):
            self.embed = nn.Embedding(config.vocab_size, config.d_model)
            self.pos = nn.Embedding(config.max_seq, config.d_model)
            self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
            self.norm_out = nn.LayerNorm(config.d_model)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()
        self.eval()
        self.requires_grad_(False)

    @torch.no_grad()
    def _init_weights(self) -> None:
        gen = torch.Generator().manual_seed(self.config.seed)
        residual_scale = 1.0 / math.sqrt(2 * self.config.n_layers)
        for module in self.modules():  # registration order: stable across runs
            if isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, 1.0, generator=gen)
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.fill_(0.0)
            elif isinstance(module, nn.Linear):  # weight is [out, in]
                module.weight.normal_(0.0, 1.0 / math.sqrt(module.in_features), generator=gen)
        for block in self.blocks:  # keep the residual stream's scale flat with depth
            block.proj.weight.mul_(residual_scale)
            block.down.weight.mul_(residual_scale)

    def run(
        self,
        tokens: torch.Tensor,
        kv: List[torch.Tensor],
        start: int,
        on_layer: Optional[LayerCallback] = None,
    ) -> torch.Tensor:
        """Runs tokens at positions start.., extending kv; returns last-position logits."""
        positions = torch.arange(start, start + tokens.shape[0])
        x = self.embed(tokens) + self.pos(positions)
        for i, block in enumerate(self.blocks):
            q = block.write_kv(x, kv[i], start)
            if on_layer is not None:
                on_layer(i)  # kv[i] is final for these positions from here on
            x = block.finish(x, q, kv[i], start)
        return self.lm_head(self.norm_out(x[-1]))


# ---- KV cache -----------------------------------------------------------------


def kv_layer_shape(config: ModelConfig) -> Tuple[int, int, int, int]:
    """Shape of one layer's cache: (2, n_heads, max_seq, head_dim)."""
    return (2, config.n_heads, config.max_seq, config.head_dim)


def kv_layer_nbytes(config: ModelConfig) -> int:
    """Bytes of one layer's cache block."""
    return math.prod(kv_layer_shape(config)) * torch.empty((), dtype=config.dtype).element_size()


def new_kv_cache(config: ModelConfig, alloc: Optional[Alloc] = None) -> List[torch.Tensor]:
    """Returns n_layers zero-copy layer tensors of `kv_layer_shape`.

    Without alloc the layers are fresh zeroed torch tensors. With alloc it is
    called once per layer, in layer order, as alloc(kv_layer_nbytes) and must
    return a 1-D contiguous uint8 tensor of at least that many bytes, aligned
    to the dtype; the layer is a view of its first nbytes (the caller keeps
    the memory alive and owns its contents, which are not cleared). Raises
    ValueError when the memory does not fit or a copy would be needed.
    """
    shape = kv_layer_shape(config)
    if alloc is None:
        return [torch.zeros(shape, dtype=config.dtype) for _ in range(config.n_layers)]
    nbytes = kv_layer_nbytes(config)
    return [_view_as_layer(alloc(nbytes), config, nbytes) for _ in range(config.n_layers)]


def _view_as_layer(raw: torch.Tensor, config: ModelConfig, nbytes: int) -> torch.Tensor:
    if not isinstance(raw, torch.Tensor) or raw.dtype != torch.uint8 or raw.dim() != 1:
        raise ValueError("alloc must return a 1-D uint8 torch tensor")
    if not raw.is_contiguous() or raw.numel() < nbytes:
        raise ValueError(f"alloc must return >= {nbytes} contiguous bytes")
    align = torch.empty((), dtype=config.dtype).element_size()
    if raw.data_ptr() % align != 0:
        raise ValueError(f"alloc memory must be {align}-byte aligned")
    layer = raw[:nbytes].view(config.dtype).view(kv_layer_shape(config))
    if layer.data_ptr() != raw.data_ptr():
        raise ValueError("KV layer view is not zero-copy")
    return layer


def kv_layer_as_bytes(layer: torch.Tensor) -> torch.Tensor:
    """Zero-copy flat uint8 view of a contiguous layer (what gets shipped)."""
    if not layer.is_contiguous():
        raise ValueError("KV layer must be contiguous")
    return layer.view(torch.uint8).view(-1)


def _check_cache(config: ModelConfig, kv: List[torch.Tensor]) -> None:
    if len(kv) != config.n_layers:
        raise ValueError(f"expected {config.n_layers} KV layers, got {len(kv)}")
    shape = kv_layer_shape(config)
    for i, layer in enumerate(kv):
        if tuple(layer.shape) != shape or layer.dtype != config.dtype or not layer.is_contiguous():
            raise ValueError(f"KV layer {i} must be a contiguous {config.dtype_name} tensor of shape {shape}")


def _as_tokens(tokens: Tokens, config: ModelConfig) -> torch.Tensor:
    t = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= config.vocab_size):
        raise ValueError(f"token ids must be in [0, {config.vocab_size})")
    return t


# ---- prefill / decode -------------------------------------------------------------


@torch.no_grad()
def prefill(
    model: TinyTransformer,
    tokens: Tokens,
    kv: List[torch.Tensor],
    on_layer: Optional[LayerCallback] = None,
) -> Optional[torch.Tensor]:
    """Fills kv[i][:, :, :len(tokens)] for every layer; returns last-position logits.

    on_layer(i) is called exactly once per layer, in order, right after layer
    i's K/V are written and before layer i+1 starts; prefill never writes
    kv[i] after that call, so the caller may ship it while the rest runs.
    With no tokens nothing is written, on_layer is still called per layer and
    None is returned (a one-token prompt has an empty hand-off prefix).
    """
    cfg = model.config
    _check_cache(cfg, kv)
    t = _as_tokens(tokens, cfg)
    if t.numel() > cfg.max_seq:
        raise ValueError(f"{t.numel()} tokens exceed max_seq {cfg.max_seq}")
    if t.numel() == 0:
        for i in range(cfg.n_layers):
            if on_layer is not None:
                on_layer(i)
        return None
    return model.run(t, kv, 0, on_layer)


def split_prompt(prompt: Tokens) -> Tuple[torch.Tensor, int]:
    """(prefix to prefill on host A, last token host B feeds first)."""
    t = torch.as_tensor(prompt, dtype=torch.long).reshape(-1)
    if t.numel() == 0:
        raise ValueError("prompt must have at least one token")
    return t[:-1], int(t[-1])


@torch.no_grad()
def decode(
    model: TinyTransformer,
    kv: List[torch.Tensor],
    prompt_len: int,
    last_prompt_token: int,
    n_tokens: int,
) -> List[int]:
    """Greedily generates n_tokens, extending kv in place.

    kv must hold the prompt prefix at positions 0..prompt_len-2 (as left by
    `prefill` of ``split_prompt(prompt)[0]``); decoding feeds
    last_prompt_token at position prompt_len-1 and then each generated token.
    Needs prompt_len - 1 + n_tokens <= max_seq.
    """
    cfg = model.config
    _check_cache(cfg, kv)
    if prompt_len < 1 or n_tokens < 0:
        raise ValueError("need prompt_len >= 1 and n_tokens >= 0")
    if prompt_len - 1 + n_tokens > cfg.max_seq:
        raise ValueError(f"prompt_len {prompt_len} + {n_tokens} tokens exceed max_seq {cfg.max_seq}")
    token = int(_as_tokens([last_prompt_token], cfg)[0])
    out: List[int] = []
    for pos in range(prompt_len - 1, prompt_len - 1 + n_tokens):
        logits = model.run(torch.tensor([token]), kv, pos)
        token = int(torch.argmax(logits))
        out.append(token)
    return out


def generate_local(model: TinyTransformer, tokens: Tokens, n_tokens: int) -> List[int]:
    """Single-host reference: same split, prefill and decode as the demo."""
    prefix, last = split_prompt(tokens)
    kv = new_kv_cache(model.config)
    prefill(model, prefix, kv)
    return decode(model, kv, prefix.numel() + 1, last, n_tokens)


# ---- tokens and manifest ---------------------------------------------------------


def prompt_tokens(text: str, config: ModelConfig) -> torch.Tensor:
    """Byte-level tokenizer: UTF-8 bytes mod vocab_size, as a 1-D LongTensor."""
    data = text.encode("utf-8")
    if not data:
        raise ValueError("prompt text must not be empty")
    return torch.tensor([b % config.vocab_size for b in data], dtype=torch.long)


def detokenize(tokens: Tokens) -> str:
    """Printable ASCII bytes as themselves, every other id as '?'."""
    return "".join(chr(t) if 32 <= t < 127 else "?" for t in torch.as_tensor(tokens).reshape(-1).tolist())


def token_digest(tokens: Tokens) -> str:
    """sha256 hex of the token ids as int64 little-endian."""
    ids = torch.as_tensor(tokens, dtype=torch.long).reshape(-1).tolist()
    return hashlib.sha256(b"".join(int(t).to_bytes(8, "little", signed=True) for t in ids)).hexdigest()


def weights_digest(model: TinyTransformer) -> str:
    """sha256 hex over all parameters' bytes in registration order.

    Stronger than the config fingerprint: it also catches two torch builds
    whose RNG would draw different weights from the same seed.
    """
    h = hashlib.sha256()
    for name, param in model.named_parameters():
        h.update(name.encode("utf-8"))
        h.update(param.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def manifest_geometry(
    config: ModelConfig, prompt_len: int, model: Optional[TinyTransformer] = None
) -> Dict[str, object]:
    """Everything a consumer must check before any byte moves (JSON-serialisable).

    A consumer compares every field with its own `manifest_geometry` and
    refuses on any difference. With model, "weights_sha256" is added too
    (about 30 ms for the default config).
    """
    if not 1 <= prompt_len <= config.max_seq:
        raise ValueError(f"prompt_len must be in [1, {config.max_seq}]")
    geometry: Dict[str, object] = {
        "model_format": MODEL_FORMAT,
        "config_fingerprint": config.fingerprint(),
        "seed": config.seed,
        "vocab_size": config.vocab_size,
        "n_layers": config.n_layers,
        "n_heads": config.n_heads,
        "head_dim": config.head_dim,
        "max_seq": config.max_seq,
        "dtype": config.dtype_name,
        "layer_shape": list(kv_layer_shape(config)),
        "layer_nbytes": kv_layer_nbytes(config),
        "block_layout": KV_LAYOUT,
        "prompt_len": prompt_len,
        "cached_len": prompt_len - 1,  # positions 0..prompt_len-2 hold prompt[:-1]
    }
    if model is not None:
        if model.config != config:
            raise ValueError("model was built from a different config")
        geometry["weights_sha256"] = weights_digest(model)
    return geometry
