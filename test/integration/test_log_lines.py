"""Log lines in Mosquitto 2.0's wording.

Operators' alerting and log parsers grep Mosquitto's lines ("New client connected from ...",
"Client X closed its connection.", "Socket error on client X, disconnecting." ...) and, with
`log_type all` / -v, its per-packet debug lines ("Received PUBLISH from X (d0, q1, r0, m1,
't', ... (5 bytes))"). The wording is an interface: every expectation here was observed on
Debian's mosquitto 2.0.11 run with `log_type all`, and each test passes against it.

The broker fixture logs to stderr with `log_type all` (see conftest.py); lines are matched
whole, after the timestamp prefix.
"""

import re
import signal
import socket
import struct
import time

import pytest

import mqttproto as mp
from helpers import IS_MOSQUITTO

NAME = "mosquitto" if IS_MOSQUITTO else "arbor"
STAMP = re.compile(r"^(\d+): (.*)$")


def lines(b):
    """The broker's log lines without their timestamp prefix."""
    out = []
    for line in b.log_text().splitlines():
        m = STAMP.match(line)
        if m:
            out.append(m.group(2))
    return out


def wait_lines(b, *patterns, timeout=15.0):
    """Wait until every regex in `patterns` matches a whole log line, in this order (each
    after the previous one); return the matched lines."""
    deadline = time.monotonic() + timeout
    while True:
        log = lines(b)
        found, pos = [], 0
        for pat in patterns:
            rx = re.compile(pat)
            while pos < len(log) and not rx.fullmatch(log[pos]):
                pos += 1
            if pos == len(log):
                break
            found.append(log[pos])
            pos += 1
        if len(found) == len(patterns):
            return found
        if time.monotonic() > deadline:
            raise AssertionError("log lines %r not found in order (matched %d); log:\n%s"
                                 % (patterns, len(found), "\n".join(log)))
        time.sleep(0.02)


def has_line(b, pattern):
    rx = re.compile(pattern)
    return any(rx.fullmatch(line) for line in lines(b))


def peer(c):
    """The client's address as the broker prints it (host:port)."""
    host, port = c.sock.getsockname()[:2]
    return r"%s:%d" % (re.escape(host), port)


# ---------------------------------------------------------------- start-up and shutdown

def test_startup_and_shutdown_lines(broker):
    b = broker()
    conf = re.escape(b.conf_path)
    wait_lines(b, NAME + r" version \S+ starting",
               "Config loaded from %s." % conf,
               r"Opening ipv4 listen socket on port %d\." % b.port,
               NAME + r" version \S+ running")
    assert b.stop() == 0
    wait_lines(b, NAME + r" version \S+ terminating")


def test_timestamps_default_epoch_seconds(broker):
    b = broker()
    wait_lines(b, NAME + r" version \S+ running")
    first = b.log_text().splitlines()[0]
    m = re.match(r"^(\d+): ", first)
    assert m, first
    assert abs(int(m.group(1)) - time.time()) < 60


def test_timestamp_format(broker):
    # mosquitto.conf(5) log_timestamp_format: strftime format, then ": ".
    b = broker("log_timestamp_format %Y-%m-%dT%H:%M:%S")
    deadline = time.monotonic() + 5
    while "running" not in b.log_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    for line in b.log_text().splitlines():
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d: \S", line), line


def test_no_timestamp(broker):
    b = broker("log_timestamp false")
    deadline = time.monotonic() + 5
    while "running" not in b.log_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    text = b.log_text().splitlines()
    assert re.fullmatch(NAME + r" version \S+ starting", text[0]), text


# ---------------------------------------------------------------- connections

@pytest.mark.parametrize("version,p", [(mp.MQTT31, 1), (mp.MQTT311, 2), (mp.MQTT5, 5)])
@pytest.mark.parametrize("username", [None, "bob"])
def test_new_client_connected(broker, raw, version, p, username):
    b = broker()
    c = raw(b, version)
    c.connect("cl-%d" % p, keepalive=30, username=username,
              password=b"pw" if username else None)
    user = ", u'%s'" % username if username else ""
    wait_lines(b, r"New connection from %s on port %d\." % (peer(c), b.port),
               r"New client connected from %s as cl-%d \(p%d, c1, k30%s\)\." % (
                   peer(c), p, p, re.escape(user)),
               r"No will message specified\.",
               r"Sending CONNACK to cl-%d \(0, 0\)" % p)


