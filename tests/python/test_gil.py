"""The GIL is released while the binding waits: other Python threads run.

Each test counts events in another Python thread, never wall-clock time. If
the waiting thread kept the GIL, the other thread could not run at all
during the wait: the counters would not move (or the wait would only end
by its deadline, raising).
"""

import sys
import threading
import time

import pytest

import mcdma
from conftest import uniq


class Counter(threading.Thread):
    """Counts loop iterations until stopped, yielding the CPU each time."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.count = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.count += 1
            time.sleep(0.0005)

    def __enter__(self) -> "Counter":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.join(10)


def test_blocking_call_lets_a_counting_thread_run(client, connect):
    server = connect()
    service = uniq("gated")
    with Counter() as counter:
        def handler(req, info):
            # The caller is blocked in client.call right now. Answer only
            # after the counter advanced 20 more times meanwhile.
            target = counter.count + 20
            while counter.count < target:
                if counter.stopped.wait(0.001):
                    return b"stopped"
            return b"counted"

        server.serve(service, handler)
        assert client.call(service, timeout=20) == b"counted"


def test_waiting_on_a_subscription_lets_the_sender_thread_run(client, connect):
    receiver = connect()
    service = uniq("gil-notify")
    sub = receiver.subscribe(service)
    started = threading.Event()

    def send():
        started.wait(10)
        client.notify(service, b"from another thread")

    sender = threading.Thread(target=send)
    sender.start()
    started.set()
    # Only the sender thread can satisfy this wait; it needs the GIL to run.
    assert sub.wait(timeout=20) == b"from another thread"
    sender.join(10)


@pytest.fixture
def no_forced_switches():
    """Python switches threads only where one releases the GIL (or blocks)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(60)
    yield
    sys.setswitchinterval(old)


def test_transfers_let_a_counting_thread_run(client, connect, no_forced_switches):
    owner = connect()
    size = 32 << 20
    src = owner.alloc(size)
    name = uniq("gil-bulk")
    owner.export(src, name, allow_write=True)
    remote = client.resolve(name)
    dst = client.alloc(size)
    # With forced switches off, this thread keeps the GIL from reading
    # `before` to reading the count again unless read()/write() release it.
    advanced = {"read": 0, "write": 0, "read_batch": 0}
    with Counter() as counter:
        for _ in range(20):
            before = counter.count
            client.read(remote, 0, dst, 0, size)
            advanced["read"] += counter.count != before
            before = counter.count
            client.write(remote, 0, dst, 0, size)
            advanced["write"] += counter.count != before
            before = counter.count
            half = size // 2
            client.read_batch([(dst, 0, remote, 0, half), (dst, half, remote, 0, half)])
            advanced["read_batch"] += counter.count != before
    assert all(n > 0 for n in advanced.values()), advanced


def test_a_handler_runs_while_the_caller_waits_without_a_helper_thread(client):
    # The same client serves and calls: the handler thread needs the GIL
    # while the caller blocks in call().
    service = uniq("self")
    client.serve(service, lambda req, info: b"served:" + req)
    assert client.call(service, b"x", timeout=20) == b"served:x"
    with pytest.raises(mcdma.NotFound):
        client.call(uniq("absent"))
