"""mcdma.kv: hand a model's KV cache from one host to another, layer by layer.

A prefill engine on host A publishes the cache of a prompt as it computes
it; a decoder on host B pulls each layer as soon as it is published (while
A computes the next) into buffers it allocated, then decodes without
prefilling the prompt again::

    # host A (producer)
    bufs = kv.allocate_layers(client, layer_nbytes, n_layers)   # compute into these
    with kv.KVExport(client, "req-42", bufs, manifest={"dtype": "bfloat16", ...,
                     "token_digest": digest}, allowed_peers=["host-b"]) as exp:
        for i in range(n_layers):
            ...                                                 # layer i of the prefill
            exp.publish_layer(i)
        exp.wait_consumed(timeout=30)

    # host B (consumer)
    with kv.KVImport(client, "host-a", "req-42", expect={"dtype": "bfloat16", ...},
                     token_digest=digest, deadline=30) as imp:
        stats = imp.pull(on_layer=lambda i: ...)                # or start() + wait_layer(i)
        cache = [torch.frombuffer(b, dtype=torch.bfloat16) for b in imp.buffers]

The manifest is checked before any byte moves. Checksums are the
producer's choice (``KVExport(checksum=True)``; off by default: a pass over
the whole cache on each end): where the producer published a layer's
XXH3-64 (computed in C++, GIL released), the consumer checks it as the
layer lands (``KVImport(verify=True)``, the default). A producer that
dies, a link that drops, a revoked or expired hand-off make ``pull`` fail
within its deadline with a named error, so the engine can prefill locally
instead. The wire protocol is described in ``mcdma._kv_wire``.
"""

from ._kv_export import KVExport, allocate_layers
from ._kv_import import KVImport, KVStats, LayerStats
from ._kv_wire import (ChecksumMismatch, DigestMismatch, HandoffError, HandoffExpired,
                       HandoffLinkDown, HandoffRevoked, HandoffTimeout, ManifestMismatch,
                       ProducerGone)

__all__ = [
    "KVExport", "KVImport", "KVStats", "LayerStats", "allocate_layers",
    "HandoffError", "ManifestMismatch", "DigestMismatch", "HandoffExpired", "HandoffRevoked",
    "ProducerGone", "HandoffLinkDown", "HandoffTimeout", "ChecksumMismatch",
]
