#!/usr/bin/env python3
"""Host A of the MLX hand-off demo: prefill a small Llama in torch, ship its cache.

The torch Llama of llama_model.py (the architecture and seeded weights of
llama_spec.py, which mlx-lm's Llama reproduces) prefills ``prompt[:-1]``
straight into mcdma buffers, one per layer (`kv.allocate_layers`; the cache
tensors are zero-copy views of them), and publishes each layer from
prefill's per-layer callback, right after its K/V are written, so layer i
crosses the link while layer i+1 computes. The manifest carries the model
facts ("model.*", weights digest included), the "kv.*" layout keys
mcdma.mlx converts by, the prompt's token digest and A's clock at the start
of prefill. The process then waits until host B has pulled every layer and
prints its timings.

Exit codes: 0 ok, 1 failure (the error's class and message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import List

import torch

import mcdma
from mcdma import kv

import llama_model as lm
import llama_spec as spec


def cache_in_buffers(config: spec.LlamaConfig, buffers: List[mcdma.Buffer]) -> List[torch.Tensor]:
    """The model's KV cache as zero-copy torch views of one buffer per layer."""
    it = iter(buffers)
    return lm.new_kv_cache(config, alloc=lambda n: torch.frombuffer(next(it), dtype=torch.uint8))


def run(args: argparse.Namespace) -> None:
    say = lambda s: print(f"host-a: {s}", flush=True)  # noqa: E731
    config = spec.config_from_args(args)
    weights = spec.init_weights(config)
    model = lm.TorchLlama(config, weights)
    tokens = spec.prompt_tokens(args.prompt, config)
    prefix, _ = spec.split_prompt(tokens)
    say(f"torch {torch.__version__}; {spec.describe(config)}")
    with mcdma.Client(args.socket, app_name="kv-prefill-llama", timeout=args.timeout) as client:
        buffers = kv.allocate_layers(client, spec.kv_layer_nbytes(config), config.n_layers)
        cache = cache_in_buffers(config, buffers)
        manifest = spec.manifest(config, tokens, weights)
        manifest["token_digest"] = spec.token_digest(tokens)
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

            lm.prefill(model, prefix, cache, on_layer=on_layer)
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
    parser.add_argument("--handoff-id", default="demo-mlx", help="name of the hand-off")
    parser.add_argument("--prompt", default=spec.DEFAULT_PROMPT, help="prompt text (byte tokens)")
    parser.add_argument("--peer-host", default="host-b", help="host allowed to pull the cache")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the consumer; also the hand-off's TTL")
    spec.add_model_args(parser)
    args = parser.parse_args()
    try:
        run(args)
    except Exception as e:  # noqa: BLE001 - the demo reports every failure the same way
        print(f"host-a: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
