"""Smoke test of `make bench-connections` (test/bench/connections_bench.py): its quick mode (200
and 500 connections from 127.0.0.2 on, each broker fresh) runs the whole pipeline once, arbor
and Debian's mosquitto, and must write its section of benchmarks.md with every figure filled
in, every connection up and every fan-out delivered to every subscriber on both, the page's
other sections kept and its own old section replaced, and every broker it started stopped.
The figures themselves are not checked (a quick run's are not meaningful).
"""

import json
import os

import pytest

from conftest import sanitizer_findings
from test_bench_bridge import NUMBER, run_quick, still_running, table_rows

MOSQUITTO = "/usr/sbin/mosquitto"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "connections_bench.py")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SECTION = "## Many connections: memory and fan-out"
COUNTS = (200, 500)
REPEATS = 3

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

FIGURES = ("idle: broker memory per connection (bytes)",
           "subscribed: broker memory per connection (bytes)",
           "subscribed: connections/s (CONNECT, SUBSCRIBE to SUBACK)",
           "fan-out of one QoS 0 message: delivery time first (ms)",
           "fan-out of one QoS 0 message: delivery time p50 (ms)",
           "fan-out of one QoS 0 message: delivery time last (ms)")

# the old section between two others (the page's order when an earlier run was redone)
OLD_PAGE = "\n\n".join([
    "# Benchmarks: arbor and Mosquitto", "Intro written by make bench.",
    "## Partitions: MQTT-ST resync or a Mosquitto bridge", "Partition rows that must stay.",
    SECTION, "| a stale row of an earlier run | 1,000 | 1 | 2 | 0.5 |",
    "## Persistence", "Persistence rows that must stay."]) + "\n"


def test_quick_run_writes_the_section_and_fans_out_to_every_connection(tmp_path):
    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Intro written by make bench.", "Partition rows that must stay.",
         "Persistence rows that must stay."])
    rows = table_rows(section[:section.index("### Run details")])
    for figure in FIGURES:
        for n in COUNTS:
            cells = rows.get((figure, "{:,}".format(n)))
            assert cells, "no row %r %d in:\n%s" % (figure, n, section)
            assert all(NUMBER.match(c) for c in cells), (figure, n, cells)
    for n in COUNTS:
        expected = "{:,} of {:,}".format(n * REPEATS, n * REPEATS)
        assert rows[("fan-out: deliveries received", "{:,}".format(n))][:2] == [expected] * 2
    assert "**100,000 connections**, from the figures at 500" in section
    with open(os.path.join(ROOT, "config", "arbor.service")) as f:
        unit_limit = [l.strip() for l in f if l.startswith("LimitNOFILE=")][0]
    assert "`%s`" % unit_limit in section  # what the unit says, read from it

    with open(out / "results.json") as f:
        results = json.load(f)
    addresses = set()
    for kind in ("arbor", "mosquitto"):
        for n in COUNTS:
            idle, sub = (results["1"][kind]["%d-%s" % (n, w)] for w in ("idle", "subscribed"))
            for r in (idle, sub):
                assert (r["up"], r["failures"]) == (n, 0), r
                assert r["rss_kib"] > r["rss_before_kib"] > 0, r
                assert r["broker_open_files"] >= n, r
                soft = r["open_files_limit"][0]
                assert soft is None or soft >= n, r
                assert not addresses & set(r["source_addresses"]), r  # a fresh set each time
                addresses |= set(r["source_addresses"])
            assert len(sub["fan_out"]) == REPEATS
            for x in sub["fan_out"]:
                assert (x["received"], x["closed"], x["no_timestamp"]) == (n, 0, 0), x
                # the kernel's receive time, after the publish
                assert 0 < x["delivery_ms"]["min"] <= x["delivery_ms"]["max"] < 10000, x
            assert sub["lost"] == 0 and sub["received"] == n * REPEATS, sub

    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 2 * len(COUNTS) * 2  # a broker per kind, N, idle and subscribed
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith(".log") and "-arbor-" in name:
            log = (out / name).read_text(errors="replace")
            assert sanitizer_findings(log) == [], name
