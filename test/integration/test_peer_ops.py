"""MQTT-ST peering as an operator meets it, on two or three real brokers on loopback: a
`peer` line on one side is enough (connect-back), peer lines added and removed by SIGHUP,
the identity derived from the listener, real mosquitto_pub/mosquitto_sub across brokers at
every QoS, and the log lines and $SYS topics operators read. The tree shapes, failures and
bad peers have their own files (test_peer_tree.py, test_peer_failures.py, test_peer_bad.py).
"""

import os
import signal
import subprocess
import time

import pytest

from helpers import HOST, PahoClient, free_port, wait_until
from peer_net import wait_link_wants

pytestmark = pytest.mark.arbor_only

SECRET = "integration-test-secret-0123"
FAST = ["stp_hello_interval 0.2", "stp_max_age 1", "peer_restart_timeout 0.1 0.5",
        "sys_interval 1", "peer_secret " + SECRET]


def peer_broker(broker, port, capability, *lines):
    return broker("peer_identity %s:%d" % (HOST, port), "stp_capability %d" % capability,
                  *FAST, *lines, port=port)


def stp_topics(b, timeout=1.0):
    """Every retained $SYS/broker/stp topic of broker b, as a dict."""
    c = PahoClient(b, client_id="stp-reader-%d" % time.monotonic_ns())
    c.subscribe("$SYS/broker/stp/#", qos=0)
    values = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            m = c.get_message(timeout=0.15)
        except AssertionError:  # quiet: every retained value has arrived
            if values:
                break
            continue
        if m.payload:
            values[m.topic[len("$SYS/broker/stp/"):]] = m.payload.decode()
        else:
            values.pop(m.topic[len("$SYS/broker/stp/"):], None)
    c.close()
    return values


def link_state(b, other_port):
    return stp_topics(b).get("peers/%s:%d/state" % (HOST, other_port))


def wait_link(a, b, state="up", timeout=8.0):
    wait_until(lambda: link_state(a, b.port) == state and link_state(b, a.port) == state,
               timeout=timeout, interval=0.2, what="link %d-%d %s" % (a.port, b.port, state))


def test_one_peer_line_is_enough_connect_back(broker):
    pa, pb = free_port(), free_port()
    b = peer_broker(broker, pb, 200)
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    wait_link(a, b)
    b.wait_log("MQTT-ST: connecting back to %s:%d." % (HOST, pa))
    a.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pb))
    sa, sb = stp_topics(a), stp_topics(b)
    assert sa["id"] == "%s:%d" % (HOST, pa) and sb["id"] == "%s:%d" % (HOST, pb)
    assert sa["root/id"] == sb["root/id"] == "%s:%d" % (HOST, pb)  # higher capability
    assert sa["root/link"] == "%s:%d" % (HOST, pb) and sb.get("root/link", "") == ""
    assert sa["peers/%s:%d/role" % (HOST, pb)] == "root"
    assert sb["peers/%s:%d/role" % (HOST, pa)] == "designated"
    assert sa["peers/%s:%d/forwarding" % (HOST, pb)] == "1"
    assert int(sa["peers/%s:%d/srtt_us" % (HOST, pb)]) > 0


def test_messages_cross_both_ways_exactly_once(broker):
    pa, pb = free_port(), free_port()
    b = peer_broker(broker, pb, 200)
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    wait_link(a, b)
    subs = {}
    for name, br in (("a", a), ("b", b)):
        c = PahoClient(br, client_id="sub-" + name, version=5)
        c.subscribe("x/#", qos=2)
        subs[name] = c
    wait_link_wants(a, "%s:%d" % (HOST, pb), "x/#")     # interest routing: in effect
    wait_link_wants(b, "%s:%d" % (HOST, pa), "x/#")
    for name, br in (("a", a), ("b", b)):
        p = PahoClient(br, client_id="pub-" + name, version=5)
        for qos in (0, 1, 2):
            p.publish("x/%s/%d" % (name, qos), b"m", qos=qos)
        p.close()
    for c in subs.values():
        got = sorted(m.topic for m in c.get_messages(6, timeout=5))
        assert got == sorted("x/%s/%d" % (n, q) for n in "ab" for q in (0, 1, 2))
        c.expect_no_message(timeout=0.8)


