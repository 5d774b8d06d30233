"""Integration tests of arbor_bench (test/bench/) against the broker under test.

They check the benchmark tool's own accounting on short scenarios: at QoS 1 and 2 nothing is
lost or duplicated, every topic's subscribers receive sent x subscribers messages, latency
figures are present and positive, the broker's CPU is read from its pid, and the limit search
writes its result. The tool is found at $ARBOR_BUILD_DIR/test/bench/arbor_bench.
"""

import json
import os
import subprocess
import time

import pytest

from helpers import HOST, free_port

BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR", "")
BENCH = os.path.join(BUILD_DIR, "test", "bench", "arbor_bench") if BUILD_DIR else ""

pytestmark = pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                                reason="arbor_bench not built (set ARBOR_BUILD_DIR)")

# Logging every packet (the fixture's default) slows any broker down a lot; a short
# scenario still finishes quickly, but the queue limit must not drop QoS 1/2 messages.
BROKER_LINES = ("max_queued_messages 100000", "max_inflight_messages 20")


def wait_forwarding(a, b, timeout=20.0):
    """Until brokers a and b (peered) both report their link forwarding in
    $SYS/broker/stp/peers/<other>/forwarding: the tree has settled and a message published
    on one crosses to the other (a fixed wait was too short on a loaded machine)."""
    from helpers import PahoClient
    for x, y in ((a, b), (b, a)):
        c = PahoClient(x, client_id="forwarding-%d" % time.monotonic_ns())
        try:
            c.subscribe("$SYS/broker/stp/peers/%s:%d/forwarding" % (HOST, y.port))
            deadline = time.monotonic() + timeout
            while c.get_message(timeout=max(0.1, deadline - time.monotonic())).payload != b"1":
                pass
        finally:
            c.close()


