"""mcdma.Client: connecting, session info, closing, argument checks."""

import gc
import threading
import weakref

import pytest

import mcdma
from conftest import uniq


def test_info_names_the_session_and_the_daemon(client, daemon):
    info = client.info
    assert info.session_id > 0
    assert info.socket == daemon.socket
    assert info.daemon_version == mcdma.__version__
    assert info.host_id
    assert f"session_id={info.session_id}" in repr(info)
    assert repr(client).startswith("<mcdma.Client session=")


def test_two_clients_are_two_sessions(connect):
    a, b = connect(), connect()
    assert a.info.session_id != b.info.session_id


def test_socket_defaults_to_mcdma_socket_variable(daemon, monkeypatch):
    monkeypatch.setenv("MCDMA_SOCKET", daemon.socket)
    with mcdma.Client(app_name="from-env") as c:
        assert c.info.socket == daemon.socket


def test_connect_without_daemon_raises_unavailable(tmp_path):
    with pytest.raises(mcdma.Unavailable, match="cannot reach mcdma-rpcd"):
        mcdma.Client(str(tmp_path / "nobody.sock"), connect_timeout=0.5)


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"timeout": -1.0},
                                    {"timeout": float("nan")}, {"connect_timeout": 0},
                                    {"handler_threads": 0}])
def test_bad_client_arguments_raise_value_error(daemon, kwargs):
    with pytest.raises(ValueError):
        mcdma.Client(daemon.socket, **kwargs)


def test_bad_operation_timeout_raises_value_error(client):
    with pytest.raises(ValueError, match="timeout"):
        client.call("anything", b"", timeout=0)
    with pytest.raises(ValueError, match="ttl"):
        client.export(client.alloc(4096), uniq("ttl"), ttl=-1)


def test_context_manager_closes_the_session(daemon, client):
    service = uniq("ctx")
    with mcdma.Client(daemon.socket) as c:
        c.serve(service, lambda req, info: b"up")
        assert client.call(service) == b"up"
        assert not c.closed
    assert c.closed
    # The daemon reclaims what the session owned (a call racing the
    # reclaim sees the server gone).
    with pytest.raises((mcdma.NotFound, mcdma.PeerGone)):
        client.call(service)


def test_closed_client_raises_unavailable_from_every_operation(connect):
    c = connect()
    buf = c.alloc(4096)
    name = uniq("closed")
    c.export(buf, name)
    remote = c.resolve(name)
    c.close()
    c.close()  # idempotent
    ops = {
        "call": lambda: c.call("x"),
        "call_async": lambda: c.call_async("x"),
        "notify": lambda: c.notify("x"),
        "serve": lambda: c.serve("x", lambda r, i: b""),
        "unserve": lambda: c.unserve(1),
        "subscribe": lambda: c.subscribe("x"),
        "alloc": lambda: c.alloc(4096),
        "export": lambda: c.export(buf, "y"),
        "unexport": lambda: c.unexport(name),
        "resolve": lambda: c.resolve(name),
        "release": lambda: c.release(remote),
        "read": lambda: c.read(remote, 0, buf, 0, 16),
        "write": lambda: c.write(remote, 0, buf, 0, 16),
        "read_async": lambda: c.read_async(remote, 0, buf, 0, 16),
        "write_async": lambda: c.write_async(remote, 0, buf, 0, 16),
        "read_batch": lambda: c.read_batch([(buf, 0, remote, 0, 16)]),
        "write_batch": lambda: c.write_batch([(buf, 0, remote, 0, 16)]),
    }
    for name, op in ops.items():
        with pytest.raises(mcdma.Unavailable, match="the client is closed"):
            op()
    # The buffer's memory outlives the session.
    memoryview(buf)[:3] = b"abc"
    assert bytes(memoryview(buf)[:3]) == b"abc"


def test_unreferenced_client_is_collected_and_its_session_ends(daemon, client):
    service = uniq("gc")
    c = mcdma.Client(daemon.socket)
    c.serve(service, lambda req, info: b"alive")
    assert client.call(service) == b"alive"
    ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None
    with pytest.raises((mcdma.NotFound, mcdma.PeerGone)):
        client.call(service)


def test_close_from_another_thread_while_a_call_waits(client, connect):
    server = connect()
    service = uniq("blocked")
    release = threading.Event()
    entered = threading.Event()

    def handler(req, info):
        entered.set()
        release.wait(10)
        return b"late"

    server.serve(service, handler)
    caught = []

    def caller():
        try:
            client.call(service, timeout=20)
        except mcdma.Error as e:
            caught.append(e)

    t = threading.Thread(target=caller)
    t.start()
    assert entered.wait(10)
    client.close()  # the waiting call fails with CANCELLED
    t.join(10)
    release.set()
    assert not t.is_alive()
    assert len(caught) == 1 and isinstance(caught[0], mcdma.Cancelled), caught
