"""Bad input: malformed and out-of-order packets close only the offending connection; other
clients carry on. Limits: message_size_limit, max_packet_size, max_connections."""

import os
import resource
import select
import signal
import socket
import subprocess
import time

import pytest

import mqttproto as mp
from helpers import assert_cpu_goes_quiet, free_port
from conftest import ARBOR_BIN
from mqttproto import MQTT311, MQTT5


class Bystander:
    """A subscriber plus a publisher that check the broker still routes messages."""

    def __init__(self, b, raw):
        self.sub = raw(b)
        self.sub.connect("bystander-sub")
        self.sub.subscribe("alive/#", 1)
        self.pub = raw(b)
        self.pub.connect("bystander-pub")
        self.n = 0

    def check(self):
        self.n += 1
        payload = b"still here %d" % self.n
        self.pub.publish("alive/x", payload, qos=1)
        m = self.sub.recv_publish(timeout=5)
        assert m.payload == payload


def rejected(b, raw, data, version=MQTT311, connect_first=True, cid="bad"):
    """Send `data` (after a good CONNECT if connect_first) and assert the broker closes the
    connection, sending at most an error CONNACK / DISCONNECT first. Returns the packets."""
    bystander = Bystander(b, raw)
    c = raw(b, version)
    if connect_first:
        c.connect(cid)
    c.try_send(data)
    pkts = c.wait_closed(5)
    for p in pkts:
        if p.type == mp.DISCONNECT:
            assert version == MQTT5 and mp.Disconnect(p).reason >= 0x80, pkts
        elif p.type == mp.CONNACK:
            assert not connect_first, pkts
            assert mp.Connack(p, version).rc != 0, pkts
        else:
            raise AssertionError("unexpected %r before close" % (pkts,))
    bystander.check()
    return pkts


# ---------------------------------------------------------------- framing

def test_remaining_length_of_five_bytes(broker, raw):
    # 2.2.3: the remaining length is at most 4 bytes.
    rejected(broker(), raw, b"\x30\xff\xff\xff\xff\x7f")


def test_remaining_length_of_five_bytes_before_connect(broker, raw):
    rejected(broker(), raw, b"\x10\xff\xff\xff\xff\x01", connect_first=False)


def test_truncated_packet_then_close(broker, raw):
    # The connection drops in the middle of a packet: the broker discards it cleanly.
    b = broker()
    bystander = Bystander(b, raw)
    for data in (b"\x10", b"\x10\x20\x00\x04MQ", mp.publish("alive/x", b"abcdef")[:-3]):
        c = raw(b)
        if data != b"\x10" and data[0] == 0x30:
            c.connect("trunc")
        c.send(data)
        c.close()
    bystander.check()
    assert bystander.sub.expect_no_packet(0.3) is None


def test_string_longer_than_packet(broker, raw):
    # Topic length field says 100 bytes but the packet ends after 3.
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0, b"\x00\x64abc"))


def test_publish_with_only_partial_topic_length(broker, raw):
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0, b"\x00"))


def test_connect_truncated_inside_variable_header(broker, raw):
    rejected(broker(), raw, mp.packet(mp.CONNECT, 0, b"\x00\x04MQTT\x04"),
             connect_first=False)


@pytest.mark.parametrize("first_byte", [0x00, 0x0F])
def test_reserved_packet_type_0(broker, raw, first_byte):
    rejected(broker(), raw, bytes([first_byte, 0x00]))


def test_auth_packet_in_v311(broker, raw):
    # Packet type 15 is reserved in MQTT 3.1.1.
    rejected(broker(), raw, b"\xf0\x00")


def test_connack_from_client(broker, raw):
    # CONNACK is sent by the server only: a protocol violation (4.8) -> close, without a
    # DISCONNECT as Mosquitto, also when its flags are wrong too (Mosquitto's test
    # 01-connect-connack-2163 sends 0x29).
    for version in (MQTT311, MQTT5):
        for data in (b"\x20\x02\x00\x00", b"\x29\x02\x00\x01"):
            assert rejected(broker(), raw, data, version=version, cid="srvonly") == []


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 silently accepts SUBACK/UNSUBACK (v3) and "
                                "PINGRESP from clients: its broker shares the bridge's "
                                "client-side handlers")
