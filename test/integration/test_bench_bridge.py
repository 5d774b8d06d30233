"""Smoke test of `make bench-bridge` (test/bench/bridge_bench.py): its quick mode runs the whole
pipeline once, the broker under test as the arbor edge and Debian's mosquitto as the other edge
and as every central, and must write its section of benchmarks.md with every expected row
filled in (no "n/a"), every QoS 1 message delivered once, the backlog drained exactly once,
the page's other sections kept and its own old section replaced, and every broker it started
stopped. The figures themselves are not checked (a quick run's are not meaningful).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ARBOR_BIN, sanitizer_findings

BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR") or (os.path.dirname(ARBOR_BIN) if ARBOR_BIN else "")
BENCH = os.path.join(BUILD_DIR, "test", "bench", "arbor_bench") if BUILD_DIR else ""
MOSQUITTO = "/usr/sbin/mosquitto"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "bridge_bench.py")
SECTION = "## Bridges: arbor or Mosquitto at the edge"

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                       reason="arbor_bench not built (set ARBOR_BUILD_DIR)"),
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

FIGURES = ("latency p50 at 100 msg/s (ms)", "latency p99 at 100 msg/s (ms)",
           "edge CPU per bridged message at 10,000 msg/s (us)",
           "throughput: delivered msg/s at full speed",
           "edge CPU per bridged message at full speed (us)")
DRAIN_FIGURES = ("5,000-message backlog drain: central start to last message (s)",
                 "5,000-message backlog drain: first to last message (s)",
                 "5,000-message backlog drain: msg/s (first to last)",
                 "5,000-message backlog drain: edge CPU per message (us)")
NUMBER = re.compile(r"^[0-9][0-9,]*(\.[0-9]+)?$")

OLD_PAGE = """# Benchmarks: arbor and Mosquitto

Intro written by make bench.

## MQTT-ST trees against bridged Mosquitto

Tree rows that must stay.

## Bridges: arbor or Mosquitto at the edge

| a stale row of an earlier run | out | 1 | 2 | 0.5 |

## Persistence

Persistence rows that must stay.
"""


def table_rows(text, columns=5):
    """{(figure, direction): [cells after them]} of the summary table (its rows of `columns`
    cells)."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == columns:
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def still_running(pid):
    """Is pid an arbor or mosquitto process (not reaped, not a zombie)?"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
        return b"arbor" in cmdline or b"mosquitto" in cmdline
    except OSError:
        return False


def run_quick(script, tmp_path, old_page, section_title, kept, *args, timeout=110):
    """Run a comparison script of test/bench (NAME_bench.py) in its quick mode, one round,
    writing into a copy of old_page; checks that it succeeded, that the lines `kept` of the
    other sections are still there, that its own old section (with "a stale row") was replaced
    by one quick-run section. Returns (that section's text, the --out directory, the pid
    file). timeout: the longest the script may take (s)."""
    page = tmp_path / "benchmarks.md"
    page.write_text(old_page)
    out, pidfile = tmp_path / "out", tmp_path / "pids"
    cmd = [sys.executable, script, "--arbor", ARBOR_BIN, "--mosquitto", MOSQUITTO,
           "--out", str(out), "--markdown", str(page), "--rounds", "1", "--quick",
           "--pidfile", str(pidfile)] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    name = os.path.basename(script).split("_")[0]
    assert p.returncode == 0, "%s failed (%d):\n%s%s" % (script, p.returncode, p.stdout,
                                                          p.stderr)
    text = page.read_text()
    for line in kept:
        assert line in text, line
    assert "a stale row" not in text
    assert text.count(section_title) == 1
    section = text[text.index(section_title):]
    assert "**Quick run (BENCH_%s_QUICK=1)" % name.upper() in section
    return section, out, pidfile


def test_quick_run_writes_the_section_with_every_row(tmp_path):
    section, out, pidfile = run_quick(
        SCRIPT, tmp_path, OLD_PAGE, SECTION,
        ["Tree rows that must stay.", "Persistence rows that must stay."], "--bench", BENCH)

    rows = table_rows(section[:section.index("### Run details")])
    for figure in FIGURES:
        for direction in ("out", "in"):
            cells = rows.get((figure, direction))
            assert cells, "no row %r %s in:\n%s" % (figure, direction, section)
            for cell in cells:
                assert NUMBER.match(cell), "%r %s: %r" % (figure, direction, cells)
    for figure in DRAIN_FIGURES:
        cells = rows.get((figure, "out"))
        assert cells and all(NUMBER.match(c) for c in cells), (figure, cells)
    assert rows[("backlog drain: arrived exactly once", "out")] == [
        "5,000 of 5,000", "5,000 of 5,000", ""]
    assert "Every arbor_bench run delivered every QoS 1 message exactly once." in section

    details = [line for line in section.splitlines() if re.match(r"^\| 1 \| (arbor|mosquitto) "
                                                                 r"\| (out|in) \|", line)]
    assert len(details) == 2 * 2 * 3, "\n".join(details)

    with open(out / "results.json") as f:
        results = json.load(f)
    for kind in ("arbor", "mosquitto"):
        drain = results["1"][kind]["drain"]
        assert (drain["distinct"], drain["missing"], drain["duplicates"],
                drain["unexpected"]) == (5000, 0, 0, 0), drain
        assert 0 < drain["first_s"] <= drain["last_s"], drain
        for direction in ("out", "in"):
            for load in ("lat", "steady", "full"):
                r = results["1"][kind][direction][load]
                assert r["egress"] > 0 and r["received"] == r["expected"] > 0, (kind, load, r)

    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) >= 10  # 2 brokers per pair, 6 pairs, the drains' central twice
    assert [pid for pid in pids if still_running(pid)] == []
    for name in os.listdir(out):
        if name.endswith("-edge.log") and "-arbor-" in name:
            assert sanitizer_findings((out / name).read_text(errors="replace")) == [], name
