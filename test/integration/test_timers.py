"""Timers fire at their deadline, measured from the event, never early and at most a few
hundred ms late: will delay, session expiry, message expiry and keepalive.

Each test starts its events at three different phases (0, 1/3 and 2/3 of a second apart), so
that a broker that rounds to a one-second tick, or stamps an event with the time its loop
turn began instead of the time the event arrived, falls outside the window for at least
one of them. Times are taken on the client side just before the triggering packet or close
is sent, so the broker can only see the event later, never earlier.

LATE is how late a timer may be: a few ms on an idle machine; 0.3 s (the issue's bound) leaves
room for a busy CI box. On a loaded machine the broker (or the test) can be kept off the CPU for
longer than that, so each bound also allows the time the kernel kept them waiting for a CPU
during the measurement (helpers.StolenTime: their schedstat run delay, zero on an idle machine),
and a measurement that is still out of bounds is repeated (up to 3 times, helpers.measure,
fresh clients on the same broker): a broker that rounds to a tick or stamps events late fails
every repetition, a machine that was busy for a moment does not.
"""

import threading
import time

import pytest

import mqttproto as mp
from helpers import StolenTime, measure
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

    def attempt(n):
        clients = []
        for i in range(len(PHASES)):
            c = raw(b, MQTT5)
            c.connect("dropper%d-%d" % (n, i), props=[(mp.P_SESSION_EXPIRY, 60)],
                      will={"topic": "will/%d/%d" % (n, i), "payload": b"gone",
                            "props": [(mp.P_WILL_DELAY, 3)]})
            clients.append(c)
        stolen = StolenTime(b)
        start = time.monotonic()
        dropped = {}
        for i, (c, phase) in enumerate(zip(clients, PHASES)):
            at(start, phase)
            dropped["will/%d/%d" % (n, i)] = time.monotonic()
            c.close()
        arrived = {}
        while len(arrived) < len(PHASES):
            m = sub.recv_publish(timeout=30)
            arrived[m.topic] = time.monotonic()
        delays = {t: arrived[t] - dropped[t] for t in dropped}
        early = {t: d for t, d in delays.items() if d < 3.0}
        assert not early, ("wills published before their 3 s delay", delays)
        allowed = 3.0 + LATE + stolen.seconds()
        if max(delays.values()) > allowed:
            return "delays %r, allowed up to %.2f s" % (delays, allowed)
        return None

    measure(attempt)


@WHOLE_SECONDS
def test_session_expiry_at_the_interval(broker, raw):
    """Expiry 2 s: a reconnect 1.8 s after the drop finds the session, 2.3 s after does not.

    A reconnect that the broker answered (CONNACK) less than 2 s after the drop must find the
    session whatever the load: missing then, it expired early. One answered later than that
    (the test was slow) proves nothing either way and repeats the measurement; so does a
    session still there at 2.3 s (late by 0.3 s: on an idle machine only a broker that
    rounds its timers does that; a busy one may, now and then)."""
    b = broker()

    def attempt(n):
        stolen = StolenTime(b)
        start = time.monotonic()
        dropped = {}
        for i, phase in enumerate(PHASES):
            for kind in ("kept", "gone"):
                c = raw(b, MQTT5)
                c.connect("%s%d-%d" % (kind, n, i), clean=True, props=[(mp.P_SESSION_EXPIRY, 2)])
                c.subscribe("keep/me", 1)
                at(start, phase)
                dropped[(kind, i)] = time.monotonic()
                c.close()
        events = sorted([(dropped[("kept", i)] + 1.8, "kept", i) for i in range(len(PHASES))] +
                        [(dropped[("gone", i)] + 2.3, "gone", i) for i in range(len(PHASES))])
        present, answered = {}, {}
        for when, kind, i in events:
            at(when, 0)
            c = raw(b, MQTT5)
            present[(kind, i)] = c.connect("%s%d-%d" % (kind, n, i), clean=False,
                                           props=[(mp.P_SESSION_EXPIRY, 2)]).session_present
            answered[(kind, i)] = time.monotonic() - dropped[(kind, i)]
            c.disconnect()
        for i in range(len(PHASES)):
            assert present[("kept", i)] or answered[("kept", i)] >= 2.0, (
                "session expired before 2 s", present, answered)
        late = [("kept", i) for i in range(len(PHASES)) if not present[("kept", i)]]
        if late:
            return "reconnects answered 2 s or more after the drop, too late to tell: %r %r" % (
                answered, present)
        still = [("gone", i) for i in range(len(PHASES)) if present[("gone", i)]]
        if still:
            return ("sessions still there 2.3 s after the drop: %r (answered %r; the broker "
                    "and the test waited %.2f s for a CPU)" % (still, answered, stolen.seconds()))
        return None

    measure(attempt)


