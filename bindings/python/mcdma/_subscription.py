"""mcdma.Subscription: a served service whose notifications queue up.

``Client.subscribe(service)`` serves `service` with a handler that queues
every notification (``Client.notify`` from any app, on this host or, as
``"host/service"``, across a link). ``wait`` pops the oldest. Calls (as
opposed to notifications) to a subscribed service are answered INVALID.

The queue is filled by a library thread without the GIL, so notifications
keep arriving while Python is busy; ``max_pending`` bounds it (newer ones
are then dropped and counted in ``dropped``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator, Optional

from . import _mcdma
from ._errors import Cancelled, Timeout

if TYPE_CHECKING:
    from ._client import Client

# Longest single wait without the GIL, so Ctrl-C (KeyboardInterrupt) is
# seen during an unbounded wait.
_SLICE_S = 1.0


class Subscription:
    """The receiving end of one service's notifications (``Client.subscribe``).

    Iterating yields notifications until the subscription or its client is
    closed. Usable as a context manager (closes on exit).
    """

    def __init__(self, client: "Client", service: str, service_id: int,
                 queue: _mcdma._NotifyQueue) -> None:
        self._client = client
        self._service = service
        self._service_id = service_id
        self._queue = queue

    @property
    def service(self) -> str:
        """The service name subscribed to."""
        return self._service

    @property
    def service_id(self) -> int:
        """The daemon's id of the service."""
        return self._service_id

    @property
    def pending(self) -> int:
        """Notifications received and not yet taken."""
        return self._queue.pending

    @property
    def dropped(self) -> int:
        """Notifications dropped because ``max_pending`` were waiting."""
        return self._queue.dropped

    @property
    def closed(self) -> bool:
        """Whether the subscription (or its client) is closed."""
        return self._queue.closed

    def wait(self, timeout: Optional[float] = None) -> bytes:
        """Returns the oldest notification's bytes, waiting for one if needed.

        Waits up to `timeout` seconds (None: without limit; 0: not at all),
        with the GIL released. Raises ``mcdma.Timeout`` when none came, and
        ``mcdma.Cancelled`` once the subscription is closed and drained.
        """
        if timeout is not None and timeout <= 0:
            return self._queue.pop(0.0)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _SLICE_S if deadline is None else deadline - time.monotonic()
            try:
                return self._queue.pop(max(min(left, _SLICE_S), 0.001))
            except Timeout:
                if deadline is not None and time.monotonic() >= deadline:
                    raise Timeout(f"no notification for {self._service!r} "
                                  f"within {timeout} s") from None

    def poll(self) -> Optional[bytes]:
        """The oldest notification, or None if none is waiting (never blocks)."""
        try:
            return self._queue.pop(0.0)
        except Timeout:
            return None

    def close(self) -> None:
        """Stops serving the service (idempotent); ``wait`` then drains what
        is queued and raises ``mcdma.Cancelled``."""
        self._client._unsubscribe(self)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            try:
                yield self.wait()
            except Cancelled:
                return

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pending={self.pending}"
        return f"<mcdma.Subscription {self._service!r} id={self._service_id} {state}>"
