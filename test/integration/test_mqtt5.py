"""MQTT 5 features: session expiry, flow control, packet size, topic aliases, message expiry,
subscription options and identifiers, properties, reason codes, enhanced auth refusal."""

import time

import pytest

import mqttproto as mp
from helpers import v5_client as client
from mqttproto import MQTT5


def drain(c, timeout=0.4, ack=True, expect=0):
    """The PUBLISHes that arrive: `expect` of them waited for (a loaded machine may delay
    them), then any more until `timeout` passes without one."""
    return c.drain_publishes(timeout, ack, expect=expect)


# ---------------------------------------------------------------- session expiry

def test_session_expiry_zero_ends_session_at_disconnect(broker, raw):
    b = broker()
    c = client(b, raw, "s0")
    c.subscribe("se", 1)
    c.disconnect()
    c2 = raw(b, MQTT5)
    assert not c2.connect("s0", clean=False).session_present


def test_session_expiry_keeps_then_drops_session(broker, raw):
    # 3.1.2.11.2: the session is kept for Session Expiry Interval seconds after the network
    # connection closes, then discarded.
    b = broker()
    # 2 s, so that the reconnect at once is within it even on a loaded machine
    c = client(b, raw, "sx", props=[(mp.P_SESSION_EXPIRY, 2)])
    c.subscribe("se", 1)
    c.disconnect()
    c2 = raw(b, MQTT5)
    ack = c2.connect("sx", clean=False, props=[(mp.P_SESSION_EXPIRY, 2)])
    assert ack.session_present
    pub = client(b, raw, "pub")
    pub.publish("se", b"still subscribed", qos=1)
    assert c2.recv_publish().payload == b"still subscribed"
    dropped = time.monotonic()
    c2.disconnect()
    # The broker says when it expires the session (arbor "Expiring client sx.", Mosquitto
    # "Expiring client sx due to timeout."): not before 2 s, and no fixed sleep to wait for it.
    b.wait_log("Expiring client sx", timeout=30)
    assert time.monotonic() - dropped >= 2.0
    c3 = raw(b, MQTT5)
    assert not c3.connect("sx", clean=False).session_present
    pub.publish("se", b"gone", qos=1)
    c3.expect_no_packet(0.4)


def test_clean_start_discards_existing_session(broker, raw):
    b = broker()
    c = client(b, raw, "cs", props=[(mp.P_SESSION_EXPIRY, 60)])
    c.subscribe("cs", 1)
    c.disconnect()
    c2 = raw(b, MQTT5)
    assert not c2.connect("cs", clean=True).session_present
    pub = client(b, raw, "pub")
    pub.publish("cs", b"x", qos=1)
    c2.expect_no_packet(0.4)


def test_disconnect_can_shorten_session_expiry(broker, raw):
    # 3.14.2.2.2: the Session Expiry Interval can be changed on DISCONNECT.
    b = broker()
    c = client(b, raw, "sd", props=[(mp.P_SESSION_EXPIRY, 60)])
    c.subscribe("sd", 1)
    c.disconnect(reason=0, props=[(mp.P_SESSION_EXPIRY, 0)])
    c2 = raw(b, MQTT5)
    assert not c2.connect("sd", clean=False).session_present


def test_disconnect_setting_expiry_after_zero_is_protocol_error(broker, raw):
    # [MQTT-3.14.2-2]: expiry 0 at CONNECT then non-zero at DISCONNECT is a Protocol Error;
    # the session must not be kept.
    b = broker()
    c = client(b, raw, "sz")
    c.subscribe("sz", 1)
    c.send(mp.disconnect(0, [(mp.P_SESSION_EXPIRY, 60)]))
    pkts = c.wait_closed(5)
    for p in pkts:
        assert p.type == mp.DISCONNECT and mp.Disconnect(p).reason == 0x82, pkts
    c2 = raw(b, MQTT5)
    assert not c2.connect("sz", clean=False).session_present


# ---------------------------------------------------------------- flow control

def test_broker_honours_client_receive_maximum(broker, raw):
    # [MQTT-3.3.4-9]: the server sends at most Receive Maximum unacknowledged QoS>0 PUBLISHes.
    b = broker()
    sub = client(b, raw, "rm", props=[(mp.P_RECEIVE_MAXIMUM, 2)])
    sub.subscribe("rm", 1)
    pub = client(b, raw, "pub")
    for i in range(6):
        pub.publish("rm", b"%d" % i, qos=1)
    first = drain(sub, ack=False, expect=2)
    assert [m.payload for m in first] == [b"0", b"1"]
    got = list(first)
    for _ in range(6):
        for m in first:
            sub.send(mp.puback(m.pid))
        first = drain(sub, ack=False, expect=min(len(first), 6 - len(got)))
        got += first
        if not first:
            break
    assert [m.payload for m in got] == [b"%d" % i for i in range(6)]


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 releases two queued messages per PUBACK "
                                "once the window is full, exceeding Receive Maximum")
