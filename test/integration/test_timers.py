"""Timers fire at their deadline, measured from the event, never early and at most a few
hundred ms late: will delay, session expiry, message expiry and keepalive.

Each test starts its events at three different phases (0, 1/3 and 2/3 of a second apart), so
that a broker that rounds to a one-second tick, or stamps an event with the time its loop
turn began instead of the time the event arrived, falls outside the window for at least
one of them. Times are taken on the client side just before the triggering packet or close
is sent, so the broker can only see the event later, never earlier.

LATE is how late a timer may be: a few ms on an idle machine; 0.3 s (the issue's bound) leaves
room for a loaded CI box.
"""

import threading
import time

import pytest

import mqttproto as mp
from mqttproto import MQTT5

PHASES = (0.0, 0.33, 0.66)
LATE = 0.3

# Observed with Debian's 2.0.11: its timers run on whole seconds, so the same tests see a will
# 4.3 s after a 3 s delay, a 2 s session still there after 2.3 s, a 2 s keepalive enforced after
# 5.7 s (or before 1.5 x 1 s), and a message with 0.3 s left sent with no expiry property.
WHOLE_SECONDS = pytest.mark.mosquitto_deviates(
    "Mosquitto 2.0.11 keeps timers in whole seconds: wills, session expiry and keepalive "
    "fire up to ~1-2 s off their deadline")


def at(start, offset):
    """Sleep until `offset` seconds after monotonic time `start`."""
    delay = start + offset - time.monotonic()
    if delay > 0:
        time.sleep(delay)


@WHOLE_SECONDS
def test_will_delay_fires_at_the_delay(broker, raw):
    b = broker()
    sub = raw(b, MQTT5)
    sub.connect("will-watcher")
    sub.subscribe("will/#", 0)
    clients = []
    for i in range(len(PHASES)):
        c = raw(b, MQTT5)
        c.connect("dropper%d" % i, props=[(mp.P_SESSION_EXPIRY, 60)],
                  will={"topic": "will/%d" % i, "payload": b"gone",
                        "props": [(mp.P_WILL_DELAY, 3)]})
        clients.append(c)
    start = time.monotonic()
    dropped = {}
    for i, (c, phase) in enumerate(zip(clients, PHASES)):
        at(start, phase)
        dropped["will/%d" % i] = time.monotonic()
        c.close()
    arrived = {}
    while len(arrived) < len(PHASES):
        m = sub.recv_publish(timeout=6)
        arrived[m.topic] = time.monotonic()
    delays = {t: arrived[t] - dropped[t] for t in dropped}
    for topic, delay in delays.items():
        assert 3.0 <= delay <= 3.0 + LATE, delays


@WHOLE_SECONDS
def test_session_expiry_at_the_interval(broker, raw):
    """Expiry 2 s: a reconnect 1.8 s after the drop finds the session, 2.3 s after does not."""
    b = broker()
    start = time.monotonic()
    dropped = {}
    for i, phase in enumerate(PHASES):
        for kind in ("kept", "gone"):
            c = raw(b, MQTT5)
            c.connect("%s%d" % (kind, i), clean=True, props=[(mp.P_SESSION_EXPIRY, 2)])
            c.subscribe("keep/me", 1)
            at(start, phase)
            dropped[(kind, i)] = time.monotonic()
            c.close()
    events = sorted([(dropped[("kept", i)] + 1.8, "kept", i) for i in range(len(PHASES))] +
                    [(dropped[("gone", i)] + 2.3, "gone", i) for i in range(len(PHASES))])
    present = {}
    for when, kind, i in events:
        at(when, 0)
        c = raw(b, MQTT5)
        present[(kind, i)] = c.connect("%s%d" % (kind, i), clean=False,
                                       props=[(mp.P_SESSION_EXPIRY, 2)]).session_present
        c.disconnect()
    for i in range(len(PHASES)):
        assert present[("kept", i)], ("session expired before 2 s", present)
        assert not present[("gone", i)], ("session still there 2.3 s after", present)


@pytest.mark.mosquitto_deviates(
    "Mosquitto 2.0.11 sends no Message Expiry Interval when less than a second is left "
    "(MQTT-3.3.2-6 asks for the received value minus the time waited)")
def test_message_expiry_for_offline_session(broker, raw):
    """Expiry 2 s: a message queued for an offline session is delivered 1.7 s after it was
    published, with 1 s (rounded up) left in its expiry property, and not 2.3 s after."""
    b = broker()
    for name in ("early", "late"):
        s = raw(b, MQTT5)
        s.connect(name, props=[(mp.P_SESSION_EXPIRY, 60)])
        s.subscribe("expiring", 1)
        s.disconnect()
    pub = raw(b, MQTT5)
    pub.connect("expiry-publisher")
    published = time.monotonic()
    pub.publish("expiring", b"short-lived", qos=1, props=[(mp.P_MESSAGE_EXPIRY, 2)])

    at(published, 1.7)
    early = raw(b, MQTT5)
    assert early.connect("early", clean=False, props=[(mp.P_SESSION_EXPIRY, 60)]).session_present
    m = early.recv_publish(timeout=2)
    assert m.payload == b"short-lived"
    assert m.props.get(mp.P_MESSAGE_EXPIRY) == 1, m.props

    at(published, 2.3)
    late = raw(b, MQTT5)
    assert late.connect("late", clean=False, props=[(mp.P_SESSION_EXPIRY, 60)]).session_present
    late.expect_no_packet(0.5)


@WHOLE_SECONDS
def test_keepalive_disconnects_at_one_and_a_half_times(broker, raw):
    """Keepalive 2 s: a silent client is disconnected 3 s after its last packet."""
    b = broker()
    start = time.monotonic()
    clients, sent, closed = [], [], {}
    for i, phase in enumerate(PHASES):
        at(start, phase)
        c = raw(b)
        sent.append(time.monotonic())
        c.connect("silent%d" % i, keepalive=2)
        clients.append(c)

    def wait(i):
        clients[i].wait_closed(timeout=6)
        closed[i] = time.monotonic()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    delays = [closed[i] - sent[i] for i in range(len(clients))]
    for delay in delays:
        assert 3.0 <= delay <= 3.0 + LATE, delays


@WHOLE_SECONDS
def test_keepalive_moves_with_every_packet(broker, raw):
    """Keepalive 1 s: PINGREQs every 0.9 s keep the connection for 4 s; after the last one,
    it is closed 1.5 s later."""
    b = broker()
    c = raw(b)
    c.connect("pinger", keepalive=1)
    start = time.monotonic()
    last = start
    while time.monotonic() - start < 4.0:
        time.sleep(0.9)
        last = time.monotonic()
        c.send(mp.pingreq())
        assert c.recv_type(mp.PINGRESP, timeout=1)
    c.wait_closed(timeout=4)
    delay = time.monotonic() - last
    assert 1.5 <= delay <= 1.5 + LATE, delay
