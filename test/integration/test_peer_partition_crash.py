"""Store and forward across a crash (docs/mqtt-st-protocol.md 7.6): the broker cut off by a
partition is killed -9 in the middle of it and started again, with durable persistence.
In a file of its own so that it runs beside test_peer_partition.py (pytest-xdist hands out
whole files).

ARBOR_PARTITION_SECONDS (default 120) sets the partition's length, as there.
"""

import time

import pytest

from helpers import wait_until
from peer_net import Collector, NumberedStream, cluster, peer_support  # noqa: F401 (fixtures)
from test_peer_partition import (ACK_TIMEOUT, BIG_QUEUES, PARTITION_SECONDS, assert_in_order,
                                 publisher, stp_number, stream_pair, unique)


@pytest.mark.timeout(PARTITION_SECONDS * 2 + 300)
def test_isolated_broker_killed_during_the_partition_loses_nothing(cluster, tmp_path):
    """Durable persistence (docs/mqtt-st-protocol.md 7.6): the broker cut off is killed -9 in
    the middle of the partition and started again. What it acknowledged before the kill is in
    its log and reaches the other side once the partition heals; it goes on with the same
    stream, so nothing arrives twice; a persistent session on it that was offline throughout
    gets everything published anywhere, exactly once and in each publisher's order."""
    c = cluster(3, [(0, 1), (1, 2)], extra_lines=BIG_QUEUES + [
        "persistence true", "persistence_location %s/" % tmp_path,
        "persistence_file arbor-{index}.db", "persistence_mode durable"])
    c.wait_tree(timeout=15)
    topic = unique("kill")
    sub = c.client(2, client_id="offline-sub", clean=False)
    sub.subscribe(topic + "/#", 2)
    sub.close()
    with Collector(c.brokers[:2], topic + "/#", qos=2) as col:
        far = [NumberedStream(publisher(c, 0), topic + "/a1", qos=1, tag="a1",
                              interval=0.01).start()]
        before = stream_pair(c, 2, topic, "b")
        for s in before:
            s.start()
        for s in before + far:
            s.wait_sent(20)
        c.cut(1, 2, "reset")
        wait_until(lambda: c.snapshot().root_of(2) == c.identity(2), timeout=15,
                   what="broker 2 on its own")
        time.sleep(PARTITION_SECONDS / 2)  # the first half of the partition
        # The isolated broker dies with its publishers' last messages acknowledged.
        sent_before = [s.stop() for s in before]
        c.kill(2)
        c.restart(2)
        c.brokers[2].wait_log("goes on with its stream", timeout=60)
        after = stream_pair(c, 2, topic, "c")
        for s in after:
            s.start()
        for s in after:
            s.wait_sent(20)
        time.sleep(PARTITION_SECONDS / 2)  # the second half
        c.heal(1, 2)
        healed = time.monotonic()
        c.wait_tree(timeout=30)
        for s in after + far:
            s.wait_sent(len(s.sent) + 20, timeout=30 + ACK_TIMEOUT)
        sent = [p for batch in sent_before for p in batch]
        sent += [p for s in after + far for p in s.stop()]
        print("published in all: %d (%d before the kill on broker 2)" % (
            len(sent), sum(len(b) for b in sent_before)))
        col.assert_exactly_once(sent, timeout=60 + PARTITION_SECONDS / 4, quiet=1.0)
        print("every subscriber had everything %.1f s after the heal; slowest publish %.2f s" % (
            time.monotonic() - healed - 1.0, max(s.slowest for s in before + after + far)))
        assert_in_order(col, before + after + far)
    sub = c.client(2, client_id="offline-sub", clean=False)
    got = []
    deadline = time.monotonic() + 60 + PARTITION_SECONDS / 4
    while len(got) < len(sent) and time.monotonic() < deadline:
        try:
            got.append(sub.messages.get(timeout=1.0).payload)
        except Exception:
            pass
    sub.expect_no_message(1.0)
    missing = sorted(set(sent) - set(got))
    assert not missing and len(got) == len(sent), "the offline session lacks %d of %d: %r" % (
        len(missing), len(sent), missing[:10] + missing[-10:])
    for s in before + after + far:  # per publisher in order, per QoS (as handed over)
        assert [p for p in got if p.startswith(s.tag.encode() + b"-")] == s.sent, s.tag
    assert [stp_number(c, i, "messages/lost") for i in range(3)] == [0, 0, 0]
