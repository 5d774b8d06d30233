"""Smoke test of `make bench-partition` (test/bench/partition_bench.py): its quick mode (a 3 s
partition at 300 msg/s) runs the whole pipeline once, arbor peers and Debian's mosquitto
bridged, and must write its section of benchmarks.md with every figure that a quick run
fills in, the backlog and the live messages delivered exactly once on both, the page's other
sections kept and its own old section replaced, and every broker it started stopped. The
figures themselves are not checked (a quick run's are not meaningful).
"""

import json
import os
import re

import pytest

from conftest import sanitizer_findings
from test_bench_bridge import NUMBER, run_quick, still_running

MOSQUITTO = "/usr/sbin/mosquitto"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "partition_bench.py")
SECTION = "## Partitions: MQTT-ST resync or a Mosquitto bridge"

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

# Filled in by every run (the live messages published while the backlog arrived are none
# when a quick run's drain takes a few milliseconds).
FIGURES = ("heal to first backlog message (s)", "heal to last backlog message (s)",
           "drain: msg/s (first to last)",
           "live messages from the heal to the end of the drain: latency p50 (ms)",
           "live messages from the heal to the end of the drain: latency max (ms)",
           "A's memory per million backlog messages (MiB)",
           "A's disk per million backlog messages, saved at the end of the partition (MiB)",
           "A's disk per million backlog messages after a clean stop following the drain (MiB)")

OLD_PAGE = """# Benchmarks: arbor and Mosquitto

Intro written by make bench.

## Partitions: MQTT-ST resync or a Mosquitto bridge

| a stale row of an earlier run | 1 | 2 | 0.5 |

## Bridges: arbor or Mosquitto at the edge

Bridge rows that must stay.
"""


def test_quick_run_writes_the_section_and_delivers_the_backlog_once(tmp_path):
    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Intro written by make bench.", "Bridge rows that must stay."])
    rows = {}
    for line in section[:section.index("### Run details")].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4:
            rows[cells[0]] = cells[1:]
    for figure in FIGURES:
        assert figure in rows, "no row %r in:\n%s" % (figure, section)
        cells = rows[figure]
        if "after a clean stop" in figure:  # mosquitto's queue is empty then: no ratio
            assert cells[2] == "n/a", (figure, cells)
            cells = cells[:2]
        assert all(NUMBER.match(c) for c in cells), (figure, cells)

    with open(out / "results.json") as f:
        results = json.load(f)
    for kind in ("arbor", "mosquitto"):
        r = results["1"][kind]
        n = r["messages"]
        assert n > 500, r  # 3 s at 300 msg/s
        assert rows["backlog arrived exactly once"][("arbor", "mosquitto").index(kind)] == \
            "{:,} of {:,}".format(n, n)
        b = r["backlog"]
        assert (b["distinct"], r["missing"], b["duplicates"], b["unexpected"], b["beyond"]) == \
            (n, 0, 0, 0, 0), b
        live = r["live"]
        assert live["distinct"] == r["live_sent"] > 0 and live["duplicates"] == 0, live
        assert 0 < r["heal_to_first_s"] <= r["heal_to_last_s"], r
        assert r["rss_end_kib"] > 0 and r["disk_partition_bytes"] > 0, r
    assert int(results["1"]["arbor"]["sys_central"]["stp/messages/lost"]) == 0

    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 4  # A and B of each kind
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith(".log") and "-arbor-" in name:
            log = (out / name).read_text(errors="replace")
            assert sanitizer_findings(log) == [], name
            assert not re.search(r"messages of \S+ .* are lost", log), log
