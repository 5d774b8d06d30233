"""Retained clears (an empty retained PUBLISH) on a broker with MQTT-ST enabled.

A broker that peers remembers each clear for an hour as a tombstone, so that a partition's
older copy of the topic cannot come back when it heals (docs/mqtt-st-protocol.md 7.5). Issue
21 found that a tombstone stored a second time (the same topic cleared twice by a client, or
a clear offered by a neighbour, which went through the check twice) linked the tombstone table
into a cycle: the next lookup in that bucket, the retained offer to a new neighbour, the
hourly sweep and shutdown then never ended (100 % CPU, SIGTERM ignored), or read freed memory.

Each test here drives one of those paths and then proves the broker still serves: many more
retained publishes acknowledged (each lookup walks the tombstone table), a new neighbour
synchronised, and a clean exit on SIGTERM within the stop deadline (the fixture's teardown
fails a broker that hangs, crashes or prints a sanitizer report, leaks included).
"""

import time

import pytest

from helpers import HOST, PahoClient, free_port, wait_until
from test_peer_ops import FAST, peer_broker, stp_topics, wait_link

pytestmark = pytest.mark.arbor_only

# With 300 other topics every bucket of the tombstone table is looked up many times over.
OTHER_TOPICS = 300


def clear(client, topic):
    client.publish(topic, b"", qos=1, retain=True)


def publish_retained_topics(b, prefix, count=OTHER_TOPICS):
    """count retained QoS 1 publishes on distinct topics, each acknowledged within the client's
    deadline (a broker spinning in a cyclic table answers none after the first few)."""
    c = PahoClient(b, client_id="retained-writer-%d" % time.monotonic_ns(), timeout=10.0)
    try:
        for i in range(count):
            c.publish("%s/%d" % (prefix, i), b"v%d" % i, qos=1, retain=True)
    finally:
        c.close()


def retained_count(b, topic_filter, expected, timeout=10.0):
    """Waits until a new subscriber on topic_filter gets `expected` retained messages."""
    def count():
        c = PahoClient(b, client_id="retained-reader-%d" % time.monotonic_ns())
        try:
            c.subscribe(topic_filter, qos=1)
            seen = set()
            while True:
                try:
                    m = c.get_message(timeout=0.5)
                except AssertionError:
                    return len(seen)
                if m.retain:
                    seen.add(m.topic)
        finally:
            c.close()
    wait_until(lambda: count() == expected, timeout=timeout, interval=0.2,
               what="%d retained messages under %s" % (expected, topic_filter))


def stop_cleanly(b):
    rc = b.stop()
    assert rc == 0, "broker exited with %r on SIGTERM (a hang shows as 'hung'):\n%s" % (
        rc, b.log_text()[-3000:])


def stp_counter(b, name):
    return int(stp_topics(b).get(name, "0") or 0)


@pytest.mark.parametrize("peering", ["peer_secret arbor-clear-test-0123456789",
                                     "peer_allow_unauthenticated true"])
def test_client_clearing_a_topic_twice_leaves_the_broker_serving(broker, peering):
    """The reported hang: peering enabled (no link needed), one client clears a topic twice,
    then publishes other retained topics: every publish is acknowledged, and SIGTERM stops
    the broker. Several topics are cleared twice so that shutdown walks several tombstones."""
    port = free_port()
    b = broker("peer_identity %s:%d" % (HOST, port), peering, port=port)
    c = PahoClient(b, client_id="clearer", timeout=10.0)
    for topic in ("clears/a", "clears/b", "clears/c"):
        c.publish(topic, b"value", qos=1, retain=True)
        clear(c, topic)
        clear(c, topic)
        clear(c, topic)
    c.close()
    publish_retained_topics(b, "after")
    retained_count(b, "after/#", OTHER_TOPICS)
    retained_count(b, "clears/#", 0)
    stop_cleanly(b)


