"""Prometheus metrics (`metrics_listen`), scraped by a real Prometheus server.

Two linked daemons each serve /metrics; Debian's `prometheus` scrapes both
every second. Apps make a known number of calls (some answered NOT_FOUND)
and remote reads, and PromQL queries over what Prometheus stored
must return exactly those counts. scripts/install-deps.sh installs
Prometheus, so its absence fails the test rather than skipping it.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Dict

import numpy as np
import pytest

import mcdma
from conftest import TwoHosts, ctl_path, daemon_path, free_ports, uniq

CALLS_OK = 23
CALLS_MISSING = 4
READS = 3
READ_BYTES = 1 << 20


def _get(url: str, timeout: float = 5) -> "tuple[str, str]":
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    """Two linked daemons with metrics on, and a Prometheus scraping both."""
    prometheus = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.access(prometheus, os.X_OK):
        pytest.fail("no prometheus binary (Debian: apt-get install prometheus; "
                    "scripts/install-deps.sh installs it)")
    work = tmp_path_factory.mktemp("metrics")
    ma, mb, pp = free_ports(3)
    hosts = TwoHosts(str(work), extra_a=["--metrics-listen", f"127.0.0.1:{ma}"],
                     extra_b=["--metrics-listen", f"127.0.0.1:{mb}"])
    config = work / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: mcdma
    static_configs:
      - targets: ['127.0.0.1:{ma}']
        labels: {{host: host-a}}
      - targets: ['127.0.0.1:{mb}']
        labels: {{host: host-b}}
""")
    log = open(work / "prometheus.log", "wb")
    proc = subprocess.Popen([prometheus, f"--config.file={config}",
                             f"--storage.tsdb.path={work / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{pp}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{pp}"
    deadline = time.monotonic() + 60
    while True:
        try:
            _get(base + "/-/ready", 2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                hosts.stop()
                pytest.fail("prometheus did not become ready: "
                            + (work / "prometheus.log").read_text(errors="replace")[-2000:])
            time.sleep(0.2)
    yield hosts, base, (ma, mb)
    proc.terminate()
    proc.wait(20)
    log.close()
    hosts.stop()


def query(base: str, promql: str) -> Dict[str, float]:
    """Instant query: {host label: value} ('' when the series has no host)."""
    _, body = _get(base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    reply = json.loads(body)
    assert reply["status"] == "success", reply
    return {r["metric"].get("host", ""): float(r["value"][1]) for r in reply["data"]["result"]}


def wait_for(base: str, promql: str, want: Dict[str, float], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    got: Dict[str, float] = {}
    while time.monotonic() < deadline:
        got = query(base, promql)
        if got == want:
            return
        time.sleep(0.5)
    pytest.fail(f"{promql}: wanted {want}, Prometheus has {got}")


@pytest.fixture(scope="module")
def traffic(metered):
    """The known operations: host-b's app calls host-a's service and reads
    host-a's export."""
    hosts, base, _ = metered
    a = mcdma.Client(hosts.a.socket, app_name="metrics-a")
    b = mcdma.Client(hosts.b.socket, app_name="metrics-b")
    service = uniq("kv-lookup")

    def lookup(req, info):
        if req.startswith(b"missing"):
            raise mcdma.NotFound("no such key")  # the call completes NOT_FOUND
        return bytes(req)

    a.serve(service, lookup)
    for i in range(CALLS_OK):
        assert b.call(f"host-a/{service}", b"ping %d" % i) == b"ping %d" % i
    for i in range(CALLS_MISSING):
        with pytest.raises(mcdma.NotFound):
            b.call(f"host-a/{service}", b"missing %d" % i)
    buf = a.alloc(READ_BYTES)
    np.frombuffer(buf, np.uint8)[:] = 7
    name = uniq("kv")
    a.export(buf, name, allow_read=True, allowed_peers=["host-b"])
    remote = b.resolve(name, peer="host-a")
    dst = b.alloc(READ_BYTES)
    for _ in range(READS):
        assert b.read(remote, 0, dst, 0, READ_BYTES) == READ_BYTES
    assert np.all(np.asarray(dst) == 7)
    yield base, hosts
    a.close()
    b.close()


def test_prometheus_counts_what_the_apps_did(traffic):
    base, _ = traffic
    wait_for(base, 'up{job="mcdma"}', {"host-a": 1, "host-b": 1})
    wait_for(base, 'mcdma_operations_total{op="call",code="OK"}', {"host-b": CALLS_OK})
    wait_for(base, 'mcdma_operations_total{op="call",code="NOT_FOUND"}',
             {"host-b": CALLS_MISSING})
    # The served side: host-a's app answered every call (an error is a reply too).
    wait_for(base, 'mcdma_operations_total{op="reply",code="OK"}',
             {"host-a": CALLS_OK + CALLS_MISSING})
    wait_for(base, 'mcdma_operations_total{op="read",code="OK"}', {"host-b": READS})
    wait_for(base, 'mcdma_operation_bytes_total{op="read"} > 0', {"host-b": READS * READ_BYTES})
    wait_for(base, 'mcdma_operation_duration_seconds_count{op="call"} > 0',
             {"host-b": CALLS_OK + CALLS_MISSING})
    wait_for(base, 'sum by (host) (mcdma_link_state{state="up"})', {"host-a": 1, "host-b": 1})
    wait_for(base, "mcdma_sessions", {"host-a": 1, "host-b": 1})
    # The histogram is a real one: PromQL's quantile over its buckets.
    p50 = query(base, 'histogram_quantile(0.5, mcdma_operation_duration_seconds_bucket'
                      '{op="call",host="host-b"})')
    assert 0 < p50["host-b"] < 10, p50
    rtt = query(base, "mcdma_link_rtt_seconds")
    assert set(rtt) == {"host-a", "host-b"} and all(v >= 0 for v in rtt.values()), rtt


def test_metrics_page_is_the_text_format_and_agrees_with_status(metered, traffic):
    _, _, (_, mb) = metered
    _, hosts = traffic
    kind, body = _get(f"http://127.0.0.1:{mb}/metrics")
    assert kind.startswith("text/plain"), kind
    assert "# TYPE mcdma_operations_total counter" in body
    assert "# TYPE mcdma_operation_duration_seconds histogram" in body
    assert 'mcdma_operation_duration_seconds_bucket{op="call",le="+Inf"}' in body
    assert f'mcdma_operations_total{{op="call",code="NOT_FOUND"}} {CALLS_MISSING}' in body
    status = json.loads(subprocess.run(
        [ctl_path(), "--socket", hosts.b.socket, "status", "--json"],
        capture_output=True, text=True, check=True, timeout=10).stdout)
    call = next(op for op in status["ops"] if op["op"] == "call")
    by_code = {row["code"]: int(row["count"]) for row in call["by_code"]}
    assert by_code == {"OK": CALLS_OK, "NOT_FOUND": CALLS_MISSING}, by_code
    assert int(call["latency"]["count"]) == CALLS_OK + CALLS_MISSING


def test_a_bad_metrics_address_stops_the_daemon_naming_it(tmp_path):
    busy, = free_ports(1)
    holder = socket.socket()
    holder.bind(("127.0.0.1", busy))
    holder.listen()
    try:
        for address, words in [("127.0.0.1", "expected host:port"),
                               (f"127.0.0.1:{busy}", "cannot listen")]:
            r = subprocess.run([daemon_path(), "--socket", str(tmp_path / "m.sock"),
                                "--metrics-listen", address],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode != 0, r.stdout + r.stderr
            out = r.stdout + r.stderr
            assert f"metrics_listen '{address}'" in out and words in out, out
    finally:
        holder.close()
