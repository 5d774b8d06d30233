"""Smoke test of `make bench-interest` (test/bench/interest_bench.py): its quick mode runs the
whole pipeline once (three loads on full replication, interest routing and statically bridged
Mosquitto, then the cost of announcing 10,000 subscriptions) and must write its section of
benchmarks.md with every figure filled in, keep the page's other sections and replace its own
old one, and stop every broker it started. Beyond the pipeline it checks what interest routing
promises, from the run's raw results: with interest routing a message crosses exactly the links
the load needs (none at 100 % locality, fewer than full replication under random attach),
full replication crosses every tree link, QoS 2 loses nothing, and announcements stay within
their rate limit under churn. Throughput and latency figures are not checked (a quick run's are
not meaningful).
"""

import json
import os

import pytest

from conftest import sanitizer_findings
from test_bench_bridge import (BENCH, MOSQUITTO, NUMBER, run_quick, still_running,
                               table_rows)

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "interest_bench.py")
SECTION = "## Interest routing: full replication, by interest, static bridges"

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                       reason="arbor_bench not built (set ARBOR_BUILD_DIR)"),
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

LOADS = {"paper-spread": "paper, clients spread (0 % locality)",
         "paper-local": "paper, 100 % locality",
         "detti": "Detti, random attach"}
FIGURES = ("inter-broker bytes (both ways, every link)",
           "inter-broker bytes per published message",
           "inter-broker PUBLISH per published message",
           "fewest link crossings per published message (this tree)",
           "delivered msg/s", "broker CPU per delivered msg (us, all 3)",
           "end-to-end latency, mean (ms)", "end-to-end latency, p99 (ms)",
           "not delivered by the end of the drain (%)")
OLD_PAGE = "\n\n".join([
    "# Benchmarks: arbor and Mosquitto", "Intro written by make bench.",
    "## MQTT-ST trees against bridged Mosquitto", "Tree rows that must stay.",
    SECTION, "| a stale row of an earlier run | 1 | 2 | 3 |",
    "## Persistence", "Persistence rows that must stay."]) + "\n"


# nine networks of three brokers and the announcement cost (about 2 minutes here, up to four
# times that under a sanitizer on a loaded machine)
@pytest.mark.timeout(900)
def test_quick_run_writes_the_section_and_routes_by_interest(tmp_path):
    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Tree rows that must stay.", "Persistence rows that must stay."], "--bench", BENCH,
        timeout=840)

    rows = table_rows(section[:section.index("### What interest costs")], columns=7)
    for figure in FIGURES:
        for load, text in LOADS.items():
            cells = rows.get((figure, text))
            assert cells, "no row %r %r in:\n%s" % (figure, text, section)
            for cell in cells[:3]:  # the three networks (a ratio may be n/a: 0 / 0)
                assert NUMBER.match(cell), "%r %r: %r" % (figure, text, cells)
    assert "zero PUBLISH between brokers with interest routing: **met**" in section
    assert "no more than full replication + 5 %: **met**" in section

    results = json.loads((out / "results.json").read_text())["1"]
    for load in LOADS:
        full, interest = results["arbor-all"][load], results["arbor-interest"][load]
        for r in (full, interest):
            assert r["published"] > 0 and r["delivered"] > 0, (load, r)
            # a changed tree, or a blocked link's ends swapping roles for a moment (settling
            # sends on every link: the copies that crossed the blocked link are duplicates)
            if (r["tree"] != r["tree_before"] or r["counters"]["stp/topology_changes"] or
                    r["counters"]["stp/messages/duplicates"]):
                pytest.skip("the tree moved during %s (a loaded machine)" % load)
        # full replication: every message on both tree links of three brokers
        assert full["inter_publish"] == 2 * full["published"], (load, full)
        # by interest: the crossings the load needs on that tree, no more; fewer only by the
        # messages a subscriber did not get (published before its interest arrived: QoS 0),
        # each at most two crossings (the longest path of three brokers)
        missing = interest["expected"] - interest["received"]
        assert (interest["needed_crossings"] - 2 * missing <= interest["inter_publish"]
                <= interest["needed_crossings"]), (load, interest)
        if load.startswith("paper"):
            for r in (full, interest):
                assert r["loss_rate"] == 0 and r["duplicates"] == 0, (load, r)
    assert results["arbor-interest"]["paper-local"]["inter_publish"] == 0
    detti = results["arbor-interest"]["detti"]
    assert 0 < detti["inter_publish"] < 2 * detti["published"], detti

    cost = json.loads((out / "results.json").read_text())["interest_cost"]
    assert cost["first"]["interest_bytes"] > 10000 * len("interest-bench/sub/00000/value")
    assert cost["update"]["interest_bytes"] > 0
    churn = cost["churn"]
    assert churn["changes"] >= 100 and churn["interest_bytes"] > 0, churn
    # at most one round per 100 ms, each at most one announcement per connection direction
    # (three links, two directions), with two rounds of slack for the start and the end
    assert churn["announcements"] <= (churn["seconds"] * 10 + 2) * 6, churn

    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 9 * 3 + 3
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith(".log") and "-arbor-" in name:
            assert sanitizer_findings((out / name).read_text(errors="replace")) == [], name