@pytest.mark.parametrize("data", [b"\x90\x03\x00\x01\x00", b"\xb0\x02\x00\x01",
                                  b"\xd0\x00"], ids=["suback", "unsuback", "pingresp"])
def test_server_only_packet_from_client(broker, raw, data):
    rejected(broker(), raw, data, cid="srvonly")


@pytest.mark.parametrize("data", [
    mp.subscribe(1, [("a", 0)], flags=0x00),        # SUBSCRIBE flags must be 0010
    mp.subscribe(1, [("a", 0)], flags=0x0A),
    mp.unsubscribe(1, ["a"], flags=0x00),           # UNSUBSCRIBE flags must be 0010
    mp.ack(mp.PUBREL, 1, flags=0x00),               # PUBREL flags must be 0010
    mp.packet(mp.DISCONNECT, 0x02, b""),
], ids=["subscribe-0", "subscribe-a", "unsubscribe-0", "pubrel-0", "disconnect-2"])
def test_wrong_fixed_header_flags(broker, raw, data):
    # 2.2.2 [MQTT-2.2.2-2]: invalid flags -> close the connection.
    rejected(broker(), raw, data)


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 does not check the fixed-header flags of "
                                "PINGREQ and PUBACK ([MQTT-2.2.2-2])")
@pytest.mark.parametrize("data", [mp.packet(mp.PINGREQ, 0x01, b""),
                                  mp.packet(mp.PUBACK, 0x02, b"\x00\x01")],
                         ids=["pingreq-1", "puback-2"])
def test_wrong_fixed_header_flags_unchecked_by_mosquitto(broker, raw, data):
    rejected(broker(), raw, data)


def test_publish_qos_3(broker, raw):
    # [MQTT-3.3.1-4]: QoS bits 11 are malformed.
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0x06, b"\x00\x01a\x00\x01x"))


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 answers a PINGREQ with remaining length 1")
def test_pingreq_with_payload(broker, raw):
    rejected(broker(), raw, mp.packet(mp.PINGREQ, 0, b"\x00"))


# ---------------------------------------------------------------- strings

@pytest.mark.parametrize("topic", [b"bad\xc3\x28utf8", b"\xff", b"a\x00b",
                                   b"\xed\xa0\x80surrogate"],
                         ids=["invalid-seq", "ff", "nul", "surrogate"])
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_bad_utf8_in_topic(broker, raw, topic, version):
    # 1.5.3 [MQTT-1.5.3-1/2]: ill-formed UTF-8 or U+0000 in a string -> close.
    b = broker()
    watcher = raw(b)
    watcher.connect("watcher")
    watcher.subscribe("#", 0)
    rejected(b, raw, mp.publish(topic, b"x", version=version), version=version)
    assert all(m.topic.startswith("alive") for m in drain(watcher))


def drain(c, timeout=0.3, expect=0):
    return c.drain_publishes(timeout, expect=expect)


@pytest.mark.parametrize("filt", [b"a/\xc3\x28", b"a\x00"], ids=["invalid-seq", "nul"])
def test_bad_utf8_in_subscribe_filter(broker, raw, filt):
    rejected(broker(), raw, mp.subscribe(1, [(filt, 0)]))


def test_bad_utf8_in_client_id(broker, raw):
    b = broker()
    pkts = rejected(b, raw, mp.connect(b"id\xff"), connect_first=False)
    for p in pkts:
        assert p.type == mp.CONNACK and p.body[1] != 0


def test_nul_in_client_id(broker, raw):
    b = broker()
    pkts = rejected(b, raw, mp.connect(b"id\x00x"), connect_first=False)
    for p in pkts:
        assert p.type == mp.CONNACK and p.body[1] != 0


def test_bad_utf8_in_will_topic(broker, raw):
    b = broker()
    rejected(b, raw, mp.connect("w", will={"topic": b"w\xc3\x28", "payload": b"x"}),
             connect_first=False)


