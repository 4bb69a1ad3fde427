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
  (so every layer's export exists whenever a consumer resolves it); a
  consumer resolves each layer just before it reads it, and reads it only
  after its layer event.
* notifications to each consumer: ``{"event": "layer", "layer": I,
  "checksum": C}`` once layer I is final (C: its XXH3-64 as 16 hex digits,
  or null), then ``{"event": "closed"}`` / ``{"event": "revoked",
  "reason": R}`` / ``{"event": "expired"}`` when it ends early.

The protocol itself runs in libmcdma (mcdma/kv.hpp, client/src/kv/), which
checks everything received before use: it comes from another app, maybe on
another host. This module holds what Python adds: the error classes (each
libmcdma hand-off failure, named by its reason, becomes one of them) and
the checks as Python functions.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from . import _mcdma
from ._errors import Code, Error, Internal, Invalid, LinkDown, PeerGone, Reason, Revoked, Timeout

FORMAT = "mcdma.kv/1"
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# Ceilings on what a peer may announce (mcdma::kv::kMaxLayers and
# kMaxLayerBytes), so a bad manifest cannot make the consumer allocate
# without bound.
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
    """The producer's manifest, with its layer geometry checked (by
    libmcdma's own check, mcdma/kv.hpp: the one C++ consumers run).

    Raises Invalid when it is not a hand-off manifest of this format or its
    layer sizes are not a list of positive integers within the ceilings.
    """
    _mcdma._kv_check_manifest(encode({"manifest": manifest}))
    return manifest


def mismatches(manifest: Dict[str, Any], expect: Dict[str, Any]) -> List[str]:
    """``"key: producer V, expected W"`` for every key of `expect` whose
    value differs in `manifest` (numbers compare by value)."""
    return list(_mcdma._kv_mismatches(encode(manifest), encode(expect)))


def check_published(reply: Dict[str, Any], n_layers: int) -> List[Dict[str, Any]]:
    """The layer events of an ``open`` reply, each checked, or Invalid."""
    _mcdma._kv_check_published(encode(reply), n_layers)
    return reply["published"]


def handoff_error(e: Error) -> Error:
    """A libmcdma hand-off failure as its Python class (by reason, else by
    code), with the same message; other errors as they are."""
    reason = int(getattr(e, "reason", 0))
    cls = _BY_REASON.get(reason)
    if cls is None:
        cls = _BY_CODE.get(int(e.code))
    if cls is None or isinstance(e, HandoffError):
        return e
    return cls(e.message, reason=reason)


_BY_REASON = {
    int(Reason.HANDOFF_MANIFEST): ManifestMismatch,
    int(Reason.HANDOFF_DIGEST): DigestMismatch,
    int(Reason.HANDOFF_EXPIRED): HandoffExpired,
    int(Reason.HANDOFF_REVOKED): HandoffRevoked,
    int(Reason.HANDOFF_PRODUCER_GONE): ProducerGone,
    int(Reason.HANDOFF_CHECKSUM): ChecksumMismatch,
}
_BY_CODE = {int(Code.LINK_DOWN): HandoffLinkDown, int(Code.TIMEOUT): HandoffTimeout}
