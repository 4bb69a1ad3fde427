"""The plumbing of kv_bench.py: two hosts, their daemons, endpoint processes.

* ``Hosts``: network namespaces PREFIX-a and PREFIX-b joined by a veth pair
  (tests/netns/hosts.sh), or this machine's loopback twice when the script's
  ``check`` exits 77 (or ``--loopback``). ``down()`` removes what ``up()``
  made.
* ``Daemons``: mcdma-rpcd as host-a and host-b, each in its namespace,
  sharing a fresh fabric key; B links to A (``--peer host-a=...``), as in
  demo/run-two-hosts-demo.sh. ``start()`` returns once ``mcdmactl links
  --json`` on B shows host-a up.
* ``Endpoint``: one role process (kv_roles.py, kv_nixl.py or
  mcdma_bench_kv_raw) driven by lines on its stdin, answering one line each
  on its stdout.

Ownership and failure: the orchestrator owns every process here. Each child
gets PR_SET_PDEATHSIG(SIGKILL) (``ip netns exec`` execs in place, so it
carries over), so killing the orchestrator takes them along; ``stop()``
closes an endpoint's stdin (its signal to end), then SIGKILLs it after a
grace period. Every wait has a deadline and raises ``Failure`` with the
reason and the process's last log lines. Threading: the orchestrator's only
thread.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_DAEMON_PORT = 7471  # inside a namespace nothing else listens
_DATA_PORT = 7472
_STOP_GRACE_S = 5.0


class Failure(Exception):
    """A step of the run failed; the message says why."""


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def last_lines(path: Path, n: int = 3) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-n:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _describe(rc: int) -> str:
    return f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"


class Hosts:
    def __init__(self, script: Path, prefix: str, force_loopback: bool) -> None:
        self.script, self.prefix = script, prefix
        self.ns: Dict[str, str] = {"a": "", "b": ""}
        self.addr: Dict[str, str] = {"a": "127.0.0.1", "b": "127.0.0.1"}
        self.note = "two hosts on loopback (--loopback)"
        self._made = False
        self._force_loopback = force_loopback

    @property
    def loopback(self) -> bool:
        return not self.ns["a"]

    def up(self) -> None:
        if self._force_loopback:
            return
        check = subprocess.run(["bash", str(self.script), "check"], capture_output=True,
                               text=True, timeout=30)
        if check.returncode == 77:
            why = check.stderr.strip() or "hosts.sh check exited 77"
            self.note = f"two hosts on loopback ({why})"
            return
        if check.returncode != 0:
            raise Failure(f"hosts.sh check: exit {check.returncode}: {check.stderr.strip()}")
        self._made = True  # down() is safe even if up fails halfway
        made = subprocess.run(["bash", str(self.script), "up", self.prefix], capture_output=True,
                              text=True, timeout=60)
        if made.returncode != 0:
            raise Failure(f"hosts.sh up {self.prefix}: {made.stderr.strip()}")
        for side, line in zip("ab", made.stdout.split("\n")):
            self.ns[side], self.addr[side] = line.split()
        self.note = (f"two hosts: network namespaces {self.ns['a']} ({self.addr['a']}) and "
                     f"{self.ns['b']} ({self.addr['b']}), joined by a veth pair")

    def down(self) -> None:
        if self._made:
            subprocess.run(["bash", str(self.script), "down", self.prefix],
                           capture_output=True, timeout=60)
            self._made = False

    def device(self, side: str) -> str:
        """The network interface that carries this side's address ("lo" on
        loopback): where a transport that picks its own interfaces (UCX)
        must be kept."""
        if self.loopback:
            return "lo"
        shown = subprocess.run(["ip", "-n", self.ns[side], "-o", "-4", "addr", "show"],
                               capture_output=True, text=True, timeout=30)
        for line in shown.stdout.splitlines():
            fields = line.split()  # "2: v12-a inet 10.240.12.1/24 ..."
            if len(fields) >= 4 and fields[3].split("/")[0] == self.addr[side]:
                return fields[1]
        raise Failure(f"no interface in {self.ns[side]} carries {self.addr[side]}: "
                      f"{shown.stderr.strip() or shown.stdout.strip()}")

    def on(self, side: str, argv: List[str]) -> List[str]:
        return ["ip", "netns", "exec", self.ns[side], *argv] if self.ns[side] else argv

    def port(self, netns_port: int) -> int:
        return _free_port() if self.loopback else netns_port


class Endpoint:
    """A child process: commands on its stdin, one answer line each on stdout."""

    def __init__(self, name: str, argv: List[str], log: Path,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.name, self.log = name, log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, env=env, preexec_fn=_die_with_parent)
        self._pending = b""

    def _gone(self, what: str) -> Failure:
        rc = self.proc.poll()
        state = "still running" if rc is None else _describe(rc)
        tail = last_lines(self.log)
        return Failure(f"{self.name}: {what} ({state})" + (f": {tail}" if tail else ""))

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise self._gone(f"cannot take {line.split()[0]!r}") from None

    def line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._gone(f"no answer within {timeout:.0f} s")
            if select.select([fd], [], [], left)[0]:
                data = os.read(fd, 65536)
                if not data:
                    self.proc.wait(timeout=_STOP_GRACE_S)
                    raise self._gone("ended")
                self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode(errors="replace")

    def ready(self, timeout: float) -> str:
        """Waits for ``ready [REST]``; returns REST."""
        line = self.line(timeout)
        if not line.startswith("ready"):
            raise self._gone(f"said {line!r} instead of ready")
        return line[len("ready"):].strip()

    def answer(self, timeout: float) -> dict:
        """The next JSON answer; Failure when it is not ok."""
        line = self.line(timeout)
        try:
            reply = json.loads(line)
        except ValueError:
            raise self._gone(f"answered {line!r}") from None
        if not reply.get("ok"):
            raise Failure(f"{self.name}: {reply.get('error', line)}")
        return reply

    def request(self, line: str, timeout: float) -> dict:
        self.send(line)
        return self.answer(timeout)

    def stop(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class Daemons:
    def __init__(self, hosts: Hosts, daemon: Path, mcdmactl: Path, workdir: Path,
                 log_level: str) -> None:
        self.hosts, self.daemon, self.mcdmactl = hosts, daemon, mcdmactl
        self.dir, self.log_level = workdir, log_level
        self.socket = {s: workdir / f"rpcd-{s}.sock" for s in "ab"}
        self.log = {s: workdir / f"rpcd-{s}.log" for s in "ab"}
        self.proc: Dict[str, subprocess.Popen] = {}
        self.note = ""

    def _spawn(self, side: str, peer: Optional[str]) -> None:
        addr = self.hosts.addr[side]
        argv = [str(self.daemon), "--socket", str(self.socket[side]), "--host-id", f"host-{side}",
                "--fabric-key", str(self.dir / "fabric.key"),
                "--listen", f"{addr}:{self.ports[side][0]}",
                "--data-listen", f"{addr}:{self.ports[side][1]}", "--log-level", self.log_level]
        if peer:
            argv += ["--peer", peer]
        with open(self.log[side], "wb") as err:
            self.proc[side] = subprocess.Popen(self.hosts.on(side, argv), stdin=subprocess.DEVNULL,
                                               stdout=err, stderr=err, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 20
        while not self.socket[side].exists():
            if gone := self.exited():
                raise Failure(gone)
            if time.monotonic() > deadline:
                raise Failure(f"mcdma-rpcd (host-{side}) made no socket within 20 s")
            time.sleep(0.05)

    def start(self, link_wait: float) -> None:
        key = subprocess.run(
            [str(self.mcdmactl), "fabric-key", "new", str(self.dir / "fabric.key")],
            capture_output=True, text=True, timeout=20)
        if key.returncode != 0:
            raise Failure(f"mcdmactl fabric-key new: {key.stderr.strip()}")
        taken: set = set()

        def port(netns_port: int) -> int:  # on loopback, four distinct ports
            p = self.hosts.port(netns_port)
            while self.hosts.loopback and p in taken:
                p = self.hosts.port(netns_port)
            taken.add(p)
            return p
        self.ports = {s: (port(_DAEMON_PORT), port(_DATA_PORT)) for s in "ab"}
        self._spawn("a", None)
        self._spawn("b", f"host-a={self.hosts.addr['a']}:{self.ports['a'][0]}")
        self._wait_link(link_wait)

    def _wait_link(self, link_wait: float) -> None:
        t0 = time.monotonic()
        state = "(not read yet)"
        while time.monotonic() - t0 < link_wait:
            if gone := self.exited():
                raise Failure(gone)
            out = subprocess.run([str(self.mcdmactl), "--socket", str(self.socket["b"]), "links",
                                  "--json"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                link = self._find_link(out.stdout)
                state = link.get("state", "(no link to host-a listed)") if link else state
                if state == "up":
                    self.note = (f"link host-b -> host-a up after {time.monotonic() - t0:.1f} s "
                                 f"(transport {link.get('transport', '?')})")
                    return
            else:
                state = f"(mcdmactl links: {out.stderr.strip()})"
            time.sleep(0.2)
        raise Failure(f"link host-b -> host-a not up within {link_wait:.0f} s (state {state})")

    @staticmethod
    def _find_link(text: str) -> dict:
        """The entry for host-a in ``mcdmactl links --json`` output."""
        def walk(node: object) -> Optional[dict]:
            if isinstance(node, dict):
                if "host-a" in node.values() and "state" in node:
                    return node
                node = list(node.values())
            if isinstance(node, list):
                for child in node:
                    if (found := walk(child)) is not None:
                        return found
            return None
        try:
            return walk(json.loads(text)) or {}
        except ValueError:
            return {}

    def exited(self) -> str:
        for side, proc in self.proc.items():
            rc = proc.poll()
            if rc is not None:
                tail = last_lines(self.log[side], 2)
                return (f"mcdma-rpcd (host-{side}) ended ({_describe(rc)})" +
                        (f": {tail}" if tail else ""))
        return ""

    def log_tails(self, n: int = 3) -> str:
        return "\n".join(f"  host-{s} daemon: {last_lines(self.log[s], n)}" for s in "ab"
                         if last_lines(self.log[s], n))

    def stop(self) -> None:
        for side in ("b", "a"):
            proc = self.proc.pop(side, None)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
