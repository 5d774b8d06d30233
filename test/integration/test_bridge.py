"""Bridges (`connection` blocks, arbor.conf(5) BRIDGES) against real remote brokers: Debian's
mosquitto 2.0.11 and arbor itself.

Messages cross both ways with the prefixes mapped, exactly once at QoS 1 and 2; the state
notifications appear on both sides; QoS 1/2 messages published while the remote is away wait
in the bridge (store and forward) and arrive in order once it is back; a remote that
restarts is dialled again; with three addresses the bridge moves on when the one it uses
dies; bridge lines with errors stop the start with file:line.
"""

import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import tlscerts
from helpers import HOST, free_port, start_mosquitto, stop_mosquitto, wait_until

MOSQUITTO = "/usr/sbin/mosquitto"

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]


class Remote:
    """A Debian mosquitto as the remote broker of a bridge, on a fixed port so that it can
    be stopped and started again where the bridge dials."""

    def __init__(self, tmp_dir, name, port=None, lines=()):
        self.host = HOST
        self.port = port or free_port()
        self.conf_path = os.path.join(tmp_dir, name + ".conf")
        self.log_path = os.path.join(tmp_dir, name + ".log")
        with open(self.conf_path, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\nlog_dest stderr\nlog_type all\n"
                    % (self.port, HOST) + "".join(line + "\n" for line in lines))
        self.proc = None
        self._log = None

    def start(self):
        self.proc, self._log = start_mosquitto(self.conf_path, self.log_path, self.port)
        return self

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        stop_mosquitto(self.proc, self._log)
        self._log = None


@pytest.fixture
def remote(tmp_path):
    """Factory: remote(port=None, start=True, lines=()) -> Remote (Debian's mosquitto). Request it
    before `mqtt` so that clients close before the processes stop."""
    made = []

    def make(port=None, start=True, lines=()):
        r = Remote(str(tmp_path), "remote%d" % len(made), port, lines)
        made.append(r)
        return r.start() if start else r

    yield make
    for r in made:
        r.stop()


def bridge_lines(port, *topics, name="edge", extra=()):
    return ["connection " + name,
            "address 127.0.0.1:%d" % port,
            "remote_clientid %s-%d" % (name, port),
            "restart_timeout 1",
            "keepalive_interval 5"] + ["topic " + t for t in topics] + list(extra)


def payloads_of(client, n, timeout=15.0):
    return [m.payload for m in client.get_messages(n, timeout)]


def wait_bridge_up(mqtt, local, remote_broker, topic_out, timeout=15.0):
    """Publish probes on a topic the bridge sends out until one reaches the remote."""
    sub = mqtt(remote_broker, client_id="probe-sub")
    sub.subscribe(topic_out, 0)
    pub = mqtt(local, client_id="probe-pub")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pub.publish(topic_out, b"probe", qos=1)
        try:
            sub.get_message(0.3)
            sub.close()
            pub.close()
            return
        except AssertionError:
            continue
    raise AssertionError("the bridge did not come up within %.0f s" % timeout)


def test_messages_cross_both_ways_once_with_prefixes(broker, remote, mqtt):
    r = remote()
    b = broker(*bridge_lines(r.port, "sensors/# out 1", "cmd/# in 2 local/ remote/",
                             "up/# out 2 edge/ site1/"))
    wait_bridge_up(mqtt, b, r, "sensors/probe")
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("sensors/#", 1)
    at_remote.subscribe("site1/#", 2)
    at_local = mqtt(b, client_id="at-local")
    at_local.subscribe("local/#", 2)
    at_local.subscribe("cmd/#", 2)
    pub_local = mqtt(b, client_id="pub-local")
    pub_remote = mqtt(r, client_id="pub-remote")
    for i in range(20):
        pub_local.publish("sensors/t", b"s%d" % i, qos=1)
        pub_local.publish("edge/up/x", b"u%d" % i, qos=2)
        pub_remote.publish("remote/cmd/go", b"c%d" % i, qos=2)
    got_remote = [(m.topic, m.payload) for m in at_remote.get_messages(40, 15)]
    assert [p for t, p in got_remote if t == "sensors/t"] == [b"s%d" % i for i in range(20)]
    assert [p for t, p in got_remote if t == "site1/up/x"] == [b"u%d" % i for i in range(20)]
    got_local = [(m.topic, m.payload) for m in at_local.get_messages(20, 15)]
    assert got_local == [("local/cmd/go", b"c%d" % i) for i in range(20)]
    at_remote.expect_no_message(0.7)
    at_local.expect_no_message(0.3)