def test_clear_offered_to_a_peer_that_joins_later(broker):
    """A holds one clear (a tombstone) when B first links to it: A offers B the clear with the
    retained flag (`r`), B takes it once. B then serves many retained publishes, keeps the
    topic cleared against an older value, and stops on SIGTERM; so does A."""
    pa, pb = free_port(), free_port()
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    ca = PahoClient(a, client_id="a-writer", timeout=10.0)
    ca.publish("sync/kept", b"kept", qos=1, retain=True)
    ca.publish("sync/cleared", b"old", qos=1, retain=True)
    clear(ca, "sync/cleared")
    ca.close()
    b = peer_broker(broker, pb, 50)
    wait_link(a, b, timeout=15.0)
    # Both the retained value and the clear were accepted by B (the clear counts too: B held
    # nothing for that topic, so the clear is news and is remembered as a tombstone).
    wait_until(lambda: stp_counter(b, "messages/received") >= 2, timeout=15.0, interval=0.3,
               what="B received A's retained offer (value and clear)")
    retained_count(b, "sync/#", 1)
    publish_retained_topics(b, "on-b")
    retained_count(b, "on-b/#", OTHER_TOPICS)
    retained_count(a, "on-b/#", OTHER_TOPICS, timeout=20.0)
    stop_cleanly(b)
    stop_cleanly(a)


def test_topic_cleared_twice_on_a_linked_broker(broker):
    """Two linked brokers, a client clears one topic twice on A: A keeps serving (its own
    tombstone stored twice), B takes both clears as flooded messages, and both stop cleanly
    (B crashed on SIGTERM before the fix)."""
    pa, pb = free_port(), free_port()
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    b = peer_broker(broker, pb, 50)
    wait_link(a, b, timeout=15.0)
    ca = PahoClient(a, client_id="a-writer", timeout=10.0)
    ca.publish("twice/t", b"value", qos=1, retain=True)
    wait_until(lambda: stp_counter(b, "messages/received") >= 1, timeout=15.0, interval=0.3,
               what="the retained value reached B")
    clear(ca, "twice/t")
    clear(ca, "twice/t")
    ca.close()
    wait_until(lambda: stp_counter(b, "messages/received") >= 3, timeout=15.0, interval=0.3,
               what="both clears reached B")
    retained_count(b, "twice/#", 0)
    publish_retained_topics(a, "on-a")
    retained_count(b, "on-a/#", OTHER_TOPICS, timeout=20.0)
    stop_cleanly(a)
    stop_cleanly(b)


def test_clear_offered_again_on_every_rejoin(broker):
    """Clear, rejoin: B learns A's clear on first contact; B restarts twice, and on each new
    link A offers its tombstone again and B takes it. The topic stays cleared everywhere, both
    keep serving retained publishes, and both stop cleanly."""
    pa, pb = free_port(), free_port()
    a = peer_broker(broker, pa, 100, "peer %s:%d" % (HOST, pb))
    b = peer_broker(broker, pb, 50)
    wait_link(a, b, timeout=15.0)
    ca = PahoClient(a, client_id="a-writer", timeout=10.0)
    ca.publish("rejoin/t", b"first", qos=1, retain=True)
    clear(ca, "rejoin/t")
    ca.close()
    wait_until(lambda: stp_counter(b, "messages/received") >= 2, timeout=15.0, interval=0.3,
               what="value and clear reached B")
    for _ in range(2):
        b.restart()
        wait_link(a, b, timeout=15.0)
        wait_until(lambda: stp_counter(b, "messages/received") >= 1, timeout=15.0,
                   interval=0.3, what="the clear offered to the restarted B")
        retained_count(b, "rejoin/#", 0)
    publish_retained_topics(b, "rejoin-more", count=100)
    retained_count(a, "rejoin-more/#", 100, timeout=20.0)
    retained_count(a, "rejoin/#", 0)
    stop_cleanly(b)
    stop_cleanly(a)
