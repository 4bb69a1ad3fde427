#!/usr/bin/python3
"""kv_bench.py: KV-cache hand-off throughput between two hosts through
``mcdma.kv``, side by side with the raw per-layer read of the same bytes
through libmcdma (mcdma_bench_kv_raw), with pickled torch tensors over a
TCP socket and with NIXL's READ (its UCX backend over TCP, DRAM to DRAM),
between the same two network namespaces in one run. See bench/README.md
("kv_bench.py").

Host A (producer) and host B (consumer) are two namespaces (loopback where
they cannot be made), each with its own mcdma-rpcd, linked with a fresh
fabric key. Every mechanism moves the same cache (--layers x --layer-mib,
the same bytes: net_roles.cpp's bulk pattern, layer i as round i) from A to
B, timed on B from the open to the last layer in hand; every byte is
checked afterwards. The mechanisms take turns within each round, so a
change in the machine's load hits them alike.

NIXL runs under its own interpreter (--nixl-python: a venv with PyPI
``nixl``); when that interpreter is absent or cannot import NIXL, the NIXL
row says so (MISSING, with the reason) and the run goes on without it.

Exit codes: 0 every mechanism ran and verified (targets met or not; a
MISSING row does not count), 1 one failed (a FAILED row) or
--require-target and the target was missed, 2 usage, 77 skipped (no mcdma
package with mcdma.kv, torch or numpy for this interpreter: build the
bindings with ``ninja -C build``).
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # kv_hosts is imported from the source tree

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402

from kv_hosts import Daemons, Endpoint, Failure, Hosts  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGET = 0.90  # the target: mcdma.kv at least 90% of the raw C++ read
SKIP = 77
READY_TIMEOUT_S = 300.0  # a role fills its 1 GiB (or more) before it is ready
NIXL_PYTHON = Path("/opt/mcdma-dev/nixl/bin/python")  # the venv with PyPI nixl
NIXL_PIN = "nixl==1.5.1"  # the version the NIXL row was written against


@dataclass
class Mechanism:
    key: str
    label: str
    kind: str  # "kv", "raw", "pickle" or "nixl"
    checksum: bool = False  # kv: KVExport(checksum=True) and KVImport(verify=True); else defaults
    given: bool = False  # kv: KVImport(buffers=...), allocated once and reused
    mode: str = ""  # raw: mcdma_bench_kv_raw's command: "batch", "each" or "fresh"
    seconds: List[float] = field(default_factory=list)
    extra: List[dict] = field(default_factory=list)
    failed: str = ""
    missing: str = ""  # why the row cannot run here (nixl: no NIXL); not a failure


def mechanisms() -> List[Mechanism]:
    return [
        Mechanism("kv", "mcdma.kv (KVExport, KVImport defaults)", "kv"),
        Mechanism("kv-checksum", "mcdma.kv checksum=True, verify=True", "kv", checksum=True),
        Mechanism("kv-given", "mcdma.kv defaults, buffers given", "kv", given=True),
        Mechanism("kv-given-checksum", "mcdma.kv checksums, buffers given", "kv", checksum=True,
                  given=True),
        Mechanism("raw-batch", "C++ Resolve + ReadBatch", "raw", mode="batch"),
        Mechanism("raw-each", "C++ Resolve + Read per layer", "raw", mode="each"),
        Mechanism("raw-fresh", "C++ Alloc + Resolve + ReadBatch", "raw", mode="fresh"),
        Mechanism("pickle", "pickle.dumps(torch tensor, 5) over TCP", "pickle"),
        Mechanism("nixl", "NIXL READ, UCX over TCP, DRAM to DRAM", "nixl"),
    ]


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every default, except None (those helps say what they default to)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or isinstance(action.default, bool):
            return action.help or ""
        return super()._get_help_string(action)


def parse_args() -> argparse.Namespace:
    build = REPO / "build"
    p = argparse.ArgumentParser(
        description="KV hand-off throughput: mcdma.kv vs the raw libmcdma read vs pickle over "
                    "TCP vs NIXL, between two network namespaces",
        formatter_class=_Help)
    p.add_argument("--layers", type=int, default=32, help="layers of the cache")
    p.add_argument("--layer-mib", type=int, default=32, help="MiB per layer")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds before them")
    p.add_argument("--mechanisms", default=",".join(m.key for m in mechanisms()),
                   help="which rows to run, comma-separated")
    p.add_argument("--layer-delay-ms", type=float, default=0.0,
                   help="kv rows: the producer publishes layer i+1 this long after layer i, "
                        "while B pulls (0: every layer is published before B opens)")
    p.add_argument("--settle-ms", type=float, default=500.0,
                   help="pause before each round of each mechanism, so that the work the "
                        "previous one left behind (freeing its buffers) is over")
    p.add_argument("--json", help="also write the results as JSON to this file (default: none)")
    p.add_argument("--require-target", action="store_true",
                   help=f"exit 1 unless every mcdma.kv row without checksums reaches "
                        f"{TARGET:.2f}x the raw read")
    p.add_argument("--loopback", action="store_true",
                   help="both hosts on 127.0.0.1 instead of two network namespaces")
    p.add_argument("--build-dir", type=Path, default=build, help="where the binaries are")
    p.add_argument("--daemon", type=Path, help="mcdma-rpcd (default: BUILD/daemon/mcdma-rpcd)")
    p.add_argument("--mcdmactl", type=Path,
                   help="mcdmactl (default: BUILD/tools/mcdmactl/mcdmactl)")
    p.add_argument("--raw", type=Path,
                   help="mcdma_bench_kv_raw (default: BUILD/bench/mcdma_bench_kv_raw)")
    p.add_argument("--pythonpath", type=Path,
                   help="where the mcdma package is (default: BUILD/bindings/python)")
    p.add_argument("--nixl-python", type=Path,
                   help="the interpreter of the NIXL row, one that imports PyPI nixl (default: "
                        f"$MCDMA_NIXL_PYTHON, else {NIXL_PYTHON})")
    p.add_argument("--hosts-script", type=Path, default=REPO / "tests/netns/hosts.sh",
                   help="the network namespace script")
    p.add_argument("--daemon-log-level", default="warn", help="the daemons' --log-level")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds one round of one mechanism may take")
    p.add_argument("--link-wait", type=float, default=60.0,
                   help="seconds the daemons' link may take to come up")
    args = p.parse_args()
    args.daemon = args.daemon or args.build_dir / "daemon/mcdma-rpcd"
    args.mcdmactl = args.mcdmactl or args.build_dir / "tools/mcdmactl/mcdmactl"
    args.raw = args.raw or args.build_dir / "bench/mcdma_bench_kv_raw"
    args.pythonpath = args.pythonpath or args.build_dir / "bindings/python"
    env_nixl = os.environ.get("MCDMA_NIXL_PYTHON")
    args.nixl_python = args.nixl_python or (Path(env_nixl) if env_nixl else NIXL_PYTHON)
    known = {m.key for m in mechanisms()}
    args.mechanisms = [m for m in args.mechanisms.split(",") if m]
    if bad := [m for m in args.mechanisms if m not in known]:
        p.error(f"unknown mechanism(s) {bad}; known: {sorted(known)}")
    if args.layers < 1 or args.layer_mib < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--layers, --layer-mib and --repeats must be >= 1, --warmup >= 0")
    return args


def child_env(args: argparse.Namespace) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(args.pythonpath)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def preflight(args: argparse.Namespace) -> Optional[str]:
    """Why the run must be skipped (exit 77), or None."""
    probe = ("import numpy, torch, mcdma; from mcdma import kv; "
             "kv.KVExport, kv.KVImport, kv.allocate_layers, mcdma._mcdma.checksum")
    r = subprocess.run([sys.executable, "-c", probe], env=child_env(args), capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return (f"{sys.executable} cannot use mcdma.kv, torch and numpy from {args.pythonpath}: "
                f"{lines[-1] if lines else 'exit ' + str(r.returncode)}")
    return None


def nixl_missing(args: argparse.Namespace) -> str:
    """Why the NIXL row cannot run (one line naming what is absent), or ""."""
    py = args.nixl_python
    if not os.access(py, os.X_OK):
        return (f"no NIXL interpreter {py} (make a venv from /usr/bin/python3 with "
                f"--system-site-packages and pip install {NIXL_PIN} into it, or name one with "
                "--nixl-python or MCDMA_NIXL_PYTHON)")
    probe = ("import numpy, torch, nixl._bindings; "
             "from nixl._api import nixl_agent, nixl_agent_config, nixl_thread_sync_t")
    try:
        r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=120,
                           env=child_env(args))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{py} cannot be run: {e}"
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return (f"{py} cannot import NIXL, torch and numpy: "
                f"{lines[-1] if lines else 'exit ' + str(r.returncode)} (pip install {NIXL_PIN})")
    return ""


class Run:
    """One run: the endpoints on both hosts and the rounds."""

    def __init__(self, args: argparse.Namespace, hosts: Hosts, daemons: Daemons,
                 workdir: Path) -> None:
        self.args, self.hosts, self.daemons, self.dir = args, hosts, daemons, workdir
        self.layer_bytes = args.layer_mib << 20
        self.ep: Dict[str, Endpoint] = {}
        self.pickle_port = 0
        self.nixl_note = ""

    def start(self, rows: List[Mechanism]) -> None:
        """Starts the endpoints the rows need; a group that fails to start
        fails its rows, not the run."""
        for kinds, starter in ((("raw",), self._start_raw), (("kv", "pickle"), self._start_py),
                               (("nixl",), self._start_nixl)):
            members = [m for m in rows if m.kind in kinds and not m.missing]
            if not members:
                continue
            try:
                starter()
            except Failure as e:
                for m in members:
                    m.failed = f"start: {e}"

    def check_same_bytes(self, rows: List[Mechanism]) -> str:
        """One line for the report: kv_roles.py reads two of the C++ tool's
        layers and checks them against its own pattern, so the C++ rows and
        the Python rows move the same bytes."""
        if "raw-a" not in self.ep or "py-b" not in self.ep:
            return ""
        try:
            checked = self.ep["py-b"].request("raw-check kvraw", self.args.timeout)["layers"]
        except Failure as e:
            for m in rows:
                m.failed = m.failed or f"the C++ and Python patterns differ: {e}"
            return ""
        return (f"same bytes: layers {checked} of mcdma_bench_kv_raw's exports, read from "
                "Python, match kv_roles.py's pattern")

    def _geometry(self) -> List[str]:
        return ["--layers", str(self.args.layers), "--layer-bytes", str(self.layer_bytes)]

    def _start_raw(self) -> None:
        a, sock = self.args, self.daemons.socket
        self.ep["raw-a"] = Endpoint("mcdma_bench_kv_raw serve (host-a)", self.hosts.on("a", [
            str(a.raw), "serve", "--socket", str(sock["a"]), "--peer", "host-b",
            *self._geometry()]), self.dir / "raw-a.log")
        self.ep["raw-a"].ready(READY_TIMEOUT_S)
        self.ep["raw-b"] = Endpoint("mcdma_bench_kv_raw read (host-b)", self.hosts.on("b", [
            str(a.raw), "read", "--socket", str(sock["b"]), "--peer", "host-a",
            "--timeout-ms", str(int(a.timeout * 1000)), *self._geometry()]),
            self.dir / "raw-b.log")
        self.ep["raw-b"].ready(READY_TIMEOUT_S)

    def _start_py(self) -> None:
        a, sock, env = self.args, self.daemons.socket, child_env(self.args)
        roles = str(HERE / "kv_roles.py")
        self.ep["py-a"] = Endpoint("kv_roles.py a (host-a)", self.hosts.on("a", [
            sys.executable, roles, "a", "--socket", str(sock["a"]), "--peer", "host-b",
            "--address", self.hosts.addr["a"], "--timeout", str(a.timeout),
            *self._geometry()]), self.dir / "py-a.log", env)
        self.ep["py-b"] = Endpoint("kv_roles.py b (host-b)", self.hosts.on("b", [
            sys.executable, roles, "b", "--socket", str(sock["b"]), "--peer", "host-a",
            "--timeout", str(a.timeout), *self._geometry()]), self.dir / "py-b.log", env)
        self.pickle_port = int(self.ep["py-a"].ready(READY_TIMEOUT_S))
        self.ep["py-b"].ready(READY_TIMEOUT_S)

    def _start_nixl(self) -> None:
        """kv_nixl.py on both hosts, UCX kept to the interface of each host's
        address; B loads A's agent metadata once, before the rounds."""
        a, env = self.args, child_env(self.args)
        nixl = [str(a.nixl_python), str(HERE / "kv_nixl.py")]
        common = ["--timeout", str(a.timeout), *self._geometry()]
        dev = {s: self.hosts.device(s) for s in "ab"}
        self.ep["nixl-a"] = Endpoint("kv_nixl.py a (host-a)", self.hosts.on("a", [
            *nixl, "a", "--address", self.hosts.addr["a"], "--device", dev["a"], *common]),
            self.dir / "nixl-a.log", env)
        self.ep["nixl-b"] = Endpoint("kv_nixl.py b (host-b)", self.hosts.on("b", [
            *nixl, "b", "--device", dev["b"], *common]), self.dir / "nixl-b.log", env)
        port = int(self.ep["nixl-a"].ready(READY_TIMEOUT_S))
        self.ep["nixl-b"].ready(READY_TIMEOUT_S)
        info = self.ep["nixl-b"].request(f"nixl-connect {self.hosts.addr['a']} {port}", a.timeout)
        # Other UCX_* settings reach the roles from this environment; they
        # change the figures (e.g. UCX_TCP_RX_SEG_SIZE), so the note names them.
        tuned = sorted(f"{k}={v}" for k, v in os.environ.items()
                       if k.startswith("UCX_") and k not in ("UCX_TLS", "UCX_NET_DEVICES"))
        self.nixl_note = (
            f"nixl: NIXL {info['nixl']} ({info['nixl_package']}), UCX {info['ucx']}, "
            f"UCX_TLS=tcp on {dev['b']} (host-b) and {dev['a']} (host-a), "
            f"{'also ' + ' '.join(tuned) if tuned else 'UCX defaults otherwise'}; host-b loaded "
            f"{info['metadata_bytes']} B of host-a's agent metadata and connected in "
            f"{info['seconds']:.3f} s, once, before the rounds (untimed)")

    def stop(self) -> None:
        for ep in self.ep.values():
            ep.stop()

    def round(self, m: Mechanism, n: int) -> dict:
        t = self.args.timeout
        if m.kind == "raw":
            return self.ep["raw-b"].request(m.mode, t)
        if m.kind == "pickle":
            return self.ep["py-b"].request(f"pickle-pull {self.hosts.addr['a']} "
                                           f"{self.pickle_port}", t)
        if m.kind == "nixl":
            return self.ep["nixl-b"].request("nixl-pull", t)
        a, b = self.ep["py-a"], self.ep["py-b"]
        hid = f"kvbench-{n}-{m.key}"
        sums = "on" if m.checksum else "default"
        a.request(f"kv-open {hid} {sums}", t)
        b_owes = False  # B's answer to kv-pull is still to be read
        try:
            pull = f"kv-pull {hid} {sums} {int(m.given)}"
            if self.args.layer_delay_ms > 0:  # B waits for layers while A publishes them
                b.send(pull)
                b_owes = True
                published = a.request(f"kv-publish {hid} {self.args.layer_delay_ms}", t)
                b_owes = False
                reply = b.answer(t)
            else:
                published = a.request(f"kv-publish {hid} 0", t)
                reply = b.request(pull, t)
            reply["publish_s"] = published["seconds"]
        except Failure:
            # Closing revokes the hand-off, so a pull still running fails
            # soon; its answer is read here to keep B's answers in step.
            for step in (lambda: a.request(f"kv-close {hid} 0", t),
                         lambda: b.answer(t) if b_owes else None):
                try:
                    step()
                except Failure:
                    pass
            raise
        a.request(f"kv-close {hid} 1", t)
        return reply

    def measure(self, rows: List[Mechanism]) -> None:
        total = self.args.warmup + self.args.repeats
        for n in range(total):
            timed = n >= self.args.warmup
            for m in rows:
                if m.failed or m.missing:
                    continue
                time.sleep(self.args.settle_ms / 1000)
                try:
                    reply = self.round(m, n)
                except Failure as e:
                    m.failed = f"round {n + 1}: {e}"
                    continue
                if timed:
                    m.seconds.append(reply.pop("seconds"))
                    reply.pop("ok", None)
                    m.extra.append(reply)
            print(f"round {n + 1}/{total} done{'' if timed else ' (untimed)'}", file=sys.stderr,
                  flush=True)