def test_receive_maximum_one_ack_releases_one(broker, raw):
    b = broker()
    sub = client(b, raw, "rm", props=[(mp.P_RECEIVE_MAXIMUM, 2)])
    sub.subscribe("rm", 1)
    pub = client(b, raw, "pub")
    for i in range(5):
        pub.publish("rm", b"%d" % i, qos=1)
    first = drain(sub, ack=False, expect=2)
    assert [m.payload for m in first] == [b"0", b"1"]
    sub.send(mp.puback(first[0].pid))
    assert [m.payload for m in drain(sub, ack=False, expect=1)] == [b"2"]


def test_connack_receive_maximum_from_max_inflight(broker, raw):
    b = broker("max_inflight_messages 3")
    c = raw(b, MQTT5)
    assert c.connect("c").props.get(mp.P_RECEIVE_MAXIMUM) == 3


def test_client_exceeding_receive_maximum_is_refused(broker, raw):
    # The 4th unacknowledged QoS 2 PUBLISH exceeds the advertised Receive Maximum 3.
    # The spec answer is DISCONNECT 0x93 (4.9); Mosquitto answers PUBREC 0x97 (Quota
    # exceeded) and keeps the connection. Both refuse the message.
    b = broker("max_inflight_messages 3")
    watcher = client(b, raw, "w")
    watcher.subscribe("rx", 0)
    c = client(b, raw, "c")
    for pid in range(1, 4):
        c.send(mp.publish("rx", b"%d" % pid, qos=2, pid=pid, version=MQTT5))
        assert mp.Ack(c.recv_type(mp.PUBREC), MQTT5).reason == 0
    c.send(mp.publish("rx", b"4", qos=2, pid=4, version=MQTT5))
    try:
        pkt = c.recv(3)
    except mp.ConnectionClosed:
        return
    if pkt.type == mp.PUBREC:
        assert mp.Ack(pkt, MQTT5).reason == 0x97
        c.send(mp.pubrel(4))
        c.recv_type(mp.PUBCOMP)
        for pid in range(1, 4):
            c.send(mp.pubrel(pid))
            c.recv_type(mp.PUBCOMP)
        assert sorted(m.payload for m in drain(watcher, expect=3)) == [b"1", b"2", b"3"]
    else:
        assert pkt.type == mp.DISCONNECT and mp.Disconnect(pkt).reason == 0x93


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 answers PUBREC 0x97 instead of "
                                "DISCONNECT 0x93 (Receive Maximum exceeded, 4.9)")
def test_client_exceeding_receive_maximum_disconnect_0x93(broker, raw):
    b = broker("max_inflight_messages 3")
    c = client(b, raw, "c")
    for pid in range(1, 5):
        c.send(mp.publish("rx", b"x", qos=2, pid=pid, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.PUBREC] * 3 + [mp.DISCONNECT]
    assert mp.Disconnect(pkts[-1]).reason == 0x93


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 does not count QoS 1 PUBLISH "
                                "against its Receive Maximum")
def test_qos1_burst_over_receive_maximum_disconnect_0x93(broker, raw):
    # A QoS 1 message is unacknowledged until its PUBACK is written; arbor writes the answers
    # to packets read together at the end of the turn, so four QoS 1 PUBLISHes in one write
    # are four unacknowledged ones: the 4th exceeds Receive Maximum 3 (3.3.4). Mosquitto
    # 2.0.11 acknowledges all four.
    b = broker("max_inflight_messages 3")
    c = client(b, raw, "c")
    c.send(b"".join(mp.publish("rx", b"x", qos=1, pid=pid, version=MQTT5)
                    for pid in range(1, 5)))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.PUBACK] * 3 + [mp.DISCONNECT]
    assert mp.Disconnect(pkts[-1]).reason == 0x93


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 does not count QoS 1 PUBLISH "
                                "against its Receive Maximum")
