"""PUBLISH at QoS 0/1/2 in both directions, byte-exact state machines, redelivery,
inflight/queue limits and QoS downgrade/upgrade."""

import socket
import time

import pytest

import mqttproto as mp
from mqttproto import MQTT311, MQTT5


def pair(b, raw, version=MQTT311, sub_qos=2, topic="t/q", sub_id="sub", **sub_kw):
    """A connected subscriber (on `topic` at `sub_qos`) and a connected publisher."""
    sub = raw(b, version)
    sub.connect(sub_id, **sub_kw)
    assert sub.subscribe(topic, sub_qos).codes == [sub_qos]
    pub = raw(b, version)
    pub.connect("pub")
    return sub, pub


# ---------------------------------------------------------------- QoS 0

@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_qos0_delivery(broker, raw, version):
    b = broker()
    sub, pub = pair(b, raw, version)
    pub.publish("t/q", b"zero", qos=0)
    pkt = sub.recv_type(mp.PUBLISH)
    assert pkt.flags == 0
    m = mp.Publish(pkt, version)
    assert (m.topic, m.payload, m.pid) == ("t/q", b"zero", None)
    pub.expect_no_packet(0.2)   # nothing acknowledges QoS 0


def test_qos0_exact_bytes_v311(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=0, topic="a/b")
    pub.send(mp.publish("a/b", b"xyz"))
    pkt = sub.recv()
    assert pkt.raw == b"\x30\x08\x00\x03a/bxyz"


# ---------------------------------------------------------------- QoS 1

@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_qos1_inbound_puback(broker, raw, version):
    b = broker()
    sub, pub = pair(b, raw, version, sub_qos=1)
    pub.send(mp.publish("t/q", b"one", qos=1, pid=0x1234, version=version))
    ack = pub.recv_type(mp.PUBACK)
    assert ack.flags == 0
    assert mp.Ack(ack, version).pid == 0x1234
    assert mp.Ack(ack, version).reason == 0
    if version == MQTT311:
        assert ack.raw == b"\x40\x02\x12\x34"
    m = sub.recv_publish()
    assert (m.qos, m.payload, m.dup, m.retain) == (1, b"one", False, False)
    assert m.pid != 0


def test_qos1_outbound_not_resent_after_puback(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1)
    for i in range(3):
        pub.publish("t/q", b"m%d" % i, qos=1)
    pids = []
    for i in range(3):
        m = sub.recv_publish()
        assert m.payload == b"m%d" % i and m.qos == 1
        pids.append(m.pid)
    assert len(set(pids)) == 3 and 0 not in pids
    sub.expect_no_packet(0.5)


def test_qos1_order_preserved(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1)
    for i in range(50):
        pub.send(mp.publish("t/q", b"%d" % i, qos=1, pid=i + 1))
    for i in range(50):
        assert mp.Ack(pub.recv_type(mp.PUBACK), MQTT311).pid == i + 1
    got = [sub.recv_publish().payload for _ in range(50)]
    assert got == [b"%d" % i for i in range(50)]


# ---------------------------------------------------------------- QoS 2

@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_qos2_inbound_flow(broker, raw, version):
    b = broker()
    sub, pub = pair(b, raw, version, sub_qos=2)
    pub.send(mp.publish("t/q", b"two", qos=2, pid=77, version=version))
    rec = pub.recv_type(mp.PUBREC)
    assert rec.flags == 0 and mp.Ack(rec, version).pid == 77
    pub.send(mp.pubrel(77))
    comp = pub.recv_type(mp.PUBCOMP)
    assert comp.flags == 0 and mp.Ack(comp, version).pid == 77
    if version == MQTT311:
        assert rec.raw == b"\x50\x02\x00\x4d" and comp.raw == b"\x70\x02\x00\x4d"
    m = sub.recv_publish()
    assert (m.qos, m.payload) == (2, b"two")
    sub.expect_no_packet(0.3)


def test_qos2_outbound_flow(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2)
    pub.publish("t/q", b"two", qos=2)
    pkt = sub.recv_type(mp.PUBLISH)
    assert pkt.flags == 0x04   # QoS 2, no dup, no retain
    m = mp.Publish(pkt, MQTT311)
    assert m.pid != 0
    sub.send(mp.pubrec(m.pid))
    rel = sub.recv_type(mp.PUBREL)
    assert rel.flags == 0x02, "PUBREL fixed header flags must be 0010"
    assert rel.body == m.pid.to_bytes(2, "big")
    sub.send(mp.pubcomp(m.pid))
    sub.expect_no_packet(0.5)


