"""mcdma.Client: one session with this host's mcdma-rpcd.

Threads: every method may be called from any thread, concurrently. Each
releases the GIL while it waits (for the daemon, a peer, a transfer), so
other Python threads run meanwhile. Service handlers run on the client's
handler threads and futures complete on its completion thread
(mcdma/_dispatch.py); both may call back into the client, blocking calls
included (a handler that waits for another call to this same client needs
handler_threads > 1).

Timeouts are in seconds; None means the client's default (its `timeout`).
Failures raise subclasses of mcdma.Error named after the status code.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from concurrent.futures import Future
from typing import Any, Dict, Optional, Tuple, Union

from . import _mcdma
from ._bulk import BulkMixin
from ._dispatch import Dispatcher, Handler
from ._errors import NotFound
from ._subscription import Subscription

#: Bytes sent in calls and notifications: any C-contiguous buffer (bytes,
#: bytearray, memoryview, numpy array, Buffer), a str (sent as UTF-8) or None
#: (empty). Typed Any: the buffer protocol has no static type before 3.12.
Data = Any

# Open clients, closed at interpreter exit before it finalizes (a closing
# session still needs Python threads to wind down).
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for client in list(_open_clients):
        try:
            client.close()
        except Exception:  # noqa: BLE001 - close the others regardless
            pass


class Client(BulkMixin):
    """A session with the local mcdma-rpcd.

    ``Client(socket=None, app_name=None, timeout=30.0)`` connects to the
    daemon at `socket` (None: ``$MCDMA_SOCKET`` or the standard path), shown
    as `app_name` in ``mcdmactl sessions`` (None: the program name).
    `timeout` is the default deadline, in seconds, of every operation that
    is given none. `connect_timeout` bounds connecting and control requests.

    `handler_threads` is how many incoming calls and notifications are
    handled at once. With 1 (the default) they are handled one at a time,
    in arrival order: a subscription sees one sender's notifications in the
    order sent, and a handler must not wait for another call to this same
    client (that call would wait behind it until its deadline). With more,
    handlers run concurrently and arrival order is not kept.

    Use it as a context manager, or call ``close()``: the daemon reclaims
    everything the session owned (exports, served services, handles) when
    it ends. Buffers stay mapped while Python references them.
    Raises ``mcdma.Unavailable`` when no daemon answers.
    """

    def __init__(self, socket: Optional[str] = None, app_name: Optional[str] = None,
                 timeout: Optional[float] = 30.0, *, connect_timeout: Optional[float] = 10.0,
                 handler_threads: int = 1) -> None:
        self._core = _mcdma._Core.connect(socket or "", app_name or "", timeout,
                                          connect_timeout, handler_threads)
        self._dispatch = Dispatcher(self._core)
        self._lock = threading.Lock()
        self._closed = False
        self._services: Dict[int, Tuple[str, int]] = {}  # service id -> (name, token)
        self._subscriptions: Dict[str, Subscription] = {}
        self._exported: Dict[str, _mcdma.Buffer] = {}
        _open_clients.add(self)

    # ---- lifetime ----

    @property
    def info(self) -> _mcdma.SessionInfo:
        """Session id, host id, daemon version and socket of this session."""
        return self._core.info

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Ends the session (idempotent).

        Handlers still running get their callers CANCELLED, in-flight
        operations fail with ``mcdma.Cancelled`` (pending futures too, before
        this returns, unless it is called from a future's callback: then
        right after), subscriptions close; later calls raise
        ``mcdma.Unavailable``. Safe from a handler or a future's callback.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._core.close()
        self._dispatch.join()
        with self._lock:
            self._exported.clear()
        _open_clients.discard(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_dispatch", None) is not None and not self._closed:
            self.close()

    def __repr__(self) -> str:
        i = self._core.info
        state = "closed" if self._closed else "open"
        return f"<mcdma.Client session={i.session_id} host={i.host_id!r} {state}>"

    # ---- request/reply ----

    def call(self, service: str, data: Data = b"", timeout: Optional[float] = None) -> bytes:
        """Calls `service` with `data` and returns the reply bytes.

        `service` is ``"name"`` on this host or ``"host/name"`` on a linked
        peer. Raises ``mcdma.NotFound`` (no such service), ``mcdma.Timeout``
        (no reply by the deadline), or the error the handler raised.
        """
        return self._core.call(service, data, timeout)

    def call_async(self, service: str, data: Data = b"",
                   timeout: Optional[float] = None) -> "Future[bytes]":
        """Starts ``call``; returns a Future of the reply bytes (not cancellable)."""
        token, fut = self._dispatch.new_future()
        try:
            self._core.call_async(service, data, timeout, token)
        except BaseException:
            self._dispatch.drop_future(token)
            raise
        return fut

    def serve(self, service: str, handler: Handler, *, inline: bool = False) -> int:
        """Serves `service` with ``handler(request: bytes, info: CallInfo)``.

        The handler returns the reply (bytes-like, str or None for empty)
        or raises: an ``mcdma.Error`` subclass answers the caller with that
        code and message, any other exception with INTERNAL. Notifications
        to the service call it too (``info.one_way``, return value dropped).
        Returns the service id. Raises ``mcdma.AlreadyExists`` when the name
        is taken.

        Where it runs: by default on one of the package's Python handler
        threads, to which the library hands each call (a thread wake-up and
        a GIL hand-off per call). With ``inline=True`` the library thread
        that reaped the call takes the GIL and runs the handler itself: a
        round trip costs about what it costs between C++ apps
        (bench/README.md, the local call bench), but while the handler runs
        that thread serves no other call of this client, so keep such
        handlers short and never wait in one for a call to this same
        client's services. At most ``handler_threads`` handlers run at once
        either way.
        """
        if inline:
            token = 0
            service_id = self._core.serve_inline(service, handler, self._dispatch.inline_error)
        else:
            token = self._dispatch.add_handler(handler)
            try:
                service_id = self._core.serve(service, token)
            except BaseException:
                self._dispatch.remove_handler(token)
                raise
        with self._lock:
            self._services[service_id] = (service, token)
        return service_id

    def unserve(self, service: Union[int, str]) -> None:
        """Stops serving a service, by id (from ``serve``) or by name."""
        with self._lock:
            if isinstance(service, str):
                ids = [i for i, (name, _) in self._services.items() if name == service]
                if not ids:
                    raise NotFound(f"this client does not serve {service!r}")
                service = ids[0]
            entry = self._services.pop(service, None)
        self._core.unserve(service)
        if entry is not None and entry[1] != 0:
            self._dispatch.remove_handler(entry[1])

    # ---- notifications ----

    def notify(self, service: str, data: Data = b"", timeout: Optional[float] = None) -> None:
        """Sends a one-way message; returns once it is in the server's inbox."""
        self._core.notify(service, data, timeout)

    def subscribe(self, service: str, max_pending: int = 0) -> Subscription:
        """Serves `service` by queueing its notifications: see ``Subscription``.

        `max_pending` bounds the queue (0: unbounded). Raises
        ``mcdma.AlreadyExists`` when the name is taken.
        """
        service_id, queue = self._core.subscribe(service, max_pending)
        sub = Subscription(self, service, service_id, queue)
        with self._lock:
            self._subscriptions[service] = sub
        return sub

    def wait_notify(self, service: str, timeout: Optional[float] = None) -> bytes:
        """``subscribe(service)``'s ``wait(timeout)``: the next notification.

        Raises ``mcdma.NotFound`` unless subscribed to `service`,
        ``mcdma.Timeout`` when none comes in time.
        """
        with self._lock:
            sub = self._subscriptions.get(service)
        if sub is None:
            raise NotFound(f"not subscribed to {service!r}: call subscribe() first")
        return sub.wait(timeout)

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if self._subscriptions.get(sub.service) is sub:
                del self._subscriptions[sub.service]
            elif sub.closed:
                return
        if not self._closed:
            self._core.unserve(sub.service_id)
