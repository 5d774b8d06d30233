"""What a resync costs (docs/mqtt-st-protocol.md 7.3): a line of five brokers, QoS 1 load from
both ends (about 100 msg/s each, going on throughout), the middle link cut for a few seconds
and healed. The messages the
resync sends (all brokers' $SYS/broker/stp/messages/resynced; older builds count
messages/replayed, so the same test measures them) are compared with the messages the far
sides actually lacked when the link healed; the waste is every copy a broker received and
dropped as a duplicate meanwhile (messages published after the heal while the walk runs are
resent too, but they are not extra: they go with the walk, in order). The messages are alike (a topic and a short
numbered payload), so the ratio of messages is the ratio of bytes (the summaries, a line of
text per origin run, are left out).
"""

import time

from helpers import wait_until
from peer_net import Collector, NumberedStream, cluster, peer_support  # noqa: F401 (fixtures)


def counter(c, i, name):
    value = c.stp(i, fresh=True).get(name)
    return int(value) if value not in (None, "") else None


def total(c, name):
    return sum(counter(c, i, name) or 0 for i in range(c.n))


def resent_total(c):
    """Messages sent again, as this build counts them: resynced (now) or replayed (before)."""
    total = 0
    for i in range(c.n):
        value = counter(c, i, "messages/resynced")
        if value is None:
            value = counter(c, i, "messages/replayed")
        total += value or 0
    return total


def test_one_flap_resyncs_only_what_the_far_side_missed(cluster):
    c = cluster(5, [(0, 1), (1, 2), (2, 3), (3, 4)], extra_lines=["max_queued_messages 100000"])
    c.wait_tree(timeout=20)
    with Collector([c.brokers[1], c.brokers[2]], "cost/#", qos=1) as col:
        left = NumberedStream(c.client(0, version=5), "cost/left", qos=1, tag="L", interval=0.01)
        right = NumberedStream(c.client(4, version=5), "cost/right", qos=1, tag="R",
                               interval=0.01)
        for s in (left, right):
            s.start()
            s.wait_sent(50)
        c.cut(1, 2, "reset")
        wait_until(lambda: c.snapshot().root_of(2) != c.snapshot().root_of(1), timeout=15,
                   what="two trees")
        time.sleep(3)
        # what each side had when the link heals; the load goes on
        before = resent_total(c)
        dups_before = total(c, "messages/duplicates")
        had_left, had_right = set(col.payloads(0)), set(col.payloads(1))
        sent_left, sent_right = list(left.sent), list(right.sent)
        missed = (len([p for p in sent_right if p not in had_left])
                  + len([p for p in sent_left if p not in had_right]))
        resyncs = counter(c, 1, "messages/resynced") is not None  # else a replaying build
        c.heal(1, 2)
        c.wait_tree(timeout=20)
        time.sleep(2.0)
        sent = left.stop() + right.stop()
        if resyncs:
            col.assert_exactly_once(sent, timeout=30, quiet=1.0)
        time.sleep(3.0)  # $SYS counters are published every second; a replay ends by then
        resent = resent_total(c) - before
        wasted = total(c, "messages/duplicates") - dups_before
        arrived = (len([p for p in sent if p.startswith(b"R-") and p in set(col.payloads(0))])
                   + len([p for p in sent if p.startswith(b"L-") and p in set(col.payloads(1))]))
    # What the links carried to make up for the flap: the missed messages themselves plus
    # every copy a broker received and dropped as a duplicate (the resync's, the replay's and
    # the settling period's alike); the live messages a resync carries are not extra.
    ratio = (missed + wasted) / missed if missed else float("inf")
    print("one flap (%s): the far sides missed %d messages; %d sent again, %d of them "
          "duplicates where they arrived: %.3f x what was missed; %d of %d sent arrived on "
          "the far side" % ("resync" if resyncs else "replay", missed, resent, wasted, ratio,
                            arrived, len(sent)))
    assert missed > 100, missed
    assert resyncs, "this build replays instead of resyncing (numbers above)"
    assert ratio <= 1.1, "%d duplicates for %d missed" % (wasted, missed)
