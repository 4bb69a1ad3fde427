"""Notifications: notify, subscribe / Subscription, wait_notify."""

import threading
import time

import pytest

import mcdma
from conftest import uniq


def test_notifications_queue_in_order_and_wait_pops_them(client, connect):
    receiver = connect()
    service = uniq("events")
    sub = receiver.subscribe(service)
    assert sub.service == service and sub.service_id > 0
    for i in range(5):
        client.notify(service, f"event {i}")
    assert [sub.wait(10) for _ in range(5)] == [f"event {i}".encode() for i in range(5)]
    assert sub.pending == 0 and sub.dropped == 0 and not sub.closed


def test_wait_notify_pops_from_the_subscription(client, connect):
    receiver = connect()
    service = uniq("wn")
    receiver.subscribe(service)
    client.notify(service, b"one")
    assert receiver.wait_notify(service, timeout=10) == b"one"


def test_wait_notify_without_subscription_raises_not_found(client):
    with pytest.raises(mcdma.NotFound, match="subscribe"):
        client.wait_notify(uniq("none"), timeout=0.1)


def test_wait_without_notification_raises_timeout(client):
    sub = client.subscribe(uniq("quiet"))
    with pytest.raises(mcdma.Timeout):
        sub.wait(timeout=0.05)
    with pytest.raises(mcdma.Timeout):
        sub.wait(timeout=0)
    assert sub.poll() is None


def test_poll_takes_only_what_already_arrived(client, connect):
    receiver = connect()
    service = uniq("poll")
    sub = receiver.subscribe(service)
    client.notify(service, b"a")
    client.notify(service, b"b")
    assert [sub.wait(10), sub.wait(10)] == [b"a", b"b"]
    assert sub.poll() is None  # both taken, nothing else sent
    client.notify(service, b"c")
    deadline = time.monotonic() + 10  # queued a moment after notify returns
    while (message := sub.poll()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert message == b"c"
    sub.close()
    assert list(sub) == []  # closed: iteration ends


def test_iteration_yields_until_closed(client, connect):
    receiver = connect()
    service = uniq("stream")
    sub = receiver.subscribe(service)
    for i in range(3):
        client.notify(service, str(i))
    received = []
    for message in sub:
        received.append(message)
        if len(received) == 3:
            sub.close()
    assert received == [b"0", b"1", b"2"]


def test_max_pending_drops_and_counts_newer_notifications(client, connect):
    receiver = connect()
    service = uniq("bounded")
    sub = receiver.subscribe(service, max_pending=2)
    for i in range(4):
        client.notify(service, str(i))
    # Notify returns once the message is in the server's inbox; the
    # receiving thread queues it a moment later.
    deadline = time.monotonic() + 10
    while sub.pending + sub.dropped < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sub.pending == 2 and sub.dropped == 2
    assert [sub.wait(10), sub.wait(10)] == [b"0", b"1"]


def test_calling_a_subscription_raises_invalid(client, connect):
    receiver = connect()
    service = uniq("sub-call")
    receiver.subscribe(service)
    with pytest.raises(mcdma.Invalid, match="subscription"):
        client.call(service)


def test_closing_a_subscription_stops_the_service_and_cancels_waits(client, connect):
    receiver = connect()
    service = uniq("closing")
    with receiver.subscribe(service) as sub:
        client.notify(service, b"kept")
        assert sub.wait(10) == b"kept"
    assert sub.closed
    with pytest.raises(mcdma.Cancelled):
        sub.wait(1)
    with pytest.raises(mcdma.NotFound):
        client.notify(service, b"late")
    sub.close()  # idempotent
    with pytest.raises(mcdma.NotFound):
        receiver.wait_notify(service, 0.1)


def test_client_close_cancels_a_blocked_wait(connect):
    receiver = connect()
    sub = receiver.subscribe(uniq("bye"))
    caught = []
    waiting = threading.Thread(target=lambda: caught.append(
        pytest.raises(mcdma.Cancelled, sub.wait, 30)))
    waiting.start()
    receiver.close()
    waiting.join(10)
    assert not waiting.is_alive() and len(caught) == 1
    assert sub.closed


def test_notify_to_a_served_handler_is_one_way(client, connect):
    server = connect()
    service = uniq("oneway")
    seen = []
    got = threading.Event()

    def handler(req, info):
        seen.append((req, info.one_way, info.time_left))
        got.set()
        return b"dropped"

    server.serve(service, handler)
    client.notify(service, b"ping")
    assert got.wait(10)
    [(request, one_way, time_left)] = seen
    assert (request, one_way) == (b"ping", True) and time_left >= 0


def test_notify_to_unknown_service_raises_not_found(client):
    with pytest.raises(mcdma.NotFound):
        client.notify(uniq("nobody"), b"x")