def run_bench(b, tmp_path, *args, timeout=90):
    out = tmp_path / "result.json"
    cmd = [BENCH, "-b", "%s:%d" % (b.host, b.port), "-P", str(b.proc.pid),
           "--json", str(out), "--csv", str(tmp_path / "series.csv"), "-Q"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "arbor_bench failed (%d):\n%s%s" % (p.returncode, p.stdout,
                                                                   p.stderr)
    with open(out) as f:
        return json.load(f)


def write_scenario(tmp_path, scenario):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    return str(path)


def check_lossless(doc):
    """Zero loss and duplicates, and received = sent x subscribers for every topic."""
    run = doc["runs"][-1]
    s = run["summary"]
    assert s["errors"] == 0
    assert s["unexpected"] == 0
    assert s["duplicates"] == 0
    assert s["loss_rate"] == 0
    assert s["sent"] > 0
    assert s["received"] == s["expected"]
    for topic in run["topics"]:
        assert topic["sent"] > 0, topic
        assert topic["received"] == topic["sent"] * topic["subscribers"], topic
        assert topic["expected"] == topic["received"], topic
        assert topic["duplicates"] == 0, topic


def check_latency(summary):
    lat = summary["latency_ms"]
    assert lat["count"] > 0
    for key in ("mean", "p50", "p90", "p99", "max"):
        assert lat[key] is not None and lat[key] > 0, (key, lat)
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["mean"] <= lat["max"]


@pytest.mark.parametrize("version", ["3.1.1", "5"])
@pytest.mark.parametrize("qos", [1, 2])
def test_accounting_is_exact_at_qos_1_and_2(broker, tmp_path, qos, version):
    b = broker(*BROKER_LINES)
    # two topics with different fan-out so that per-topic accounting is really checked
    scenario = write_scenario(tmp_path, {
        "name": "it-qos%d" % qos,
        "topics": [{"name": "it/bench/a", "publishers": 3, "subscribers": 2},
                   {"name": "it/bench/b", "publishers": 1, "subscribers": 4}],
        "qos": qos, "inflight": 5, "rate": 100, "payload": 48,
        "duration": 1.5, "trim": 0.25, "drain": 10, "mqtt_version": version,
    })
    doc = run_bench(b, tmp_path, "-s", scenario)
    check_lossless(doc)
    s = doc["result"]
    check_latency(s)
    assert s["ingress"] > 0 and s["egress"] > 0
    # 4 publishers at 100 msg/s: the tool must reach the asked rate on a light load
    assert s["ingress"] == pytest.approx(400, rel=0.25)
    assert s["sp_ratio"] == pytest.approx((3 * 2 + 1 * 4) / 4)
    assert s["broker_cpu_s"] is not None and s["broker_cpu_s"] >= 0
    assert doc["scenario"]["mqtt_version"] == (5 if version == "5" else 4)
    series = doc["runs"][0]["series"]
    assert len(series) >= 2 and sum(x["egress"] for x in series) == s["received"]
    assert (tmp_path / "series.csv").read_text().startswith("run,interval_ms,second")


@pytest.mark.parametrize("scenario", ["qos1-pairs", "qos2-pairs"])
def test_full_speed_pairs_lossless(broker, tmp_path, scenario):
    b = broker(*BROKER_LINES)
    doc = run_bench(b, tmp_path, "-s", scenario, "-d", "1", "--trim", "0.2", "--drain", "10")
    check_lossless(doc)
    check_latency(doc["result"])
    assert len(doc["runs"][0]["topics"]) == 10


def test_threads_and_qos_mix(broker, tmp_path):
    """Publish at QoS 2, subscribe at QoS 1, clients spread over two threads."""
    b = broker(*BROKER_LINES)
    doc = run_bench(b, tmp_path, "--topics", "3", "--publishers", "2", "--subscribers", "3",
                    "--pub-qos", "2", "--sub-qos", "1", "--inflight", "3", "--rate", "50",
                    "-T", "2", "-d", "1.5", "--trim", "0.25", "--drain", "10")
    check_lossless(doc)
    check_latency(doc["result"])
    assert doc["result"]["sp_ratio"] == pytest.approx(3)


def test_limit_search_reports_a_result(broker, tmp_path):
    """A tiny search: from a slow start interval every step passes, so it halves twice and
    reports that the limit lies beyond what it tried."""
    b = broker(*BROKER_LINES)
    doc = run_bench(b, tmp_path, "-s", "ildm", "--topics", "1", "--publishers", "2",
                    "--subscribers", "2", "--start-interval", "40", "--max-steps", "2",
                    "-d", "1", "--trim", "0.2", "--drain", "2")
    search = doc["limit_search"]
    assert len(doc["runs"]) == 2
    assert [r["interval_ms"] for r in doc["runs"]] == [40, 20]
    assert search["outcome"] == "never_failed"
    assert search["limit_interval_ms"] == 20
    assert doc["result"]["passed"] is True
    assert doc["result"]["egress_ratio"] == pytest.approx(1.0, abs=0.05)


def test_refused_connection_fails_cleanly(tmp_path):
    """No broker on the port: arbor_bench exits with status 2 and says why."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.run([BENCH, "-b", "127.0.0.1:%d" % port, "-d", "1", "--trim", "0", "-Q"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "refused" in p.stderr.lower()


def run_bench_on(brokers, tmp_path, *args, timeout=90):
    """run_bench over several brokers (-b in the order given, -P every one)."""
    out = tmp_path / "result.json"
    cmd = [BENCH, "--json", str(out), "-Q"]
    for b in brokers:
        cmd += ["-b", "%s:%d" % (b.host, b.port), "-P", str(b.proc.pid)]
    p = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "arbor_bench failed (%d):\n%s%s" % (p.returncode, p.stdout,
                                                                   p.stderr)
    with open(out) as f:
        return json.load(f)


def test_placements_ends_and_first_to_all(broker, tmp_path):
    """Two brokers that are not linked, so each message reaches only the subscribers on the
    broker it was published to: `ends` puts the publishers on the first broker and the
    subscribers on the last (nothing arrives), `first-to-all` puts the publishers on the first
    and spreads the subscribers (those on the first get everything, the others nothing)."""
    a, b = broker(*BROKER_LINES), broker(*BROKER_LINES)
    common = ["--topics", "2", "--publishers", "2", "--subscribers", "2", "--qos", "1",
              "--rate", "50", "-d", "1.5", "--trim", "0.25", "--drain", "2"]

    doc = run_bench_on([a, b], tmp_path, "--placement", "ends", *common)
    assert doc["scenario"]["placement"] == "ends"
    s, per_broker = doc["result"], doc["runs"][0]["brokers"]
    assert s["sent"] > 0 and s["received"] == 0 and s["loss_rate"] == 1
    assert per_broker[0]["ingress"] == pytest.approx(200, rel=0.25)
    assert per_broker[1]["ingress"] == 0
    assert per_broker[0]["egress"] == per_broker[1]["egress"] == 0

    doc = run_bench_on([a, b], tmp_path, "--placement", "first-to-all", *common)
    assert doc["scenario"]["placement"] == "first-to-all"
    s, per_broker = doc["result"], doc["runs"][0]["brokers"]
    assert s["duplicates"] == 0 and s["unexpected"] == 0
    # each topic has one subscriber on each broker: only the first broker's half arrives
    assert s["received"] * 2 == s["expected"] and s["loss_rate"] == pytest.approx(0.5)
    assert per_broker[1]["ingress"] == 0 and per_broker[1]["egress"] == 0
    assert per_broker[0]["egress"] == pytest.approx(per_broker[0]["ingress"], rel=0.1)


@pytest.mark.arbor_only
@pytest.mark.parametrize("qos", [1, 2])
def test_placement_ends_across_peered_brokers(broker, tmp_path, qos):
    """`ends` over two arbor brokers linked by MQTT-ST: every message crosses the link once,
    nothing lost or duplicated, all deliveries on the last broker."""
    import time
    pa, pb = free_port(), free_port()
    peer_lines = ("peer_secret bench-tool-test-secret-0123", "stp_hello_interval 0.2",
                  "stp_max_age 1", "peer_restart_timeout 0.1 0.5")
    b = broker(*BROKER_LINES, *peer_lines, "peer_identity %s:%d" % (HOST, pb),
               "stp_capability 200", port=pb)
    a = broker(*BROKER_LINES, *peer_lines, "peer_identity %s:%d" % (HOST, pa),
               "stp_capability 100", "peer %s:%d" % (HOST, pb), port=pa)
    a.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pb))
    b.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pa))
    wait_forwarding(a, b)  # let the tree settle (a's link to the root starts forwarding)
    doc = run_bench_on([a, b], tmp_path, "--placement", "ends", "--topics", "2",
                       "--publishers", "2", "--subscribers", "2", "--qos", str(qos),
                       "--inflight", "4", "--rate", "50", "-d", "1.5", "--trim", "0.25",
                       "--drain", "10")
    check_lossless(doc)
    per_broker = doc["runs"][0]["brokers"]
    assert per_broker[0]["egress"] == 0 and per_broker[1]["ingress"] == 0
    assert per_broker[1]["egress"] > 0


@pytest.mark.arbor_only
@pytest.mark.parametrize("qos", [1, 2])
def test_full_speed_across_peered_brokers_loses_nothing(broker, tmp_path, qos):
    """Publishers as fast as their windows allow on one broker, subscribers on its peer: the
    link is the bottleneck, so the first broker must hold its publishers back (it stops
    reading them while the link's queue is long) rather than acknowledge messages and drop
    them. Every message arrives once; the broker reports no message dropped."""
    import time
    pa, pb = free_port(), free_port()
    peer_lines = ("peer_secret bench-tool-test-secret-0123", "stp_hello_interval 0.2",
                  "stp_max_age 1", "peer_restart_timeout 0.1 0.5", "sys_interval 1",
                  "max_queued_messages 0")
    b = broker(*BROKER_LINES, *peer_lines, "peer_identity %s:%d" % (HOST, pb),
               "stp_capability 200", port=pb)
    a = broker(*BROKER_LINES, *peer_lines, "peer_identity %s:%d" % (HOST, pa),
               "stp_capability 100", "peer %s:%d" % (HOST, pb), port=pa)
    a.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pb))
    wait_forwarding(a, b)
    doc = run_bench_on([a, b], tmp_path, "--placement", "ends", "--topics", "4",
                       "--publishers", "2", "--subscribers", "1", "--qos", str(qos),
                       "--inflight", "64", "-i", "0", "-d", "2", "--trim", "0.25",
                       "--drain", "20", timeout=120)
    check_lossless(doc)
    assert doc["result"]["received"] > 10000   # it really ran at speed
    time.sleep(1.2)
    from helpers import PahoClient
    c = PahoClient(a, client_id="dropped-reader")
    c.subscribe("$SYS/broker/stp/messages/dropped")
    assert c.get_message(timeout=10).payload == b"0"
    c.close()
