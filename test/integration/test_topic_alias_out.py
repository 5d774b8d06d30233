"""Topic aliases from arbor to MQTT 5 clients (`topic_alias_outgoing true`, arbor's own):
the bytes of first and later uses, the least-recently-used replacement, clients that do not
allow aliases, reconnects and messages sent again, the debug log, and paho-mqtt."""

import pytest

import mqttproto as mp
from helpers import IS_MOSQUITTO, PacketTypes, props as paho_props, v5_client
from mqttproto import MQTT5

pytestmark = pytest.mark.skipif(IS_MOSQUITTO, reason="arbor's own directive")

ON = "topic_alias_outgoing true"


def published(c):
    return mp.Publish(c.recv_type(mp.PUBLISH), MQTT5)


def alias_props(n):
    return b"\x03\x23" + n.to_bytes(2, "big")


def test_first_use_carries_topic_and_alias_then_alias_alone(broker, raw):
    b = broker(ON)
    sub = v5_client(b, raw, "sub", props=[(mp.P_TOPIC_ALIAS_MAXIMUM, 4)])
    sub.subscribe("a/#", 0)
    pub = v5_client(b, raw, "pub")
    for payload in (b"1", b"2"):
        pub.send(mp.publish("a/one", payload, version=MQTT5))
    first = sub.recv_type(mp.PUBLISH)
    # PUBLISH QoS 0: topic "a/one", properties: Topic Alias 1, payload "1"
    assert first.raw == b"\x30\x0c\x00\x05a/one" + alias_props(1) + b"1"
    again = sub.recv_type(mp.PUBLISH)
    # the same alias with an empty topic name
    assert again.raw == b"\x30\x07\x00\x00" + alias_props(1) + b"2"


def test_least_recently_used_alias_is_given_to_a_new_topic(broker, raw):
    b = broker(ON)
    sub = v5_client(b, raw, "sub", props=[(mp.P_TOPIC_ALIAS_MAXIMUM, 2)])
    sub.subscribe("t/#", 0)
    pub = v5_client(b, raw, "pub")
    # a1 a2 a1 a3 (a2 least recent: its alias 2 goes to a3) a1 a2 (a3 least recent: alias 2)
    order = ["t/a1", "t/a2", "t/a1", "t/a3", "t/a1", "t/a2"]
    for topic in order:
        pub.send(mp.publish(topic, topic.encode(), version=MQTT5))
    seen = [published(sub) for _ in order]
    assert [(m.topic, m.props.get(mp.P_TOPIC_ALIAS)) for m in seen] == [
        ("t/a1", 1), ("t/a2", 2), ("", 1), ("t/a3", 2), ("", 1), ("t/a2", 2)]
    assert [m.payload for m in seen] == [t.encode() for t in order]


@pytest.mark.parametrize("conf, connect_props", [
    (ON, []),                                      # the client allows none
    (ON, [(mp.P_TOPIC_ALIAS_MAXIMUM, 0)]),         # ... explicitly
    ("", [(mp.P_TOPIC_ALIAS_MAXIMUM, 10)]),        # default: off
    ("topic_alias_outgoing false", [(mp.P_TOPIC_ALIAS_MAXIMUM, 10)]),
])
def test_no_alias_unless_allowed_and_enabled(broker, raw, conf, connect_props):
    b = broker(conf)
    sub = v5_client(b, raw, "sub", props=connect_props)
    sub.subscribe("n/#", 1)
    pub = v5_client(b, raw, "pub")
    for i in range(3):
        pub.publish("n/x", b"%d" % i, qos=1)
    for i in range(3):
        m = published(sub)
        assert m.topic == "n/x" and mp.P_TOPIC_ALIAS not in m.props
        sub.send(mp.puback(m.pid))


def test_v311_client_never_gets_an_alias(broker, raw):
    b = broker(ON)
    sub = raw(b)
    sub.connect("old")
    sub.subscribe("o/#", 0)
    pub = v5_client(b, raw, "pub")
    for _ in range(2):
        pub.send(mp.publish("o/x", b"p", version=MQTT5))
    for _ in range(2):
        assert sub.recv_type(mp.PUBLISH).raw == b"\x30\x06\x00\x03o/xp"


def test_reconnect_starts_without_aliases_and_resent_message_names_its_topic(broker, raw):
    b = broker(ON)
    session = [(mp.P_SESSION_EXPIRY, 60), (mp.P_TOPIC_ALIAS_MAXIMUM, 4)]
    sub = v5_client(b, raw, "sub", props=session)
    sub.subscribe("r/#", 1)
    pub = v5_client(b, raw, "pub")
    pub.publish("r/x", b"1", qos=1)
    pub.publish("r/x", b"2", qos=1)
    m1, m2 = published(sub), published(sub)
    assert (m1.topic, m1.props.get(mp.P_TOPIC_ALIAS)) == ("r/x", 1)
    assert (m2.topic, m2.props.get(mp.P_TOPIC_ALIAS)) == ("", 1)
    sub.close()  # neither acknowledged
    sub2 = raw(b, MQTT5)
    assert sub2.connect("sub", clean=False, props=session).session_present
    again = [published(sub2) for _ in range(2)]
    # the new connection has no aliases yet: the first message sent again carries its topic
    assert [(m.dup, m.topic, m.props.get(mp.P_TOPIC_ALIAS), m.payload) for m in again] == [
        (True, "r/x", 1, b"1"), (True, "", 1, b"2")]


def test_debug_log_names_the_topic_of_an_aliased_publish(broker, raw):
    b = broker(ON)
    sub = v5_client(b, raw, "logsub", props=[(mp.P_TOPIC_ALIAS_MAXIMUM, 1)])
    sub.subscribe("lg/#", 0)
    pub = v5_client(b, raw, "pub")
    for _ in range(2):
        pub.send(mp.publish("lg/topic", b"x", version=MQTT5))
    assert published(sub).topic == "lg/topic"
    assert published(sub).topic == ""
    b.wait_log("Sending PUBLISH to logsub (d0, q0, r0, m0, 'lg/topic', ... (1 bytes))")
    assert "'', ..." not in b.log_text()


def test_paho_v5_client_with_topic_alias_maximum(broker, mqtt):
    # paho-mqtt passes the alias on (msg.properties.TopicAlias, empty msg.topic) and leaves
    # the mapping to the application, as here.
    b = broker(ON)
    sub = mqtt(b, client_id="psub", version=5,
               properties=paho_props(PacketTypes.CONNECT, TopicAliasMaximum=3))
    sub.subscribe("p/#", 1)
    pub = mqtt(b, client_id="ppub", version=5)
    topics = ["p/a", "p/b", "p/a", "p/c", "p/d", "p/a", "p/b"]
    for i, t in enumerate(topics):
        pub.publish(t, b"%d" % i, qos=1)
    aliases = {}
    got = []
    for _ in topics:
        m = sub.get_message()
        alias = getattr(m.props, "TopicAlias", None)
        assert alias is not None and 1 <= alias <= 3
        if m.topic:
            aliases[alias] = m.topic
        got.append((aliases[alias], m.payload))
    assert got == [(t, b"%d" % i) for i, t in enumerate(topics)]
