"""A real Mosquitto bridge (Debian's /usr/sbin/mosquitto) on an arbor broker that runs MQTT-ST.

Mosquitto dials arbor with an ordinary `connection` block and try_private: its CONNECT has
protocol level 0x84 (0x80 | 4), which arbor must take as a bridge (an ordinary client that
is never handed back its own messages), not as an MQTT-ST peer (0x85 only). Messages cross
in both directions exactly once, nothing is echoed back over the bridge, and with a second
arbor peered to the first, messages cross bridge and peer link alike exactly once.
"""

import os
import re
import signal
import socket
import subprocess
import time
import uuid

import pytest

import peerproto as pp
from helpers import HOST, free_port, start_mosquitto, stop_mosquitto
from peer_net import wait_link_wants

MOSQUITTO = "/usr/sbin/mosquitto"

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

SECRET = "bridge-tests-shared-secret"


def peer_lines(port, capability, *extra):
    return ["peer_identity 127.0.0.1:%d" % port,
            "stp_capability %d" % capability,
            "stp_hello_interval 0.2",
            "stp_max_age 1",
            "peer_restart_timeout 0.1 1",
            "sys_interval 1",
            "peer_secret " + SECRET] + list(extra)


class Mosquitto:
    """A mosquitto process with its own listener and a bridge to arbor at remote_port."""

    def __init__(self, tmp_dir, remote_port, name="mosquitto"):
        self.host = HOST
        self.port = free_port()
        self.bridge_id = "mq-bridge-%d" % self.port
        self.conf_path = os.path.join(tmp_dir, name + ".conf")
        self.log_path = os.path.join(tmp_dir, name + ".log")
        with open(self.conf_path, "w") as f:
            f.write("\n".join([
                "listener %d %s" % (self.port, HOST),
                "allow_anonymous true",
                "log_dest stderr",
                "log_type all",
                "connection arbor",
                "address 127.0.0.1:%d" % remote_port,
                "remote_clientid " + self.bridge_id,
                "topic # both 0",
                "try_private true",
                "bridge_protocol_version mqttv311",
                "cleansession true",
                "restart_timeout 1",
            ]) + "\n")
        self.proc, self._log = start_mosquitto(self.conf_path, self.log_path, self.port,
                                               cwd=tmp_dir)

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        stop_mosquitto(self.proc, self._log)


@pytest.fixture
def mosquitto(tmp_path):
    """Factory: mosquitto(remote_port) -> Mosquitto. Request it before `mqtt` so that the
    clients are closed before the process is stopped."""
    started = []

    def make(remote_port):
        m = Mosquitto(str(tmp_path), remote_port, name="mosquitto%d" % len(started))
        started.append(m)
        return m

    yield make
    for m in started:
        m.stop()


def wait_crossing(mqtt, src, dst, timeout=10.0):
    """Publish probes at src until one arrives at dst (the bridge or peer link is working),
    with clients of their own so that the tests' subscribers see nothing of it."""
    tag = uuid.uuid4().hex
    sub = mqtt(dst, client_id="probe-sub-" + tag[:8])
    sub.subscribe("probe/" + tag, 0)
    pub = mqtt(src, client_id="probe-pub-" + tag[:8])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pub.publish("probe/" + tag, b"probe", qos=1)
        try:
            sub.get_message(0.3)
            return
        except AssertionError:
            continue
    raise AssertionError("nothing crossed from port %d to port %d within %.0fs"
                         % (src.port, dst.port, timeout))


def received_once(client, payloads, timeout=10.0):
    """client receives exactly `payloads` (in any order) and nothing more."""
    got = sorted(m.payload for m in client.get_messages(len(payloads), timeout))
    assert got == sorted(payloads), got
    client.expect_no_message(0.5)


def subscriber(mqtt, b, name):
    c = mqtt(b, client_id=name)
    c.subscribe("t/#", 1)
    return c


