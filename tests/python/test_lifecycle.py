"""Closing with work in flight: handlers waiting for the GIL or running,
pending futures, close from a handler or a callback, interpreter exit."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import mcdma
from conftest import uniq

# Statuses a caller may see when the server's session ends under its call:
# the server answered CANCELLED, or the daemon failed the call first.
SERVER_GONE = (mcdma.Cancelled, mcdma.PeerGone, mcdma.NotFound)


def test_close_with_a_handler_running_answers_its_caller(client, connect):
    server = connect()
    service = uniq("running")
    entered, release = threading.Event(), threading.Event()

    def handler(req, info):
        entered.set()
        release.wait(10)
        return b"late"

    server.serve(service, handler)
    fut = client.call_async(service, timeout=20)
    try:
        assert entered.wait(10)
        server.close()  # must not wait for the handler to return
        assert isinstance(fut.exception(10), SERVER_GONE)
    finally:
        release.set()


def test_close_while_the_handler_waits_for_the_gil(client, connect):
    server = connect()
    service = uniq("gil-wait")
    server.serve(service, lambda req, info: b"ok")
    assert client.call(service) == b"ok"
    # Hold the GIL (no forced switches) while a call arrives, then close:
    # the library's handler thread waits for Python, close must not.
    old = sys.getswitchinterval()
    sys.setswitchinterval(60)
    try:
        fut = client.call_async(service, timeout=20)
        server.close()
    finally:
        sys.setswitchinterval(old)
    try:
        assert fut.result(10) == b"ok"  # served before the close
    except SERVER_GONE:
        pass


def test_close_from_inside_a_handler(client, connect):
    server = connect()
    service = uniq("self-close")

    def handler(req, info):
        server.close()
        return b"after close"

    server.serve(service, handler)
    with pytest.raises(SERVER_GONE):
        client.call(service, timeout=20)
    assert server.closed


def test_close_from_a_future_callback(client, connect):
    server = connect()
    service = uniq("cb-close")
    server.serve(service, lambda req, info: b"done")
    closed = threading.Event()

    def on_done(fut):
        client.close()
        closed.set()

    client.call_async(service).add_done_callback(on_done)
    assert closed.wait(10) and client.closed


def test_close_fails_pending_futures_with_cancelled_before_returning(connect):
    caller, server = connect(), connect()
    service = uniq("pending")
    release = threading.Event()
    server.serve(service, lambda req, info: release.wait(10) and b"late")
    futures = [caller.call_async(service, timeout=20) for _ in range(4)]
    buf = caller.alloc(4096)
    name = uniq("pending-bulk")
    server.export(server.alloc(4096), name)
    futures.append(caller.read_async(caller.resolve(name), 0, buf, 0, 4096))
    try:
        caller.close()
        assert all(f.done() for f in futures)
        assert all(isinstance(f.exception(), mcdma.Cancelled) for f in futures[:4])
    finally:
        release.set()


EXIT_SCRIPT = """
import threading, mcdma
c = mcdma.Client({socket!r})
other = mcdma.Client({socket!r})
release = threading.Event()
c.serve("exit-slow-" + str(c.info.session_id), lambda r, i: release.wait(30) and b"x")
sub = c.subscribe("exit-sub-" + str(c.info.session_id))
pending = other.call_async("exit-slow-" + str(c.info.session_id), timeout=30)
def quietly(fn):  # closing at exit fails these waits: expected
    try:
        fn()
    except mcdma.Error:
        pass
# A daemon thread blocked in a call, and one blocked in a subscription wait.
threading.Thread(target=quietly, daemon=True, args=(
    lambda: other.call("exit-slow-" + str(c.info.session_id), timeout=30),)).start()
threading.Thread(target=quietly, args=(lambda: sub.wait(30),), daemon=True).start()
buf = c.alloc(1 << 20)
view = memoryview(buf)
print("READY", flush=True)
{ending}
"""


@pytest.mark.parametrize("ending", ["pass", "c.close()", "raise SystemExit(3)",
                                    "import gc; del c, other; gc.collect()"])
def test_interpreter_exits_cleanly_with_clients_open(daemon, ending):
    script = EXIT_SCRIPT.format(socket=daemon.socket, ending=ending)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    expected = 3 if "SystemExit" in ending else 0
    assert proc.returncode == expected, proc.stderr
    assert "READY" in proc.stdout
    for bad in ("terminate", "Fatal Python error", "Traceback"):
        assert bad not in proc.stderr, proc.stderr
