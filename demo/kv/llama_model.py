"""The small Llama of the MLX hand-off demo, in torch: the prefill host's model.

It computes what mlx-lm's ``llama.Model`` computes (the architecture and the
weights are in llama_spec.py) and keeps its KV cache the way mlx-lm's
``KVCache`` does, so a decoder running mlx-lm can continue from a cache this
model filled: K after the rotary embedding, one block per layer
``kv[2][n_kv_heads][max_seq][head_dim]`` in the config's dtype (see
`llama_spec.kv_layer_shape`), and attention always reads K/V back from the
cache, so prefill sees the same rounded values a later decode sees (mlx-lm
does the same: ``update_and_fetch`` returns the stored arrays).

Numerics: weights and arithmetic are float32, only the cache is stored in
``config.dtype``. torch and MLX sum in different orders, so the K/V this
model writes differ from mlx-lm's own in the last bits of float32 (the
demo prints the largest difference); greedy tokens only differ on a
near-tie of two logits.

Threads: nothing here is thread-safe. One thread owns a model and its
caches; `prefill`'s callback runs on that thread and must not write the
cache.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

import llama_spec as spec

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

LayerCallback = Callable[[int], None]
Alloc = Callable[[int], torch.Tensor]


def torch_dtype(config: spec.LlamaConfig) -> torch.dtype:
    """The KV cache's torch dtype."""
    return _TORCH_DTYPES[config.dtype]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class TorchLlama:
    """The Llama of llama_spec in torch, on CPU, without gradients.

    Holds the parameters as torch views of `llama_spec.init_weights`'s
    arrays (built here unless given), so both hosts' models hold the same
    float32 numbers.
    """

    def __init__(self, config: spec.LlamaConfig,
                 weights: Optional[Dict[str, np.ndarray]] = None) -> None:
        self.config = config
        arrays = spec.init_weights(config) if weights is None else weights
        shapes = dict(spec.weight_shapes(config))
        if set(arrays) != set(shapes):
            raise ValueError("weights do not name the config's parameters")
        self.w: Dict[str, torch.Tensor] = {}
        for name, shape in shapes.items():
            a = np.ascontiguousarray(arrays[name], dtype=np.float32)
            if a.shape != shape:
                raise ValueError(f"weight {name} has shape {a.shape}, the config needs {shape}")
            self.w[name] = torch.from_numpy(a)
        half = config.head_dim // 2
        # Rotary frequencies, mlx-lm's default (non-traditional) convention.
        self.inv_freq = config.rope_theta ** (-torch.arange(0, half, dtype=torch.float32) / half)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [heads, T, head_dim]: dimension i rotates with i + head_dim/2."""
        angles = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]  # [T, half]
        cos, sin = torch.cos(angles), torch.sin(angles)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def _attention(self, i: int, x: torch.Tensor, kv: torch.Tensor, start: int,
                   on_layer: Optional[LayerCallback]) -> torch.Tensor:
        cfg, w, p = self.config, self.w, f"model.layers.{i}."
        t, hd = x.shape[0], cfg.head_dim
        end = start + t
        positions = torch.arange(start, end)
        h = _rms_norm(x, w[p + "input_layernorm.weight"], cfg.rms_norm_eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(t, cfg.n_heads, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(t, cfg.n_kv_heads, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(t, cfg.n_kv_heads, hd).transpose(0, 1)
        q, k = self._rope(q, positions), self._rope(k, positions)
        kv[0, :, start:end].copy_(k)
        kv[1, :, start:end].copy_(v)
        if on_layer is not None:
            on_layer(i)  # kv[i] is final for these positions from here on
        repeat = cfg.n_heads // cfg.n_kv_heads  # query head h reads KV head h // repeat
        keys = kv[0, :, :end].float().repeat_interleave(repeat, dim=0)  # [H, end, hd]
        values = kv[1, :, :end].float().repeat_interleave(repeat, dim=0)
        scores = (q * (hd ** -0.5)) @ keys.transpose(-1, -2)  # [H, T, end]
        causal = torch.arange(end)[None, :] > positions[:, None]
        scores = scores.masked_fill(causal, float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(t, -1)
        return out @ w[p + "self_attn.o_proj.weight"].T

    def _mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        w, p = self.w, f"model.layers.{i}."
        h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], self.config.rms_norm_eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        return (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T

    @torch.no_grad()
    def run(self, tokens: torch.Tensor, kv: List[torch.Tensor], start: int,
            on_layer: Optional[LayerCallback] = None) -> torch.Tensor:
        """Runs tokens at positions start.., extending kv; returns last-position logits."""
        x = self.w["model.embed_tokens.weight"][tokens]
        for i in range(self.config.n_layers):
            x = x + self._attention(i, x, kv[i], start, on_layer)
            x = x + self._mlp(i, x)
        h = _rms_norm(x[-1], self.w["model.norm.weight"], self.config.rms_norm_eps)
        return h @ self.w["lm_head.weight"].T


# ---- KV cache -----------------------------------------------------------------


def new_kv_cache(config: spec.LlamaConfig, alloc: Optional[Alloc] = None) -> List[torch.Tensor]:
    """n_layers zero-copy layer tensors of `llama_spec.kv_layer_shape`.

    Without alloc the layers are fresh zeroed tensors. With alloc it is
    called once per layer, in layer order, as alloc(kv_layer_nbytes) and must
    return a 1-D contiguous uint8 tensor of at least that many bytes, aligned
    to the dtype (e.g. ``torch.frombuffer`` of an mcdma buffer); the layer is
    a view of its first bytes. Raises ValueError when it does not fit.
    """
    shape, dtype = spec.kv_layer_shape(config), torch_dtype(config)
    if alloc is None:
        return [torch.zeros(shape, dtype=dtype) for _ in range(config.n_layers)]
    nbytes = spec.kv_layer_nbytes(config)
    layers = []
    for _ in range(config.n_layers):
        raw = alloc(nbytes)
        if not isinstance(raw, torch.Tensor) or raw.dtype != torch.uint8 or raw.dim() != 1:
            raise ValueError("alloc must return a 1-D uint8 torch tensor")
        if not raw.is_contiguous() or raw.numel() < nbytes:
            raise ValueError(f"alloc must return >= {nbytes} contiguous bytes")
        if raw.data_ptr() % spec.DTYPE_ITEMSIZE[config.dtype] != 0:
            raise ValueError("alloc memory must be aligned to the dtype")
        layers.append(raw[:nbytes].view(dtype).view(shape))
    return layers


def _check_cache(config: spec.LlamaConfig, kv: List[torch.Tensor]) -> None:
    if len(kv) != config.n_layers:
        raise ValueError(f"expected {config.n_layers} KV layers, got {len(kv)}")
    shape = spec.kv_layer_shape(config)
    for i, layer in enumerate(kv):
        if tuple(layer.shape) != shape or layer.dtype != torch_dtype(config) or not layer.is_contiguous():
            raise ValueError(f"KV layer {i} must be a contiguous {config.dtype} tensor of shape {shape}")


def _as_tokens(tokens: Sequence[int], config: spec.LlamaConfig) -> torch.Tensor:
    t = torch.as_tensor(list(tokens), dtype=torch.long).reshape(-1)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= config.vocab_size):
        raise ValueError(f"token ids must be in [0, {config.vocab_size})")
    return t


# ---- prefill / decode ------------------------------------------------------------


def prefill(model: TorchLlama, tokens: Sequence[int], kv: List[torch.Tensor],
            on_layer: Optional[LayerCallback] = None) -> Optional[torch.Tensor]:
    """Fills kv[i][:, :, :len(tokens)] for every layer; returns last-position logits.

    on_layer(i) is called exactly once per layer, in order, right after
    layer i's K/V are written and before its attention reads them; nothing
    writes kv[i] after that call, so the caller may ship it while the rest
    runs. With no tokens nothing is written, on_layer is still called per
    layer and None is returned (a one-token prompt has an empty hand-off).
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


