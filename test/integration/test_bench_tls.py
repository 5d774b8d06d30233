"""Smoke test of `make bench-tls` (test/bench/tls_bench.py): its quick mode (1 and 8 clients,
1 s windows, the cases marked quick) runs the whole pipeline once, arbor and Debian's mosquitto,
each broker fresh per measurement, and must write its section of benchmarks.md with a row for
every case and client count, every figure filled in, no errors, the connects of the resumed
cases resumed (all but each client's first), the TLS versions asked for negotiated, the page's
other sections kept and its own old section replaced, and every broker it started stopped. The
figures themselves are not checked (a quick run's are not meaningful).
"""

import json
import os
import shutil

import pytest

from conftest import sanitizer_findings
from test_bench_bridge import BENCH, NUMBER, run_quick, still_running

MOSQUITTO = "/usr/sbin/mosquitto"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "tls_bench.py")
SECTION = "## TLS handshakes"
KINDS = ("arbor", "mosquitto")

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                       reason="arbor_bench not built (set ARBOR_BUILD_DIR)"),
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
    pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl CLI"),
]

# (case text in the table, client counts) of a quick run
ROWS = [("ECDSA P-256, TLS 1.3", (1, 8)), ("ECDSA P-256, TLS 1.2", (1, 8)),
        ("RSA 2048, TLS 1.3", (1, 8)),
        ("ECDSA P-256, TLS 1.3, `set_tcp_nodelay true`", (1, 8)),
        ("ECDSA P-256, TLS 1.3, resumed, `set_tcp_nodelay true`", (8,)),
        ("ECDSA P-256, TLS 1.2, resumed", (8,)), ("plain TCP, no TLS", (8,))]

OLD_PAGE = "\n\n".join([
    "# Benchmarks: arbor and Mosquitto", "Intro written by make bench.",
    SECTION, "| a stale row of an earlier run | 1 | 2 / 3 (0.67) |",
    "## Many connections: memory and fan-out", "Connection rows that must stay."]) + "\n"


def rows_of(text):
    """{(case, C): [cells after them]} of a summary table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 9 and cells[1][:1].isdigit():
            rows[(cells[0], int(cells[1]))] = cells[2:]
    return rows


def test_quick_run_writes_every_case(tmp_path):
    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Intro written by make bench.", "Connection rows that must stay."], "--bench", BENCH)
    head = section[:section.index("### Run details")]
    rate = rows_of(head[:head.index("**CPU per connect")])
    cpu = rows_of(head[head.index("**CPU per connect"):])
    assert len(rate) == len(cpu) == sum(len(counts) for _, counts in ROWS), (rate, cpu)
    for text, counts in ROWS:
        for n in counts:
            assert (text, n) in rate and (text, n) in cpu, "no row %r C=%d in:\n%s" % (
                text, n, section)
            # connects/s, ratio and p50 / p99 of each; broker CPU, ratio and client CPU of each
            numbers = rate[(text, n)] + cpu[(text, n)][:5]
            assert all(NUMBER.match(c) for c in numbers), (text, n, numbers)
            assert cpu[(text, n)][5:] == ["0", "0"], (text, n, cpu[(text, n)])  # errors
    rows = rate

    with open(out / "results.json") as f:
        results = json.load(f)
    for kind in KINDS:
        got = results["1"][kind]
        assert len(got) == len(rows)
        for key, r in got.items():
            assert r["errors_total"] == 0 and r["connects"] > 0, (kind, key, r)
            assert r["broker_cpu_s"] is not None, (kind, key)
            if key.startswith("tcp-"):
                assert r["tls"] is None
                continue
            version = "TLSv1.2" if "-1.2" in key else "TLSv1.3"
            assert r["tls"]["version"] == version, (kind, key, r["tls"])
            if "resumed" in key:
                # each client's first handshake is full; on a slow machine it may fall in the
                # window
                clients = int(key.rsplit("-", 1)[1])
                assert r["resumed"] >= r["connects"] - clients, (kind, key, r)
            else:
                assert r["resumed"] == 0, (kind, key, r)
    # the arbor configurations: certificates of both kinds, set_tcp_nodelay where asked
    conf = (out / "r1-arbor-rsa-1.3-8.conf").read_text()
    assert "certs-rsa/server.crt" in conf and "set_tcp_nodelay" not in conf
    assert "set_tcp_nodelay true" in (out / "r1-mosquitto-ecdsa-1.3-nodelay-8.conf").read_text()
    assert "certfile" not in (out / "r1-arbor-tcp-8.conf").read_text()

    pids = [int(x) for x in pidfile.read_text().split()]
    restarts = sum("started again on another port" in n for n in results["env"]["notes"])
    assert len(pids) == 2 * len(rows) + restarts  # a fresh broker per kind and measurement
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith(".log") and "-arbor-" in name:
            log = (out / name).read_text(errors="replace")
            assert sanitizer_findings(log) == [], name
