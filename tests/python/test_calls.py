"""Request/reply: call, call_async, serve, unserve, handler semantics, deadlines."""

import threading
import time

import numpy as np
import pytest

import mcdma
from conftest import uniq


@pytest.fixture
def server(connect):
    return connect(app_name="server")


def test_call_returns_the_handler_reply(client, server):
    service = uniq("echo")
    seen = []

    def echo(req, info):
        seen.append((req, info.service, info.one_way, info.service_id))
        return b"re: " + req

    service_id = server.serve(service, echo)
    assert client.call(service, b"hello") == b"re: hello"
    assert seen == [(b"hello", service, False, service_id)]


@pytest.mark.parametrize("data, expected", [
    (b"bytes", b"bytes"),
    (bytearray(b"bytearray"), b"bytearray"),
    (memoryview(b"xmemoryviewx")[1:-1], b"memoryview"),
    ("str \u00e9", "str \u00e9".encode()),
    (np.arange(4, dtype=np.uint16), np.arange(4, dtype=np.uint16).tobytes()),
    (None, b""),
])
def test_call_accepts_bytes_like_data_and_str(client, server, data, expected):
    service = uniq("raw")
    server.serve(service, lambda req, info: req)
    assert client.call(service, data) == expected


def test_non_contiguous_data_is_a_type_error(client, server):
    with pytest.raises(TypeError, match="bytes-like"):
        client.call(uniq("x"), np.arange(10)[::2])
    with pytest.raises(TypeError, match="bytes-like"):
        client.call(uniq("x"), 12)


@pytest.mark.parametrize("reply, expected", [(None, b""), ("text", b"text"),
                                             (bytearray(b"ba"), b"ba")])
def test_handler_may_return_none_str_or_any_bytes_like(client, server, reply, expected):
    service = uniq("ret")
    server.serve(service, lambda req, info: reply)
    assert client.call(service) == expected


def test_handler_returning_a_non_bytes_value_answers_internal(client, server):
    service = uniq("bad")
    server.serve(service, lambda req, info: 42)
    with pytest.raises(mcdma.Internal, match="TypeError"):
        client.call(service)


def test_handler_exception_answers_internal_with_its_text(client, server):
    service = uniq("raise")

    def handler(req, info):
        raise ValueError("bad request shape")

    server.serve(service, handler)
    with pytest.raises(mcdma.Internal, match="ValueError: bad request shape"):
        client.call(service)


def test_call_to_unknown_service_raises_not_found(client):
    with pytest.raises(mcdma.NotFound, match="no service"):
        client.call(uniq("missing"))


def test_serving_a_taken_name_raises_already_exists(client, server):
    service = uniq("taken")
    server.serve(service, lambda req, info: b"")
    with pytest.raises(mcdma.AlreadyExists):
        client.serve(service, lambda req, info: b"")


def test_unserve_by_id_and_by_name(client, server):
    by_id, by_name = uniq("id"), uniq("name")
    service_id = server.serve(by_id, lambda req, info: b"1")
    server.serve(by_name, lambda req, info: b"2")
    assert client.call(by_id) == b"1" and client.call(by_name) == b"2"
    server.unserve(service_id)
    server.unserve(by_name)
    for service in (by_id, by_name):
        with pytest.raises(mcdma.NotFound):
            client.call(service)
    with pytest.raises(mcdma.NotFound, match="does not serve"):
        server.unserve(by_name)


def test_call_past_its_deadline_raises_timeout_within_a_bound(client, server):
    service = uniq("slow")
    release = threading.Event()

    def slow(req, info):
        assert 0 < info.time_left <= 0.3
        release.wait(10)
        return b"too late"

    server.serve(service, slow)
    start = time.monotonic()
    try:
        with pytest.raises(mcdma.Timeout):
            client.call(service, timeout=0.3)
        elapsed = time.monotonic() - start
    finally:
        release.set()
    # Bounded by the deadline plus the library's grace (2 s) and slack.
    assert elapsed < 0.3 + 4.0


def test_async_call_past_its_deadline_fails_its_future_with_timeout(client, server):
    service = uniq("slow-async")
    release = threading.Event()
    server.serve(service, lambda req, info: release.wait(10) and b"late")
    try:
        fut = client.call_async(service, timeout=0.2)
        assert isinstance(fut.exception(timeout=10), mcdma.Timeout)
    finally:
        release.set()


def test_call_async_returns_futures_of_replies(client, server):
    service = uniq("async")
    server.serve(service, lambda req, info: req[::-1])
    futures = [client.call_async(service, f"req {i}") for i in range(64)]
    assert [f.result(10) for f in futures] == [f"req {i}".encode()[::-1] for i in range(64)]
    assert not futures[0].cancel()  # running futures cannot be cancelled


def test_call_async_to_unknown_service_fails_its_future_with_not_found(client):
    fut = client.call_async(uniq("missing"))
    assert isinstance(fut.exception(timeout=10), mcdma.NotFound)


def test_future_callbacks_run_and_may_call_the_client(client, server):
    service = uniq("cb")
    server.serve(service, lambda req, info: req + b"!")
    done = threading.Event()
    results = []

    def on_done(fut):
        results.append(fut.result())
        results.append(client.call(service, b"nested"))  # blocking call in a callback
        done.set()

    client.call_async(service, b"first").add_done_callback(on_done)
    assert done.wait(10)
    assert results == [b"first!", b"nested!"]


def test_handler_may_make_blocking_calls(client, server, connect):
    inner, outer = uniq("inner"), uniq("outer")
    other = connect()
    other.serve(inner, lambda req, info: b"inner:" + req)
    server.serve(outer, lambda req, info: b"outer:" + server.call(inner, req))
    assert client.call(outer, b"x") == b"outer:inner:x"


def test_handlers_run_concurrently_up_to_handler_threads(client, connect):
    server = connect(handler_threads=2)
    first, second = uniq("first"), uniq("second")
    met = threading.Event()
    # `first` answers only once `second` has run: needs two handler threads.
    server.serve(first, lambda req, info: b"met" if met.wait(10) else b"alone")
    server.serve(second, lambda req, info: met.set())
    fut = client.call_async(first)
    assert client.call(second) == b""
    assert fut.result(10) == b"met"


def test_call_async_finds_a_service_served_again_by_another_app(client, connect):
    # CallAsync does not retry (its request is gone once sent): the call
    # that meets the stale id fails NOT_FOUND and the next one looks the
    # name up again. The synchronous call retries at once.
    service = uniq("moved")
    first, second = connect(), connect()
    first.serve(service, lambda req, info: b"first")
    assert client.call_async(service).result(10) == b"first"
    first.unserve(service)
    second.serve(service, lambda req, info: b"second")
    with pytest.raises(mcdma.NotFound, match="no service with id"):
        client.call_async(service).result(10)
    assert client.call_async(service).result(10) == b"second"
    second.unserve(service)
    first.serve(service, lambda req, info: b"first again")
    assert client.call(service) == b"first again"
