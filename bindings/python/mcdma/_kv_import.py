"""The consumer side of a KV hand-off: ``KVImport`` (see mcdma.kv).

Threading: ``pull`` runs on the calling thread (or, after ``start``, on a
thread of its own); ``wait_layer``, ``stats`` and ``close`` may be called
from any thread.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import _kv_wire as wire
from ._client import Client
from ._errors import Error, LinkDown, NotFound, PeerGone, Revoked, Timeout
from ._mcdma import Buffer, RemoteBuffer, checksum

# How often a consumer waiting for the next layer checks that the producer
# is still there (a dead producer sends nothing).
_PROBE_S = 1.0


@dataclass
class LayerStats:
    """One layer's timings, in seconds; ``*_at`` count from the open."""
    index: int
    nbytes: int
    published_at: float = 0.0  # its layer event arrived
    pull_s: float = 0.0        # the read, from its start to its end
    verify_s: float = 0.0      # the checksum
    landed_at: float = 0.0     # pulled and verified


@dataclass
class KVStats:
    """A whole import's figures (seconds, bytes)."""
    open_s: float = 0.0    # open call, manifest checks, allocation
    total_s: float = 0.0   # open start -> last layer landed
    bytes: int = 0
    layers: List[LayerStats] = field(default_factory=list)

    @property
    def gbytes_per_s(self) -> float:
        """Bytes / total_s, in 10^9 B/s."""
        return self.bytes / self.total_s / 1e9 if self.total_s > 0 else 0.0


def _failure(e: Error, handoff_id: str, what: str) -> Error:
    """An mcdma error met while pulling, as the hand-off error it means."""
    text = f"hand-off {handoff_id}: {what}: {e.message}"
    if isinstance(e, wire.HandoffError):
        return e
    if isinstance(e, LinkDown):
        return wire.HandoffLinkDown(text)
    if isinstance(e, (NotFound, PeerGone)):
        return wire.ProducerGone(text)
    if isinstance(e, Revoked):
        return wire.HandoffRevoked(text)
    if isinstance(e, Timeout):
        return wire.HandoffTimeout(text)
    return e