# ---- the report ----

def lower_median(values: List[float]) -> float:
    """The lower of the middle values: always a real sample."""
    return sorted(values)[(len(values) - 1) // 2]


def figures(m: Mechanism, nbytes: int) -> dict:
    rates = [nbytes / s / 1e9 for s in m.seconds]
    return {"gbps_median": lower_median(rates), "gbps_min": min(rates), "gbps_max": max(rates),
            "seconds_median": lower_median(m.seconds)}


def report(args: argparse.Namespace, rows: List[Mechanism], notes: List[str]) -> dict:
    nbytes = args.layers * (args.layer_mib << 20)
    size = f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes >> 20} MiB"
    print(f"KV hand-off: {args.layers} layers x {args.layer_mib} MiB = {size} ({nbytes} B) "
          "from host-a to host-b")
    for note in notes:
        print(note)
    print(f"rounds: {args.warmup} untimed, then {args.repeats} timed; the mechanisms take turns "
          "within a round; GB/s = 10^9 B/s; med = lower median; every byte checked after each "
          "transfer")
    if args.layer_delay_ms > 0:
        print(f"kv rows: the producer publishes a layer every {args.layer_delay_ms:g} ms while "
              "B pulls, so they include its schedule and their ratios compare nothing")
    print(f"\n{'mechanism':<44} {'GB/s med':>9} {'GB/s min':>9} {'GB/s max':>9} {'s med':>8}")
    out: dict = {"rows": [], "ratios": {}}
    for m in rows:
        row = {"key": m.key, "label": m.label, "seconds": m.seconds, "extra": m.extra}
        if m.missing:
            print(f"{m.label:<44} MISSING: {m.missing}")
            row["missing"] = m.missing
        elif m.failed:
            print(f"{m.label:<44} FAILED: {m.failed}")
            row["failed"] = m.failed
        else:
            f = figures(m, nbytes)
            row.update(f)
            print(f"{m.label:<44} {f['gbps_median']:>9.3f} {f['gbps_min']:>9.3f} "
                  f"{f['gbps_max']:>9.3f} {f['seconds_median']:>8.3f}")
        out["rows"].append(row)
    ok = {m.key: m for m in rows if not m.failed and not m.missing}
    for m in ok.values():
        if m.kind == "kv":
            med = {k: lower_median([e[k] for e in m.extra]) for k in
                   ("kv_open_s", "kv_pull_s", "kv_verify_s", "kv_last_tail_s", "publish_s")}
            tail = (f", last layer landed {med['kv_last_tail_s'] * 1000:.1f} ms after its layer "
                    "event arrived" if args.layer_delay_ms > 0 else "")
            print(f"  {m.key}: KVStats, medians: open {med['kv_open_s']:.3f} s, layer reads "
                  f"{med['kv_pull_s']:.3f} s (summed; two overlap), checksums "
                  f"{med['kv_verify_s']:.3f} s{tail}; A's publish_layer calls "
                  f"{med['publish_s'] * 1000:.1f} ms (untimed)")
        elif m.kind == "nixl":
            post = lower_median([e["nixl_post_s"] for e in m.extra])
            polls = lower_median([e["nixl_polls"] for e in m.extra])
            print(f"  {m.key}: medians: make_prepped_xfer + transfer {post * 1000:.2f} ms, then "
                  f"check_xfer_state asked {polls} times until DONE")
    gbps = {k: figures(m, nbytes)["gbps_median"] for k, m in ok.items()}
    kvs = [m for m in ok.values() if m.kind == "kv"]
    # The target's baseline: the faster raw read into buffers made once.
    raws = [m for m in ok.values() if m.kind == "raw" and m.mode != "fresh"]
    best = max(raws, key=lambda m: gbps[m.key]) if raws else None
    if args.layer_delay_ms > 0:
        # The kv rows follow the producer's schedule: no ratio of theirs means anything.
        kvs = []
    def heading(text: str) -> None:  # a blank line before the first ratio
        print(("" if out["ratios"] else "\n") + text)

    if best and kvs:
        heading(f"ratio mcdma.kv / raw C++ (medians; raw = the faster raw row, {best.label}, "
              f"{gbps[best.key]:.3f} GB/s); target >= {TARGET:.2f} for the default path:")
        for m in kvs:
            r = gbps[m.key] / gbps[best.key]
            ratio: dict = {"ratio": r, "raw": best.key}
            if m.checksum:  # opted in: one more pass over the cache on each end
                verdict = "(checksums opted in)"
            else:
                verdict = "target met" if r >= TARGET else "target NOT met"
                ratio["target_met"] = r >= TARGET
            print(f"  {m.label:<42} {r:6.2f}x  {verdict}")
            out["ratios"][f"{m.key}/raw"] = ratio
    # Like for like: KVImport allocates its buffers per hand-off by default.
    fresh = [m for m in kvs if not m.given]
    if "raw-fresh" in ok and fresh:
        heading(f"ratio mcdma.kv / raw C++ into fresh buffers ({ok['raw-fresh'].label}, "
              f"{gbps['raw-fresh']:.3f} GB/s):")
        for m in fresh:
            r = gbps[m.key] / gbps["raw-fresh"]
            print(f"  {m.label:<42} {r:6.2f}x")
            out["ratios"][f"{m.key}/raw-fresh"] = {"ratio": r}
    if "pickle" in ok and kvs:
        heading(f"ratio mcdma.kv / pickle over TCP ({gbps['pickle']:.3f} GB/s):")
        for m in kvs:
            r = gbps[m.key] / gbps["pickle"]
            print(f"  {m.label:<42} {r:6.2f}x")
            out["ratios"][f"{m.key}/pickle"] = {"ratio": r}
    if "nixl" in ok and best:
        r = gbps["nixl"] / gbps[best.key]
        heading(f"ratio NIXL / raw C++ ({best.label}, {gbps[best.key]:.3f} GB/s):")
        print(f"  {ok['nixl'].label:<42} {r:6.2f}x")
        out["ratios"]["nixl/raw"] = {"ratio": r, "raw": best.key}
    if "nixl" in ok and kvs:
        heading(f"ratio mcdma.kv / NIXL ({gbps['nixl']:.3f} GB/s):")
        for m in kvs:
            r = gbps[m.key] / gbps["nixl"]
            print(f"  {m.label:<42} {r:6.2f}x")
            out["ratios"][f"{m.key}/nixl"] = {"ratio": r}
    return out


