"""serve(..., inline=True): the handler runs on the library thread that
reaped the call, holding the GIL, with the same answers as a queued one."""

import threading
import time

import pytest

import mcdma
from conftest import uniq


@pytest.fixture
def server(connect):
    return connect(app_name="inline-server")


def test_an_inline_handler_answers_with_its_reply_off_any_python_thread(client, server):
    service = uniq("echo")
    seen = []

    def echo(req, info):
        seen.append((req, info.service, info.one_way, threading.current_thread()))
        return b"re: " + req

    service_id = server.serve(service, echo, inline=True)
    assert client.call(service, b"hello") == b"re: hello"
    assert client.call(service, bytearray(range(256)) * 64) == b"re: " + bytes(range(256)) * 64
    assert [s[:3] for s in seen] == [(b"hello", service, False),
                                     (bytes(range(256)) * 64, service, False)]
    # Not one of the package's handler threads, nor the test's own.
    ran_on = seen[0][3]
    assert ran_on is not threading.main_thread()
    assert not ran_on.name.startswith("mcdma-handler")
    assert service_id > 0


@pytest.mark.parametrize("reply, expected", [(None, b""), ("text", b"text"),
                                             (bytearray(b"ba"), b"ba"),
                                             (memoryview(b"xmvx")[1:3], b"mv")])
def test_an_inline_handler_may_return_none_str_or_any_bytes_like(client, server, reply,
                                                                  expected):
    service = uniq("ret")
    server.serve(service, lambda req, info: reply, inline=True)
    assert client.call(service) == expected


def test_an_inline_handler_returning_a_non_bytes_value_answers_internal(client, server):
    service = uniq("bad")
    server.serve(service, lambda req, info: 42, inline=True)
    with pytest.raises(mcdma.Internal, match="bytes-like"):
        client.call(service)
    # The thread survived: the next call is answered.
    server.unserve(service)
    server.serve(service, lambda req, info: b"ok", inline=True)
    assert client.call(service) == b"ok"


def test_inline_handler_errors_reach_the_caller_by_class(client, server):
    service = uniq("raise")
    answers = iter([mcdma.NotFound("no such layer"), ValueError("bad request shape")])

    def handler(req, info):
        raise next(answers)

    server.serve(service, handler, inline=True)
    with pytest.raises(mcdma.NotFound, match="no such layer"):
        client.call(service)
    with pytest.raises(mcdma.Internal, match="ValueError: bad request shape"):
        client.call(service)


def test_notifications_run_an_inline_handler_and_drop_its_return(client, server):
    service = uniq("note")
    got = []
    done = threading.Event()

    def handler(req, info):
        got.append((req, info.one_way))
        if len(got) == 3:
            done.set()
        return b"dropped"

    server.serve(service, handler, inline=True)
    for i in range(3):
        client.notify(service, b"n%d" % i)
    assert done.wait(10)
    assert got == [(b"n0", True), (b"n1", True), (b"n2", True)]


def test_an_inline_handler_may_call_another_client(client, server, connect):
    backend = connect(app_name="backend")
    inner, outer = uniq("inner"), uniq("outer")
    backend.serve(inner, lambda req, info: req[::-1])
    helper = connect(app_name="helper")
    server.serve(outer, lambda req, info: helper.call(inner, req) + b"!", inline=True)
    assert client.call(outer, b"abc") == b"cba!"


def test_unserving_an_inline_service_releases_its_handler(client, server):
    import gc
    import weakref

    service = uniq("gone")

    class Handler:
        def __call__(self, req, info):
            return b"here"

    handler = Handler()
    ref = weakref.ref(handler)
    server.serve(service, handler, inline=True)
    assert client.call(service) == b"here"
    server.unserve(service)
    del handler
    gc.collect()
    assert ref() is None
    with pytest.raises(mcdma.NotFound):
        client.call(service)


def test_closing_a_client_with_inline_services_ends_them(client, connect):
    server = connect(app_name="closing")
    service = uniq("closing")
    server.serve(service, lambda req, info: b"up", inline=True)
    assert client.call(service) == b"up"
    server.close()
    # The daemon ends the session as the close reaches it: a call racing
    # that gets PEER_GONE, the later ones NOT_FOUND; none is answered.
    deadline = time.monotonic() + 10
    while True:
        try:
            reply = client.call(service)
        except mcdma.NotFound:
            break
        except mcdma.PeerGone:
            assert time.monotonic() < deadline, "the service outlived its session"
            time.sleep(0.01)
            continue
        pytest.fail(f"answered {reply!r} after close")