def test_state_notifications_on_both_sides(broker, remote, mqtt):
    r = remote()
    b = broker(*bridge_lines(r.port, "a/# out 1", name="notes"))
    topic = "$SYS/broker/connection/notes-%d/state" % r.port
    at_remote = mqtt(r, client_id="watch-remote")
    at_remote.subscribe(topic, 1)
    assert at_remote.get_message(15).payload == b"1"
    at_local = mqtt(b, client_id="watch-local")
    at_local.subscribe(topic, 1)
    m = at_local.get_message(10)
    assert m.payload == b"1" and m.retain
    # The remote goes away: locally "0"; back: "1" on both sides again.
    r.stop()
    assert at_local.get_message(15).payload == b"0"
    r.start()
    at_remote = mqtt(r, client_id="watch-remote-2")
    at_remote.subscribe(topic, 1)
    assert at_remote.get_message(15).payload == b"1"
    assert at_local.get_message(15).payload == b"1"


def test_store_and_forward_while_the_remote_is_away(broker, remote, mqtt):
    """QoS 1/2 messages accepted while the remote (Debian's mosquitto) is down reach it once
    each when it comes up; QoS 0 ones are not kept (as for an offline client)."""
    r = remote(start=False)  # nothing listens there yet
    b = broker(*bridge_lines(r.port, "q/# out 2"))
    b.wait_log("Connecting bridge (step 2) edge")
    pub = mqtt(b, client_id="pub")
    for i in range(200):
        pub.publish("q/one", b"m%03d" % i, qos=1 + i % 2)
    pub.publish("q/zero", b"lost", qos=0)
    r.start()
    # The remote's subscriber must exist before the bridge hands over: it is made at once,
    # the bridge waits restart_timeout (1 s) between attempts.
    at_remote = mqtt(r, client_id="at-remote", clean=False)
    at_remote.subscribe("q/#", 2)
    got = [(m.qos, m.payload) for m in at_remote.get_messages(200, 20)]
    # Mosquitto 2.0.11 may swap a few messages on their way to its subscriber (seen in about
    # one run of two, also within one QoS); the order is checked against arbor below.
    assert sorted(got) == sorted((1 + i % 2, b"m%03d" % i) for i in range(200))
    at_remote.expect_no_message(0.7)


def test_store_and_forward_keeps_the_order(broker, mqtt):
    """The same with arbor as the remote: every message in the order it was published."""
    port = free_port()
    b = broker(*bridge_lines(port, "q/# out 2"))
    b.wait_log("Connecting bridge (step 2) edge")
    pub = mqtt(b, client_id="pub")
    for i in range(300):
        pub.publish("q/one", b"m%03d" % i, qos=1 + i % 2)
    r = broker(port=port)
    at_remote = mqtt(r, client_id="at-remote", clean=False)
    at_remote.subscribe("q/#", 2)
    got = [(m.qos, m.payload) for m in at_remote.get_messages(300, 20)]
    # in order within each QoS (the subscriber's client hands a QoS 2 message over at the end
    # of its handshake, so QoS 1 ones may overtake it)
    for qos in (1, 2):
        assert [p for q, p in got if q == qos] == [b"m%03d" % i for i in range(300)
                                                   if 1 + i % 2 == qos]
    at_remote.expect_no_message(0.7)


def test_remote_restart_loses_nothing_queued(broker, remote, mqtt):
    r = remote()
    b = broker(*bridge_lines(r.port, "q/# out 1"))
    wait_bridge_up(mqtt, b, r, "q/probe")
    r.stop()
    pub = mqtt(b, client_id="pub")
    for i in range(50):
        pub.publish("q/x", b"%d" % i, qos=1)
    r.start()
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("q/x", 1)
    assert payloads_of(at_remote, 50, 20) == [b"%d" % i for i in range(50)]


