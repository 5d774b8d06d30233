"""Persistent sessions: subscriptions and queued QoS 1/2 messages survive a disconnect;
clean session discards them; persistent_client_expiration is accepted."""

import pytest

import mqttproto as mp
from helpers import free_port
from mqttproto import MQTT311, MQTT5


def drain(c, timeout=0.4, expect=0):
    """The PUBLISHes that arrive: `expect` of them waited for (a loaded machine may delay
    them), then any more until `timeout` passes without one."""
    return c.drain_publishes(timeout, expect=expect)


def test_subscriptions_survive_disconnect(broker, raw):
    b = broker()
    c = raw(b)
    assert not c.connect("p", clean=False).session_present
    c.subscribe([("ps/a", 1), ("ps/+/b", 2)])
    c.disconnect()
    c2 = raw(b)
    assert c2.connect("p", clean=False).session_present
    pub = raw(b)
    pub.connect("pub")
    pub.publish("ps/a", b"1", qos=1)
    pub.publish("ps/x/b", b"2", qos=2)
    got = [(m.topic, m.payload, m.qos) for m in drain(c2, expect=2)]
    assert got == [("ps/a", b"1", 1), ("ps/x/b", b"2", 2)]


@pytest.mark.parametrize("qos", [1, 2])
def test_queued_messages_delivered_on_reconnect_in_order(broker, raw, qos):
    b = broker()
    c = raw(b)
    c.connect("p", clean=False)
    c.subscribe("pq", qos)
    c.disconnect()
    pub = raw(b)
    pub.connect("pub")
    for i in range(10):
        pub.publish("pq", b"%d" % i, qos=qos)
    c2 = raw(b)
    assert c2.connect("p", clean=False).session_present
    got = drain(c2, expect=10)
    assert [m.payload for m in got] == [b"%d" % i for i in range(10)]
    assert all(m.qos == qos and not m.dup for m in got)


def test_queued_messages_survive_abrupt_close(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("p", clean=False)
    c.subscribe("pq", 1)
    c.close()                      # no DISCONNECT
    pub = raw(b)
    pub.connect("pub")
    pub.publish("pq", b"while away", qos=1)
    c2 = raw(b)
    assert c2.connect("p", clean=False).session_present
    assert c2.recv_publish().payload == b"while away"


def test_clean_session_discards_subscriptions_and_queue(broker, raw):
    # [MQTT-3.1.2-6]: clean session 1 discards any previous session.
    b = broker()
    c = raw(b)
    c.connect("p", clean=False)
    c.subscribe("pc", 1)
    c.disconnect()
    pub = raw(b)
    pub.connect("pub")
    pub.publish("pc", b"queued", qos=1)
    c2 = raw(b)
    assert not c2.connect("p", clean=True).session_present
    pub.publish("pc", b"after", qos=1)
    c2.expect_no_packet(0.5)
    c2.disconnect()
    # The clean session is not kept either.
    c3 = raw(b)
    assert not c3.connect("p", clean=False).session_present


def test_clean_session_true_never_session_present(broker, raw):
    # [MQTT-3.2.2-1]: clean session 1 -> session present 0.
    b = broker()
    for _ in range(2):
        c = raw(b)
        ack = c.connect("p", clean=True)
        assert not ack.session_present and ack.ack_flags == 0
        c.subscribe("x", 1)
        c.disconnect()


def test_unsubscribed_topics_not_queued(broker, raw):
    b = broker()
    c = raw(b)
    c.connect("p", clean=False)
    c.subscribe([("keep", 1), ("drop", 1)])
    c.unsubscribe("drop")
    c.disconnect()
    pub = raw(b)
    pub.connect("pub")
    pub.publish("drop", b"no", qos=1)
    pub.publish("keep", b"yes", qos=1)
    c2 = raw(b)
    c2.connect("p", clean=False)
    assert [m.payload for m in drain(c2, expect=1)] == [b"yes"]


def test_v5_session_with_infinite_expiry(broker, raw):
    b = broker()
    c = raw(b, MQTT5)
    c.connect("p5", clean=True, props=[(mp.P_SESSION_EXPIRY, 0xFFFFFFFF)])
    c.subscribe("p5", 1)
    c.disconnect()
    pub = raw(b, MQTT5)
    pub.connect("pub")
    pub.publish("p5", b"kept", qos=1)
    c2 = raw(b, MQTT5)
    assert c2.connect("p5", clean=False, props=[(mp.P_SESSION_EXPIRY, 0xFFFFFFFF)]) \
        .session_present
    assert c2.recv_publish().payload == b"kept"


def test_session_shared_between_v311_and_v5_reconnect(broker, raw):
    # A session is identified by client id alone; a v3.1.1 persistent session is resumed
    # by a v5 CONNECT with Clean Start 0 and a non-zero expiry.
    b = broker()
    c = raw(b, MQTT311)
    c.connect("mixed", clean=False)
    c.subscribe("mx", 1)
    c.disconnect()
    c2 = raw(b, MQTT5)
    assert c2.connect("mixed", clean=False,
                      props=[(mp.P_SESSION_EXPIRY, 60)]).session_present
    pub = raw(b)
    pub.connect("pub")
    pub.publish("mx", b"x", qos=1)
    assert c2.recv_publish().payload == b"x"


@pytest.mark.parametrize("value", ["1h", "2d", "1w", "1m", "1y"])
def test_persistent_client_expiration_accepted(broker, raw, value):
    # mosquitto.conf(5) persistent_client_expiration: <integer><h|d|w|m|y>. The smallest
    # unit is an hour, so within a test the session must still be there.
    b = broker("persistent_client_expiration " + value)
    c = raw(b)
    c.connect("pce", clean=False)
    c.subscribe("pce", 1)
    c.disconnect()
    c2 = raw(b)
    assert c2.connect("pce", clean=False).session_present


@pytest.mark.parametrize("value", ["10s", "5", "1x"])
def test_persistent_client_expiration_bad_value(run_broker, value):
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % free_port(),
                                     "persistent_client_expiration " + value])
    assert rc not in (0, None), out
    assert "%s:2" % run_broker.conf_path in out, out
    assert "persistent_client_expiration" in out
