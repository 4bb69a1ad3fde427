#!/usr/bin/env python3
"""Host B of the KV-cache hand-off demo: receive the cache, decode, compare.

Builds the same model as host A (same flags, same seed), opens A's hand-off
with its own `manifest_geometry` and the prompt's token digest as what it
expects (the hand-off refuses, before allocating or moving a byte, when
they differ), pulls each layer into its own mcdma buffers as soon as A
publishes it, and decodes N tokens greedily from that cache, viewed
zero-copy as torch tensors. Then it runs the whole thing locally
(`generate_local`: prefill and decode on this host alone) and checks both
token lists are identical.

Both hosts start at about the same time, so opening is retried while no
producer serves the hand-off yet, for --open-timeout seconds.

Prints "tokens match: yes" and exits 0 when they match; exits 1 on a
mismatch or any error (its class and message on stderr); 2 on usage.
"""

from __future__ import annotations

import argparse
import sys
import time

import mcdma
from mcdma import kv

import model as m
from prefill import (DEFAULT_PROMPT, add_model_args, cache_in_buffers, describe, model_config,
                     model_manifest)


def say(text: str) -> None:
    print(f"host-b: {text}", flush=True)


def run(args: argparse.Namespace) -> bool:
    config = model_config(args)
    model = m.TinyTransformer(config)
    tokens = m.prompt_tokens(args.prompt, config)
    _, last = m.split_prompt(tokens)
    expect = model_manifest(config, len(tokens), model)
    say(describe(config))
    with mcdma.Client(args.socket, app_name="kv-decode", timeout=args.timeout) as client:
        # run-kv-demo.sh starts host A once this line is out.
        say(f"waiting for hand-off {args.handoff_id!r} from {args.peer}")
        open_unix = time.time()  # KVImport's stats count from here
        # open_wait: A may not serve the hand-off yet (both start together).
        with kv.KVImport(client, args.peer, args.handoff_id, expect=expect,
                         token_digest=m.token_digest(tokens), deadline=args.timeout,
                         open_wait=args.open_timeout) as imp:
            # Times on A's timeline: A puts its clock at prefill start in the
            # manifest, and both hosts share this machine's clock here.
            a_t0 = imp.manifest.get("demo.prefill_t0_unix")

            def on_a(t: float) -> str:  # t: seconds since the open started
                if not isinstance(a_t0, (int, float)):
                    return f"+{t * 1e3:.1f} ms after open"
                return f"A's prefill +{(open_unix + t - a_t0) * 1e3:.1f} ms"

            say(f"opened at {on_a(imp.stats.open_s)}: manifest matches "
                f"(model geometry, weights digest, token digest)")
            cache = cache_in_buffers(config, imp.buffers)
            stats = imp.pull()
            for layer in stats.layers:
                say(f"layer {layer.index}: landed at {on_a(layer.landed_at)}; "
                    f"{layer.nbytes / (1 << 20):.2f} MiB pulled in {layer.pull_s * 1e3:.1f} ms, "
                    f"checksum {layer.verify_s * 1e3:.1f} ms")
            first = min(layer.landed_at for layer in stats.layers)
            pull_s = sum(layer.pull_s for layer in stats.layers)
            say(f"pull: first layer landed at {on_a(first)}, last at {on_a(stats.total_s)}; "
                f"{stats.bytes / (1 << 20):.1f} MiB read in {pull_s * 1e3:.1f} ms "
                f"({stats.bytes / pull_s / 1e9:.2f} GB/s while reading)")

            t = time.perf_counter()
            remote = m.decode(model, cache, len(tokens), last, args.tokens)
            decode_s = time.perf_counter() - t
    t = time.perf_counter()
    local = m.generate_local(model, tokens, args.tokens)
    local_s = time.perf_counter() - t
    say(f"decode {args.tokens} tokens from the received cache: {decode_s * 1e3:.1f} ms")
    say(f"local reference (prefill + decode on host-b alone): {local_s * 1e3:.1f} ms")
    say(f"tokens (received cache): {remote}")
    say(f"tokens (local run):      {local}")
    say(f"text (received cache): {m.detokenize(remote)!r}")
    say(f"text (local run):      {m.detokenize(local)!r}")
    match = remote == local
    say(f"tokens match: {'yes' if match else 'NO'}")
    return match


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--socket", default=None, help="this host's daemon ($MCDMA_SOCKET if unset)")
    parser.add_argument("--handoff-id", default="demo", help="name of the hand-off")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt text; must equal host A's")
    parser.add_argument("--peer", default="host-a", help="the producer's host")
    parser.add_argument("--tokens", type=int, default=32, help="tokens to decode")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of the whole pull, seconds")
    parser.add_argument("--open-timeout", type=float, default=30.0,
                        help="seconds to retry opening while host A does not serve the hand-off yet")
    add_model_args(parser)
    args = parser.parse_args()
    try:
        return 0 if run(args) else 1
    except Exception as e:  # noqa: BLE001 - the demo reports every failure the same way
        print(f"host-b: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