def test_a_black_holed_remote_is_given_up_and_nothing_is_lost(broker, remote, mqtt):
    """The path to the remote stops moving bytes without an error (a proxy keeps the sockets
    open and forwards nothing): the bridge finds out by its keepalive (no answer for 1.5 x
    keepalive_interval), keeps what is published meanwhile, dials again, and once the path
    moves again every message reaches the remote once, in order."""
    from peer_net import DelayProxy

    r = remote()
    proxy = DelayProxy(0, r.port, 0, "bridge-path")
    try:
        b = broker(*bridge_lines(proxy.port, "q/# out 1"))
        at_remote = mqtt(r, client_id="at-remote", clean=False)
        at_remote.subscribe("q/#", 1)
        wait_bridge_up(mqtt, b, r, "q/probe")
        while True:  # the probes that made it
            try:
                at_remote.get_message(0.5)
            except AssertionError:
                break
        proxy.cut("blackhole")
        pub = mqtt(b, client_id="pub")
        for i in range(50):
            pub.publish("q/x", b"%d" % i, qos=1)
        # keepalive_interval 5: silence for 7.5 s ends the connection
        b.wait_log("Warning: bridge edge: exceeded timeout from the remote; closing the "
                   "connection.", timeout=30)
        b.wait_log("Error creating bridge: no CONNACK received in time.", timeout=30)
        at_remote.expect_no_message(0.5)
        proxy.heal()
        assert payloads_of(at_remote, 50, 40) == [b"%d" % i for i in range(50)]
        at_remote.expect_no_message(1.0)
    finally:
        proxy.close()


def test_three_addresses_the_bridge_moves_on_when_its_remote_dies(broker, remote, mqtt):
    first, second = remote(), remote()
    dead = free_port()
    b = broker("connection multi",
               "address 127.0.0.1:%d 127.0.0.1:%d" % (first.port, second.port),
               "addresses 127.0.0.1:%d" % dead,
               "remote_clientid multi-%d" % first.port,
               "restart_timeout 1",
               "topic m/# out 1")
    wait_bridge_up(mqtt, b, first, "m/probe")
    first.stop()
    at_second = mqtt(second, client_id="at-second")
    at_second.subscribe("m/#", 1)
    pub = mqtt(b, client_id="pub")
    for i in range(10):
        pub.publish("m/x", b"%d" % i, qos=1)
    assert payloads_of(at_second, 10, 20) == [b"%d" % i for i in range(10)]


def test_round_robin_false_goes_back_to_the_main_address(broker, remote, mqtt):
    main = remote(start=False)
    backup = remote()
    b = broker("connection mb",
               "address 127.0.0.1:%d 127.0.0.1:%d" % (main.port, backup.port),
               "remote_clientid mb-%d" % main.port,
               "restart_timeout 1",
               "topic m/# out 1")
    wait_bridge_up(mqtt, b, backup, "m/probe")
    main.start()
    b.wait_log("the main address is reachable again; moving back to it")
    wait_bridge_up(mqtt, b, main, "m/probe")


class FakeRemote:
    """A listening socket that plays a remote broker badly: each connection gets a CONNACK,
    then the bytes given (a malformed packet)."""

    def __init__(self, bad_bytes):
        self.server = socket.socket()
        self.server.bind((HOST, 0))
        self.server.listen(4)
        self.port = self.server.getsockname()[1]
        self.bad = bad_bytes
        self.accepted = 0
        self.closed_by_bridge = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        self.server.settimeout(0.2)
        while self.server.fileno() >= 0:
            try:
                conn, _ = self.server.accept()
            except OSError:
                if self.server.fileno() < 0:
                    return
                continue
            self.accepted += 1
            with conn:
                conn.settimeout(10)
                try:
                    conn.recv(4096)  # the CONNECT
                    conn.sendall(b"\x20\x02\x00\x00" + self.bad)
                    while conn.recv(4096):  # until the bridge closes it
                        pass
                    self.closed_by_bridge += 1
                except OSError:
                    pass

    def close(self):
        self.server.close()
        self.thread.join(5)