@pytest.mark.mosquitto_deviates(
    "Mosquitto 2.0.11 sends no Message Expiry Interval when less than a second is left "
    "(MQTT-3.3.2-6 asks for the received value minus the time waited)")
def test_message_expiry_for_offline_session(broker, raw):
    """Expiry 2 s: a message queued for an offline session is delivered 1.7 s after it was
    published, with 1 s (rounded up) left in its expiry property, and not 2.3 s after. (A
    reconnect the broker answered 2 s or more after the publication, because the test was
    slow, cannot show the first: the measurement is repeated.)"""
    b = broker()

    def attempt(n):
        early_id, late_id, topic = "early%d" % n, "late%d" % n, "expiring/%d" % n
        for name in (early_id, late_id):
            s = raw(b, MQTT5)
            s.connect(name, props=[(mp.P_SESSION_EXPIRY, 60)])
            s.subscribe(topic, 1)
            s.disconnect()
        pub = raw(b, MQTT5)
        pub.connect("expiry-publisher%d" % n)
        published = time.monotonic()
        pub.publish(topic, b"short-lived", qos=1, props=[(mp.P_MESSAGE_EXPIRY, 2)])

        at(published, 1.7)
        early = raw(b, MQTT5)
        assert early.connect(early_id, clean=False,
                             props=[(mp.P_SESSION_EXPIRY, 60)]).session_present
        answered = time.monotonic() - published
        try:
            m = early.recv_publish(timeout=2)
        except mp.PacketTimeout:
            if answered >= 2.0:
                return "the reconnect was answered %.2f s after the publication" % answered
            raise AssertionError("message expired %.2f s after the publication, before its "
                                 "2 s" % answered) from None
        assert m.payload == b"short-lived"
        assert m.props.get(mp.P_MESSAGE_EXPIRY) == 1, m.props

        at(published, 2.3)
        late = raw(b, MQTT5)
        assert late.connect(late_id, clean=False,
                            props=[(mp.P_SESSION_EXPIRY, 60)]).session_present
        late.expect_no_packet(0.5)
        return None

    measure(attempt)


@WHOLE_SECONDS
def test_keepalive_disconnects_at_one_and_a_half_times(broker, raw):
    """Keepalive 2 s: a silent client is disconnected 3 s after its last packet."""
    b = broker()

    def attempt(n):
        stolen = StolenTime(b)
        start = time.monotonic()
        clients, sent, closed = [], [], {}
        for i, phase in enumerate(PHASES):
            at(start, phase)
            c = raw(b)
            sent.append(time.monotonic())
            c.connect("silent%d-%d" % (n, i), keepalive=2)
            clients.append(c)

        def wait(i):
            clients[i].wait_closed(timeout=30)
            closed[i] = time.monotonic()

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(clients))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(closed) == len(clients), "a silent client was still connected after 30 s"
        delays = [closed[i] - sent[i] for i in range(len(clients))]
        assert min(delays) >= 3.0, ("disconnected before 1.5 x the keepalive", delays)
        allowed = 3.0 + LATE + stolen.seconds()
        if max(delays) > allowed:
            return "delays %r, allowed up to %.2f s" % (delays, allowed)
        return None

    measure(attempt)


@WHOLE_SECONDS
def test_keepalive_moves_with_every_packet(broker, raw):
    """Keepalive 1 s: PINGREQs every 0.9 s keep the connection for 4 s; after the last one,
    it is closed 1.5 s later. (A test kept from sending for 0.6 s by a loaded machine lets the
    deadline pass: the measurement is then repeated on a new connection.)"""
    b = broker()

    def attempt(n):
        stolen = StolenTime(b)
        c = raw(b)
        c.connect("pinger%d" % n, keepalive=1)
        start = time.monotonic()
        last = start
        while time.monotonic() - start < 4.0:
            time.sleep(0.9)
            gap = time.monotonic() - last
            last = time.monotonic()
            try:
                c.send(mp.pingreq())
                c.recv_type(mp.PINGRESP, timeout=5)
            except (OSError, mp.ConnectionClosed, mp.PacketTimeout) as e:
                return "connection lost at %.2f s (%r), %.2f s after the previous PINGREQ; " \
                    "the broker and the test waited %.2f s for a CPU" % (
                        last - start, e, gap, stolen.seconds())
        stolen = StolenTime(b)
        c.wait_closed(timeout=30)
        delay = time.monotonic() - last
        assert delay >= 1.5, delay
        allowed = 1.5 + LATE + stolen.seconds()
        if delay > allowed:
            return "closed %.2f s after the last PINGREQ, allowed up to %.2f s" % (delay, allowed)
        return None

    measure(attempt)
