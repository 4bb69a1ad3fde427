"""The Python threads that run handlers and complete futures for a Client.

libmcdma's own threads never take the GIL (bindings/python/src/gil.hpp says
why). Work that needs Python goes through two queues in the extension, and
this module runs the threads that drain them:

* handler threads (``handler_threads`` of them, started by the first
  ``serve``) pop incoming calls (``_Core.next_call``), run the Python
  handler and answer. While a handler runs, the library thread that received
  the call waits for the answer, bounded by the caller's deadline and by
  ``Client.close``;
* one completion thread (started by the first async operation) pops results
  (``_Core.next_completion``) and completes the ``concurrent.futures.Future``;
  futures' done-callbacks therefore run on it.

All are daemon threads that end when the client closes. They hold the
dispatcher, never the Client, so an unreferenced Client can be collected.
"""

from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _mcdma
from ._errors import Code, Error, error_from

_log = logging.getLogger("mcdma")

#: handler(request, info) -> reply (bytes-like, str or None).
Handler = Callable[[bytes, _mcdma.CallInfo], Any]


class Dispatcher:
    """Handlers and pending futures of one Client, and the threads that use them."""

    def __init__(self, core: _mcdma._Core) -> None:
        self._core = core
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._handlers: Dict[int, Handler] = {}
        self._futures: Dict[int, "Future[Any]"] = {}
        self._handler_threads: List[threading.Thread] = []
        self._completion_thread: Optional[threading.Thread] = None

    # ---- handlers ----

    def add_handler(self, handler: Handler) -> int:
        """Registers `handler`; returns the token its calls carry."""
        with self._lock:
            token = next(self._tokens)
            self._handlers[token] = handler
            if not self._handler_threads:
                for i in range(self._core.handler_threads):
                    t = threading.Thread(target=self._serve_loop, daemon=True,
                                         name=f"mcdma-handler-{self._core.info.session_id}-{i}")
                    t.start()
                    self._handler_threads.append(t)
        return token

    def remove_handler(self, token: int) -> None:
        with self._lock:
            self._handlers.pop(token, None)

    def _serve_loop(self) -> None:
        core = self._core
        while True:
            call = core.next_call()
            if call is None:
                return
            with self._lock:
                handler = self._handlers.get(call._token)
            if handler is None:
                core.fail(call, int(Code.NOT_FOUND), f"service {call.service!r} is not served")
                continue
            self._run(handler, call)

    def _run(self, handler: Handler, call: _mcdma.CallInfo) -> None:
        core = self._core
        try:
            reply = handler(call._request, call)
            core.answer(call, b"" if reply is None or call.one_way else reply)
        except Error as e:
            core.fail(call, int(e.code), e.message)
        except BaseException as e:  # noqa: B036 - the caller must get an answer
            _log.exception("mcdma: the handler of %r raised", call.service)
            core.fail(call, int(Code.INTERNAL), f"{type(e).__name__}: {e}")

    @staticmethod
    def inline_error(call: _mcdma.CallInfo, e: BaseException) -> Tuple[int, str]:
        """The answer to a call whose inline handler raised `e` (or returned
        what is not bytes-like: a TypeError), as ``(code, message)``: the
        same as a queued handler's. Runs on the library thread that took
        the call, holding the GIL."""
        if isinstance(e, Error):
            return int(e.code), e.message
        _log.error("mcdma: the handler of %r raised", call.service, exc_info=e)
        return int(Code.INTERNAL), f"{type(e).__name__}: {e}"

    # ---- futures ----

    def new_future(self) -> Tuple[int, "Future[Any]"]:
        """A running (uncancellable) Future and the token its result will carry."""
        fut: "Future[Any]" = Future()
        fut.set_running_or_notify_cancel()
        with self._lock:
            token = next(self._tokens)
            self._futures[token] = fut
            if self._completion_thread is None:
                self._completion_thread = threading.Thread(
                    target=self._complete_loop, daemon=True,
                    name=f"mcdma-completion-{self._core.info.session_id}")
                self._completion_thread.start()
        return token, fut

    def drop_future(self, token: int) -> None:
        """Forgets a future whose operation could not be started."""
        with self._lock:
            self._futures.pop(token, None)

    def _complete_loop(self) -> None:
        core = self._core
        while True:
            item = core.next_completion()
            if item is None:
                return
            token, code, message, value = item
            with self._lock:
                fut = self._futures.pop(token, None)
            if fut is None:
                continue
            if code == 0:
                fut.set_result(value)
            else:
                fut.set_exception(error_from(code, message))

    def join(self) -> None:
        """After _Core.close(): waits until every pending future is complete."""
        with self._lock:
            t = self._completion_thread
        if t is not None and t is not threading.current_thread():
            t.join()
