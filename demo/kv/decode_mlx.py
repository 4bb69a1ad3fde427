#!/usr/bin/env python3
"""Host B of the MLX hand-off demo: receive a torch prefill's cache, decode with mlx-lm.

Builds mlx-lm's own Llama (``mlx_lm.models.llama.Model``) from the config
and the seeded weights of llama_spec.py (no download: the same numbers host
A's torch model holds), opens A's hand-off with its own manifest and the
prompt's token digest as what it expects (the hand-off refuses, before a
byte moves, when they differ), pulls each layer as soon as A publishes it
and converts it into the model's own ``KVCache`` objects with mcdma.mlx
while the next layers are still in flight. Then mlx-lm's ``generate_step``
decodes N tokens greedily from those caches, feeding the prompt's last
token first; and the same prompt runs on this host in MLX alone (mlx-lm's
prefill and decode into empty caches of the hand-off's dtype and capacity),
and both token lists must be equal.

Needs numpy, mlx, mlx-lm and mcdma; not torch. Prints "tokens match: yes"
and exits 0 when they match; exits 1 on a mismatch or any error (its class
and message on stderr); 2 on usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, List, Sequence

# mlx-lm imports transformers, which warns that it will not use this
# host's torch; the demo uses neither.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import mlx.core as mx  # noqa: E402
import mlx_lm  # noqa: E402
import numpy as np  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models import llama  # noqa: E402

import mcdma  # noqa: E402
import mcdma.mlx as kvmlx  # noqa: E402
from mcdma import kv  # noqa: E402

import llama_spec as spec  # noqa: E402


def say(text: str) -> None:
    print(f"host-b: {text}", flush=True)


def build_model(config: spec.LlamaConfig, weights: dict) -> Any:
    """mlx-lm's Llama with llama_spec's weights (float32), evaluated."""
    model = llama.Model(llama.ModelArgs.from_dict(config.mlx_lm_args()))
    model.load_weights([(name, mx.array(w)) for name, w in weights.items()], strict=True)
    mx.eval(model.parameters())
    return model


def greedy(model: Any, prompt: Sequence[int], caches: List[Any], n_tokens: int) -> List[int]:
    """mlx-lm's own generation loop, greedy: prefills all of `prompt` but
    its last token into `caches` (nothing for one token), then decodes."""
    return [int(token) for token, _ in generate_step(mx.array(list(prompt)), model,
                                                      prompt_cache=caches, max_tokens=n_tokens)]


def max_diff(a: List[Any], b: List[Any], n: int) -> tuple:
    """(largest |a - b|, largest |b|) over the first n positions of every
    layer's K and V."""
    diff = big = 0.0
    for ca, cb in zip(a, b):
        for x, y in ((ca.keys, cb.keys), (ca.values, cb.values)):
            x = np.array(x[..., :n, :].astype(mx.float32))
            y = np.array(y[..., :n, :].astype(mx.float32))
            diff = max(diff, float(np.abs(x - y).max(initial=0.0)))
            big = max(big, float(np.abs(y).max(initial=0.0)))
    return diff, big