def test_qos2_duplicate_publish_before_pubrel_delivered_once(broker, raw):
    # [MQTT-4.3.3-9/10]: until PUBREL, a PUBLISH with the same packet id is the same
    # message: answer PUBREC again, do not deliver it twice.
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2)
    pub.send(mp.publish("t/q", b"once", qos=2, pid=9))
    assert mp.Ack(pub.recv_type(mp.PUBREC), MQTT311).pid == 9
    pub.send(mp.publish("t/q", b"once", qos=2, pid=9, dup=True))
    assert mp.Ack(pub.recv_type(mp.PUBREC), MQTT311).pid == 9
    pub.send(mp.pubrel(9))
    assert mp.Ack(pub.recv_type(mp.PUBCOMP), MQTT311).pid == 9
    m = sub.recv_publish()
    assert m.payload == b"once"
    sub.expect_no_packet(0.5)


def test_qos2_same_pid_after_pubcomp_is_new_message(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2)
    for payload in (b"first", b"second"):
        pub.send(mp.publish("t/q", payload, qos=2, pid=5))
        pub.recv_type(mp.PUBREC)
        pub.send(mp.pubrel(5))
        pub.recv_type(mp.PUBCOMP)
        assert sub.recv_publish().payload == payload
    sub.expect_no_packet(0.3)


def test_pubrel_for_unknown_pid_gets_pubcomp(broker, raw):
    # [MQTT-4.3.3-11]: PUBREL must be answered with PUBCOMP with the same id (v5: reason
    # 0x92 Packet Identifier not found is allowed; v3.1.1 has no reason code).
    b = broker()
    c = raw(b)
    c.connect("c")
    c.send(mp.pubrel(4242))
    comp = c.recv_type(mp.PUBCOMP)
    assert comp.body[:2] == b"\x10\x92"


# ---------------------------------------------------------------- redelivery and DUP

def test_qos1_redelivered_with_dup_on_reconnect(broker, raw):
    # [MQTT-4.4.0-1] / [MQTT-3.3.1-1]: unacknowledged messages are resent on reconnect of a
    # persistent session, with DUP set and the original packet identifier.
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1, clean=False)
    pub.publish("t/q", b"unacked", qos=1)
    first = sub.recv_publish(ack=False)
    assert not first.dup
    sub.close()
    sub2 = raw(b)
    assert sub2.connect("sub", clean=False).session_present
    again = sub2.recv_publish(ack=False)
    assert (again.payload, again.qos, again.dup, again.pid) == (b"unacked", 1, True,
                                                                first.pid)
    sub2.send(mp.puback(again.pid))
    sub2.expect_no_packet(0.5)


def test_qos2_publish_redelivered_with_dup(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2, clean=False)
    pub.publish("t/q", b"q2", qos=2)
    first = sub.recv_publish(ack=False)
    sub.close()
    sub2 = raw(b)
    assert sub2.connect("sub", clean=False).session_present
    pkt = sub2.recv_type(mp.PUBLISH)
    again = mp.Publish(pkt, MQTT311)
    assert (again.payload, again.qos, again.dup, again.pid) == (b"q2", 2, True, first.pid)
    sub2.ack_publish(again)
    sub2.expect_no_packet(0.5)


def test_qos2_pubrel_resent_after_pubrec(broker, raw):
    # After PUBREC the broker owes a PUBREL; on reconnect it resends PUBREL, not PUBLISH.
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2, clean=False)
    pub.publish("t/q", b"q2", qos=2)
    first = sub.recv_publish(ack=False)
    sub.send(mp.pubrec(first.pid))
    rel = sub.recv_type(mp.PUBREL)
    sub.close()
    sub2 = raw(b)
    assert sub2.connect("sub", clean=False).session_present
    rel2 = sub2.recv_type(mp.PUBREL)
    assert rel2.flags == 0x02 and rel2.body == rel.body
    sub2.send(mp.pubcomp(first.pid))
    sub2.expect_no_packet(0.5)


def test_clean_session_discards_unacked(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1, clean=False)
    pub.publish("t/q", b"unacked", qos=1)
    sub.recv_publish(ack=False)
    sub.close()
    sub2 = raw(b)
    assert not sub2.connect("sub", clean=True).session_present
    sub2.expect_no_packet(0.5)