def test_connection_messages_false_hides_both_connection_lines(broker, raw):
    b = broker("connection_messages false")
    c = raw(b)
    c.connect("quiet", keepalive=30)
    c.close()
    c = raw(b)
    c.connect("marker", keepalive=30)
    wait_lines(b, r"Sending CONNACK to marker \(0, 0\)")
    text = "\n".join(lines(b))
    assert "New connection from" not in text
    assert "New client connected from" not in text


def test_persistent_session_flags(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("keep", clean=False, keepalive=0)
    c.close()
    wait_lines(b, r"Client keep closed its connection\.")
    c = raw(b)
    c.connect("keep", clean=False, keepalive=0)
    wait_lines(b, r"New client connected from %s as keep \(p2, c0, k0\)\." % peer(c),
               r"Sending CONNACK to keep \(1, 0\)")


def test_will_lines(broker, raw):
    b = broker()
    c = raw(b, mp.MQTT5)
    c.connect("willer", will={"topic": "w/t", "payload": b"bye", "qos": 1, "retain": True})
    wait_lines(b, r"New client connected from .* as willer \(p5, c1, k60\)\.",
               r"Will message specified \(3 bytes\) \(r1, q1\)\.",
               r"\tw/t",
               r"Sending CONNACK to willer \(0, 0\)")


@pytest.mark.parametrize("version", [mp.MQTT311, mp.MQTT5])
def test_clean_disconnect(broker, raw, version):
    b = broker()
    c = raw(b, version)
    c.connect("leaver")
    c.disconnect()
    wait_lines(b, r"Received DISCONNECT from leaver", r"Client leaver disconnected\.")


def test_disconnect_with_will_is_disconnected(broker, raw):
    b = broker()
    c = raw(b, mp.MQTT5)
    c.connect("w5", will={"topic": "w/x", "payload": b"b"})
    c.disconnect(reason=0x04)
    wait_lines(b, r"Received DISCONNECT from w5", r"Client w5 disconnected\.")


def test_socket_closed_by_client(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("closer")
    c.close()
    wait_lines(b, r"Client closer closed its connection\.")
    assert not has_line(b, r"Client closer disconnected.*")


def test_connection_reset_by_client(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("resetter")
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    wait_lines(b, r"Client resetter closed its connection\.")


def test_closed_before_connect(broker, raw):
    b = broker()
    c = raw(b)
    wait_lines(b, r"New connection from %s on port %d\." % (peer(c), b.port))
    c.close()
    wait_lines(b, r"Client <unknown> closed its connection\.")


def test_garbage_before_connect(broker, raw):
    b = broker()
    c = raw(b)
    c.send(b"GET / HTTP/1.1\r\n\r\n")
    c.wait_closed()
    wait_lines(b, r"Client <unknown> disconnected due to protocol error\.")


def test_unsupported_protocol_version(broker, raw):
    b = broker()
    c = raw(b)
    c.send(mp.connect("badv", proto_level=7))
    c.wait_closed()
    wait_lines(b, r"Sending CONNACK to 127\.0\.0\.1 \(0, 1\)",
               r"Client <unknown> disconnected due to protocol error\.")


@pytest.mark.parametrize("version,rc", [(mp.MQTT311, 5), (mp.MQTT5, 0x87)])
def test_not_authorised(broker, raw, version, rc):
    b = broker("allow_anonymous false")
    c = raw(b, version)
    ack = c.connect("anon", expect_rc=None)
    assert ack.rc == rc
    wait_lines(b, r"Sending CONNACK to 127\.0\.0\.1 \(0, %d\)" % rc,
               r"Client <unknown> disconnected, not authorised\.")
    assert not has_line(b, r"New client connected.*")
    # Mosquitto prints only those two lines for the refusal, nothing about a "refused" client.
    assert not [l for l in lines(b) if "refused" in l], lines(b)


def test_second_connect_is_protocol_error(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("perr")
    c.send(mp.connect("perr"))
    c.wait_closed()
    wait_lines(b, r"Bad client perr sending multiple CONNECT messages\.",
               r"Client perr disconnected due to protocol error\.")


def test_malformed_packet(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("mal")
    c.send(mp.packet(mp.SUBSCRIBE, 2, b"\x00"))
    c.wait_closed()
    wait_lines(b, r"Received SUBSCRIBE from mal",
               r"Client mal disconnected due to malformed packet\.")


def test_oversize_publish_one_debug_line(broker, raw):
    # Mosquitto 2.0.11 -v: one debug line instead of "Received PUBLISH", and the PUBACK it sends
    # with reason 149 (0x95, outside MQTT 5's PUBACK table but what Mosquitto sends).
    b = broker("message_size_limit 10")
    c = raw(b, mp.MQTT5)
    c.connect("big")
    c.publish("t/x", b"x" * 50, qos=1)
    c.send(mp.publish("t/y", b"y" * 50, qos=2, pid=2, version=mp.MQTT5))
    c.recv()
    c.disconnect()
    wait_lines(b, r"Dropped too large PUBLISH from big \(d0, q1, r0, m1, 't/x', \.\.\. \(50 bytes\)\)",
               r"Sending PUBACK to big \(m1, rc149\)",
               r"Dropped too large PUBLISH from big \(d0, q2, r0, m2, 't/y', \.\.\. \(50 bytes\)\)",
               r"Sending PUBREC to big \(m2, rc149\)")
    log = lines(b)
    assert not [l for l in log if "t/x" in l and "Dropped too large" not in l], log
    assert len([l for l in log if "Dropped too large" in l]) == 2, log


def test_oversize_publish_not_logged_without_debug(broker, raw):
    # Without debug, Mosquitto logs nothing for a dropped oversize PUBLISH (a client cannot
    # flood the log with them).
    b = broker("message_size_limit 10", "allow_anonymous true", "log_dest stderr",
               "log_type error", "log_type warning",
               "log_type notice", "log_type information", defaults=False)
    c = raw(b, mp.MQTT5)
    c.connect("big")
    for pid in range(1, 4):
        c.publish("t/x", b"x" * 50, qos=1, pid=pid)
    c.disconnect()
    wait_lines(b, r"Client big (disconnected|closed its connection)\.")
    assert not [l for l in lines(b) if "t/x" in l or "PUBLISH" in l], lines(b)


@pytest.mark.arbor_only  # Mosquitto 2.0.11 prints client strings raw (one line can be many)
def test_control_characters_from_clients_are_escaped(broker, raw):
    # A client id, user name, topic or filter with a newline must not split a log line or forge
    # one: control characters are written as \xHH.
    b = broker()
    forged = "1700000000: New client connected from 6.6.6.6:1 as admin (p2, c1, k60)."
    c = raw(b, mp.MQTT5)
    c.connect("evil\n" + forged, username="u\r\x1bx")
    c.subscribe([("f\n" + forged, 0)])
    c.publish("t\n" + forged, b"x", qos=1)
    c.disconnect()
    wait_lines(b, r"Client evil\\x0a1700000000: .* disconnected\.")
    text = b.log_text()
    assert forged not in text.splitlines(), text        # no forged line of its own
    assert all("\\x0a" in l for l in text.splitlines() if "6.6.6.6" in l), text
    assert "u'u\\x0d\\x1bx'" in text, text
    assert "'t\\x0a1700000000" in text, text
    assert "\tf\\x0a1700000000" in text, text


def test_oversize_packet(broker, raw):
    b = broker("max_packet_size 100")
    c = raw(b)
    c.connect("big")
    c.send(mp.publish("t", b"x" * 200))
    c.wait_closed()
    wait_lines(b, r"Client big disconnected due to oversize packet\.")


@pytest.mark.parametrize("version", [mp.MQTT311, mp.MQTT5])
def test_keepalive_timeout(broker, raw, version):
    # Mosquitto 2.0.11 checks keepalives coarsely: with k2 it disconnects after ~5 s.
    b = broker()
    c = raw(b, version)
    c.connect("sleepy", keepalive=2)
    c.wait_closed(timeout=10)
    wait_lines(b, r"Client sleepy has exceeded timeout, disconnecting\.")
    assert not has_line(b, r"Client sleepy (closed|disconnected).*")


def test_takeover(broker, raw):
    b = broker()
    old = raw(b, mp.MQTT5)
    old.connect("twin")
    new = raw(b, mp.MQTT5)
    new.connect("twin")
    old.wait_closed()
    wait_lines(b, r"New client connected from %s as twin .*" % peer(old),
               r"New connection from %s on port %d\." % (peer(new), b.port),
               r"Client twin already connected, closing old connection\.",
               r"New client connected from %s as twin \(p5, c1, k60\)\." % peer(new))
    # Only the takeover line: the old connection's end is not reported again.
    log = lines(b)
    assert not [l for l in log if re.fullmatch(r"Client twin (closed|disconnected).*", l)], log


# ---------------------------------------------------------------- log types

def test_levels_without_debug(broker, raw):
    # Connection lines are `notice`, start-up lines `information`, packet lines `debug`.
    b = broker("allow_anonymous true", "log_dest stderr", "log_type notice", defaults=False)
    c = raw(b)
    c.connect("quiet")
    c.subscribe("q", 1)
    c.publish("q", b"x", qos=1, complete=False)
    got = [c.recv(), c.recv()]
    assert sorted(p.type for p in got) == [mp.PUBLISH, mp.PUBACK]
    address = peer(c)
    c.disconnect()
    wait_lines(b, r"New connection from %s on port %d\." % (address, b.port),
               r"New client connected from %s as quiet \(p2, c1, k60\)\." % address,
               r"Client quiet disconnected\.")
    log = lines(b)
    for pat in (r"(Received|Sending) .*", r".*version .* starting", r"Config loaded from .*",
                r"Opening ipv4 listen socket.*", r"No will message specified\."):
        assert not [l for l in log if re.fullmatch(pat, l)], (pat, log)


def test_information_has_startup_lines_only(broker, raw):
    b = broker("allow_anonymous true", "log_dest stderr", "log_type information",
               defaults=False)
    c = raw(b)
    c.connect("infoclient")
    c.disconnect()
    wait_lines(b, NAME + r" version \S+ starting", r"Config loaded from .*",
               r"Opening ipv4 listen socket on port %d\." % b.port,
               NAME + r" version \S+ running")
    time.sleep(0.2)
    assert not has_line(b, r".*infoclient.*"), lines(b)


# ---------------------------------------------------------------- packets (debug)

def test_packet_lines_qos0_qos1_subscribe_ping(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("c311", username="bob", password=b"pw", keepalive=30)
    c.subscribe([("t/#", 1), ("x", 2)])
    wait_lines(b, r"Received SUBSCRIBE from c311", r"\tt/# \(QoS 1\)", r"\tx \(QoS 2\)",
               r"Sending SUBACK to c311")
    wait_lines(b, r"Received SUBSCRIBE from c311", r"c311 1 t/#", r"c311 2 x",
               r"Sending SUBACK to c311")
    c.publish("t/a", b"hello")
    c.recv_publish()
    wait_lines(b, r"Received PUBLISH from c311 \(d0, q0, r0, m0, 't/a', \.\.\. \(5 bytes\)\)",
               r"Sending PUBLISH to c311 \(d0, q0, r0, m0, 't/a', \.\.\. \(5 bytes\)\)")
    c.publish("t/a", b"hello", qos=1, pid=5, complete=False)
    pkts = [c.recv(), c.recv()]
    out = [mp.Publish(p, mp.MQTT311) for p in pkts if p.type == mp.PUBLISH][0]
    c.send(mp.puback(out.pid))
    wait_lines(b, r"Received PUBLISH from c311 \(d0, q1, r0, m5, 't/a', \.\.\. \(5 bytes\)\)",
               r"Sending PUBLISH to c311 \(d0, q1, r0, m%d, 't/a', \.\.\. \(5 bytes\)\)"
               % out.pid)
    wait_lines(b, r"Received PUBLISH from c311 \(d0, q1, r0, m5, .*",
               r"Sending PUBACK to c311 \(m5, rc0\)",
               r"Received PUBACK from c311 \(Mid: %d, RC:0\)" % out.pid)
    c.unsubscribe(["t/#"])
    wait_lines(b, r"Received UNSUBSCRIBE from c311", r"\tt/#", r"c311 t/#",
               r"Sending UNSUBACK to c311")
    assert c.is_open()
    wait_lines(b, r"Received PINGREQ from c311", r"Sending PINGRESP to c311")


@pytest.mark.parametrize("version", [mp.MQTT311, mp.MQTT5])
def test_packet_lines_qos2_both_ways(broker, raw, version):
    b = broker()
    sub = raw(b, version)
    sub.connect("sub2")
    sub.subscribe("q", 2)
    pub = raw(b, version)
    pub.connect("pub2")
    pub.publish("q", b"abc", qos=2, retain=True, pid=9)
    msg = sub.recv_publish(ack=False)
    sub.send(mp.pubrec(msg.pid))
    sub.recv_type(mp.PUBREL)
    sub.send(mp.pubcomp(msg.pid))
    assert sub.is_open()
    # Received side: the publisher's flow.
    wait_lines(b, r"Received PUBLISH from pub2 \(d0, q2, r1, m9, 'q', \.\.\. \(3 bytes\)\)",
               r"Sending PUBREC to pub2 \(m9, rc0\)",
               r"Received PUBREL from pub2 \(Mid: 9\)",
               r"Sending PUBCOMP to pub2 \(m9\)")
    # Sent side: the subscriber's flow (a live message is sent with retain 0).
    wait_lines(b, r"Sending PUBLISH to sub2 \(d0, q2, r0, m%d, 'q', \.\.\. \(3 bytes\)\)"
               % msg.pid,
               r"Received PUBREC from sub2 \(Mid: %d\)" % msg.pid,
               r"Sending PUBREL to sub2 \(m%d\)" % msg.pid,
               r"Received PUBCOMP from sub2 \(Mid: %d, RC:0\)" % msg.pid)


def test_packet_lines_retained_and_reason_codes(broker, raw):
    b = broker()
    c = raw(b, mp.MQTT5)
    c.connect("r5")
    c.publish("ret/a", b"kept", qos=1, retain=True)
    c.subscribe("ret/#", 1)
    msg = c.recv_publish(ack=False)
    c.send(mp.puback(msg.pid, reason=0x10))
    wait_lines(b, r"Sending PUBLISH to r5 \(d0, q1, r1, m%d, 'ret/a', \.\.\. \(4 bytes\)\)"
               % msg.pid,
               r"Received PUBACK from r5 \(Mid: %d, RC:16\)" % msg.pid)


def test_packet_lines_topic_alias(broker, raw):
    # The topic a client's alias stands for is logged, not the empty topic on the wire.
    b = broker()
    c = raw(b, mp.MQTT5)
    c.connect("al")
    c.subscribe("#", 0)
    c.send(mp.publish("tt", b"", version=mp.MQTT5, props=[(mp.P_TOPIC_ALIAS, 1)]))
    c.recv_publish()
    c.send(mp.publish("", b"abc", version=mp.MQTT5, props=[(mp.P_TOPIC_ALIAS, 1)]))
    c.recv_publish()
    wait_lines(b, r"Received PUBLISH from al \(d0, q0, r0, m0, 'tt', \.\.\. \(0 bytes\)\)",
               r"Sending PUBLISH to al \(d0, q0, r0, m0, 'tt', \.\.\. \(0 bytes\)\)",
               r"Received PUBLISH from al \(d0, q0, r0, m0, 'tt', \.\.\. \(3 bytes\)\)",
               r"Sending PUBLISH to al \(d0, q0, r0, m0, 'tt', \.\.\. \(3 bytes\)\)")


def test_large_payload_size_is_counted(broker, raw):
    # The payload is queued apart from the header; its size is still reported.
    b = broker()
    c = raw(b)
    c.connect("big")
    c.subscribe("big", 0)
    c.publish("big", b"z" * 100000)
    c.recv_publish()
    wait_lines(b, r"Sending PUBLISH to big \(d0, q0, r0, m0, 'big', \.\.\. \(100000 bytes\)\)")


@pytest.mark.arbor_only  # Mosquitto 2.0.11 keeps its start-up log_type across SIGHUP
def test_debug_enabled_by_sighup(broker, raw):
    # arbor(8): SIGHUP re-reads log_type; turning debug on starts the packet lines.
    b = broker("allow_anonymous true", "log_dest stderr", "log_type notice", defaults=False)
    c = raw(b)
    c.connect("before")
    assert c.is_open()
    with open(b.conf_path, "a") as f:
        f.write("log_type debug\n")
    b.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    c2 = raw(b)
    c2.connect("after")
    assert c2.is_open()
    wait_lines(b, r"Received PINGREQ from after", r"Sending PINGRESP to after")
    assert not has_line(b, r"Received PINGREQ from before")


def test_max_connections_denied(broker, raw):
    b = broker("max_connections 1")
    first = raw(b)
    first.connect("one")
    second = raw(b)
    second.wait_closed()
    wait_lines(b, r"Client connection from 127\.0\.0\.1 denied: max_connections exceeded\.")
    assert first.is_open()


def test_listen_socket_per_address_family(broker):
    # A listener without an address opens an IPv4 and an IPv6 socket (where the host has
    # IPv6), each with its own line.
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    from helpers import free_port
    port = free_port()
    b = broker("listener %d" % port)
    wait_lines(b, r"Opening ipv4 listen socket on port %d\." % b.port,
               r"Opening ipv4 listen socket on port %d\." % port,
               r"Opening ipv6 listen socket on port %d\." % port)


@pytest.mark.parametrize("version", [mp.MQTT311, mp.MQTT5])
def test_malformed_connect_is_protocol_error(broker, raw, version):
    b = broker()
    c = raw(b, version)
    c.send(mp.connect("ok", version=version, flags=0x03))  # reserved flag bit set
    c.wait_closed()
    wait_lines(b, r"Client <unknown> disconnected due to protocol error\.")
    assert not has_line(b, r"New client connected.*")


def test_unknown_protocol_name(broker, raw):
    b = broker()
    c = raw(b)
    c.send(mp.connect("x", proto_name="XYZW"))
    c.wait_closed()
    wait_lines(b, r"Client <unknown> disconnected due to protocol error\.")


@pytest.mark.parametrize("version,rc", [(mp.MQTT311, 5), (mp.MQTT5, 0x87)])
def test_clientid_prefix_refusal_is_not_authorised(broker, raw, version, rc):
    b = broker("clientid_prefixes ok-")
    c = raw(b, version)
    assert c.connect("intruder", expect_rc=None).rc == rc
    wait_lines(b, r"Sending CONNACK to 127\.0\.0\.1 \(0, %d\)" % rc,
               r"Client <unknown> disconnected, not authorised\.")


def test_packet_lines_resend_with_dup(broker, raw):
    b = broker()
    pub = raw(b)
    pub.connect("p")
    pub.publish("r/1", b"kept", qos=1, retain=True)
    s = raw(b)
    s.connect("s", clean=False)
    s.subscribe("r/#", 1)
    msg = s.recv_publish(ack=False)
    s.close()
    wait_lines(b, r"Client s closed its connection\.")
    s = raw(b)
    s.connect("s", clean=False)
    again = s.recv_publish()
    assert again.pid == msg.pid
    wait_lines(b, r"Sending PUBLISH to s \(d0, q1, r1, m%d, 'r/1', \.\.\. \(4 bytes\)\)" % msg.pid,
               r"Client s closed its connection\.",
               r"Sending CONNACK to s \(1, 0\)",
               r"Sending PUBLISH to s \(d1, q1, r1, m%d, 'r/1', \.\.\. \(4 bytes\)\)" % msg.pid)


def test_auth_is_not_described(broker, raw):
    # Mosquitto logs no packet line for an AUTH it refuses (no authentication methods).
    b = broker()
    c = raw(b, mp.MQTT5)
    c.connect("au")
    c.send(mp.auth(0x18))
    c.wait_closed()
    wait_lines(b, r"Client au disconnected due to protocol error\.")
    assert not has_line(b, r"Received AUTH.*")


def test_verbose_option_logs_packets(broker, raw):
    # mosquitto(8) -v: every log type, so the packet lines too.
    from helpers import free_port
    port = free_port()
    b = broker(use_config=False, port=port, args=["-p", str(port), "-v"])
    c = raw(b)
    c.connect("verbose")
    assert c.is_open()
    wait_lines(b, r"New client connected from %s as verbose \(p2, c1, k60\)\." % peer(c),
               r"Sending CONNACK to verbose \(0, 0\)",
               r"Received PINGREQ from verbose",
               r"Sending PINGRESP to verbose")