@pytest.fixture
def bridged(broker, mosquitto, mqtt):
    """arbor A (MQTT-ST configured, secret set, no peers yet) and mosquitto M bridged to it,
    the bridge working both ways."""
    a_port = free_port()
    a = broker(*peer_lines(a_port, 1000), port=a_port)
    m = mosquitto(a_port)
    wait_crossing(mqtt, m, a)
    wait_crossing(mqtt, a, m)
    return a, m


def assert_bridge_is_a_client(a, m, peers=()):
    log = a.log_text()
    assert "as %s" % m.bridge_id in log, log[-3000:]
    assert "MQTT-ST: refused peer connection" not in log
    # never taken for a peer broker: the only peers that connected are the arbor ones
    connected = set(re.findall(r"MQTT-ST: peer (\S+) connected from", log))
    assert connected <= set(peers), connected


def publish_all(client, topic, payloads):
    for p in payloads:
        client.publish(topic, p, qos=1)


@pytest.mark.parametrize("side", ["mosquitto", "arbor"])
def test_bridge_exactly_once_each_way(bridged, mqtt, side):
    a, m = bridged
    subs = [subscriber(mqtt, a, "sub-a"), subscriber(mqtt, m, "sub-m")]
    payloads = [b"from %s %d" % (side.encode(), i) for i in range(5)]
    publish_all(mqtt(m if side == "mosquitto" else a, client_id="pub"), "t/" + side, payloads)
    # Across the bridge once, and on the publisher's side once: what crossed the bridge was
    # not sent back over it (by arbor: try_private; by mosquitto: its bridge's no-local).
    for sub in subs:
        received_once(sub, payloads)
    assert_bridge_is_a_client(a, m)


def test_bridge_retained_message_once(bridged, mqtt):
    a, m = bridged
    sub_a = subscriber(mqtt, a, "sub-a")
    pub_m = mqtt(m, client_id="pub-m")
    pub_m.publish("t/retained", b"kept", qos=1, retain=True)
    received_once(sub_a, [b"kept"])
    # Both sides now hold it retained, once.
    for side, name in ((a, "late-a"), (m, "late-m")):
        late = mqtt(side, client_id=name)
        late.subscribe("t/retained", 1)
        msg = late.get_message()
        assert (msg.payload, msg.retain) == (b"kept", True), msg
        late.expect_no_message(0.3)


def test_bridge_and_peer_link_exactly_once(broker, mosquitto, mqtt):
    # M (mosquitto) ==bridge== A (arbor) --peer-- B (arbor)
    a_port, b_port = free_port(), free_port()
    b = broker(*peer_lines(b_port, 500), port=b_port)
    a = broker(*peer_lines(a_port, 1000, "peer 127.0.0.1:%d" % b_port), port=a_port)
    watch = pp.SysWatch(a)
    try:
        watch.wait("peers/127.0.0.1:%d/forwarding" % b_port, "1")
    finally:
        watch.close()
    m = mosquitto(a_port)
    for src, dst in ((m, b), (b, m)):
        wait_crossing(mqtt, src, dst)
    subs = [subscriber(mqtt, a, "sub-a"), subscriber(mqtt, b, "sub-b"),
            subscriber(mqtt, m, "sub-m")]
    wait_link_wants(a, "127.0.0.1:%d" % b_port, "t/#")   # interest routing: in effect
    wait_link_wants(b, "127.0.0.1:%d" % a_port, "t/#")
    for side, src in (("mosquitto", m), ("second arbor", b)):
        payloads = [b"from %s %d" % (side.encode(), i) for i in range(5)]
        publish_all(mqtt(src, client_id="pub-%d" % src.port), "t/x", payloads)
        for sub in subs:
            received_once(sub, payloads)
    assert_bridge_is_a_client(a, m, peers=["127.0.0.1:%d" % b_port])
    assert "as %s" % m.bridge_id not in b.log_text()