# ---------------------------------------------------------------- inflight / queue limits

def drain(c, timeout=0.4, ack=False, expect=0):
    """All PUBLISHes that arrive until `timeout` passes without one (the first `expect` of
    them waited for as long as a loaded machine may need)."""
    return c.drain_publishes(timeout, ack, expect=expect)


def test_max_inflight_messages_limits_unacked(broker, raw):
    b = broker("max_inflight_messages 2")
    sub, pub = pair(b, raw, sub_qos=1)
    for i in range(6):
        pub.publish("t/q", b"%d" % i, qos=1)
    first = drain(sub, expect=2)
    assert [m.payload for m in first] == [b"0", b"1"]
    got = list(first)
    for _ in range(6):
        for m in first:
            sub.send(mp.puback(m.pid))
        first = drain(sub, expect=min(len(first), 6 - len(got)))
        got += first
        if not first:
            break
    assert [m.payload for m in got] == [b"%d" % i for i in range(6)]


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 releases two queued messages per PUBACK "
                                "once the window is full, exceeding max_inflight_messages")
def test_max_inflight_messages_one_ack_releases_one(broker, raw):
    b = broker("max_inflight_messages 2")
    sub, pub = pair(b, raw, sub_qos=1)
    for i in range(5):
        pub.publish("t/q", b"%d" % i, qos=1)
    first = drain(sub, expect=2)
    assert [m.payload for m in first] == [b"0", b"1"]
    sub.send(mp.puback(first[0].pid))
    assert [m.payload for m in drain(sub, expect=1)] == [b"2"]


def test_max_queued_messages_drops_excess_while_offline(broker, raw):
    # mosquitto.conf(5) max_queued_messages: "the maximum number of QoS 1 and 2 messages to
    # hold in a queue per client above those that are currently in-flight"; newer messages
    # beyond that are dropped, the oldest are kept and arrive in order.
    b = broker("max_inflight_messages 1", "max_queued_messages 3")
    sub, pub = pair(b, raw, sub_qos=1, clean=False)
    sub.disconnect()
    for i in range(10):
        pub.publish("t/q", b"%d" % i, qos=1)
    sub2 = raw(b)
    assert sub2.connect("sub", clean=False).session_present
    got = [m.payload for m in drain(sub2, 0.7, ack=True, expect=3)]
    # Nothing is in flight to an offline client, so exactly max_queued_messages are kept.
    assert got == [b"0", b"1", b"2"], got


def test_max_queued_messages_drops_excess_while_online(broker, raw):
    b = broker("max_inflight_messages 1", "max_queued_messages 2")
    sub, pub = pair(b, raw, sub_qos=1)
    for i in range(8):
        pub.publish("t/q", b"%d" % i, qos=1)
    got = [m.payload for m in drain(sub, 0.7, ack=True, expect=3)]
    assert got == [b"0", b"1", b"2"], got


def test_qos0_not_queued_for_offline_session(broker, raw):
    # mosquitto.conf(5) queue_qos0_messages defaults to false.
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1, clean=False)
    sub.disconnect()
    pub.publish("t/q", b"q0", qos=0)
    pub.publish("t/q", b"q1", qos=1)
    sub2 = raw(b)
    sub2.connect("sub", clean=False)
    assert sub2.recv_publish().payload == b"q1"
    sub2.expect_no_packet(0.4)


def test_queue_qos0_messages_true(broker, raw):
    b = broker("queue_qos0_messages true")
    sub, pub = pair(b, raw, sub_qos=1, clean=False)
    sub.disconnect()
    pub.publish("t/q", b"q0", qos=0)
    sub2 = raw(b)
    sub2.connect("sub", clean=False)
    m = sub2.recv_publish()
    assert (m.payload, m.qos) == (b"q0", 0)


# ---------------------------------------------------------------- QoS downgrade / upgrade

@pytest.mark.parametrize("sub_qos,pub_qos", [(0, 1), (0, 2), (1, 2), (2, 1), (1, 0)])
def test_delivered_at_min_of_pub_and_sub_qos(broker, raw, sub_qos, pub_qos):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=sub_qos)
    pub.publish("t/q", b"x", qos=pub_qos)
    m = sub.recv_publish()
    assert m.qos == min(sub_qos, pub_qos)
    assert (m.pid is None) == (m.qos == 0)