@pytest.mark.parametrize("bad,what", [
    (b"\x36\x05\x00\x01t\x00\x01", "malformed"),     # PUBLISH with QoS 3
    (b"\x10\x02\x00\x00", "unexpected packet"),       # a CONNECT from the remote
    (b"\x30\xff\xff\xff\xff\x7f", "malformed"),      # a remaining length over 4 bytes
])
def test_a_remote_sending_garbage_loses_its_connection_only(broker, mqtt, bad, what):
    fake = FakeRemote(bad)
    try:
        b = broker(*bridge_lines(fake.port, "g/# both 1"))
        wait_until(lambda: fake.closed_by_bridge >= 2, timeout=15,
                   what="the bridge closing the bad connection and dialling again")
        assert "Warning: bridge edge: " in b.log_text(), b.log_text()
        # the broker's clients are unharmed
        c = mqtt(b, client_id="bystander")
        c.subscribe("local/x", 1)
        c.publish("local/x", b"fine", qos=1)
        assert c.get_message(10).payload == b"fine"
    finally:
        fake.close()


def test_arbor_to_arbor_mqtt5_both_ways_no_echo(broker, mqtt):
    central = broker()
    edge = broker(*bridge_lines(central.port, "shared/# both 1",
                                extra=["bridge_protocol_version mqttv50"]))
    wait_bridge_up(mqtt, edge, central, "shared/probe")
    at_central = mqtt(central, client_id="c-sub", version=5)
    at_central.subscribe("shared/#", 1)
    at_edge = mqtt(edge, client_id="e-sub", version=5)
    at_edge.subscribe("shared/#", 1)
    mqtt(edge, client_id="e-pub").publish("shared/from-edge", b"e", qos=1)
    mqtt(central, client_id="c-pub").publish("shared/from-central", b"c", qos=1)
    # each side gets both messages once: nothing comes back over the bridge a second time
    assert sorted(m.payload for m in at_central.get_messages(2, 15)) == [b"c", b"e"]
    assert sorted(m.payload for m in at_edge.get_messages(2, 15)) == [b"c", b"e"]
    at_central.expect_no_message(1.0)
    at_edge.expect_no_message(0.3)


def test_mosquitto_clients_and_retained_over_the_bridge(broker, remote, mqtt):
    """Debian's mosquitto_pub on the edge, mosquitto_sub on the remote: a retained message
    arrives retained (try_private: the remote keeps the flag as published)."""
    r = remote()
    b = broker(*bridge_lines(r.port, "ret/# out 1"))
    wait_bridge_up(mqtt, b, r, "ret/probe")
    subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(b.port), "-t", "ret/v", "-m", "kept",
                    "-q", "1", "-r"], check=True, timeout=10)

    def retained_at_remote():
        out = subprocess.run(["mosquitto_sub", "-h", HOST, "-p", str(r.port), "-t", "ret/v",
                              "-C", "1", "-W", "2", "-v"], capture_output=True, timeout=10)
        return out.stdout.strip() == b"ret/v kept"
    wait_until(retained_at_remote, timeout=15, what="the retained message at the remote")


@pytest.mark.parametrize("version", ["mqttv311", "mqttv50"])
def test_debian_mosquitto_as_the_local_side_bridging_to_arbor(broker, remote, mqtt, version):
    """The other way round: Debian's mosquitto runs the bridge, arbor is the remote."""
    central = broker()
    edge = remote(lines=["connection to-arbor",
                         "address 127.0.0.1:%d" % central.port,
                         "remote_clientid mq-edge-%d" % central.port,
                         "bridge_protocol_version " + version,
                         "restart_timeout 1",
                         "topic up/# out 1",
                         "topic down/# in 1"])
    wait_bridge_up(mqtt, edge, central, "up/probe")
    at_central = mqtt(central, client_id="at-central")
    at_central.subscribe("up/x", 1)
    at_edge = mqtt(edge, client_id="at-edge")
    at_edge.subscribe("down/x", 1)
    pub_edge = mqtt(edge, client_id="pub-edge")
    pub_central = mqtt(central, client_id="pub-central")

    def crossed_down():
        pub_central.publish("down/x", b"probe", qos=1)
        try:
            at_edge.get_message(0.3)
            return True
        except AssertionError:
            return False
    wait_until(crossed_down, timeout=15, interval=0, what="the in topic subscribed at arbor")
    for i in range(20):
        pub_edge.publish("up/x", b"u%d" % i, qos=1)
        pub_central.publish("down/x", b"d%d" % i, qos=1)
    assert payloads_of(at_central, 20) == [b"u%d" % i for i in range(20)]
    got = []
    while len(got) < 20:  # late copies of the probe may come first
        payload = at_edge.get_message(15).payload
        if payload != b"probe":
            got.append(payload)
    assert got == [b"d%d" % i for i in range(20)]
    at_central.expect_no_message(0.5)


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_store_and_forward_survives_a_restart(broker, remote, mqtt, mode):
    """With persistence, the messages waiting for the remote are kept across a restart of
    arbor (snapshot: a clean stop; durable: kill -9) and reach the remote once it is up."""
    r = remote(start=False)
    lines = bridge_lines(r.port, "k/# out 1") + ["persistence true"]
    if mode == "durable":
        lines.append("persistence_mode durable")
    b = broker(*lines)
    b.wait_log("Connecting bridge (step 2) edge")
    pub = mqtt(b, client_id="pub")
    for i in range(50):
        pub.publish("k/x", b"%02d" % i, qos=1)  # acknowledged: arbor has taken it
    pub.close()
    if mode == "durable":
        b.stop(signal.SIGKILL, check=False)
    else:
        b.stop()
    b.start()
    b.wait_log("Bridge edge: 50 messages kept for the remote.")
    r.start()
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("k/x", 1)
    assert payloads_of(at_remote, 50, 20) == [b"%02d" % i for i in range(50)]
    at_remote.expect_no_message(0.7)


