"""What both ends of a KV hand-off agree on: names, messages, errors.

A hand-off ``ID`` published by a producer app on host A:

* service ``mcdma.kv.ID`` on A's client answers JSON calls:
  ``{"op": "open", "host": H, "notify": S}`` registers a consumer (its
  notifications go to ``H/S``) and replies ``{"state": "open", "manifest":
  M, "published": [EVENT...]}``, or ``{"state": "closed"|"expired"|
  "revoked", "reason": ...}``; ``{"op": "status"}`` replies the state;
  ``{"op": "done", "host": H}`` says that consumer has every layer.
* export ``mcdma.kv.ID.I`` is layer ``I``'s bytes, granted to the
  producer's ``allowed_peers``, made before the first layer is published
  (so consumers resolve every layer once, at open) and read only after its
  layer event.
* notifications to each consumer: ``{"event": "layer", "layer": I,
  "checksum": C}`` once layer I is final (C: its XXH3-64 as 16 hex digits,
  or null), then ``{"event": "closed"}`` / ``{"event": "revoked",
  "reason": R}`` / ``{"event": "expired"}`` when it ends early.

Everything received is checked here before use: it comes from another app,
maybe on another host.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from ._errors import Internal, Invalid, LinkDown, PeerGone, Revoked, Timeout
from ._errors import Error

FORMAT = "mcdma.kv/1"
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# Ceilings on what a peer may announce, so a bad manifest cannot make the
# consumer allocate without bound.
MAX_LAYERS = 4096
MAX_LAYER_BYTES = 1 << 40


class HandoffError(Error):
    """Base class of the KV hand-off's own errors (each also derives from the
    mcdma code class it stands for, e.g. ``HandoffRevoked`` is a
    ``mcdma.Revoked``)."""


class ManifestMismatch(HandoffError, Invalid):
    """The producer's manifest is not what the consumer expects (dtype,
    shapes, model...); raised before any byte moves."""


class DigestMismatch(HandoffError, Invalid):
    """The producer's token digest differs: its cache is for another prompt."""


class HandoffExpired(HandoffError, Revoked):
    """The hand-off's TTL passed before the consumer had every layer."""


class HandoffRevoked(HandoffError, Revoked):
    """The producer revoked or closed the hand-off before it completed."""


class ProducerGone(HandoffError, PeerGone):
    """The producer app (or its daemon) is gone: no service, exports withdrawn."""


class HandoffLinkDown(HandoffError, LinkDown):
    """The link to the producer's host went down during the hand-off."""


class HandoffTimeout(HandoffError, Timeout):
    """The consumer's deadline passed before every layer arrived."""


class ChecksumMismatch(HandoffError, Internal):
    """A layer's bytes do not match the checksum the producer published."""


def check_id(handoff_id: str) -> str:
    """`handoff_id` if it is 1..64 of ``[A-Za-z0-9._:-]``, else ValueError."""
    if not isinstance(handoff_id, str) or not _ID.match(handoff_id):
        raise ValueError(f"hand-off id {handoff_id!r}: 1 to 64 of [A-Za-z0-9._:-]")
    return handoff_id


def service_name(handoff_id: str) -> str:
    return f"mcdma.kv.{handoff_id}"


def export_name(handoff_id: str, layer: int) -> str:
    return f"mcdma.kv.{handoff_id}.{layer}"


def encode(message: Dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes, what: str) -> Dict[str, Any]:
    """A JSON object from a peer, or Invalid naming `what` was malformed."""
    try:
        message = json.loads(bytes(data).decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise Invalid(f"malformed {what}: {e}") from None
    if not isinstance(message, dict):
        raise Invalid(f"malformed {what}: not a JSON object")
    return message


def checksum_hex(value: Optional[int]) -> Optional[str]:
    return None if value is None else f"{value:016x}"


def check_manifest(manifest: Any) -> Dict[str, Any]:
    """The producer's manifest, with its layer geometry checked.

    Raises Invalid when it is not a hand-off manifest of this format or its
    layer sizes are not a list of positive integers within the ceilings.
    """
    if not isinstance(manifest, dict):
        raise Invalid("malformed hand-off manifest: not a JSON object")
    if manifest.get("format") != FORMAT:
        raise Invalid(f"hand-off manifest format {manifest.get('format')!r}, expected {FORMAT!r}")
    sizes = manifest.get("layer_nbytes")
    if (not isinstance(sizes, list) or not 1 <= len(sizes) <= MAX_LAYERS
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_LAYER_BYTES
                       for n in sizes)):
        raise Invalid("malformed hand-off manifest: layer_nbytes must list 1 to "
                      f"{MAX_LAYERS} sizes of 1 to {MAX_LAYER_BYTES} bytes")
    if manifest.get("n_layers") != len(sizes):
        raise Invalid("malformed hand-off manifest: n_layers does not match layer_nbytes")
    if manifest.get("checksum") not in (None, "xxh3-64"):
        raise Invalid(f"hand-off manifest: unknown checksum {manifest.get('checksum')!r}")
    return manifest


def mismatches(manifest: Dict[str, Any], expect: Dict[str, Any]) -> List[str]:
    """``"key: producer V, expected W"`` for every key of `expect` whose
    value differs in `manifest` (compared as JSON, so tuples equal lists)."""
    out = []
    for key, want in sorted(expect.items()):
        have = manifest.get(key)
        if json.dumps(have, sort_keys=True) != json.dumps(want, sort_keys=True):
            out.append(f"{key}: producer {have!r}, expected {want!r}")
    return out


def check_layer_event(event: Dict[str, Any], n_layers: int) -> int:
    """The layer index of a ``layer`` event, or Invalid."""
    if not isinstance(event, dict):
        raise Invalid("malformed hand-off event: not a JSON object")
    layer = event.get("layer")
    if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n_layers:
        raise Invalid(f"hand-off event names layer {layer!r} of {n_layers}")
    cs = event.get("checksum")
    if cs is not None and (not isinstance(cs, str) or not re.match(r"^[0-9a-f]{16}$", cs)):
        raise Invalid(f"hand-off event: malformed checksum {cs!r}")
    return layer


def check_published(reply: Dict[str, Any], n_layers: int) -> List[Dict[str, Any]]:
    """The layer events of an ``open`` reply, each checked, or Invalid."""
    published = reply.get("published")
    if not isinstance(published, list):
        raise Invalid("malformed hand-off reply: published must be a list of layer events")
    for event in published:
        check_layer_event(event, n_layers)
    return published