def busy_seconds() -> float:
    """User + system CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system = (int(x) for x in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """User + system CPU seconds of this process and its reaped children."""
    import resource
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def main() -> int:
    args = parse_args()
    if reason := preflight(args):
        print(f"SKIP: {reason}")
        return SKIP
    for path in (args.daemon, args.mcdmactl, args.raw):
        if not os.access(path, os.X_OK):
            print(f"FAILED: no executable {path} (build it: ninja -C build mcdma-rpcd mcdmactl "
                  "mcdma_bench_kv_raw)")
            return 1
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the namespaces and processes go.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    rows = [m for m in mechanisms() if m.key in args.mechanisms]
    for m in rows:
        if m.kind == "nixl":
            m.missing = nixl_missing(args)
    workdir = Path(tempfile.mkdtemp(prefix="mcdma-kvbench-", dir="/tmp"))
    hosts = Hosts(args.hosts_script, f"mckv{os.getpid()}", args.loopback)
    daemons = Daemons(hosts, args.daemon, args.mcdmactl, workdir, args.daemon_log_level)
    run: Optional[Run] = None
    same = ""
    load_before, busy_before, own_before = os.getloadavg()[0], busy_seconds(), own_seconds()
    wall_before = time.monotonic()
    daemon_tails = ""
    try:
        hosts.up()
        daemons.start(args.link_wait)
        run = Run(args, hosts, daemons, workdir)
        run.start(rows)
        same = run.check_same_bytes(rows)
        run.measure(rows)
        if any(m.failed for m in rows):
            daemon_tails = daemons.log_tails()
    except Failure as e:
        print(f"FAILED: setup: {e}")
        if tails := daemons.log_tails():
            print(tails)
        return 1
    finally:
        if run is not None:
            run.stop()
        daemons.stop()
        hosts.down()
        shutil.rmtree(workdir, ignore_errors=True)
    # Everything else the machine ran meanwhile skews the figures (its own
    # kernel work, e.g. softirqs not charged to a process, counts as other).
    cpus = os.cpu_count() or 1
    others = (busy_seconds() - busy_before) - (own_seconds() - own_before)
    others_share = max(0.0, others) / ((time.monotonic() - wall_before) * cpus)
    nixl_note = run.nixl_note if run is not None else ""
    notes = [n for n in (hosts.note, daemons.note, same, nixl_note) if n] + [
        f"{cpus} CPUs, shared by both hosts' daemons and apps; "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}",
        f"the rest of the machine used {others_share:.0%} of its CPU time during the run "
        f"(1-min load average {load_before:.2f} before it)"]
    out = report(args, rows, notes)
    if daemon_tails:
        print(f"the daemons' last log lines:\n{daemon_tails}")
    failed = [m for m in rows if m.failed]
    missed = [k for k, r in out["ratios"].items() if "target_met" in r and not r["target_met"]]
    if args.json:
        out.update({"settings": {k: str(v) if isinstance(v, Path) else v
                                 for k, v in vars(args).items()},
                    "notes": notes, "layer_bytes": args.layer_mib << 20,
                    "bytes": args.layers * (args.layer_mib << 20)})
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if failed:
        return 1
    return 1 if args.require_target and missed else 0


if __name__ == "__main__":
    sys.exit(main())