def test_a_new_bridge_sends_the_retained_messages_its_topics_match(broker, remote, mqtt,
                                                                    tmp_path):
    """Retained messages stored before the bridge existed go over it once its session is
    new, as a client's new subscription gets them (06-bridge-b2br-late-connection-retain,
    which Mosquitto 2.0.11 itself fails)."""
    store = tmp_path / "store"
    store.mkdir()
    os.chmod(str(store), 0o777)
    keep = ["persistence true", "persistence_location %s/" % store]
    before = broker(*keep)
    mqtt(before, client_id="pub").publish("r/x", b"held", qos=1, retain=True)
    before.stop()
    r = remote()
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("r/#", 1)
    broker(*bridge_lines(r.port, "r/# out 1"), *keep)
    m = at_remote.get_message(15)
    assert (m.topic, m.payload) == ("r/x", b"held")


def test_local_cleansession_true_keeps_nothing_across_a_restart(broker, remote, mqtt):
    r = remote(start=False)
    b = broker(*bridge_lines(r.port, "k/# out 1",
                             extra=["persistence true", "local_cleansession true"]))
    b.wait_log("Connecting bridge (step 2) edge")
    pub = mqtt(b, client_id="pub")
    for i in range(5):
        pub.publish("k/x", b"%d" % i, qos=1)
    pub.close()
    b.stop()
    b.start()
    r.start()
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("k/x", 1)
    wait_bridge_up(mqtt, b, r, "k/probe")  # up, and after the 5 had they been kept
    at_remote.expect_no_message(1.0)


def test_a_client_may_not_take_the_bridge_queue(broker, remote, mqtt):
    r = remote()
    b = broker(*bridge_lines(r.port, "k/# out 1", extra=["local_clientid edge-queue"]))
    wait_bridge_up(mqtt, b, r, "k/probe")
    c = mqtt(b, client_id="edge-queue", connect=False)
    rc = c.connect(expect_success=False)[0]
    assert rc.is_failure and rc.value == 0x85, rc  # paho maps 3.1.1 rc 2 to 0x85


@pytest.fixture(scope="module")
def pki():
    """tlscerts.make_pki's certificates, in a directory the brokers can read."""
    with tlscerts.temporary(tlscerts.make_pki, "arbor-bridge-tls-") as p:
        yield p


def tls_remote(remote, pki):
    """Debian's mosquitto with a TLS listener that asks for a client certificate."""
    return remote(lines=["cafile " + pki["ca"], "certfile " + pki["server"],
                         "keyfile " + pki["server_key"], "require_certificate true"])