def decode(model: TorchLlama, kv: List[torch.Tensor], prompt_len: int,
           last_prompt_token: int, n_tokens: int) -> List[int]:
    """Greedily generates n_tokens from a cache holding the prompt prefix
    (positions 0..prompt_len-2), feeding last_prompt_token at prompt_len-1."""
    cfg = model.config
    _check_cache(cfg, kv)
    if prompt_len < 1 or n_tokens < 0:
        raise ValueError("need prompt_len >= 1 and n_tokens >= 0")
    if prompt_len - 1 + n_tokens > cfg.max_seq:
        raise ValueError(f"prompt_len {prompt_len} + {n_tokens} tokens exceed max_seq {cfg.max_seq}")
    token = int(_as_tokens([last_prompt_token], cfg)[0])
    out: List[int] = []
    for pos in range(prompt_len - 1, prompt_len - 1 + n_tokens):
        token = int(torch.argmax(model.run(torch.tensor([token]), kv, pos)))
        out.append(token)
    return out


def generate_local(model: TorchLlama, tokens: Sequence[int], n_tokens: int) -> List[int]:
    """Single-host torch reference: the demo's split, prefill and decode."""
    prefix, last = spec.split_prompt(tokens)
    kv = new_kv_cache(model.config)
    prefill(model, prefix, kv)
    return decode(model, kv, len(prefix) + 1, last, n_tokens)

