"""SUBSCRIBE / UNSUBSCRIBE: wildcards, $-topics, invalid filters and topics, overlapping and
shared subscriptions."""

import pytest

import mqttproto as mp
from mqttproto import MQTT311, MQTT5


def client(b, raw, cid, version=MQTT311):
    c = raw(b, version)
    c.connect(cid)
    return c


def drain_topics(c, timeout=0.4, expect=0):
    """Topics of the PUBLISHes that arrive: `expect` of them waited for (a loaded machine
    may delay them), then any more until `timeout` passes without one."""
    return [m.topic for m in c.drain_publishes(timeout, expect=expect)]


MATCHES = {
    # filter: topics (of TOPICS below) it must match
    "a/b": ["a/b"],
    "a/+": ["a/b", "a/"],
    "a/#": ["a", "a/b", "a/b/c", "a/", "a//c"],
    "a/+/c": ["a/b/c", "a//c"],
    "+/+": ["a/b", "/a", "a/"],
    "+": ["a", "b"],
    "#": ["a", "a/b", "a/b/c", "/a", "a//c", "a/", "b"],
    "/+": ["/a"],
    "+/b": ["a/b"],
    "$app/#": ["$app/x"],
    "$app/+": ["$app/x"],
}
TOPICS = ["a", "a/b", "a/b/c", "/a", "a//c", "a/", "b", "$app/x"]


def test_wildcard_matching(broker, raw):
    # 4.7: + matches one level (also an empty one), # matches the parent and any number of
    # levels, topics starting with $ are not matched by filters starting with a wildcard
    # [MQTT-4.7.2-1].
    b = broker()
    subs = {}
    for i, filt in enumerate(MATCHES):
        c = client(b, raw, "s%d" % i)
        assert c.subscribe(filt, 0).codes == [0]
        subs[filt] = c
    pub = client(b, raw, "pub")
    for t in TOPICS:
        pub.publish(t, b"x", qos=1)
    for i, (filt, c) in enumerate(subs.items()):
        # The first wait lets deliveries finish; the rest are already buffered.
        got = drain_topics(c, timeout=0.4 if i == 0 else 0.1, expect=len(MATCHES[filt]))
        assert sorted(got) == sorted(MATCHES[filt]), filt


def test_hash_does_not_match_sys(broker, raw):
    b = broker("sys_interval 1")
    c = client(b, raw, "all")
    c.subscribe("#", 0)
    c.subscribe("+/broker/#", 0)
    c.subscribe("+/+/version", 0)
    pub = client(b, raw, "pub")
    pub.publish("plain", b"x")
    topics = drain_topics(c, timeout=1.5, expect=1)
    assert topics.count("plain") == 1 and all(not t.startswith("$") for t in topics), topics
    s = client(b, raw, "sys")
    s.subscribe("$SYS/#", 0)
    assert s.recv_publish(timeout=3).topic.startswith("$SYS/")