def test_bridge_over_tls_with_a_client_certificate(broker, remote, mqtt, pki):
    r = tls_remote(remote, pki)
    b = broker(*bridge_lines(r.port, "secure/# both 1",
                             extra=["bridge_cafile " + pki["ca"],
                                    "bridge_certfile " + pki["alice"],
                                    "bridge_keyfile " + pki["alice_key"]]))
    b.wait_log("Received CONNACK on connection")
    cert = ["--cafile", pki["ca"], "--cert", pki["bob"], "--key", pki["bob_key"]]
    # out: a mosquitto_sub (with its own certificate) at the remote gets a local message
    sub = subprocess.Popen(["mosquitto_sub", "-h", HOST, "-p", str(r.port)] + cert +
                           ["-t", "secure/out", "-C", "1", "-W", "20"], stdout=subprocess.PIPE)
    try:
        pub = mqtt(b, client_id="pub")

        def sent_and_received():
            pub.publish("secure/out", b"to-remote", qos=1)
            return sub.poll() is not None
        wait_until(sent_and_received, timeout=20, interval=0.3, what="a message out")
        assert sub.stdout.read().strip() == b"to-remote"
    finally:
        if sub.poll() is None:
            sub.kill()
        sub.wait()
    # in: a message published at the remote arrives here
    at_local = mqtt(b, client_id="at-local")
    at_local.subscribe("secure/in", 1)
    subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(r.port)] + cert +
                   ["-t", "secure/in", "-m", "over-tls", "-q", "1"], check=True, timeout=10)
    assert at_local.get_message(15).payload == b"over-tls"


def test_bridge_refuses_a_remote_its_ca_did_not_sign(broker, remote, mqtt, pki):
    r = tls_remote(remote, pki)
    b = broker(*bridge_lines(r.port, "secure/# out 1",
                             extra=["bridge_cafile " + pki["other_ca"]]))
    b.wait_log("Error creating bridge")
    assert "Received CONNACK" not in b.log_text()


def test_bridge_tls_file_errors_stop_the_start(broker, pki):
    b = broker(*bridge_lines(1, "t", extra=["bridge_cafile /nonexistent/ca.pem"]), start=False)
    proc = subprocess.run([os.environ.get("ARBOR_BIN", "build/arbor"), "-c", b.conf_path],
                          capture_output=True, timeout=15)
    assert proc.returncode != 0
    err = (proc.stdout + proc.stderr).decode()
    assert "bridge_cafile" in err and "/nonexistent/ca.pem" in err, err


@pytest.mark.parametrize("lines,where,text", [
    (["topic a/# out"], 1, "only allowed after a connection line"),
    (["connection x", "topic a/#"], 1, "has no address line"),
    (["connection x", "address 127.0.0.1:1", "topic a/# sideways"], 3, "is not in, out or both"),
    (["connection x", "address 127.0.0.1:1", "topic \"\" out 0 local"], 3, "remote prefix"),
    (["connection x", "address 127.0.0.1:1", "topic \"\" out 0 \"\" remote"], 3, "empty"),
    (["connection x", "address 127.0.0.1:99999", "topic a"], 2, "invalid port"),
    (["connection x", "address h", "topic a", "connection x"], 4, "already given"),
    (["connection x", "address h", "topic a", "bridge_psk 00"], 4, "needs bridge_identity"),
])
def test_bad_bridge_lines_stop_the_start_with_file_and_line(broker, lines, where, text):
    b = broker(*lines, defaults=False, start=False)
    proc = subprocess.run([os.environ.get("ARBOR_BIN", "build/arbor"), "-c", b.conf_path],
                          capture_output=True, timeout=15)
    assert proc.returncode != 0
    err = (proc.stdout + proc.stderr).decode()
    # the config's first line is the listener: the bridge lines start at line 2
    assert ":%d: " % (where + 1) in err and text in err, err



def test_every_bridge_directive_is_in_the_man_page():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "src", "config", "bridge_config.c")) as f:
        source = f.read()
    table = source[source.index("bridge_directives[] = {"):]
    names = re.findall(r'"([a-z_]+)"', table[:table.index("};")])
    assert len(names) >= 40
    with open(os.path.join(root, "man", "arbor.conf.5")) as f:
        page = f.read()
    section = page[page.index(".SH BRIDGES"):page.index('.SH "PEERS (MQTT-ST)"')]
    section = re.sub(r"\\f[BIRP]", " ", section)  # roff font changes
    missing = [n for n in names if not re.search(r"\b%s\b" % re.escape(n), section)]
    assert not missing, missing