def test_qos1_and_qos2_share_receive_maximum(broker, raw):
    # Two QoS 2 awaiting PUBREL and two QoS 1 sent together: four unacknowledged, over 3.
    b = broker("max_inflight_messages 3")
    c = client(b, raw, "c")
    for pid in (1, 2):
        c.send(mp.publish("rx", b"x", qos=2, pid=pid, version=MQTT5))
        assert mp.Ack(c.recv_type(mp.PUBREC), MQTT5).reason == 0
    c.send(mp.publish("rx", b"x", qos=1, pid=3, version=MQTT5) +
           mp.publish("rx", b"x", qos=1, pid=4, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.PUBACK, mp.DISCONNECT]
    assert mp.Disconnect(pkts[-1]).reason == 0x93


@pytest.mark.parametrize("durable", [False, True])
def test_qos1_within_receive_maximum_is_never_refused(broker, raw, tmp_path, durable):
    # Keeping to the limit (never more than 3 without their PUBACKs) goes on for ever, also
    # with persistence_mode durable, where PUBACKs wait for the commit; v3.1.1 has no limit.
    conf = "max_inflight_messages 3"
    if durable:
        conf += "\npersistence true\npersistence_mode durable\npersistence_location %s/" % tmp_path
    b = broker(conf)
    c = client(b, raw, "c")
    pid = 0
    for _ in range(20):
        c.send(b"".join(mp.publish("rx", b"x", qos=1, pid=pid + i, version=MQTT5)
                        for i in (1, 2, 3)))
        for i in (1, 2, 3):
            assert mp.Ack(c.recv_type(mp.PUBACK), MQTT5).pid == pid + i
        pid += 3
    old = raw(b)
    old.connect("old")
    old.send(b"".join(mp.publish("rx", b"x", qos=1, pid=i) for i in range(1, 41)))
    for i in range(1, 41):
        assert mp.Ack(old.recv_type(mp.PUBACK), 4).pid == i


# ---------------------------------------------------------------- maximum packet size

@pytest.mark.parametrize("limit", [2, 4])
def test_connack_larger_than_client_maximum_packet_size_is_not_sent(broker, raw, limit):
    # [MQTT-3.1.2-24]: nothing larger than the client's Maximum Packet Size, CONNACK
    # included (at least 5 bytes in MQTT 5): closed without it, as by Mosquitto (its test
    # 12-prop-maximum-packet-size-connect).
    b = broker()
    c = raw(b, MQTT5)
    c.send(mp.connect("tiny", version=MQTT5, props=[(mp.P_MAXIMUM_PACKET_SIZE, limit)]))
    assert c.wait_closed(5) == []
    ok = raw(b, MQTT5)
    assert ok.connect("roomy", props=[(mp.P_MAXIMUM_PACKET_SIZE, 64)]).rc == 0


def test_broker_respects_client_maximum_packet_size(broker, raw):
    # [MQTT-3.1.2-25]: the server must not send a packet larger than the client's Maximum
    # Packet Size; it discards it [MQTT-3.1.2-26] and carries on.
    b = broker()
    sub = client(b, raw, "small", props=[(mp.P_MAXIMUM_PACKET_SIZE, 100)])
    sub.subscribe("mp", 1)
    pub = client(b, raw, "pub")
    pub.publish("mp", b"x" * 200, qos=1)
    pub.publish("mp", b"fits", qos=1)
    got = drain(sub, expect=1)
    assert [m.payload for m in got] == [b"fits"]
    assert all(len(m.payload) < 100 for m in got)


def test_max_packet_size_advertised_and_enforced(broker, raw):
    # mosquitto.conf(5) max_packet_size: advertised in CONNACK; a bigger packet from the
    # client gets DISCONNECT 0x95 (Packet too large).
    b = broker("max_packet_size 200")
    watcher = client(b, raw, "w")
    watcher.subscribe("big", 0)
    c = raw(b, MQTT5)
    ack = c.connect("c")
    assert ack.props.get(mp.P_MAXIMUM_PACKET_SIZE) == 200
    c.publish("big", b"y" * 100, qos=1)
    assert watcher.recv_publish().payload == b"y" * 100
    c.send(mp.publish("big", b"x" * 300, qos=0, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT], pkts
    assert mp.Disconnect(pkts[0]).reason == 0x95
    watcher.expect_no_packet(0.3)
    assert watcher.is_open()


# ---------------------------------------------------------------- topic aliases

def test_inbound_topic_alias(broker, raw):
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("alias/#", 1)
    c = raw(b, MQTT5)
    ack = c.connect("c")
    assert ack.props.get(mp.P_TOPIC_ALIAS_MAXIMUM) == 10   # Mosquitto's default
    c.publish("alias/one", b"1", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])
    c.publish("", b"2", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])
    c.publish("alias/two", b"3", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])   # remap
    c.publish("", b"4", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])
    got = [(m.topic, m.payload) for m in drain(sub, expect=4)]
    assert got == [("alias/one", b"1"), ("alias/one", b"2"), ("alias/two", b"3"),
                   ("alias/two", b"4")]