def test_upgrade_outgoing_qos(broker, raw):
    # mosquitto.conf(5) upgrade_outgoing_qos: deliver at the subscription QoS even when the
    # message was published at a lower QoS (non-standard, off by default).
    b = broker("upgrade_outgoing_qos true")
    sub, pub = pair(b, raw, sub_qos=2)
    pub.publish("t/q", b"up", qos=0)
    m = sub.recv_publish()
    assert (m.payload, m.qos) == (b"up", 2)
    sub2, pub2 = pair(b, raw, sub_qos=1, topic="t/q1", sub_id="sub1")
    pub2.publish("t/q1", b"up1", qos=0)
    assert sub2.recv_publish().qos == 1


def test_no_upgrade_by_default(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=2)
    pub.publish("t/q", b"x", qos=0)
    assert sub.recv_publish().qos == 0


def test_publisher_receives_own_message(broker, raw):
    # MQTT 3.1.1 has no "no local": a client subscribed to its own topic gets its messages.
    b = broker()
    c = raw(b)
    c.connect("self")
    c.subscribe("me", 1)
    c.send(mp.publish("me", b"echo", qos=1, pid=3))
    got = {}
    for _ in range(2):
        pkt = c.recv()
        got[pkt.type] = pkt
    assert mp.Ack(got[mp.PUBACK], MQTT311).pid == 3
    m = mp.Publish(got[mp.PUBLISH], MQTT311)
    assert (m.payload, m.qos) == (b"echo", 1)


def test_large_payload_roundtrip(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1)
    payload = bytes(range(256)) * 8300   # ~2.1 MB: the remaining length needs 4 bytes
    pub.publish("t/q", payload, qos=1)
    m = sub.recv_publish(timeout=10)
    assert m.payload == payload


def test_empty_payload_delivered(broker, raw):
    b = broker()
    sub, pub = pair(b, raw, sub_qos=1)
    pub.publish("t/q", b"", qos=1)
    m = sub.recv_publish()
    assert m.payload == b""


def test_fan_out_to_many_subscribers(broker, raw):
    b = broker()
    subs = []
    for i in range(30):
        c = raw(b)
        c.connect("fan%d" % i)
        c.subscribe("fan/+", i % 3)
        subs.append(c)
    pub = raw(b)
    pub.connect("pub")
    for n in range(20):
        pub.publish("fan/x", b"%d" % n, qos=(n % 3))
    for i, c in enumerate(subs):
        got = [c.recv_publish() for _ in range(20)]
        assert [m.payload for m in got] == [b"%d" % n for n in range(20)]
        assert [m.qos for m in got] == [min(n % 3, i % 3) for n in range(20)]
    subs[0].expect_no_packet(0.2)


def test_unknown_puback_is_ignored(broker, raw):
    # An acknowledgement for a packet id not in flight is not a reason to disconnect.
    b = broker()
    c = raw(b)
    c.connect("c")
    c.send(mp.puback(999))
    c.send(mp.pubrec(998))
    c.send(mp.pubcomp(997))
    assert c.is_open()


