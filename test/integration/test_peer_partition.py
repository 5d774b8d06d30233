"""Store and forward between brokers (docs/mqtt-st-protocol.md 7.3): the message log and the
resync of a link that starts forwarding.

A line of three brokers, the middle link cut (reset, and black-holed) for
ARBOR_PARTITION_SECONDS (default 120; `make partition-soak` runs 300 and 1800) while QoS 1
and QoS 2 publishers on both sides send about 100 messages a second each: after the heal every
subscriber on every broker has every message exactly once, in each publisher's order, and no
broker counts a loss. A partition longer than the log: the loss is counted and logged with
the range, and what was still in the log arrives, in order.
"""

import os
import re
import time
import uuid

import pytest

from helpers import wait_until
from peer_net import Collector, NumberedStream, cluster, peer_support  # noqa: F401 (fixtures)

PARTITION_SECONDS = float(os.environ.get("ARBOR_PARTITION_SECONDS", "120"))
# How long a publisher waits for an acknowledgement, whatever the partition's length: arbor
# holds a publisher for max_publisher_hold (1 s) to 2 s at most, and the slowest publish
# measured was 1.2 s (three 300 s tests side by side on 2 loaded cores; each test prints its
# own). The 30-minute soak once waited over 5 s here, and later the proxy's heal timed out:
# the test process itself stopped for seconds at a time, in full garbage collections over the
# paho Properties (6 KB each) its subscribers kept for every message, and the publishers
# stopped waiting at all after 65535 messages (the acknowledgement of an earlier publish
# with the same mid answered for the new one). Both are fixed in helpers.py and peer_net.py.
ACK_TIMEOUT = 15.0


def publisher(c, i):
    """A paho client on broker i that waits ACK_TIMEOUT for each acknowledgement."""
    client = c.client(i, version=5)
    client.timeout = ACK_TIMEOUT
    return client


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def assert_in_order(col, streams):
    """Per subscriber, each publisher's messages arrive in the order they were sent."""
    for k in range(len(col.clients)):
        got = col.payloads(k)
        for s in streams:
            mine = [p for p in got if p.startswith(s.tag.encode() + b"-")]
            assert mine == s.sent, "subscriber %d: %s out of order (first differences: %r)" % (
                k, s.tag, [(a, b) for a, b in zip(mine, s.sent) if a != b][:5])


def stream_pair(c, i, topic, tag):
    """A QoS 1 and a QoS 2 publisher on broker i (tags <tag>1, <tag>2), about 100 msg/s each."""
    return [NumberedStream(publisher(c, i), "%s/%s%d" % (topic, tag, q), qos=q,
                           tag="%s%d" % (tag, q), interval=0.01) for q in (1, 2)]


def stp_number(c, i, name):
    value = c.stp(i, fresh=True).get(name)
    return int(value) if value not in (None, "") else None


# The backlog reaches the subscribers in a burst when the partition heals: their queues must
# hold it (as for any slow subscriber, arbor.conf(5) max_queued_messages), or the broker drops
# what does not fit and counts it in $SYS/broker/publish/messages/dropped.
BIG_QUEUES = ["max_queued_messages 1000000"]


