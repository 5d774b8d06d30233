"""Regression tests for defects found in code review of src/.

Each test states the spec rule it checks and the defect it once caught.
"""

import time

import pytest

import mqttproto as mp
from helpers import v5_client as client
from mqttproto import MQTT5


def drain(c, timeout=0.4, ack=True, expect=0):
    return c.drain_publishes(timeout, ack, expect=expect)


def test_will_message_expiry_counts_from_publication(broker, raw):
    """3.1.3.2.4: the will's Message Expiry Interval is "the lifetime of the Will Message"
    and is sent as the Publication Expiry Interval *when the Server publishes* it. arbor
    starts the clock at CONNECT (store_will -> message_create(..., now_ms)), so a client that
    stays connected longer than the expiry loses its will entirely."""
    b = broker()
    sub = client(b, raw, "watch")
    sub.subscribe("w/exp", 1)
    c = client(b, raw, "dying", will={"topic": "w/exp", "payload": b"bye", "qos": 1,
                                      "props": [(mp.P_MESSAGE_EXPIRY, 1)]})
    time.sleep(2.2)  # connected longer than the will's expiry interval
    c.close()        # unexpected close: the will must be published now
    m = sub.recv_publish(timeout=3)
    assert m.payload == b"bye"
    assert m.props.get(mp.P_MESSAGE_EXPIRY) == 1


def test_delayed_will_message_expiry_counts_from_publication(broker, raw):
    """Same as above with a Will Delay Interval: the will is due 2 s after the close but its
    expiry (1 s) was counted from CONNECT, so it is silently dropped."""
    b = broker()
    sub = client(b, raw, "watch")
    sub.subscribe("w/dexp", 1)
    c = client(b, raw, "dying", props=[(mp.P_SESSION_EXPIRY, 60)],
               will={"topic": "w/dexp", "payload": b"late", "qos": 1,
                     "props": [(mp.P_MESSAGE_EXPIRY, 1), (mp.P_WILL_DELAY, 2)]})
    c.close()
    m = sub.recv_publish(timeout=5)
    assert m.payload == b"late"


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 also resends every in-flight message on "
                                "resumption, ignoring the new Receive Maximum")
def test_resume_respects_new_receive_maximum(broker, raw):
    """[MQTT-3.3.4-9]: the server MUST NOT send more than Receive Maximum unacknowledged
    QoS>0 PUBLISH packets. On session resumption session_resume() resends every in-flight
    delivery regardless of the Receive Maximum of the *new* connection."""
    b = broker()
    sub = client(b, raw, "rmr", props=[(mp.P_SESSION_EXPIRY, 60), (mp.P_RECEIVE_MAXIMUM, 10)])
    sub.subscribe("rmr", 1)
    pub = client(b, raw, "pub")
    for i in range(5):
        pub.publish("rmr", b"%d" % i, qos=1)
    first = drain(sub, ack=False, expect=5)
    assert len(first) == 5
    sub.close()
    time.sleep(0.2)
    sub2 = raw(b, MQTT5)
    assert sub2.connect("rmr", clean=False,
                        props=[(mp.P_SESSION_EXPIRY, 60), (mp.P_RECEIVE_MAXIMUM, 2)]).session_present
    resent = drain(sub2, ack=False)
    assert len(resent) <= 2, [m.payload for m in resent]


def test_delayed_will_published_on_shutdown(broker, raw):
    """Mosquitto 2.0 publishes pending delayed wills when it shuts down (will_delay__send_all
    after the main loop); broker_shutdown() unrefs session->pending_will without publishing,
    so a connected subscriber never learns that the client went away."""
    b = broker()
    sub = client(b, raw, "watch")
    sub.subscribe("dw", 0)
    c = client(b, raw, "dying", props=[(mp.P_SESSION_EXPIRY, 60)],
               will={"topic": "dw", "payload": b"late", "props": [(mp.P_WILL_DELAY, 30)]})
    c.close()
    sub.expect_no_packet(0.5)
    b.stop()
    got = []
    try:
        got = sub.wait_closed(3)
    except AssertionError:
        pass
    pubs = [mp.Publish(p, MQTT5) for p in got if p.type == mp.PUBLISH]
    assert [m.payload for m in pubs] == [b"late"], got


def test_mqtt31_connack_has_no_session_present_bit(broker, raw):
    """MQTT 3.1 has no Session Present flag: the first CONNACK byte is reserved (0).
    mqtt_encode_connack() sets it for every version, so an MQTT 3.1 client resuming a
    persistent session gets 0x01 there (strict 3.1 clients reject it)."""
    b = broker()
    c = raw(b, mp.MQTT31)
    c.connect("old31", clean=False)
    c.disconnect()
    c2 = raw(b, mp.MQTT31)
    c2.send(mp.connect("old31", version=mp.MQTT31, clean=False))
    ack = c2.recv_type(mp.CONNACK)
    assert ack.body[0] == 0, ack