def test_pingreq_pingresp_bytes(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("c")
    c.send(b"\xc0\x00")
    assert c.recv().raw == b"\xd0\x00"


@pytest.mark.parametrize("size", [127, 128, 16383, 16384])
def test_remaining_length_boundaries(broker, raw, size):
    # 2.2.3: varint boundaries 127/128 (1->2 bytes) and 16383/16384 (2->3 bytes).
    b = broker()
    sub, pub = pair(b, raw, sub_qos=0)
    payload = b"p" * (size - len(mp.string("t/q")))
    pkt = mp.publish("t/q", payload)
    assert len(pkt) == 1 + len(mp.varint(size)) + size
    pub.send(pkt)
    got = sub.recv()
    assert got.raw == pkt


def test_byte_by_byte_delivery(broker, raw):
    # TCP may split packets anywhere: the broker must reassemble them.
    b = broker()
    sub = raw(b)
    sub.connect("sub")
    sub.subscribe("frag", 1)
    c = raw(b)
    data = (mp.connect("frag") + mp.subscribe(1, [("x", 0)]) +
            mp.publish("frag", b"pieces", qos=1, pid=7))
    for i in range(len(data)):
        c.send(data[i:i + 1])
        time.sleep(0.001)
    types = [c.recv().type for _ in range(3)]
    assert types == [mp.CONNACK, mp.SUBACK, mp.PUBACK]
    assert sub.recv_publish().payload == b"pieces"


def test_pipelined_packets_in_one_write(broker, raw):
    b = broker()
    c = raw(b)
    data = (mp.connect("pipe") + mp.subscribe(1, [("pipe/#", 2)]) +
            b"".join(mp.publish("pipe/%d" % i, b"%d" % i, qos=1, pid=10 + i)
                     for i in range(5)) + mp.pingreq())
    c.send(data)
    got = []
    while len(got) < 1 + 1 + 5 + 5 + 1:
        got.append(c.recv())
    kinds = [p.type for p in got]
    assert kinds[:2] == [mp.CONNACK, mp.SUBACK]
    assert kinds.count(mp.PUBACK) == 5 and kinds.count(mp.PUBLISH) == 5
    assert kinds[-1] == mp.PINGRESP     # answered after everything sent before it
    pubs = [mp.Publish(p, MQTT311) for p in got if p.type == mp.PUBLISH]
    assert [m.payload for m in pubs] == [b"%d" % i for i in range(5)]


@pytest.mark.arbor_only
def test_qos0_backlog_of_a_stalled_subscriber_is_bounded(broker, raw):
    # A connected subscriber that stops reading: QoS 0 messages beyond max_queued_messages
    # in its output backlog are dropped (and counted in $SYS) instead of buffered without
    # bound, and everyone else carries on.
    b = broker("max_queued_messages 50", "sys_interval 1")
    stalled = raw(b)
    stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect("stalled")
    stalled.subscribe("flood", 0)
    healthy = raw(b)
    healthy.connect("healthy")
    healthy.subscribe("flood", 0)
    pub = raw(b)
    pub.connect("pub")
    payload = b"x" * 32768  # 64 MB in all: far more than the kernel's socket buffers hold
    count = 2000
    received = 0

    def drain_healthy(timeout):
        nonlocal received
        while True:
            try:
                healthy.recv_publish(timeout=timeout)
                received += 1
            except mp.PacketTimeout:
                return

    for i in range(count):
        pub.send(mp.publish("flood", payload, qos=0))
        if i % 20 == 19:
            drain_healthy(0.02)  # keep the healthy one reading; only the stalled one backs up
    drain_healthy(0.5)
    watch = raw(b)
    watch.connect("watch")
    watch.subscribe("$SYS/broker/publish/messages/dropped", 0)
    deadline = time.monotonic() + 5
    dropped = 0
    while time.monotonic() < deadline and dropped <= count // 2:
        dropped = int(watch.recv_publish(timeout=3).payload)  # refreshed every second
    assert dropped > count // 2, dropped
    assert received > 0
    # The broker and the other clients carry on normally.
    pub.publish("flood", b"after", qos=1)
    while True:
        m = healthy.recv_publish(timeout=3)
        if m.payload == b"after":
            break


# ---------------------------------------------------------------- acks of the wrong kind

@pytest.mark.parametrize("version", [MQTT311, MQTT5])
@pytest.mark.parametrize("qos, step, wrong", [
    (1, None, mp.pubcomp),       # PUBCOMP for a QoS 1 message
    (1, None, mp.pubrec),        # PUBREC for a QoS 1 message
    (2, None, mp.puback),        # PUBACK for a QoS 2 message awaiting PUBREC
    (2, None, mp.pubcomp),       # PUBCOMP before PUBREC
    (2, mp.pubrec, mp.puback),   # PUBACK for a QoS 2 message awaiting PUBCOMP
], ids=["q1-pubcomp", "q1-pubrec", "q2-puback", "q2-pubcomp-early", "q2-puback-late"])
def test_ack_of_the_wrong_kind_closes_without_disconnect(broker, raw, version, qos, step,
                                                          wrong):
    # An ack for a message in flight that does not fit its QoS or step is a protocol error:
    # closed, without a DISCONNECT (as Mosquitto, its tests 02-subpub-qos1-bad-pubcomp and
    # the like). An ack for an identifier not in flight is still ignored.
    b = broker()
    sub, pub = pair(b, raw, version, sub_qos=qos)
    sub.send(mp.puback(77))  # nothing in flight with 77: ignored
    pub.publish("t/q", b"m", qos=qos)
    m = sub.recv_publish(ack=False)
    if step:
        sub.send(step(m.pid))
        assert sub.recv_type(mp.PUBREL)
    sub.send(wrong(m.pid))
    sub.try_send(mp.pingreq())
    assert sub.wait_closed(5) == []
    b.wait_log("Client sub disconnected due to protocol error.")
