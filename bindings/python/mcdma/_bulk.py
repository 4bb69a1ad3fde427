"""Buffers, exports and one-sided transfers: the bulk half of mcdma.Client.

The flow: ``alloc`` a Buffer, fill it through numpy/torch views (no copy),
``export`` it under a name; another app ``resolve``s the name (on this host
or, with ``peer=``, on a linked host) into a RemoteBuffer and ``read``s or
``write``s ranges of it into or from its own Buffers. The daemons move the
bytes between the shared-memory buffers; Python only waits (GIL released).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Dict, Iterable, NamedTuple, Optional, Sequence

from . import _mcdma

if TYPE_CHECKING:
    from ._dispatch import Dispatcher


class Transfer(NamedTuple):
    """One piece of ``read_batch`` / ``write_batch`` (a plain 5-tuple works too)."""

    buffer: _mcdma.Buffer
    local_offset: int
    remote: _mcdma.RemoteBuffer
    remote_offset: int
    length: int


class BulkMixin:
    """The bulk-data methods of mcdma.Client (see its docstring)."""

    _core: _mcdma._Core
    _dispatch: "Dispatcher"
    _lock: threading.Lock
    # Exported buffers by export name: freeing a buffer withdraws its
    # exports, so an export holds its buffer until unexport() or close().
    _exported: Dict[str, _mcdma.Buffer]

    def alloc(self, size: int) -> _mcdma.Buffer:
        """A new page-aligned shared-memory Buffer of `size` bytes (zeroed).

        Freed when the last reference to it, or to a view of it, is gone.
        Raises ``mcdma.Invalid`` / ``mcdma.NoMemory`` for a bad or too large size.
        """
        return self._core.alloc(size)

    def export(self, buffer: _mcdma.Buffer, name: str, offset: int = 0, length: int = 0,
               ttl: Optional[float] = None, allow_read: bool = True, allow_write: bool = False,
               allowed_peers: Iterable[str] = ()) -> None:
        """Lets other apps resolve `name` to ``buffer[offset:offset+length]``.

        `length` 0 exports to the end of the buffer. `ttl` seconds after
        which the export expires (None: until ``unexport`` or the session
        ends). `allowed_peers`: host ids whose apps may resolve it across a
        link (apps on this host always may). The client keeps `buffer`
        alive until ``unexport(name)`` or ``close()``, even past `ttl`.
        Raises ``mcdma.AlreadyExists`` when the name is taken,
        ``mcdma.OutOfRange`` for a bad range.
        """
        self._core.export(buffer, name, offset, length, ttl, allow_read, allow_write,
                          list(allowed_peers))
        with self._lock:
            self._exported[name] = buffer

    def unexport(self, name: str) -> None:
        """Withdraws an export; handles to it then fail with ``mcdma.Revoked``.

        Drops the client's reference to the buffer even when the export had
        already expired (then raising ``mcdma.NotFound``).
        """
        try:
            self._core.unexport(name)
        finally:
            with self._lock:
                buffer = self._exported.pop(name, None)
            del buffer  # maybe the last reference: frees the daemon's buffer

    def resolve(self, name: str, peer: Optional[str] = None) -> _mcdma.RemoteBuffer:
        """A RemoteBuffer for export `name` on this host, or on host `peer`.

        Raises ``mcdma.NotFound`` when there is no such export (or peer),
        ``mcdma.PermissionDenied`` when this host may not resolve it.
        """
        return self._core.resolve(name, peer or "")

    def release(self, remote: _mcdma.RemoteBuffer) -> None:
        """Hands a RemoteBuffer back to the daemon (it is unusable afterwards)."""
        self._core.release(remote)

    def read(self, remote: _mcdma.RemoteBuffer, remote_offset: int, buffer: _mcdma.Buffer,
             local_offset: int, length: int, timeout: Optional[float] = None) -> int:
        """Copies ``remote[remote_offset:+length]`` into ``buffer[local_offset:]``.

        Returns the bytes moved. Raises ``mcdma.OutOfRange`` when either
        range is outside its buffer, ``mcdma.PermissionDenied`` when the
        export is not readable, ``mcdma.Timeout`` past the deadline.
        """
        return self._core.transfer(False, remote, remote_offset, buffer, local_offset, length,
                                   timeout)

    def write(self, remote: _mcdma.RemoteBuffer, remote_offset: int, buffer: _mcdma.Buffer,
              local_offset: int, length: int, timeout: Optional[float] = None) -> int:
        """Copies ``buffer[local_offset:+length]`` into ``remote[remote_offset:]``.

        Returns the bytes moved; errors as for ``read`` (``PermissionDenied``
        when the export does not allow writes).
        """
        return self._core.transfer(True, remote, remote_offset, buffer, local_offset, length,
                                   timeout)

    def read_async(self, remote: _mcdma.RemoteBuffer, remote_offset: int,
                   buffer: _mcdma.Buffer, local_offset: int, length: int,
                   timeout: Optional[float] = None) -> "Future[int]":
        """Starts ``read``; returns a Future of the bytes moved. The buffer is
        kept alive until the transfer is over."""
        return self._start(False, remote, remote_offset, buffer, local_offset, length, timeout)

    def write_async(self, remote: _mcdma.RemoteBuffer, remote_offset: int,
                    buffer: _mcdma.Buffer, local_offset: int, length: int,
                    timeout: Optional[float] = None) -> "Future[int]":
        """Starts ``write``; returns a Future of the bytes moved."""
        return self._start(True, remote, remote_offset, buffer, local_offset, length, timeout)

    def read_batch(self, pieces: Sequence[Transfer], timeout: Optional[float] = None) -> int:
        """Reads every ``(buffer, local_offset, remote, remote_offset, length)``
        piece, submitted together (one wake-up of the daemon).

        Returns the total bytes; raises the first piece's error, by order.
        """
        return self._core.transfer_batch(False, pieces, timeout)

    def write_batch(self, pieces: Sequence[Transfer], timeout: Optional[float] = None) -> int:
        """Writes every piece, submitted together; as ``read_batch``."""
        return self._core.transfer_batch(True, pieces, timeout)

    def _start(self, write: bool, remote: _mcdma.RemoteBuffer, remote_offset: int,
               buffer: _mcdma.Buffer, local_offset: int, length: int,
               timeout: Optional[float]) -> "Future[int]":
        token, fut = self._dispatch.new_future()
        try:
            self._core.transfer_async(write, remote, remote_offset, buffer, local_offset, length,
                                      timeout, token)
        except BaseException:
            self._dispatch.drop_future(token)
            raise
        return fut