def test_max_topic_alias_config(broker, raw):
    b = broker("max_topic_alias 3")
    c = raw(b, MQTT5)
    assert c.connect("c").props.get(mp.P_TOPIC_ALIAS_MAXIMUM) == 3
    c.publish("t", b"ok", qos=1, props=[(mp.P_TOPIC_ALIAS, 3)])
    c.send(mp.publish("t", b"x", qos=1, pid=9, props=[(mp.P_TOPIC_ALIAS, 4)],
                      version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason == 0x94


@pytest.mark.parametrize("alias", [0, 11])
def test_topic_alias_out_of_range_disconnects(broker, raw, alias):
    # [MQTT-3.3.2-8/9]: alias 0 or above the Topic Alias Maximum is a protocol error.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.publish("t", b"x", props=[(mp.P_TOPIC_ALIAS, alias)], version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason >= 0x80
    if alias != 0:
        assert mp.Disconnect(pkts[0]).reason == 0x94


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 answers Topic Alias 0 with DISCONNECT "
                                "0x81 (Malformed) instead of 0x94 (Topic Alias invalid)")
def test_topic_alias_zero_disconnects_0x94(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.publish("t", b"x", props=[(mp.P_TOPIC_ALIAS, 0)], version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason == 0x94


def test_unknown_topic_alias_with_empty_topic_is_protocol_error(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.publish("", b"x", props=[(mp.P_TOPIC_ALIAS, 2)], version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason == 0x82


def test_topic_aliases_are_per_connection(broker, raw):
    # 3.3.2.3.4: aliases do not carry over to another connection (or a reconnect).
    b = broker()
    c = client(b, raw, "c", props=[(mp.P_SESSION_EXPIRY, 60)])
    c.publish("pa", b"1", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])
    c.disconnect()
    c2 = raw(b, MQTT5)
    c2.connect("c", clean=False)
    c2.send(mp.publish("", b"x", props=[(mp.P_TOPIC_ALIAS, 1)], version=MQTT5))
    pkts = c2.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]


def test_outbound_topic_alias_limit_zero(broker, raw):
    # [MQTT-3.3.2-10]: with Topic Alias Maximum 0 (the default) the server sends no alias.
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("oa/#", 1)
    pub = client(b, raw, "pub")
    for i in range(3):
        pub.publish("oa/t", b"%d" % i, qos=1)
    got = drain(sub, expect=3)
    assert [(m.topic, m.payload) for m in got] == [("oa/t", b"%d" % i) for i in range(3)]
    assert all(mp.P_TOPIC_ALIAS not in m.props for m in got)


def test_outbound_topic_alias_within_client_limit(broker, raw):
    # [MQTT-3.3.2-11]: aliases the server sends are within the client's maximum, and an
    # alias-only PUBLISH refers to a topic the server sent before with that alias.
    b = broker()
    sub = client(b, raw, "sub", props=[(mp.P_TOPIC_ALIAS_MAXIMUM, 2)])
    sub.subscribe("oa/#", 1)
    pub = client(b, raw, "pub")
    topics = ["oa/a", "oa/b", "oa/c", "oa/a", "oa/b", "oa/c"]
    for t in topics:
        pub.publish(t, t.encode(), qos=1)
    aliases = {}
    for m in drain(sub, expect=len(topics)):
        alias = m.props.get(mp.P_TOPIC_ALIAS)
        if alias is not None:
            assert 1 <= alias <= 2
            if m.topic:
                aliases[alias] = m.topic
            else:
                m.topic = aliases[alias]
        assert m.topic.encode() == m.payload


# ---------------------------------------------------------------- message expiry

def test_message_expiry_for_offline_session(broker, raw):
    # 3.3.2.3.3: a message whose expiry passed while queued is not delivered.
    b = broker()
    sub = client(b, raw, "me", props=[(mp.P_SESSION_EXPIRY, 60)])
    sub.subscribe("me", 1)
    sub.disconnect()
    pub = client(b, raw, "pub")
    pub.publish("me", b"short", qos=1, props=[(mp.P_MESSAGE_EXPIRY, 1)])
    pub.publish("me", b"long", qos=1, props=[(mp.P_MESSAGE_EXPIRY, 60)])
    pub.publish("me", b"forever", qos=1)
    time.sleep(2.2)
    sub2 = raw(b, MQTT5)
    assert sub2.connect("me", clean=False).session_present
    got = drain(sub2, expect=2)
    assert [m.payload for m in got] == [b"long", b"forever"]
    remaining = got[0].props.get(mp.P_MESSAGE_EXPIRY)
    assert remaining is not None and 55 <= remaining <= 58, remaining
    assert mp.P_MESSAGE_EXPIRY not in got[1].props


def test_message_expiry_passed_through_live(broker, raw):
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("me", 1)
    pub = client(b, raw, "pub")
    pub.publish("me", b"x", qos=1, props=[(mp.P_MESSAGE_EXPIRY, 30)])
    m = sub.recv_publish()
    assert m.props.get(mp.P_MESSAGE_EXPIRY) in (29, 30)


def test_retained_message_expires(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("rme", b"x", qos=1, retain=True, props=[(mp.P_MESSAGE_EXPIRY, 1)])
    pub.publish("rme2", b"y", qos=1, retain=True, props=[(mp.P_MESSAGE_EXPIRY, 60)])
    time.sleep(2.2)
    sub = client(b, raw, "sub")
    sub.subscribe("rme/#", 1)
    sub.subscribe("rme2", 1)
    got = drain(sub, expect=1)
    assert [m.payload for m in got] == [b"y"]
    assert 55 <= got[0].props.get(mp.P_MESSAGE_EXPIRY) <= 58


# ---------------------------------------------------------------- subscription options

def test_subscription_identifier_delivered(broker, raw):
    b = broker()
    sub = client(b, raw, "sub")
    assert sub.subscribe("si/a", 1, props=[(mp.P_SUBSCRIPTION_ID, 42)]).codes == [1]
    assert sub.subscribe("si/b", 1, props=[(mp.P_SUBSCRIPTION_ID, 268435455)]).codes == [1]
    sub.subscribe("si/c", 1)
    pub = client(b, raw, "pub")
    for t in ("si/a", "si/b", "si/c"):
        pub.publish(t, b"x", qos=1)
    got = {m.topic: m.props.all(mp.P_SUBSCRIPTION_ID) for m in drain(sub, expect=3)}
    assert got == {"si/a": [42], "si/b": [268435455], "si/c": []}


def test_subscription_identifier_zero_is_protocol_error(broker, raw):
    # [MQTT-3.8.2-?] 3.8.2.1.2: the identifier is 1..268435455; 0 is a Protocol Error.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(1, [("x", 0)], props=[(mp.P_SUBSCRIPTION_ID, 0)], version=MQTT5))
    pkts = c.wait_closed(5)
    assert all(p.type == mp.DISCONNECT for p in pkts), pkts


def test_no_local(broker, raw):
    # [MQTT-3.8.3-3]: with No Local the server does not forward a client's own messages.
    b = broker()
    c = client(b, raw, "nl")
    c.subscribe([("nl/t", mp.sub_options(qos=1, no_local=True))])
    other = client(b, raw, "other")
    other.subscribe("nl/t", 1)
    c.publish("nl/t", b"mine", qos=1)
    assert other.recv_publish().payload == b"mine"
    c.expect_no_packet(0.4)
    third = client(b, raw, "third")
    third.publish("nl/t", b"theirs", qos=1)
    assert c.recv_publish().payload == b"theirs"


def test_retain_as_published(broker, raw):
    # 3.8.3.1: RAP=1 keeps the RETAIN flag as published on live delivery; RAP=0 clears it.
    b = broker()
    rap = client(b, raw, "rap")
    rap.subscribe([("rap/t", mp.sub_options(qos=1, retain_as_published=True))])
    norap = client(b, raw, "norap")
    norap.subscribe([("rap/t", mp.sub_options(qos=1))])
    pub = client(b, raw, "pub")
    pub.publish("rap/t", b"r", qos=1, retain=True)
    pub.publish("rap/t", b"n", qos=1, retain=False)
    assert [(m.payload, m.retain) for m in drain(rap, expect=2)] == [(b"r", True), (b"n", False)]
    assert [(m.payload, m.retain) for m in drain(norap, 0.1, expect=2)] == [(b"r", False),
                                                                    (b"n", False)]


def test_retain_handling(broker, raw):
    # 3.8.3.1: 0 = send retained at every subscribe, 1 = only if the subscription is new,
    # 2 = never.
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("rh/t", b"kept", qos=1, retain=True)
    results = {}
    expected = {0: [1, 1], 1: [1, 0], 2: [0, 0]}
    for rh in (0, 1, 2):
        c = client(b, raw, "rh%d" % rh)
        counts = []
        for k in range(2):
            c.subscribe([("rh/t", mp.sub_options(qos=1, retain_handling=rh))])
            got = drain(c, 0.3, expect=expected[rh][k])
            assert all(m.retain and m.payload == b"kept" for m in got)
            counts.append(len(got))
        results[rh] = counts
    assert results == expected


def test_retain_handling_3_is_protocol_error(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(1, [("x", 0x30)], version=MQTT5))
    pkts = c.wait_closed(5)
    assert all(p.type == mp.DISCONNECT for p in pkts), pkts


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 accepts No Local on a shared "
                                "subscription")
def test_no_local_on_shared_subscription_is_protocol_error(broker, raw):
    # [MQTT-3.8.3-4]: No Local on a shared subscription is a Protocol Error.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.subscribe(1, [("$share/g/x", mp.sub_options(qos=1, no_local=True))],
                        version=MQTT5))
    try:
        pkt = c.recv(3)
    except mp.ConnectionClosed:
        return
    if pkt.type == mp.SUBACK:
        assert mp.Suback(pkt, MQTT5).codes[0] >= 0x80, pkt
    else:
        assert pkt.type == mp.DISCONNECT and mp.Disconnect(pkt).reason == 0x82, pkt


# ---------------------------------------------------------------- properties pass-through

def test_publish_properties_passed_through(broker, raw):
    # 3.3.2.3: payload format, content type, response topic, correlation data and user
    # properties (in order, duplicates kept) reach the subscriber unchanged.
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("pp", 2)
    pub = client(b, raw, "pub")
    sent = [(mp.P_PAYLOAD_FORMAT, 1), (mp.P_CONTENT_TYPE, "text/plain; charset=utf-8"),
            (mp.P_RESPONSE_TOPIC, "reply/here"), (mp.P_CORRELATION_DATA, b"\x00\xffcorr"),
            (mp.P_USER_PROPERTY, ("b", "2")), (mp.P_USER_PROPERTY, ("a", "1")),
            (mp.P_USER_PROPERTY, ("b", "3")), (mp.P_USER_PROPERTY, ("", ""))]
    for qos in (0, 1, 2):
        pub.publish("pp", "héllo".encode(), qos=qos, props=sent)
        m = sub.recv_publish()
        assert m.payload == "héllo".encode() and m.qos == qos
        assert m.props.get(mp.P_PAYLOAD_FORMAT) == 1
        assert m.props.get(mp.P_CONTENT_TYPE) == "text/plain; charset=utf-8"
        assert m.props.get(mp.P_RESPONSE_TOPIC) == "reply/here"
        assert m.props.get(mp.P_CORRELATION_DATA) == b"\x00\xffcorr"
        assert m.props.all(mp.P_USER_PROPERTY) == [("b", "2"), ("a", "1"), ("b", "3"),
                                                   ("", "")]


def test_properties_reach_v311_subscriber_stripped(broker, raw):
    # A v5 PUBLISH with properties is delivered to a v3.1.1 subscriber as a plain PUBLISH.
    b = broker()
    sub = raw(b, mp.MQTT311)
    sub.connect("old")
    sub.subscribe("pp", 1)
    pub = client(b, raw, "pub")
    pub.publish("pp", b"body", qos=1, props=[(mp.P_USER_PROPERTY, ("k", "v")),
                                              (mp.P_CONTENT_TYPE, "x")])
    pkt = sub.recv_type(mp.PUBLISH)
    assert pkt.body[6:] == b"body"     # topic(2+2) + packet id(2), then payload directly


def test_request_problem_information_zero(broker, raw):
    # [MQTT-3.1.2-29]: with Request Problem Information 0 the server sends no Reason String
    # or User Property on anything but CONNACK/PUBLISH/DISCONNECT.
    b = broker()
    c = client(b, raw, "c", props=[(mp.P_REQUEST_PROBLEM_INFO, 0)])
    ack = c.publish("nobody/here", b"x", qos=1)
    assert ack.reason == 0x10
    assert mp.P_REASON_STRING not in ack.props and mp.P_USER_PROPERTY not in ack.props
    sub = c.subscribe("x", 1)
    assert mp.P_REASON_STRING not in sub.props
    uns = c.unsubscribe("not/subscribed")
    assert uns.codes == [0x11] and mp.P_REASON_STRING not in uns.props


def test_request_response_information(broker, raw):
    # 3.1.2.11.7: with 0 the server must not send Response Information; with 1 it may.
    b = broker()
    c = raw(b, MQTT5)
    ack = c.connect("c0", props=[(mp.P_REQUEST_RESPONSE_INFO, 0)])
    assert mp.P_RESPONSE_INFO not in ack.props
    c = raw(b, MQTT5)
    ack = c.connect("c1", props=[(mp.P_REQUEST_RESPONSE_INFO, 1)])
    assert ack.rc == 0
    info = ack.props.get(mp.P_RESPONSE_INFO)
    assert info is None or isinstance(info, str)


def test_request_response_pattern(broker, raw):
    # The requester's response topic and correlation data let a responder answer it.
    b = broker()
    requester = client(b, raw, "req")
    requester.subscribe("resp/req", 1)
    responder = client(b, raw, "srv")
    responder.subscribe("service", 1)
    requester.publish("service", b"ping", qos=1,
                      props=[(mp.P_RESPONSE_TOPIC, "resp/req"),
                             (mp.P_CORRELATION_DATA, b"id-7")])
    req = responder.recv_publish()
    responder.publish(req.props.get(mp.P_RESPONSE_TOPIC), b"pong", qos=1,
                      props=[(mp.P_CORRELATION_DATA, req.props.get(mp.P_CORRELATION_DATA))])
    m = requester.recv_publish()
    assert (m.payload, m.props.get(mp.P_CORRELATION_DATA)) == (b"pong", b"id-7")


# ---------------------------------------------------------------- reason codes

def test_puback_and_pubrec_no_matching_subscribers(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    ack = c.publish("nobody", b"x", qos=1)
    assert ack.type == mp.PUBACK and ack.reason == 0x10
    c.send(mp.publish("nobody", b"x", qos=2, pid=50, version=MQTT5))
    rec = mp.Ack(c.recv_type(mp.PUBREC), MQTT5)
    # PUBREC 0x10 is a MAY; Mosquitto answers 0x00 for QoS 2.
    assert rec.pid == 50 and rec.reason in (0x00, 0x10)
    c.send(mp.pubrel(50))
    assert mp.Ack(c.recv_type(mp.PUBCOMP), MQTT5).pid == 50


def test_puback_success_with_subscriber(broker, raw):
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("some", 0)
    c = client(b, raw, "c")
    assert c.publish("some", b"x", qos=1).reason == 0


def test_suback_v5_granted_qos_codes(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    assert c.subscribe([("a", 0), ("b", 1), ("c", 2)]).codes == [0, 1, 2]


def test_max_qos_config(broker, raw):
    # mosquitto.conf(5) max_qos: advertised as Maximum QoS; a v5 PUBLISH above it is a
    # protocol error (DISCONNECT 0x9B QoS not supported); subscriptions are granted at most it.
    b = broker("max_qos 1")
    c = raw(b, MQTT5)
    assert c.connect("c").props.get(mp.P_MAXIMUM_QOS) == 1
    assert c.subscribe("mq", 2).codes == [1]
    c.send(mp.publish("mq", b"x", qos=2, pid=1, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason == 0x9B


# ---------------------------------------------------------------- DISCONNECT from client

def test_disconnect_with_will_message_publishes_will(broker, raw):
    # 3.14.2.1: reason 0x04 (Disconnect with Will Message) -> the will is published.
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("dw", 0)
    c = client(b, raw, "c", will={"topic": "dw", "payload": b"will04"})
    c.send(mp.disconnect(0x04))
    assert sub.recv_publish(timeout=3).payload == b"will04"


def test_normal_disconnect_discards_will(broker, raw):
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("dw", 0)
    c = client(b, raw, "c", will={"topic": "dw", "payload": b"nope"})
    c.send(mp.disconnect(0x00))
    sub.expect_no_packet(0.6)


@pytest.mark.mosquitto_deviates
def test_disconnect_with_error_reason_keeps_will(broker, raw):
    """[MQTT-3.1.2-10]: the will is deleted only on DISCONNECT with reason 0x00; a client that
    disconnects with an error reason (here 0x80) still has its will published. Mosquitto
    2.0.11 discards it."""
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("w/err", 0)
    c = client(b, raw, "erring", will={"topic": "w/err", "payload": b"err-will"})
    c.send(mp.disconnect(0x80))
    assert sub.recv_publish(timeout=3).payload == b"err-will"


def test_empty_disconnect_means_normal(broker, raw):
    # 3.14.2.1: remaining length 0 means reason 0x00.
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("dw", 0)
    c = client(b, raw, "c", will={"topic": "dw", "payload": b"nope"})
    c.send(b"\xe0\x00")
    assert c.wait_closed(3) == []
    sub.expect_no_packet(0.6)


# ---------------------------------------------------------------- authentication

def test_authentication_method_refused(broker, raw):
    # With no enhanced authentication configured: CONNACK 0x8C Bad authentication method.
    b = broker()
    c = raw(b, MQTT5)
    c.send(mp.connect("auth", version=MQTT5, props=[(mp.P_AUTH_METHOD, "SCRAM-SHA-1"),
                                                     (mp.P_AUTH_DATA, b"abc")]))
    pkts = c.wait_closed(5)
    assert len(pkts) == 1 and pkts[0].type == mp.CONNACK, pkts
    assert mp.Connack(pkts[0], MQTT5).rc == 0x8C
    other = client(b, raw, "other")
    assert other.is_open()


def test_auth_packet_without_auth_method_is_protocol_error(broker, raw):
    # [MQTT-4.12.0-1]: AUTH without an authentication method in CONNECT -> disconnect.
    b = broker()
    c = client(b, raw, "c")
    c.send(mp.auth(0x19, [(mp.P_AUTH_METHOD, "X")]))
    pkts = c.wait_closed(5)
    for p in pkts:
        assert p.type == mp.DISCONNECT and mp.Disconnect(p).reason >= 0x80, pkts


def test_duplicate_property_is_protocol_error(broker, raw):
    # 2.2.2.2: including a property more than once (other than User Property or
    # Subscription Identifier) is a Protocol Error.
    b = broker()
    c = raw(b, MQTT5)
    c.send(mp.connect("dupprop", version=MQTT5,
                      props=[(mp.P_SESSION_EXPIRY, 1), (mp.P_SESSION_EXPIRY, 2)]))
    pkts = c.wait_closed(5)
    for p in pkts:
        assert p.type == mp.CONNACK and mp.Connack(p, MQTT5).rc >= 0x80, pkts


@pytest.mark.parametrize("prop", [(mp.P_RECEIVE_MAXIMUM, 0), (mp.P_MAXIMUM_PACKET_SIZE, 0),
                                  (mp.P_REQUEST_PROBLEM_INFO, 2),
                                  (mp.P_REQUEST_RESPONSE_INFO, 2)],
                         ids=["receive-max-0", "max-packet-0", "problem-info-2",
                              "response-info-2"])
def test_connect_property_out_of_range(broker, raw, prop):
    # 3.1.2.11: these values are Protocol Errors: the CONNECT is refused.
    b = broker()
    c = raw(b, MQTT5)
    c.send(mp.connect("bad", version=MQTT5, props=[prop]))
    pkts = c.wait_closed(5)
    for p in pkts:
        assert p.type == mp.CONNACK and mp.Connack(p, MQTT5).rc >= 0x80, pkts
    assert client(b, raw, "good").is_open()


def test_retained_via_topic_alias_stored_under_topic(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    c.publish("ra/t", b"first", qos=1, props=[(mp.P_TOPIC_ALIAS, 1)])
    c.publish("", b"second", qos=1, retain=True, props=[(mp.P_TOPIC_ALIAS, 1)])
    sub = client(b, raw, "sub")
    sub.subscribe("ra/#", 1)
    m = sub.recv_publish()
    assert (m.topic, m.payload, m.retain) == ("ra/t", b"second", True)
    assert mp.P_TOPIC_ALIAS not in m.props


def test_invalid_utf8_in_user_property(broker, raw):
    b = broker()
    c = client(b, raw, "c")
    body = mp.string("t") + mp.properties([(mp.P_USER_PROPERTY, (b"k\xff", "v"))]) + b"x"
    c.send(mp.packet(mp.PUBLISH, 0, body))
    pkts = c.wait_closed(5)
    for p in pkts:
        assert p.type == mp.DISCONNECT and mp.Disconnect(p).reason >= 0x80, pkts


# ---------------------------------------------------------------- reason strings (arbor)

@pytest.mark.arbor_only
def test_reason_string_on_error_ack_only_when_problem_information_requested(broker, raw):
    # 3.1.2.11.6: reason strings on PUBACK/PUBREC only when Request Problem Information is 1
    # (and only with `reason_strings true`: by default arbor sends none, as Mosquitto).
    b = broker("message_size_limit 10", "reason_strings true")
    c = client(b, raw, "wants")
    ack = c.publish("big", b"x" * 11, qos=1)
    assert ack.reason == 0x95
    assert ack.props.get(mp.P_REASON_STRING) == "packet too large"
    quiet = client(b, raw, "quiet", props=[(mp.P_REQUEST_PROBLEM_INFO, 0)])
    ack = quiet.publish("big", b"x" * 11, qos=1)
    assert ack.reason >= 0x80 and mp.P_REASON_STRING not in ack.props


@pytest.mark.arbor_only
def test_reason_string_on_disconnect(broker, raw):
    # DISCONNECT may always carry a reason string; with `reason_strings true` arbor says what
    # was wrong.
    b = broker("max_qos 1", "reason_strings true")
    c = client(b, raw, "c", props=[(mp.P_REQUEST_PROBLEM_INFO, 0)])
    c.send(mp.publish("q", b"x", qos=2, pid=1, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    d = mp.Disconnect(pkts[0])
    assert d.reason == 0x9B and d.props.get(mp.P_REASON_STRING) == "QoS not supported"
