"""A linked host that dies: operations across the link raise LinkDown."""

import time

import pytest

import mcdma
from conftest import uniq


def test_operations_across_a_dead_link_raise_link_down(fresh_two_hosts):
    hosts = fresh_two_hosts
    with mcdma.Client(hosts.a.socket) as a, mcdma.Client(hosts.b.socket) as b:
        service, name = uniq("svc"), uniq("exp")
        a.serve(service, lambda req, info: b"up")
        buf = a.alloc(1 << 20)
        a.export(buf, name, allowed_peers=["host-b"], allow_write=True)
        remote = b.resolve(name, peer="host-a")
        local = b.alloc(1 << 20)
        assert b.call(f"host-a/{service}") == b"up"
        assert b.read(remote, 0, local, 0, 4096) == 4096

        hosts.a.kill()
        deadline = time.monotonic() + 10  # host-b notices (EOF or heartbeat)
        while hosts.links(hosts.b).get("host-a") == "up" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hosts.links(hosts.b).get("host-a") != "up"

        with pytest.raises(mcdma.LinkDown):
            b.call(f"host-a/{service}", timeout=5)
        with pytest.raises(mcdma.LinkDown):
            b.call_async(f"host-a/{service}", timeout=5).result(10)
        with pytest.raises(mcdma.LinkDown):
            b.read(remote, 0, local, 0, 4096, timeout=5)
        with pytest.raises(mcdma.LinkDown):
            b.write_async(remote, 0, local, 0, 4096, timeout=5).result(10)
        with pytest.raises(mcdma.LinkDown):
            b.resolve(name, peer="host-a")
        with pytest.raises(mcdma.LinkDown):
            b.notify(f"host-a/{service}", b"anyone?", timeout=5)