class KVImport:
    """Opens hand-off `handoff_id` of an app on host `peer` (None: this
    host) and prepares to pull it.

    Before any byte moves the manifest is checked: every key of `expect`
    must be equal in it (else ``ManifestMismatch``, naming each
    difference), and its ``token_digest`` must be `token_digest` when given
    (else ``DigestMismatch``). Then one mcdma.Buffer per layer is allocated
    (``buffers``), unless `buffers` gives them (each at least the layer's
    size). `deadline`: seconds from now by which every layer must have
    landed. `verify`: check each layer's published XXH3-64.

    Raises ``HandoffExpired``/``HandoffRevoked`` for a hand-off that has
    ended, ``ProducerGone`` when no producer serves it (after retrying for
    `open_wait` seconds: the producer may not have started yet).
    """

    def __init__(self, client: Client, peer: Optional[str], handoff_id: str, *,
                 expect: Optional[Dict[str, Any]] = None, token_digest: Optional[str] = None,
                 deadline: float = 60.0, verify: bool = True, open_wait: float = 0.0,
                 buffers: Optional[List[Buffer]] = None) -> None:
        started = time.monotonic()
        self._client = client
        self._id = wire.check_id(handoff_id)
        self._deadline = started + deadline
        self._verify = verify
        self._started = started
        local = peer is None or peer == client.info.host_id
        self._peer = None if local else peer
        self._service = wire.service_name(self._id) if local else f"{peer}/{wire.service_name(self._id)}"
        self._lock = threading.Lock()
        self._landed_cv = threading.Condition(self._lock)
        self._landed: Dict[int, LayerStats] = {}
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        self._sub = client.subscribe(f"{wire.service_name(self._id)}.in.{uuid.uuid4().hex[:12]}")
        try:
            reply = self._open(open_wait)
            self._manifest = wire.check_manifest(reply.get("manifest"))
            problems = wire.mismatches(self._manifest, expect or {})
            if problems:
                raise wire.ManifestMismatch(f"hand-off {self._id}: " + "; ".join(problems))
            if token_digest is not None and self._manifest.get("token_digest") != token_digest:
                raise wire.DigestMismatch(
                    f"hand-off {self._id}: token digest {self._manifest.get('token_digest')!r} "
                    f"is not this prompt's {token_digest!r}")
            sizes = self._manifest["layer_nbytes"]
            self._remotes = self._resolve_all(len(sizes))
            self._buffers = self._prepare(buffers, sizes)
            published = wire.check_published(reply, len(sizes))
            self._pending = [ev["layer"] for ev in published]
            self._checksums = {ev["layer"]: ev.get("checksum") for ev in published}
        except BaseException:
            self._sub.close()
            raise
        self._stats = KVStats(open_s=time.monotonic() - started,
                              layers=[LayerStats(i, n) for i, n in enumerate(sizes)])
        for i in self._pending:
            self._stats.layers[i].published_at = self._stats.open_s

    # ---- what the caller uses ----

    @property
    def manifest(self) -> Dict[str, Any]:
        return dict(self._manifest)

    @property
    def buffers(self) -> List[Buffer]:
        """One buffer per layer; layer i's bytes are final once it landed."""
        return list(self._buffers)

    @property
    def stats(self) -> KVStats:
        return self._stats

    def pull(self, on_layer: Optional[Callable[[int], None]] = None) -> KVStats:
        """Pulls every layer as soon as it is published, into ``buffers``;
        calls ``on_layer(i)`` once layer i landed (verified). Returns the
        figures; raises the hand-off errors (see the class)."""
        try:
            self._run(on_layer)
        except BaseException as e:
            with self._lock:
                self._error = e
                self._landed_cv.notify_all()
            raise
        return self._stats

    def start(self, on_layer: Optional[Callable[[int], None]] = None) -> None:
        """``pull`` on a thread of its own; see ``wait_layer``/``wait``."""
        def run() -> None:
            try:
                self.pull(on_layer)
            except BaseException:
                pass  # kept in self._error for wait_layer/wait
        self._thread = threading.Thread(target=run, name=f"kv-import-{self._id}", daemon=True)
        self._thread.start()

    def wait_layer(self, layer: int, timeout: Optional[float] = None) -> LayerStats:
        """Blocks until layer `layer` landed; raises the pull's error, or
        mcdma.Timeout after `timeout` s."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while layer not in self._landed:
                if self._error is not None:
                    raise self._error
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"hand-off {self._id}: layer {layer} not landed in {timeout} s")
                self._landed_cv.wait(left)
            return self._landed[layer]

    def wait(self, timeout: Optional[float] = None) -> KVStats:
        """Blocks until every layer landed (after ``start``)."""
        for i in range(len(self._buffers)):
            self.wait_layer(i, timeout)
        return self._stats

    def close(self) -> None:
        """Stops listening and hands the remote handles back (the buffers
        stay valid while referenced). Idempotent."""
        self._sub.close()
        for remote in getattr(self, "_remotes", []):
            try:
                self._client.release(remote)
            except Error:
                pass
        self._remotes = []

    def __enter__(self) -> "KVImport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ----

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            got = len(self._landed)
            raise wire.HandoffTimeout(f"hand-off {self._id}: {got} of {len(self._buffers)} layers "
                                      "landed before the deadline")
        return left

    def _call(self, message: Dict[str, Any]) -> Dict[str, Any]:
        reply = self._client.call(self._service, wire.encode(message), timeout=min(self._left(), 10.0))
        return wire.decode(reply, "hand-off reply")

    def _open(self, open_wait: float) -> Dict[str, Any]:
        host = self._client.info.host_id
        retry_until = time.monotonic() + open_wait
        while True:
            try:
                reply = self._call({"op": "open", "host": host, "notify": self._sub.service})
                break
            except NotFound as e:
                if time.monotonic() >= retry_until:
                    raise wire.ProducerGone(f"hand-off {self._id}: no producer serves it "
                                            f"({e.message})") from None
                time.sleep(0.1)
            except Error as e:
                raise _failure(e, self._id, "open") from None
        self._raise_if_ended(reply)
        return reply

    def _raise_if_ended(self, reply: Dict[str, Any]) -> None:
        state, reason = reply.get("state"), str(reply.get("reason", ""))[:512]
        if state == "expired":
            raise wire.HandoffExpired(f"hand-off {self._id} expired: {reason}")
        if state in ("closed", "revoked"):
            raise wire.HandoffRevoked(f"hand-off {self._id} {state}: {reason}")
        if state != "open":
            raise wire.HandoffError(f"hand-off {self._id}: unknown state {state!r}")

    def _resolve_all(self, n: int) -> List[RemoteBuffer]:
        remotes: List[RemoteBuffer] = []
        try:
            for i in range(n):
                remotes.append(self._client.resolve(wire.export_name(self._id, i), self._peer))
        except Error as e:
            for r in remotes:
                self._client.release(r)
            raise _failure(e, self._id, f"resolving layer {len(remotes)}") from None
        sizes = self._manifest["layer_nbytes"]
        for i, r in enumerate(remotes):
            if r.length < sizes[i]:
                raise wire.ManifestMismatch(f"hand-off {self._id}: layer {i} export holds "
                                            f"{r.length} bytes, the manifest says {sizes[i]}")
        return remotes

    def _prepare(self, buffers: Optional[List[Buffer]], sizes: List[int]) -> List[Buffer]:
        if buffers is None:
            return [self._client.alloc(n) for n in sizes]
        if len(buffers) != len(sizes) or any(len(b) < n for b, n in zip(buffers, sizes)):
            raise wire.ManifestMismatch(f"hand-off {self._id}: the given buffers do not fit "
                                        f"{len(sizes)} layers of {sizes} bytes")
        return list(buffers)

    def _next_event(self, block: bool) -> Optional[int]:
        """The next published layer; None when `block` is False and none is
        waiting. Raises when the hand-off ended or the producer is gone."""
        if self._pending:
            return self._pending.pop(0)
        while True:
            try:
                data = self._sub.wait(timeout=min(self._left(), _PROBE_S)) if block else self._sub.poll()
            except Timeout:
                self._probe()
                continue
            if data is None:
                return None
            event = wire.decode(data, "hand-off event")
            if event.get("event") != "layer":
                self._raise_if_ended({"state": event.get("event"), "reason": event.get("reason")})
            layer = wire.check_layer_event(event, len(self._buffers))
            if layer in self._checksums or layer in self._landed:
                continue  # a duplicate: already known
            self._checksums[layer] = event.get("checksum")
            self._stats.layers[layer].published_at = time.monotonic() - self._started
            return layer

    def _probe(self) -> None:
        try:
            self._raise_if_ended(self._call({"op": "status"}))
        except wire.HandoffError:
            raise
        except Error as e:
            raise _failure(e, self._id, "the producer does not answer") from None

    def _run(self, on_layer: Optional[Callable[[int], None]]) -> None:
        n = len(self._buffers)
        prev: Optional[int] = None  # read, not yet verified
        while len(self._landed) + (prev is not None) < n:
            layer = self._next_event(block=prev is None)
            if layer is None:
                self._finish(prev, on_layer)
                prev = None
                continue
            st = self._stats.layers[layer]
            t0 = time.monotonic()
            future = self._client.read_async(self._remotes[layer], 0, self._buffers[layer], 0,
                                             st.nbytes, timeout=self._left())
            if prev is not None:  # verify the previous layer while this one moves
                self._finish(prev, on_layer)
            try:
                future.result()
            except Error as e:
                if isinstance(e, (Revoked, NotFound, PeerGone)):
                    self._probe()  # the producer ended it or is gone: say which
                raise _failure(e, self._id, f"reading layer {layer}") from None
            st.pull_s = time.monotonic() - t0
            prev = layer
        if prev is not None:
            self._finish(prev, on_layer)
        self._stats.total_s = time.monotonic() - self._started
        self._stats.bytes = sum(s.nbytes for s in self._stats.layers)
        try:
            self._call({"op": "done", "host": self._client.info.host_id})
        except Error:
            pass  # every byte is here; the producer only misses the courtesy

    def _finish(self, layer: Optional[int], on_layer: Optional[Callable[[int], None]]) -> None:
        if layer is None:
            return
        st = self._stats.layers[layer]
        want = self._checksums.get(layer)
        if self._verify and want is not None:
            t0 = time.monotonic()
            got = wire.checksum_hex(checksum(self._buffers[layer], 0, st.nbytes))
            st.verify_s = time.monotonic() - t0
            if got != want:
                raise wire.ChecksumMismatch(f"hand-off {self._id}: layer {layer} checksum {got}, "
                                            f"the producer published {want}")
        st.landed_at = time.monotonic() - self._started
        with self._lock:
            self._landed[layer] = st
            self._landed_cv.notify_all()
        if on_layer is not None:
            on_layer(layer)