# ---------------------------------------------------------------- ordering

def test_first_packet_not_connect(broker, raw):
    # [MQTT-3.1.0-1]: the first packet must be CONNECT.
    b = broker()
    for data in (mp.subscribe(1, [("a", 0)]), mp.publish("alive/x", b"sneaky"),
                 mp.pingreq()):
        rejected(b, raw, data, connect_first=False)


def test_second_connect_closes(broker, raw):
    # [MQTT-3.1.0-2]: a second CONNECT is a protocol violation.
    for version in (MQTT311, MQTT5):
        b = broker()
        pkts = rejected(b, raw, mp.connect("again", version=version), version=version,
                        cid="again")
        assert pkts == []  # no CONNACK, and no DISCONNECT either (as Mosquitto)


def test_publish_qos1_packet_id_zero(broker, raw):
    # 2.3.1 [MQTT-2.3.1-1]: QoS>0 packets need a non-zero packet identifier.
    rejected(broker(), raw, mp.publish("alive/zero", b"x", qos=1, pid=0))


def test_subscribe_packet_id_zero(broker, raw):
    rejected(broker(), raw, mp.subscribe(0, [("a", 0)]))


def test_garbage_instead_of_connect(broker, raw):
    rejected(broker(), raw, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", connect_first=False)


def test_v5_unknown_property(broker, raw):
    # 2.2.2.2: an unknown property identifier is malformed.
    body = mp.string("alive/x") + b"\x02\x7f\x00" + b"payload"
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0, body), version=MQTT5)


def test_v5_property_length_overruns_packet(broker, raw):
    body = mp.string("alive/x") + b"\x20\x01"
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0, body), version=MQTT5)


def test_v5_property_not_allowed_on_packet(broker, raw):
    # Session Expiry Interval is not a PUBLISH property.
    body = mp.string("alive/x") + mp.properties([(mp.P_SESSION_EXPIRY, 5)]) + b"x"
    rejected(broker(), raw, mp.packet(mp.PUBLISH, 0, body), version=MQTT5)


def test_many_half_open_connections_do_not_block(broker, raw):
    b = broker()
    idle = []
    for i in range(20):
        s = socket.create_connection((b.host, b.port))
        s.sendall(mp.connect("half%d" % i)[:7])
        idle.append(s)
    try:
        Bystander(b, raw).check()
    finally:
        for s in idle:
            s.close()


# ---------------------------------------------------------------- size limits

def test_message_size_limit_v311_drops_but_acks(broker, raw):
    # mosquitto.conf(5) message_size_limit: bigger payloads are not forwarded, but the QoS
    # flow is completed (v3.x has no way to say why).
    b = broker("message_size_limit 100")
    sub = raw(b)
    sub.connect("sub")
    sub.subscribe("big", 1)
    c = raw(b)
    c.connect("c")
    ack = c.publish("big", b"x" * 101, qos=1)
    assert ack.type == mp.PUBACK
    c.publish("big", b"y" * 100, qos=1)
    assert [m.payload for m in drain(sub, 0.4, expect=1)] == [b"y" * 100]
    assert c.is_open()


def test_message_size_limit_v5_reason(broker, raw):
    # MQTT v5 QoS 1/2 publishers get an error reason code on the PUBACK/PUBREC.
    b = broker("message_size_limit 100")
    sub = raw(b)
    sub.connect("sub")
    sub.subscribe("big", 2)
    c = raw(b, MQTT5)
    c.connect("c")
    ack = c.publish("big", b"x" * 101, qos=1)
    assert ack.reason >= 0x80
    rec = c.publish("big", b"x" * 101, qos=2)
    assert rec.type == mp.PUBREC and rec.reason >= 0x80
    assert drain(sub, 0.4) == []


def test_max_packet_size_v311_disconnects(broker, raw):
    b = broker("max_packet_size 200")
    rejected(b, raw, mp.publish("alive/x", b"x" * 300, qos=1, pid=1))


