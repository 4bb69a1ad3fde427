#!/usr/bin/env python3
"""Host A of the KV-cache hand-off demo: prefill a prompt, ship its cache.

The KV cache lives in mcdma buffers from the start: `kv.allocate_layers`
gives one shared-memory buffer per layer and the model's cache tensors are
views of them, so prefill writes K/V straight into the memory host B pulls
from. Each layer is published from prefill's per-layer callback, right
after its K/V are written, so layer i crosses the link while layer i+1
computes. The process then waits until host B has pulled every layer
(the buffers must stay alive until then) and prints its timings.

The hand-off manifest carries the model geometry (`model.manifest_geometry`,
weights digest included) under "model.*" keys, the prompt's token digest and
A's clock at the start of prefill; host B refuses the hand-off before a byte
moves unless the geometry and digest equal its own.

Also the home of what both halves share (model flags, the manifest's model
keys, the default prompt); demo/kv/decode.py imports them from here.

Exit codes: 0 ok, 1 failure (the error's class and message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List

import torch

import mcdma
from mcdma import kv

import model as m

DEFAULT_PROMPT = (
    "Two hosts share one prompt. Host A runs the prefill and writes every "
    "layer's keys and values into shared memory; the daemons carry each "
    "layer to host B while the next one computes, and host B decodes from "
    "the cache it received."
)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """Model flags; both hosts must pass the same ones (the manifest checks)."""
    g = parser.add_argument_group("model (random weights from --seed)")
    g.add_argument("--layers", type=int, default=8, help="transformer layers")
    g.add_argument("--d-model", type=int, default=256, help="residual width")
    g.add_argument("--heads", type=int, default=8, help="attention heads")
    g.add_argument("--max-seq", type=int, default=512, help="KV cache positions")
    g.add_argument("--dtype", choices=sorted(_DTYPES), default="float32",
                   help="KV cache dtype")
    g.add_argument("--seed", type=int, default=0, help="weights seed")


def model_config(args: argparse.Namespace) -> m.ModelConfig:
    return m.ModelConfig(n_layers=args.layers, d_model=args.d_model, n_heads=args.heads,
                         d_ff=4 * args.d_model, max_seq=args.max_seq,
                         dtype=_DTYPES[args.dtype], seed=args.seed)


def model_manifest(config: m.ModelConfig, prompt_len: int, model: m.TinyTransformer) -> Dict[str, object]:
    """`manifest_geometry` under "model.*" keys.

    Prefixed because the hand-off adds keys of its own to the manifest
    ("n_layers", "layer_nbytes" as a per-layer list, ...); the prefix keeps
    the two apart and still lets the consumer name each differing field.
    """
    return {f"model.{k}": v for k, v in m.manifest_geometry(config, prompt_len, model).items()}


def cache_in_buffers(config: m.ModelConfig, buffers: List[mcdma.Buffer]) -> List[torch.Tensor]:
    """The model's KV cache as zero-copy torch views of one buffer per layer."""
    it = iter(buffers)
    return m.new_kv_cache(config, alloc=lambda n: torch.frombuffer(next(it), dtype=torch.uint8))


def describe(config: m.ModelConfig) -> str:
    mib = m.kv_layer_nbytes(config) / (1 << 20)
    return (f"tiny transformer: {config.n_layers} layers, d_model {config.d_model}, "
            f"{config.n_heads} heads, seed {config.seed}; KV cache {config.n_layers} x "
            f"{mib:.2f} MiB {config.dtype_name}")


def run(args: argparse.Namespace) -> None:
    say = lambda s: print(f"host-a: {s}", flush=True)  # noqa: E731
    config = model_config(args)
    model = m.TinyTransformer(config)
    tokens = m.prompt_tokens(args.prompt, config)
    prefix, _ = m.split_prompt(tokens)
    say(describe(config))
    with mcdma.Client(args.socket, app_name="kv-prefill", timeout=args.timeout) as client:
        buffers = kv.allocate_layers(client, m.kv_layer_nbytes(config), config.n_layers)
        cache = cache_in_buffers(config, buffers)
        manifest = model_manifest(config, len(tokens), model)
        manifest["token_digest"] = m.token_digest(tokens)
        t0_unix, t0 = time.time(), time.perf_counter()
        manifest["demo.prefill_t0_unix"] = t0_unix  # lets B place its arrivals on A's timeline
        marks = []  # (K/V written, published) per layer, seconds since t0
        with kv.KVExport(client, args.handoff_id, layers=buffers, manifest=manifest,
                         allowed_peers=[args.peer_host], ttl=args.timeout,
                         checksum=True) as exp:  # B checks every layer (shown per layer)
            say(f"hand-off {args.handoff_id!r} served to {args.peer_host}; prefilling "
                f"{len(prefix)} of {len(tokens)} prompt tokens (the last is B's first input)")

            def on_layer(i: int) -> None:
                written = time.perf_counter() - t0
                exp.publish_layer(i)
                marks.append((written, time.perf_counter() - t0))

            m.prefill(model, prefix, cache, on_layer=on_layer)
            prefill_s = time.perf_counter() - t0
            prev = 0.0
            for i, (written, published) in enumerate(marks):
                say(f"layer {i}: K/V written +{written * 1e3:7.1f} ms "
                    f"(computed in {(written - prev) * 1e3:6.1f} ms), published +{published * 1e3:7.1f} ms")
                prev = published
            publish_s = sum(p - w for w, p in marks)
            say(f"prefill {prefill_s * 1e3:.1f} ms for {config.n_layers} layers "
                f"({prefill_s / config.n_layers * 1e3:.1f} ms/layer), of which publishing "
                f"{publish_s * 1e3:.1f} ms")
            hosts = exp.wait_consumed(count=1, timeout=args.timeout)
            say(f"consumed by {', '.join(hosts)} at +{(time.perf_counter() - t0) * 1e3:.1f} ms; done")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--socket", default=None, help="this host's daemon ($MCDMA_SOCKET if unset)")
    parser.add_argument("--handoff-id", default="demo", help="name of the hand-off")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt text (byte tokens)")
    parser.add_argument("--peer-host", default="host-b", help="host allowed to pull the cache")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the consumer; also the hand-off's TTL")
    add_model_args(parser)
    args = parser.parse_args()
    try:
        run(args)
    except Exception as e:  # noqa: BLE001 - the demo reports every failure the same way
        print(f"host-a: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