def run(args: argparse.Namespace) -> bool:
    config = spec.config_from_args(args)
    weights = spec.init_weights(config)
    model = build_model(config, weights)
    tokens = spec.prompt_tokens(args.prompt, config)
    prefix, last = spec.split_prompt(tokens)
    expect = spec.manifest(config, tokens, weights)
    say(f"mlx {mx.__version__} on {mx.default_device()}, mlx-lm {mlx_lm.__version__}; "
        f"{spec.describe(config)}")
    with mcdma.Client(args.socket, app_name="kv-decode-mlx", timeout=args.timeout) as client:
        # run-kv-demo-mlx.sh starts host A once this line is out.
        say(f"waiting for hand-off {args.handoff_id!r} from {args.peer}")
        open_unix = time.time()  # KVImport's stats count from here
        with kv.KVImport(client, args.peer, args.handoff_id, expect=expect,
                         token_digest=spec.token_digest(tokens), deadline=args.timeout,
                         open_wait=args.open_timeout) as imp:
            a_t0 = imp.manifest.get("demo.prefill_t0_unix")

            def on_a(t: float) -> str:  # t: seconds since the open started
                if not isinstance(a_t0, (int, float)):
                    return f"+{t * 1e3:.1f} ms after open"
                return f"A's prefill +{(open_unix + t - a_t0) * 1e3:.1f} ms"

            layout = kvmlx.KVLayout.from_manifest(imp.manifest)
            say(f"opened at {on_a(imp.stats.open_s)}: manifest matches (model geometry, "
                f"weights digest, token digest); KV layout {layout.layout} {layout.dtype}, "
                f"{layout.cached_len} of {layout.capacity} positions cached")
            imp.start()  # the pull runs on its own thread; layers convert as they land
            caches = model.make_cache()  # mlx-lm's own KVCache objects, one per layer
            convert_s = 0.0
            for i, cache in enumerate(caches):
                landed = imp.wait_layer(i, args.timeout)
                t = time.perf_counter()
                kvmlx.fill_cache(cache, imp.buffers[i], layout)
                took = time.perf_counter() - t
                convert_s += took
                say(f"layer {i}: landed at {on_a(landed.landed_at)}; {landed.nbytes / 1024:.0f} KiB "
                    f"pulled in {landed.pull_s * 1e3:.1f} ms, checksum {landed.verify_s * 1e3:.1f} ms; "
                    f"into KVCache {tuple(cache.keys.shape)} {cache.keys.dtype} offset {cache.offset} "
                    f"in {took * 1e3:.1f} ms")
            stats = imp.wait(args.timeout)
            first = min(layer.landed_at for layer in stats.layers)
            pull_s = sum(layer.pull_s for layer in stats.layers)
            say(f"pull: first layer landed at {on_a(first)}, last at {on_a(stats.total_s)}; "
                f"{stats.bytes / (1 << 20):.2f} MiB read in {pull_s * 1e3:.1f} ms; "
                f"conversion into mlx-lm caches {convert_s * 1e3:.1f} ms")
    t = time.perf_counter()
    remote = greedy(model, [last], caches, args.tokens)
    decode_s = time.perf_counter() - t
    local_caches = kvmlx.empty_caches(layout, config.n_layers)
    t = time.perf_counter()
    local = greedy(model, tokens, local_caches, args.tokens)
    local_s = time.perf_counter() - t
    diff, big = max_diff(caches, local_caches, len(prefix))
    say(f"decode {args.tokens} tokens with mlx-lm from the received cache: {decode_s * 1e3:.1f} ms")
    say(f"local reference (mlx-lm prefill + decode on host-b alone): {local_s * 1e3:.1f} ms")
    say(f"received K/V (torch) vs host-b's own MLX prefill: largest |difference| {diff:.3g} "
        f"(largest |value| {big:.3g})")
    say(f"tokens (received cache): {remote}")
    say(f"tokens (local MLX run):  {local}")
    say(f"text (received cache): {spec.detokenize(remote)!r}")
    say(f"text (local MLX run):  {spec.detokenize(local)!r}")
    match = remote == local
    say(f"tokens match: {'yes' if match else 'NO'}")
    return match


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--socket", default=None, help="this host's daemon ($MCDMA_SOCKET if unset)")
    parser.add_argument("--handoff-id", default="demo-mlx", help="name of the hand-off")
    parser.add_argument("--prompt", default=spec.DEFAULT_PROMPT, help="prompt text; must equal host A's")
    parser.add_argument("--peer", default="host-a", help="the producer's host")
    parser.add_argument("--tokens", type=int, default=32, help="tokens to decode")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of the whole pull, seconds")
    parser.add_argument("--open-timeout", type=float, default=30.0,
                        help="seconds to retry opening while host A does not serve the hand-off yet")
    spec.add_model_args(parser)
    args = parser.parse_args()
    if args.tokens < 1:
        parser.error("--tokens must be >= 1")
    try:
        return 0 if run(args) else 1
    except Exception as e:  # noqa: BLE001 - the demo reports every failure the same way
        print(f"host-b: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