def test_max_packet_size_applies_to_connect(broker, raw):
    b = broker("max_packet_size 100")
    rejected(b, raw, mp.connect("big", username="u" * 200), connect_first=False)


def test_max_connections(broker, raw):
    # mosquitto.conf(5) max_connections: further connections are refused (closed).
    b = broker("max_connections 2")
    a = raw(b)
    a.connect("a")
    bb = raw(b)
    bb.connect("b")
    third = raw(b)
    third.try_send(mp.connect("c"))
    assert third.wait_closed(5) == []
    a.disconnect()
    deadline = time.monotonic() + 5
    while True:
        again = raw(b)
        again.try_send(mp.connect("d"))
        try:
            pkt = again.recv(1)
            break
        except (mp.ConnectionClosed, mp.PacketTimeout):
            assert time.monotonic() < deadline, "slot never freed"
            time.sleep(0.05)
    assert pkt.type == mp.CONNACK and pkt.body == b"\x00\x00"
    assert bb.is_open()


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 frees a max_connections slot twice when a "
                                "connection closes before sending CONNECT, so the limit "
                                "stops working")
def test_max_connections_after_connection_without_connect(broker, raw):
    b = broker("max_connections 2")
    probe = socket.create_connection((b.host, b.port))
    probe.close()
    time.sleep(0.2)
    a = raw(b)
    a.connect("a")
    bb = raw(b)
    bb.connect("b")
    third = raw(b)
    third.try_send(mp.connect("c"))
    assert third.wait_closed(5) == []


@pytest.mark.arbor_only
def wait_closed_by_peer(socks, want, timeout):
    """How many of socks the other end has closed (EOF or reset), waiting until `want` are
    or timeout has passed."""
    open_socks, closed = list(socks), 0
    deadline = time.monotonic() + timeout
    while closed < want and open_socks and time.monotonic() < deadline:
        readable, _, _ = select.select(open_socks, [], [], deadline - time.monotonic())
        for s in readable:
            try:
                gone = s.recv(1) == b""
            except ConnectionResetError:
                gone = True
            if gone:
                closed += 1
                open_socks.remove(s)
    return closed


def test_out_of_file_descriptors_refuses_at_once_and_does_not_spin(tmp_path):
    # With the descriptor limit reached, accept() fails. A client past the limit must learn
    # at once (closed, as Mosquitto does), not complete the TCP handshake and wait for a
    # CONNACK that never comes; the broker must neither crash nor busy-loop on the
    # still-readable listening socket, and must accept again once descriptors are free.
    port = free_port()
    conf = tmp_path / "fd.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\nlog_dest stderr\n" % port)
    log = open(tmp_path / "fd.log", "wb")
    proc = subprocess.Popen(
        [ARBOR_BIN, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (24, 24)))
    socks = []
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "broker did not start"
                time.sleep(0.05)
        for _ in range(40):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        # 24 descriptors, some of them the broker's own: most of the 40 are refused, each
        # closed right after it was accepted (the CONNECT timeout is 10 s and longer).
        refused = wait_closed_by_peer(socks, 20, 5.0)
        assert refused >= 20, "only %d of 40 closed at once" % refused
        assert_cpu_goes_quiet(proc.pid, 0.5, window=1.5, what="while out of descriptors")
        for s in socks:
            s.close()
        socks = []
        c = None
        deadline = time.monotonic() + 5
        while c is None:
            try:
                c = mp.RawClient("127.0.0.1", port)
                assert c.connect("after-fd-exhaustion").rc == 0
            except (OSError, mp.ConnectionClosed, mp.PacketTimeout):
                if c is not None:
                    c.close()
                c = None
                assert time.monotonic() < deadline, "broker did not accept again"
                time.sleep(0.2)
        c.close()
        assert proc.poll() is None
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
        log.close()
    out = (tmp_path / "fd.log").read_text()
    assert rc == 0, out
    assert "denied: out of file descriptors (the open files limit)." in out
    assert "Open files limit 24: up to about 0 connections." in out
    assert "AddressSanitizer" not in out and "runtime error" not in out
