"""Smoke test of `make bench-overload` (test/bench/overload_bench.py and its Go client,
test/bench/overload): the client is built with the machine's Go (skipped without one), then the
quick mode (100 messages per publisher, one round, 10 and 50 subscribers) runs the whole
pipeline once against arbor (loops 1, and one loop per CPU) and Debian's mosquitto, and must write its section of
benchmarks.md with every figure filled in, every message delivered to every subscriber once
and in order on both, the page's other sections kept and its own old section replaced, and
every broker it started stopped. The figures themselves are not checked (a quick run's are not
meaningful).
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import sanitizer_findings
from test_bench_bridge import NUMBER, run_quick, still_running, table_rows

MOSQUITTO = "/usr/sbin/mosquitto"
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "bench", "overload_bench.py")
CLIENT_SRC = os.path.join(HERE, "..", "bench", "overload")
SECTION = "## Overload: slow subscribers (the MQTT-ST paper's local scenario)"
SUBSCRIBERS = (10, 50)
MESSAGES = 100  # per publisher in the quick mode
PUBLISHERS = 10


def go_command():
    """The go command run-bench-overload.sh would use: GO, go on PATH, /usr/local/go/bin/go."""
    for go in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if go and os.access(go, os.X_OK):
            return go
    return None


pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
    pytest.mark.skipif(go_command() is None, reason="no Go toolchain for the client"),
]

FIGURES = ("publication throughput, mean per publisher (msg/s; higher is better)",
           "end-to-end latency mean (ms)", "end-to-end latency p50 (ms)",
           "end-to-end latency p99 (ms)", "end-to-end latency max (ms)",
           "broker CPU per delivery (us)", "broker peak RSS (MiB)")

OLD_PAGE = "\n\n".join([
    "# Benchmarks: arbor and Mosquitto", "Intro written by make bench.",
    "## Many connections: memory and fan-out", "Connections rows that must stay.",
    SECTION, "| a stale row of an earlier run | 10 | 1 | 2 | 0.5 |",
    "## Persistence", "Persistence rows that must stay."]) + "\n"


# a go build with an empty cache (about 20 s here, more on a loaded machine, plus the module
# download on a fresh one) and the quick run (up to 110 s, run_quick's limit)
@pytest.mark.timeout(420)
def test_quick_run_writes_the_section_and_delivers_every_message(tmp_path):
    client = tmp_path / "overload"
    p = subprocess.run([go_command(), "build", "-buildvcs=false", "-o", str(client), "."],
                       cwd=CLIENT_SRC, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "go build failed:\n%s%s" % (p.stdout, p.stderr)

    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Intro written by make bench.", "Connections rows that must stay.",
         "Persistence rows that must stay."], "--bench", str(client))
    # figure, subscribers, then arbor, arbor-loops, mosquitto and two ratios
    rows = table_rows(section[:section.index("### Run details")], columns=7)
    for figure in FIGURES:
        for n in SUBSCRIBERS:
            cells = rows.get((figure, str(n)))
            assert cells, "no row %r %d in:\n%s" % (figure, n, section)
            assert all(NUMBER.match(c) for c in cells), (figure, n, cells)
    for n in SUBSCRIBERS:
        lost = rows[("messages lost (of {:,}), each round".format(PUBLISHERS * MESSAGES * n),
                     str(n))]
        assert lost[:3] == ["0", "0", "0"], lost
        assert rows[("duplicates + deliveries out of order, each round", str(n))][:3] == \
            ["0", "0", "0"]
    assert "-messages %d -size 100 -subscribers 10 -qos 2" % MESSAGES in section

    with open(out / "results.json") as f:
        results = json.load(f)
    for kind in ("arbor", "arbor-loops", "mosquitto"):
        for n in SUBSCRIBERS:
            r = results["1"][kind][str(n)]
            assert r["complete"] and r["exit"] == 0, r
            assert r["delivered"] == r["expected"] == PUBLISHERS * MESSAGES * n, r
            assert r["latency_ms"]["count"] == r["expected"], r
            assert 0 < r["latency_ms"]["min"] <= r["latency_ms"]["max"] < 120000, r
            assert [x["completed"] for x in r["per_publisher"]] == [MESSAGES] * PUBLISHERS, r
            assert r["connections_lost"] == 0 and r["broker_cpu_s"] > 0, r

    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 3 * len(SUBSCRIBERS)  # a fresh broker per kind and run
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith(".log") and "-arbor" in name:
            log = (out / name).read_text(errors="replace")
            assert sanitizer_findings(log) == [], name
