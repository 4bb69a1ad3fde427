"""Fixtures for the mcdma Python binding tests: real mcdma-rpcd daemons.

Environment (ctest sets all three; see bindings/python/CMakeLists.txt):
  PYTHONPATH    <build>/bindings/python, where the built package lives;
  MCDMA_DAEMON  the mcdma-rpcd to run (default: <repo>/build*/daemon/...);
  MCDMA_CTL     mcdmactl, for the two-host fixture's fabric key and link
                state (default: next to the daemon's build).

Fixtures:
  daemon      one daemon for the whole session on a private socket;
  client      a fresh mcdma.Client on it, closed after the test;
  connect     a factory of more clients (all closed after the test);
  two_hosts   two daemons, "host-a" and "host-b", linked on loopback with a
              fresh fabric key (module scope; skips without mcdmactl);
  fresh_two_hosts  the same for one test (which may kill a daemon).

Every daemon is stopped with SIGTERM and must exit 0. A failing test gets
the tail of every daemon log attached to its report.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
_daemons: List["Daemon"] = []  # every daemon started, for failure reports


def _find_tool(env: str, relative: str) -> Optional[str]:
    path = os.environ.get(env)
    if path:
        if not os.access(path, os.X_OK):
            pytest.fail(f"${env}={path} is not an executable")
        return path
    for build in sorted(REPO.glob("build*")):
        candidate = build / relative
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def daemon_path() -> str:
    path = _find_tool("MCDMA_DAEMON", "daemon/mcdma-rpcd")
    if path is None:
        pytest.skip("no mcdma-rpcd: build it (scripts/build.sh) or set MCDMA_DAEMON")
    return path


def ctl_path() -> str:
    path = _find_tool("MCDMA_CTL", "tools/mcdmactl/mcdmactl")
    if path is None:
        pytest.skip("no mcdmactl (fabric keys, link state): build it or set MCDMA_CTL")
    return path


def free_ports(n: int) -> List[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Daemon:
    """One mcdma-rpcd process on a socket in `workdir`, logging to a file."""

    def __init__(self, workdir: str, name: str, args: Optional[List[str]] = None) -> None:
        self.name = name
        self.socket = os.path.join(workdir, f"{name}.sock")
        self.log = os.path.join(workdir, f"{name}.log")
        argv = [daemon_path(), "--socket", self.socket, "--log-level", "info", *(args or [])]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        _daemons.append(self)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                pytest.fail(f"{name}: mcdma-rpcd exited {self.proc.returncode} at start:\n"
                            f"{self.tail()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"{name}: mcdma-rpcd did not create {self.socket} in 20 s")
            time.sleep(0.02)

    def tail(self, lines: int = 40) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def kill(self) -> None:
        """SIGKILL, as a crashed or unplugged host (no clean exit expected)."""
        self.proc.kill()
        self.proc.wait()
        _daemons.remove(self)

    def stop(self) -> None:
        """SIGTERM; the daemon must exit 0 within 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"{self.name}: mcdma-rpcd ignored SIGTERM for 15 s:\n{self.tail()}")
        _daemons.remove(self)
        assert self.proc.returncode == 0, (
            f"{self.name}: mcdma-rpcd exited {self.proc.returncode} after SIGTERM:\n{self.tail()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for d in _daemons:
            alive = "running" if d.proc.poll() is None else f"exited {d.proc.returncode}"
            report.sections.append((f"mcdma-rpcd {d.name} ({alive}) log tail", d.tail()))


def uniq(prefix: str) -> str:
    """A service or export name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("local"))


@pytest.fixture(scope="session")
def daemon(workdir):
    d = Daemon(workdir, "local")
    yield d
    d.stop()


@pytest.fixture
def connect(daemon):
    """connect(**kwargs) -> a new mcdma.Client on the session daemon."""
    import mcdma

    clients = []

    def make(**kwargs) -> "mcdma.Client":
        kwargs.setdefault("socket", daemon.socket)
        c = mcdma.Client(**kwargs)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(connect):
    return connect(app_name="pytest")


class TwoHosts:
    """host-a and host-b, linked (host-a dials host-b) and up."""

    def __init__(self, workdir: str, extra_a: Optional[List[str]] = None,
                 extra_b: Optional[List[str]] = None) -> None:
        self.ctl = ctl_path()
        key = os.path.join(workdir, "fabric.key")
        subprocess.run([self.ctl, "fabric-key", "new", key], check=True, capture_output=True)
        pa, da, pb, db = free_ports(4)
        timing = ["--heartbeat-ms", "200", "--link-timeout-ms", "1500",
                  "--reconnect-max-ms", "1000"]
        started = len(_daemons)
        try:
            self.b = Daemon(workdir, "host-b", ["--host-id", "host-b", "--fabric-key", key,
                                                "--listen", f"127.0.0.1:{pb}",
                                                "--data-listen", f"127.0.0.1:{db}", *timing,
                                                *(extra_b or [])])
            self.a = Daemon(workdir, "host-a", ["--host-id", "host-a", "--fabric-key", key,
                                                "--listen", f"127.0.0.1:{pa}",
                                                "--data-listen", f"127.0.0.1:{da}", *timing,
                                                "--peer", f"host-b=127.0.0.1:{pb}",
                                                *(extra_a or [])])
            self.wait_linked()
        except BaseException:
            # No teardown runs for a fixture that failed to set up. The
            # report of this failure still shows the logs (see the hook).
            for d in _daemons[started:]:
                d.proc.kill()
                d.proc.wait()
            raise

    def links(self, d: Daemon) -> Dict[str, str]:
        r = subprocess.run([self.ctl, "--socket", d.socket, "links", "--json"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            return {}
        return {link["peer"]: link.get("state", "") for link in json.loads(r.stdout)["links"]}

    def wait_linked(self) -> None:
        deadline = time.monotonic() + 20
        while True:
            a, b = self.links(self.a), self.links(self.b)
            if a.get("host-b") == "up" and b.get("host-a") == "up":
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the link did not come up in 20 s: host-a sees {a}, host-b sees {b}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stops both daemons still in the list (both, even when the first
        fails to stop cleanly)."""
        try:
            if self.a in _daemons:
                self.a.stop()
        finally:
            if self.b in _daemons:
                self.b.stop()


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    hosts = TwoHosts(str(tmp_path_factory.mktemp("two-hosts")))
    yield hosts
    hosts.stop()


@pytest.fixture
def fresh_two_hosts(tmp_path):
    hosts = TwoHosts(str(tmp_path))
    yield hosts
    hosts.stop()
