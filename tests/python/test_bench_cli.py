"""`mcdmactl bench`: the responder on host-a, the bench on host-b, across
the link of two real daemons; rows, JSON and raw samples checked."""

import csv
import json
import subprocess
import time

import pytest

from conftest import ctl_path


def ctl(socket: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ctl_path(), "--socket", socket, *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def responder(two_hosts):
    proc = subprocess.Popen([ctl_path(), "--socket", two_hosts.a.socket, "bench", "--serve",
                             "--serve-seconds", "300", "--buffer", "1M"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    assert "mcdma bench responder on host-a" in line and "host-b" in line, line
    yield two_hosts
    proc.terminate()
    assert proc.wait(20) == 0


def test_bench_rows_json_and_raw_samples(responder, tmp_path):
    raw = tmp_path / "samples.csv"
    r = ctl(responder.b.socket, "bench", "host-a", "--sizes", "8,4K", "--bw-sizes", "64K",
            "--depths", "1,4", "--iterations", "40", "--bw-iterations", "16", "--warmup", "2",
            "--json", "--raw", str(raw))
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert (report["host"], report["peer"]) == ("host-b", "host-a")
    rows = [(row["test"], row["bytes"], row["depth"], row["samples"]) for row in report["rows"]]
    assert rows == [("call", 8, 1, 40), ("call", 4096, 1, 40), ("read", 8, 1, 40),
                    ("read", 4096, 1, 40), ("write", 8, 1, 40), ("write", 4096, 1, 40),
                    ("read_bw", 65536, 1, 16), ("read_bw", 65536, 4, 16),
                    ("write_bw", 65536, 1, 16), ("write_bw", 65536, 4, 16)]
    for row in report["rows"]:
        assert row["transport"] == "tcp" and row["error"] == "" and not row["link_restarted"]
        assert 0 < row["min_us"] <= row["median_us"] <= row["p95_us"] <= row["p99_us"] \
            <= row["max_us"], row
        if row["test"].endswith("_bw"):
            assert row["gbit_per_s"] > 0 and row["elapsed_s"] > 0, row
    with open(raw) as f:
        samples = list(csv.DictReader(f))
    assert len(samples) == 6 * 40 + 4 * 16
    assert all(int(s["ns"]) > 0 for s in samples)
    # The raw samples are the ones the rows summarize.
    call8 = sorted(int(s["ns"]) for s in samples if s["test"] == "call" and s["bytes"] == "8")
    assert abs(call8[-1] / 1e3 - report["rows"][0]["max_us"]) < 0.01


def test_bench_text_table_names_the_transport(responder):
    r = ctl(responder.b.socket, "bench", "host-a", "--tests", "call,read_bw", "--sizes", "64",
            "--bw-sizes", "4K", "--depths", "2", "--iterations", "10", "--bw-iterations", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("mcdma bench: host-b -> host-a")
    assert any("median[us]" in l and "p99[us]" in l and "transport" in l for l in lines)
    call = next(l.split() for l in lines if l.split()[:1] == ["call"])
    assert call[1:3] == ["64", "10"] and call[-1] == "tcp", call
    bw = next(l.split() for l in lines if l.split()[:1] == ["read_bw"])
    assert bw[1:4] == ["4096", "2", "8"] and bw[-1] == "tcp", bw


def test_bench_without_a_responder_or_peer_fails_naming_why(two_hosts):
    r = ctl(two_hosts.a.socket, "bench", "host-b", "--iterations", "1")
    assert r.returncode == 1 and "no responder on 'host-b'" in r.stderr, r.stderr
    r = ctl(two_hosts.a.socket, "bench")
    assert r.returncode == 2 and "give PEER, or --serve" in r.stderr, r.stderr
    r = ctl(two_hosts.a.socket, "bench", "host-b", "--sizes", "12Q")
    assert r.returncode == 2 and "--sizes '12Q' is not a size" in r.stderr, r.stderr
