"""Retained messages: set, replace, clear, flags on delivery, wildcard matching."""

import pytest

import mqttproto as mp
from mqttproto import MQTT311, MQTT5


def client(b, raw, cid, version=MQTT311):
    c = raw(b, version)
    c.connect(cid)
    return c


@pytest.mark.parametrize("version", [mp.MQTT31, MQTT311, MQTT5])
def test_retained_delivered_on_subscribe_with_retain_flag(broker, raw, version):
    b = broker()
    pub = client(b, raw, "pub", version)
    pub.publish("r/a", b"kept", qos=1, retain=True)
    sub = client(b, raw, "sub", version)
    sub.subscribe("r/a", 1)
    m = sub.recv_publish()
    assert (m.topic, m.payload, m.retain, m.qos) == ("r/a", b"kept", True, 1)
    sub.expect_no_packet(0.3)


def test_retained_replaced_by_newer(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"old", qos=1, retain=True)
    pub.publish("r/a", b"new", qos=1, retain=True)
    sub = client(b, raw, "sub")
    sub.subscribe("r/a", 1)
    assert sub.recv_publish().payload == b"new"
    sub.expect_no_packet(0.3)


def test_non_retained_publish_does_not_replace(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"kept", qos=1, retain=True)
    pub.publish("r/a", b"transient", qos=1, retain=False)
    sub = client(b, raw, "sub")
    sub.subscribe("r/a", 1)
    assert sub.recv_publish().payload == b"kept"


def test_empty_payload_clears_retained(broker, raw):
    # [MQTT-3.3.1-10/11]: a retained zero-length payload removes the retained message and is
    # not itself stored, but it is delivered to current subscribers.
    b = broker()
    live = client(b, raw, "live")
    live.subscribe("r/a", 0)
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"kept", qos=1, retain=True)
    assert live.recv_publish().payload == b"kept"
    pub.publish("r/a", b"", qos=1, retain=True)
    m = live.recv_publish()
    assert m.payload == b"" and not m.retain
    sub = client(b, raw, "sub")
    sub.subscribe("r/#", 1)
    sub.expect_no_packet(0.5)


def test_live_delivery_v311_has_retain_flag_clear(broker, raw):
    # [MQTT-3.3.1-9]: a message sent because of an existing subscription has RETAIN 0.
    b = broker()
    sub = client(b, raw, "sub")
    sub.subscribe("r/a", 1)
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"live", qos=1, retain=True)
    m = sub.recv_publish()
    assert (m.payload, m.retain) == (b"live", False)


def test_retained_qos_is_min_of_stored_and_subscription(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("r/q2", b"two", qos=2, retain=True)
    pub.publish("r/q0", b"zero", qos=0, retain=True)
    s0 = client(b, raw, "s0")
    s0.subscribe("r/q2", 0)
    assert s0.recv_publish().qos == 0
    s2 = client(b, raw, "s2")
    s2.subscribe("r/q0", 2)
    m = s2.recv_publish()
    assert (m.payload, m.qos, m.retain) == (b"zero", 0, True)
    s1 = client(b, raw, "s1")
    s1.subscribe("r/q2", 1)
    assert s1.recv_publish().qos == 1


def test_wildcard_subscription_gets_all_matching_retained(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    for t in ("w/a", "w/b", "w/b/c", "x/a"):
        pub.publish(t, t.encode(), qos=1, retain=True)
    sub = client(b, raw, "s1")
    sub.subscribe("w/+", 0)
    got = sorted(sub.recv_publish().topic for _ in range(2))
    assert got == ["w/a", "w/b"]
    sub.expect_no_packet(0.3)
    sub2 = client(b, raw, "s2")
    sub2.subscribe("w/#", 0)
    got = sorted(sub2.recv_publish().topic for _ in range(3))
    assert got == ["w/a", "w/b", "w/b/c"]
    sub2.expect_no_packet(0.3)


def test_resubscribe_resends_retained(broker, raw):
    # 3.1.1 [MQTT-3.8.4-3]: a SUBSCRIBE that replaces an existing subscription resends the
    # matching retained messages.
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"kept", qos=1, retain=True)
    sub = client(b, raw, "sub")
    sub.subscribe("r/a", 1)
    assert sub.recv_publish().payload == b"kept"
    sub.subscribe("r/a", 1)
    m = sub.recv_publish()
    assert (m.payload, m.retain) == (b"kept", True)


def test_retained_survives_publisher_disconnect(broker, raw):
    b = broker()
    pub = client(b, raw, "pub")
    pub.publish("r/a", b"kept", qos=0, retain=True)
    pub.disconnect()
    sub = client(b, raw, "sub")
    sub.subscribe("r/a", 0)
    assert sub.recv_publish().payload == b"kept"


def test_retained_message_properties_kept_v5(broker, raw):
    b = broker()
    pub = client(b, raw, "pub", MQTT5)
    pub.publish("r/p", b"{}", qos=1, retain=True,
                props=[(mp.P_CONTENT_TYPE, "application/json"),
                       (mp.P_USER_PROPERTY, ("a", "b"))])
    sub = client(b, raw, "sub", MQTT5)
    sub.subscribe("r/p", 1)
    m = sub.recv_publish()
    assert m.retain
    assert m.props.get(mp.P_CONTENT_TYPE) == "application/json"
    assert m.props.all(mp.P_USER_PROPERTY) == [("a", "b")]


def test_retain_available_false(broker, raw):
    # mosquitto.conf(5) retain_available false: v5 CONNACK says Retain Available 0, and a
    # retained PUBLISH is a protocol error answered with DISCONNECT 0x9A.
    b = broker("retain_available false")
    c = raw(b, MQTT5)
    ack = c.connect("c")
    assert ack.props.get(mp.P_RETAIN_AVAILABLE) == 0
    c.send(mp.publish("r/a", b"x", qos=0, retain=True, version=MQTT5))
    pkts = c.wait_closed(5)
    assert [p.type for p in pkts] == [mp.DISCONNECT]
    assert mp.Disconnect(pkts[0]).reason == 0x9A