def test_subscribe_multiple_filters_suback_order(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    ack = c.subscribe([("x/0", 0), ("x/1", 1), ("x/2", 2)])
    assert ack.codes == [0, 1, 2]
    ack = c.subscribe([("x/0", 2), ("x/1", 0)])
    assert ack.codes == [2, 0]


def test_suback_exact_bytes(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(0x0102, [("a", 1), ("b", 2)]))
    assert c.recv().raw == b"\x90\x04\x01\x02\x01\x02"


def test_resubscribe_replaces_qos(broker, raw):
    # [MQTT-3.8.4-3]: same filter again replaces the subscription (one copy, new QoS).
    b = broker()
    c = client(b, raw, "c")
    c.subscribe("r", 2)
    c.subscribe("r", 0)
    pub = client(b, raw, "pub")
    pub.publish("r", b"x", qos=2)
    m = c.recv_publish()
    assert m.qos == 0
    c.expect_no_packet(0.3)


def test_unsubscribe_stops_delivery(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.subscribe("u/+", 1)
    pub = client(b, raw, "pub")
    pub.publish("u/1", b"before", qos=1)
    assert c.recv_publish().payload == b"before"
    c.send(mp.unsubscribe(0x4321, "u/+"))
    assert c.recv().raw == b"\xb0\x02\x43\x21"
    pub.publish("u/1", b"after", qos=1)
    c.expect_no_packet(0.4)


def test_unsubscribe_unknown_filter_v311_still_acked(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    ack = c.unsubscribe("never/subscribed")
    assert ack.codes == []


def test_unsubscribe_v5_reason_codes(broker, raw):
    b = broker()
    c = client(b, raw, "c", MQTT5)
    c.subscribe("yes", 0)
    ack = c.unsubscribe(["yes", "no"])
    assert ack.codes == [0x00, 0x11]


@pytest.mark.parametrize("filt", ["a/#/b", "a+", "a/b#", "#/a", "a/+b", ""])
def test_invalid_filter_v311_disconnects(broker, raw, filt):
    # 4.7.1: these break the wildcard rules. Mosquitto treats an invalid filter as a
    # malformed packet and closes the connection (allowed: 4.8 / [MQTT-4.8.0-1]); the
    # alternative would be SUBACK 0x80. Either way nothing is subscribed.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(1, [(filt, 0)]))
    pkts = c.wait_closed(5)
    assert pkts == [], pkts
    other = client(b, raw, "other")
    assert other.subscribe("ok", 0).codes == [0]


@pytest.mark.parametrize("filt", ["a/#/b", "a+", "a/b#", ""])
def test_invalid_filter_v5(broker, raw, filt):
    # MQTT 5: not a topic filter at all, so not "correctly formed" as SUBACK 0x8F (Topic
    # Filter invalid) requires: DISCONNECT 0x81 (Malformed Packet), as Mosquitto sends.
    b = broker()
    c = client(b, raw, "c", MQTT5)
    c.send(mp.subscribe(1, [(filt, 0)], version=MQTT5))
    assert [p.raw for p in c.wait_closed(5)] == [bytes.fromhex("e00181")]
    other = client(b, raw, "other")
    assert other.subscribe("ok", 0).codes == [0]


def test_subscribe_qos_3_disconnects(broker, raw):
    # [MQTT-3-8.3-4]: requested QoS 3 is malformed.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(1, [("a", 3)]))
    assert c.wait_closed(5) == []


def test_subscribe_without_filters_disconnects(broker, raw):
    # [MQTT-3.8.3-3]: a SUBSCRIBE must contain at least one filter.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.packet(mp.SUBSCRIBE, 2, b"\x00\x01"))
    assert c.wait_closed(5) == []


def test_unsubscribe_without_filters_disconnects(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.packet(mp.UNSUBSCRIBE, 2, b"\x00\x01"))
    assert c.wait_closed(5) == []


@pytest.mark.parametrize("topic", ["a/+", "a/#", "+", "#", "a/b+"])
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_publish_to_wildcard_topic_disconnects(broker, raw, topic, version):
    # [MQTT-3.3.2-2]: the topic name must not contain wildcards.
    b = broker()
    watcher = client(b, raw, "watcher")
    watcher.subscribe("#", 0)
    c = client(b, raw, "c", version)
    c.send(mp.publish(topic, b"x", qos=1, pid=1, version=version))
    pkts = c.wait_closed(5)
    assert all(p.type == mp.DISCONNECT for p in pkts), pkts
    watcher.expect_no_packet(0.2)
    assert watcher.is_open()


def test_publish_empty_topic_v311_disconnects(broker, raw):
    # [MQTT-4.7.3-1]: topic names are at least one character long.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.publish("", b"x"))
    assert c.wait_closed(5) == []


# ---------------------------------------------------------------- overlapping subscriptions

def test_overlapping_subscriptions_v311(broker, raw):
    # 3.1.1 [MQTT-3.3.5-1]: with overlapping subscriptions the server delivers at the
    # maximum QoS of the matches (it may send extra copies). Mosquitto sends exactly one
    # copy per client, at the maximum QoS.
    b = broker()
    c = client(b, raw, "c")
    c.subscribe([("o/#", 0), ("o/+", 1), ("o/x", 2)])
    pub = client(b, raw, "pub")
    pub.publish("o/x", b"m", qos=2)
    got = drain_msgs(c, 0.5, expect=1)
    assert [(m.payload, m.qos) for m in got] == [(b"m", 2)]
    pub.publish("o/y", b"n", qos=2)
    got = drain_msgs(c, 0.5, expect=1)
    assert [(m.payload, m.qos) for m in got] == [(b"n", 1)]


def test_overlapping_subscriptions_v5_subscription_ids(broker, raw):
    # 5.0 3.3.4: at least one copy at the maximum QoS; when one copy per subscription is
    # sent each carries its own subscription identifier.
    b = broker()
    c = client(b, raw, "c", MQTT5)
    c.subscribe("o/#", 0, props=[(mp.P_SUBSCRIPTION_ID, 1)])
    c.subscribe("o/x", 1, props=[(mp.P_SUBSCRIPTION_ID, 2)])
    pub = client(b, raw, "pub", MQTT5)
    pub.publish("o/x", b"m", qos=1)
    got = drain_msgs(c, 0.5, expect=1)
    assert max(m.qos for m in got) == 1
    pairs = sorted((m.qos, tuple(m.props.all(mp.P_SUBSCRIPTION_ID))) for m in got)
    if len(got) == 1:
        assert sorted(pairs[0][1]) == [1, 2]
    else:
        assert pairs == [(0, (1,)), (1, (2,))]


# ---------------------------------------------------------------- shared subscriptions

@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_shared_subscription_round_robin(broker, raw, version):
    # 4.8.2: each message goes to one member of the group. Mosquitto distributes in turn
    # (round robin); other groups and plain subscribers each get their own copy.
    b = broker()
    g1 = [client(b, raw, "g1m%d" % i, version) for i in range(3)]
    for c in g1:
        assert c.subscribe("$share/g1/job/+", 1).codes == [1]
    g2 = client(b, raw, "g2m", version)
    g2.subscribe("$share/g2/job/#", 1)
    plain = client(b, raw, "plain", version)
    plain.subscribe("job/+", 1)
    pub = client(b, raw, "pub", version)
    n = 9
    for i in range(n):
        pub.publish("job/x", b"%d" % i, qos=1)
    counts = []
    seen = []
    for c in g1:
        got = [m for m in drain_msgs(c, expect=n // len(g1))]
        assert all(m.topic == "job/x" for m in got)
        counts.append(len(got))
        seen += [m.payload for m in got]
    assert sorted(seen) == sorted(b"%d" % i for i in range(n)), "each message exactly once"
    assert counts == [3, 3, 3], counts
    assert len(drain_msgs(g2, expect=n)) == n
    assert len(drain_msgs(plain, expect=n)) == n


def drain_msgs(c, timeout=0.4, expect=0):
    """The PUBLISHes that arrive: `expect` of them waited for (a loaded machine may delay
    them), then any more until `timeout` passes without one."""
    return c.drain_publishes(timeout, expect=expect)


def test_shared_subscription_member_leaving(broker, raw):
    b = broker()
    a = client(b, raw, "a")
    a.subscribe("$share/g/s", 1)
    z = client(b, raw, "z")
    z.subscribe("$share/g/s", 1)
    z.unsubscribe("$share/g/s")
    pub = client(b, raw, "pub")
    for i in range(4):
        pub.publish("s", b"%d" % i, qos=1)
    assert [m.payload for m in drain_msgs(a, expect=4)] == [b"0", b"1", b"2", b"3"]
    assert drain_msgs(z, 0.2) == []


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 sends retained messages when a shared "
                                "subscription is made; 3.3.1.3 sends them only for new "
                                "non-shared subscriptions")
def test_shared_subscription_no_retained_on_subscribe(broker, raw):
    # 5.0 4.8.2: retained messages are not sent when a shared subscription is made.
    b = broker()
    pub = client(b, raw, "pub", MQTT5)
    pub.publish("ret/s", b"kept", qos=1, retain=True)
    c = client(b, raw, "c", MQTT5)
    assert c.subscribe("$share/g/ret/s", 1).codes == [1]
    c.expect_no_packet(0.5)


def shared_filter_refused(b, raw, filt):
    c = client(b, raw, "c", MQTT5)
    c.send(mp.subscribe(1, [(filt, 1)], version=MQTT5))
    try:
        pkt = c.recv(3)
    except mp.ConnectionClosed:
        return
    if pkt.type == mp.SUBACK:
        assert mp.Suback(pkt, MQTT5).codes[0] >= 0x80, pkt
    else:
        assert pkt.type == mp.DISCONNECT and mp.Disconnect(pkt).reason >= 0x80, pkt


@pytest.mark.parametrize("filt", ["$share/g+/t", "$share/g#/t"])
def test_invalid_shared_filter_wildcard_in_share_name(broker, raw, filt):
    # [MQTT-4.8.2-2]: the ShareName must not contain "/", "+" or "#".
    shared_filter_refused(broker(), raw, filt)


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 accepts $share/g and $share//t as "
                                "ordinary filters")
@pytest.mark.parametrize("filt", ["$share/g", "$share//t"])
def test_invalid_shared_filter_structure(broker, raw, filt):
    # [MQTT-4.8.2-1/2]: ShareName at least one character, followed by "/" and a filter.
    shared_filter_refused(broker(), raw, filt)
