"""mcdma: Python bindings of libmcdma, the client library of mcdma-rpcd.

An app talks to other apps, on this host or on linked hosts, through its
host's daemon::

    import mcdma, numpy as np

    with mcdma.Client() as c:                       # $MCDMA_SOCKET or default
        c.serve("echo", lambda req, info: b"re: " + req)
        assert c.call("echo", b"hi") == b"re: hi"

        buf = c.alloc(1 << 20)                      # shared memory, page-aligned
        np.frombuffer(buf, np.float32)[:] = 1.0     # zero-copy view
        c.export(buf, "weights", allow_read=True)
        remote = c.resolve("weights")               # or resolve(name, peer="host-b")
        dst = c.alloc(1 << 20)
        c.read(remote, 0, dst, 0, len(dst))         # one-sided, GIL released

        sub = c.subscribe("events")                 # notifications into a queue
        c.notify("events", b"ready")
        assert sub.wait(timeout=5) == b"ready"

Contents:

* ``Client``: the session; calls, handlers, notifications, buffers, exports,
  transfers (sync, ``*_async`` futures, batches).
* ``Buffer``: shared memory with the buffer protocol, ``__array_interface__``
  and DLPack; ``RemoteBuffer``: a resolved export; ``Subscription``;
  ``SessionInfo``; ``CallInfo``; ``Transfer``.
* ``Code`` and ``Error``, with one subclass per code (``NotFound``,
  ``Timeout``, ``OutOfRange``, ``PermissionDenied``, ``LinkDown``,
  ``Unavailable``, ...), generated from the C++ code list.
"""

from ._mcdma import Buffer, CallInfo, RemoteBuffer, SessionInfo, __version__
from ._errors import *  # noqa: F401,F403 - Code, Error and one class per code
from ._errors import __all__ as _error_names
from ._bulk import Transfer
from ._client import Client
from ._subscription import Subscription

__all__ = [
    "Buffer",
    "CallInfo",
    "Client",
    "RemoteBuffer",
    "SessionInfo",
    "Subscription",
    "Transfer",
    "__version__",
    *_error_names,
]