@pytest.mark.timeout(PARTITION_SECONDS * 2 + 300)
@pytest.mark.parametrize("mode", ["reset", "blackhole"])
def test_partition_heals_every_message_once_in_order(cluster, mode):
    c = cluster(3, [(0, 1), (1, 2)], extra_lines=BIG_QUEUES)
    c.wait_tree(timeout=15)
    topic = unique("part")
    with Collector(c.brokers, topic + "/#", qos=2) as col:
        streams = stream_pair(c, 0, topic, "a") + stream_pair(c, 2, topic, "b")
        for s in streams:
            s.start()
        for s in streams:
            s.wait_sent(20)
        c.cut(1, 2, mode)
        wait_until(lambda: c.snapshot().root_of(2) == c.identity(2), timeout=15,
                   what="broker 2 on its own")
        cut_at = [len(s.sent) for s in streams]
        time.sleep(PARTITION_SECONDS)  # the partition itself: its length is the test
        during = [len(s.sent) - n for s, n in zip(streams, cut_at)]
        c.heal(1, 2)
        healed = time.monotonic()
        c.wait_tree(timeout=30)
        for s in streams:
            s.wait_sent(len(s.sent) + 20, timeout=30 + ACK_TIMEOUT)
        sent = [p for s in streams for p in s.stop()]
        print("published during the %.0f s partition (per stream): %s; in all %d" % (
            PARTITION_SECONDS, during, len(sent)))
        col.assert_exactly_once(sent, timeout=60 + PARTITION_SECONDS / 4, quiet=1.0)
        print("every subscriber had everything %.1f s after the heal; slowest publish %.2f s" % (
            time.monotonic() - healed - 1.0, max(s.slowest for s in streams)))
        assert_in_order(col, streams)
    resynced = [stp_number(c, i, "messages/resynced") for i in range(3)]
    print("resynced per broker:", resynced)
    assert [stp_number(c, i, "messages/lost") for i in range(3)] == [0, 0, 0]
    assert resynced[1] >= sum(during[:2]) and resynced[2] >= sum(during[2:]), resynced


def test_partition_longer_than_the_log_reports_the_loss(cluster):
    c = cluster(2, [(0, 1)], extra_lines=["peer_log_max_messages 300"])
    c.wait_tree(timeout=15)
    topic = unique("over")
    with Collector([c.brokers[1]], topic + "/#", qos=1) as col:
        c.cut(0, 1, "reset")
        wait_until(lambda: c.snapshot().root_of(1) == c.identity(1), timeout=15,
                   what="broker 1 on its own")
        pub = c.client(0, version=5)
        for n in range(500):
            pub.publish(topic + "/x", b"m%d" % n, qos=1)
        c.heal(0, 1)
        c.wait_tree(timeout=15)
        kept = [b"m%d" % n for n in range(200, 500)]
        col.assert_exactly_once(kept, timeout=30, quiet=1.0)
        assert col.payloads(0) == kept  # in order, nothing older
    wait_until(lambda: stp_number(c, 1, "messages/lost") == 200, timeout=10,
               what="broker 1 counts 200 messages lost")
    line = re.search(r"Warning: MQTT-ST: 200 messages of (\S+) \(sequence 1-200\) are lost: "
                     r"they left (\S+)'s log before they could be sent here\.",
                     c.brokers[1].log_text())
    assert line and line.group(1) == c.identity(0), c.brokers[1].log_text()[-3000:]
    assert stp_number(c, 0, "log/messages") == 300
    assert stp_number(c, 0, "log/evicted") == 200


def test_persistent_session_on_the_cut_off_broker_gets_the_partition_once(cluster):
    """A subscriber with a persistent session on the broker that is cut off, offline during
    the partition: once the partition heals and it comes back, it has what was published on
    the other side meanwhile, exactly once and in order."""
    c = cluster(2, [(0, 1)], extra_lines=BIG_QUEUES)
    c.wait_tree(timeout=15)
    topic = unique("sess")
    sub = c.client(1, client_id="durable-sub", clean=False)
    sub.subscribe(topic + "/#", 1)
    sub.close()
    c.cut(0, 1, "reset")
    wait_until(lambda: c.snapshot().root_of(1) == c.identity(1), timeout=15,
               what="broker 1 on its own")
    pub = c.client(0, version=5)
    for n in range(300):
        pub.publish(topic + "/x", b"p%d" % n, qos=1 + n % 2)
    c.heal(0, 1)
    c.wait_tree(timeout=15)
    wait_until(lambda: (stp_number(c, 1, "messages/received") or 0) >= 300, timeout=30,
               what="the partition's messages resynced to broker 1")
    sub = c.client(1, client_id="durable-sub", clean=False)
    got = [m.payload for m in sub.get_messages(300, 30)]
    sub.expect_no_message(1.0)
    # per QoS in order (a QoS 2 message is handed over at the end of its handshake)
    for q in (1, 2):
        assert [p for p in got if int(p[1:]) % 2 == q - 1] == \
            [b"p%d" % n for n in range(300) if n % 2 == q - 1]