def test_mosquitto_clients_across_three_brokers(broker, tmp_path):
    """Real mosquitto_pub on one end of a line of three arbor brokers, mosquitto_sub on the
    other: every message once, at each QoS, with its payload."""
    ports = [free_port() for _ in range(3)]
    brokers = [peer_broker(broker, ports[0], 100, "peer %s:%d" % (HOST, ports[1])),
               peer_broker(broker, ports[1], 300, "peer %s:%d" % (HOST, ports[2])),
               peer_broker(broker, ports[2], 200)]
    wait_link(brokers[0], brokers[1])
    wait_link(brokers[1], brokers[2])
    out = os.path.join(str(tmp_path), "sub.txt")
    with open(out, "w") as f:
        sub = subprocess.Popen(["mosquitto_sub", "-p", str(ports[2]), "-h", HOST, "-t", "line/#",
                                "-q", "2", "-v", "-V", "mqttv5"], stdout=f)
    try:
        time.sleep(0.5)
        for qos in (0, 1, 2):
            for i in range(5):
                subprocess.run(["mosquitto_pub", "-p", str(ports[0]), "-h", HOST,
                                "-t", "line/q%d" % qos, "-m", "m%d" % i, "-q", str(qos)],
                               check=True, timeout=10)
        wait_until(lambda: len(open(out).read().splitlines()) >= 15, timeout=5,
                   what="15 messages at mosquitto_sub")
        time.sleep(0.5)
    finally:
        sub.send_signal(signal.SIGTERM)
        sub.wait(5)
    lines = sorted(open(out).read().splitlines())
    assert lines == sorted("line/q%d m%d" % (q, i) for q in range(3) for i in range(5))


def test_sighup_adds_and_removes_peer_lines(broker):
    pa, pb = free_port(), free_port()
    b = peer_broker(broker, pb, 200)
    a = peer_broker(broker, pa, 100)
    time.sleep(0.5)
    assert link_state(a, pb) is None
    with open(a.conf_path, "a") as f:
        f.write("peer %s:%d\n" % (HOST, pb))
    a.proc.send_signal(signal.SIGHUP)
    a.wait_log("MQTT-ST: peer %s:%d added by the configuration." % (HOST, pb))
    wait_link(a, b)
    lines = open(a.conf_path).read().splitlines()
    with open(a.conf_path, "w") as f:
        f.write("\n".join(l for l in lines if not l.startswith("peer ")) + "\n")
    a.proc.send_signal(signal.SIGHUP)
    a.wait_log("MQTT-ST: peer %s:%d removed from the configuration." % (HOST, pb))
    # b's connect-back ends with a's connection: the link is gone on both sides
    wait_until(lambda: link_state(a, pb) is None and link_state(b, pa) is None, timeout=5,
               interval=0.2, what="link gone on both sides")
    time.sleep(1.5)  # and nobody dials again
    assert link_state(a, pb) is None and link_state(b, pa) is None


def test_identity_derived_from_the_listener(broker):
    p = free_port()
    b = broker("peer_allow_unauthenticated true", "stp_capability 5", port=p)
    b.wait_log("MQTT-ST: identity %s:%d, capability 5." % (HOST, p))
    b.wait_log("Warning: MQTT-ST: peer_allow_unauthenticated is set")


def test_capability_is_measured_when_not_given(broker):
    b = broker("peer_allow_unauthenticated true", "peer_identity %s" % HOST)
    b.wait_log("MQTT-ST: identity %s:%d, capability " % (HOST, b.port))
    cap = int(b.log_text().split("MQTT-ST: identity %s:%d, capability " % (HOST, b.port))[1]
              .split(".")[0])
    mem_mib = int([l for l in open("/proc/meminfo") if l.startswith("MemTotal:")][0]
                  .split()[1]) // 1024
    assert cap >= mem_mib  # C = MHz + MiB with the default weights


def test_peering_unconfigured_refuses_peers_and_publishes_no_stp_sys(broker):
    b = broker("sys_interval 1")
    assert stp_topics(b, timeout=0.6) == {}


def test_message_expiry_counts_down_across_the_link(broker):
    """The expiry interval crosses the link as the time left, and a retained message expires
    on the far broker when it expires on the near one."""
    from paho.mqtt.packettypes import PacketTypes
    from helpers import props
    pa, pb = free_port(), free_port()
    b = peer_broker(broker, pb, 200)
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    wait_link(a, b)
    sub = PahoClient(b, client_id="exp-sub", version=5)
    sub.subscribe("exp/#", qos=1)
    wait_link_wants(a, "%s:%d" % (HOST, pb), "exp/#")
    pub = PahoClient(a, client_id="exp-pub", version=5)
    pub.publish("exp/live", b"x", qos=1,
                properties=props(PacketTypes.PUBLISH, MessageExpiryInterval=30))
    m = sub.get_message(timeout=5)
    assert 28 <= m.props.MessageExpiryInterval <= 30
    pub.publish("exp/retained", b"short", qos=1, retain=True,
                properties=props(PacketTypes.PUBLISH, MessageExpiryInterval=2))
    assert sub.get_message(timeout=5).payload == b"short"
    late = PahoClient(b, client_id="exp-late-1", version=5)
    late.subscribe("exp/retained", qos=1)
    assert late.get_message(timeout=5).payload == b"short"      # held on b too
    late.close()
    time.sleep(2.6)
    late = PahoClient(b, client_id="exp-late-2", version=5)
    late.subscribe("exp/retained", qos=1)
    late.expect_no_message(timeout=1.0)                           # expired on b as on a


def test_unreachable_peer_is_retried_with_capped_backoff_and_jitter(broker):
    closed = free_port()  # nothing listens there
    b = broker("peer_identity %s" % HOST, "stp_capability 5", "peer_secret " + SECRET,
               "peer_restart_timeout 0.1 0.8", "peer %s:%d" % (HOST, closed))
    failed = "MQTT-ST: cannot connect to %s:%d: Connection refused, retrying in" % (HOST, closed)

    def retries():
        return [float(line.rsplit("retrying in ", 1)[1].split(" ")[0])
                for line in b.log_text().splitlines() if failed in line]
    # about 3 s for 6 retries on an idle machine: wait for them rather than for a fixed time
    wait_until(lambda: len(retries()) >= 6, timeout=30, interval=0.1, what="6 retries")
    waits = retries()
    assert len(waits) >= 6, waits
    assert all(0.05 <= w <= 0.8 for w in waits), waits       # within [base/2, max]
    assert max(waits[:2]) <= 0.2                              # starts at the base
    assert max(waits[-3:]) >= 0.4                             # grew towards the maximum
    assert len(set(waits[-4:])) > 1                           # jitter: not all the same


def test_identity_that_cannot_be_derived_stops_start_up(tmp_path):
    """In a network namespace with only loopback, a wildcard listener gives no address other
    brokers could dial: start-up fails with a clear line, naming the directive to set."""
    import shutil
    from helpers import ARBOR_BIN
    if not shutil.which("unshare") or subprocess.run(["unshare", "--net", "true"]).returncode:
        pytest.skip("cannot make a network namespace here")
    conf = tmp_path / "noid.conf"
    conf.write_text("listener %d\nallow_anonymous true\npeer_allow_unauthenticated true\n"
                    % free_port())
    r = subprocess.run(["unshare", "--net", ARBOR_BIN, "-c", str(conf)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode != 0
    assert "peer_identity: cannot be derived" in r.stdout + r.stderr
    assert "set peer_identity" in r.stdout + r.stderr
    from conftest import sanitizer_findings
    assert not sanitizer_findings(r.stdout + r.stderr), r.stdout + r.stderr


def test_peers_without_sys_topics_do_not_spin(broker):
    """With `sys_interval 0` there is no $SYS to publish: what would have changed it (a link
    up, the tree settling) must not keep the loop awake."""
    from helpers import assert_cpu_goes_quiet
    lines = [line for line in FAST if not line.startswith("sys_interval")] + ["sys_interval 0"]
    pa, pb = free_port(), free_port()
    b = broker("peer_identity %s:%d" % (HOST, pb), "stp_capability 200", *lines, port=pb)
    a = broker("peer_identity %s:%d" % (HOST, pa), "stp_capability 100", *lines,
               "peer %s:%d" % (HOST, pb), port=pa)
    a.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pb))
    b.wait_log("MQTT-ST: link to %s:%d up" % (HOST, pa))
    for x in (a, b):
        assert_cpu_goes_quiet(x.proc.pid, 0.3, what="with peers and sys_interval 0")
