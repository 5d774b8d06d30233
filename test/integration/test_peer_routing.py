"""Interest routing, step 3 (docs/interest-routing-design.md sections 4-6): a message goes on
a peer link only if the far side's announced interest matches it; a QoS 1/2 number left out
is told in a skip notice ($MQTT-ST/link/skip), and a link whose far side gains carried
interest after a tree change resyncs, so nothing a subscriber wanted is lost.

- In a tree of 5 and a random graph of 10 (real brokers, every link's connections through
  proxies that count bytes): subscribers on some brokers, with wildcards and filters that
  overlap across clients and brokers, an unsubscribe, a persistent session that is offline
  while messages are published, at QoS 0/1/2; publishers on every broker. Each subscriber
  gets exactly what full replication gives it (every matching message, once, in each
  publisher's order), and no byte of a topic nobody subscribes to crosses any link.
- The tree moves interest: in a triangle the subscriber's broker loses its direct link to the
  publisher's while a QoS 1 stream runs; the path through the third broker (which was told
  skips only) takes over, and every message arrives once.
- A will without retain reaches a subscriber three links away and nowhere else.
- 4,200 wanted messages between unwanted ones on one QoS 1 stream leave no gap at the
  receiver (more than 4096 gaps would be given up as lost).
- In the random graph, with subscribers on two brokers and QoS 1/2 streams on wanted and
  unwanted topics, tree links are cut and healed one after the other and a broker in between
  is killed and restarted: every message a subscriber wants arrives once, none is lost.

Before counting bytes on the wire a test waits until the subscriptions are in effect and
every link's interest is known (a link whose interest is unknown gets everything).
"""

import random
import threading
import time
import uuid

import pytest

import mqttproto as mp
from helpers import PahoClient, wait_until
from peer_net import (NumberedStream, clear_delays, components, line, random_graph,
                      read_stp_once)
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only

UNWANTED = b"nobody/wants"      # topics below it: no subscriber anywhere


def topic_matches(filter_, topic):
    fl, tl = filter_.split("/"), topic.split("/")
    for k, f in enumerate(fl):
        if f == "#":
            return True
        if k >= len(tl) or (f != "+" and f != tl[k]):
            return False
    return len(fl) == len(tl)


class Subscriber:
    """A client on one broker whose messages are kept in arrival order."""

    def __init__(self, c, i, filters, qos, client_id=None, clean=True):
        self.c, self.i, self.filters, self.qos = c, i, list(filters), qos
        self.client_id = client_id or "s%d-%s" % (i, uuid.uuid4().hex[:6])
        self.lock = threading.Lock()
        self.got = []
        self.clean = clean
        self.connect()

    def connect(self):
        self.client = PahoClient(self.c.brokers[self.i], client_id=self.client_id, version=4,
                                 clean=self.clean, sink=self._record)
        if self.clean or not self.client.session_present:
            for f in self.filters:
                self.client.subscribe(f, self.qos)

    def _record(self, m):
        with self.lock:
            self.got.append((m.topic, m.payload))

    def received(self):
        with self.lock:
            return list(self.got)


def in_effect(c, subs):
    for s in subs:
        for f in s.filters:
            c.wait_interest(f, [s.i], timeout=30, exact=True)


def publish_all(c, topics, per_topic, tag):
    """From a client on every broker: per_topic messages on each topic at QoS 0, 1 and 2
    (payload "<tag> b<i> <topic> q<qos> <n>"); returns [(topic, payload, qos)] in order."""
    sent = []
    for i in range(len(c.brokers)):
        pub = c.client(i, version=5)
        for n in range(per_topic):
            for t in topics:
                for qos in (0, 1, 2):
                    payload = ("%s b%d %s q%d %d" % (tag, i, t, qos, n)).encode()
                    pub.publish(t, payload, qos=qos)
                    sent.append((t, payload, qos))
        pub.close()
    return sent


def expected_for(sub, sent):
    return [(t, p) for t, p, _ in sent if any(topic_matches(f, t) for f in sub.filters)]


def check_exactly(sub, want, timeout=30.0):
    """sub got every message of want once, nothing else, in each publisher's order."""
    want_set = set(want)
    wait_until(lambda: want_set <= set(sub.received()), timeout=timeout, interval=0.1,
               what="b%d %s: %d of %d" % (sub.i, sub.filters,
                                          len(want_set & set(sub.received())), len(want)))
    time.sleep(0.5)          # anything extra or duplicated would come now
    got = sub.received()
    assert len(got) == len(set(got)), "b%d %s: duplicates %s" % (
        sub.i, sub.filters, [g for g in got if got.count(g) > 1][:5])
    extra = [g for g in got if g not in want_set]
    assert not extra, "b%d %s: not subscribed %s" % (sub.i, sub.filters, extra[:5])
    # per publisher (and QoS stream): the order it published in
    for origin in {p.split()[1] for _, p in want}:
        for q in (b"q0", b"q1", b"q2"):
            mine = [g for g in got if g[1].split()[1] == origin and g[1].split()[3] == q]
            order = [g for g in want if g in mine]
            assert mine == order, "b%d: %s %s out of order" % (sub.i, origin, q)


def watch_unwanted(c):
    for p in c.proxies.values():
        p.watch_bytes(UNWANTED)


def unwanted_crossings(c):
    return {name: p.seen_bytes(UNWANTED) for name, p in c.proxies.items()
            if p.seen_bytes(UNWANTED)}


def tree_events(c):
    """What each broker logged about its links and the tree (to explain a settling)."""
    out = []
    for b in c.brokers:
        out += ["b%d %s" % (b.index, line) for line in b.log_text().splitlines()
                if "MQTT-ST:" in line and ("is now" in line or "topology" in line or
                                           "down" in line or " up " in line)]
    return "\n".join(out)


def sys_total(c, key):
    return sum(int(read_stp_once(b).get(key, "0")) for b in c.brokers)


SHAPES = {
    "tree5": (line(5), [300, 100, 500, 200, 400], {(0, 1): 2, (1, 2): 5, (2, 3): 3, (3, 4): 6}),
    "random10": None,
}


def make(cluster, shape):
    if shape == "tree5":
        edges, caps, delays = SHAPES["tree5"]
        return cluster(5, edges, caps, delays=delays)
    edges = random_graph(10, 3, seed=2024)
    caps = [100 * k for k in range(1, 11)]
    return cluster(10, edges, caps, delays=clear_delays(10, edges, caps, seed=2024))


@pytest.mark.parametrize("shape", ["tree5", "random10"])
def test_subscribers_get_what_full_replication_gives_and_nothing_else_crosses(cluster, shape):
    c = make(cluster, shape)
    n = len(c.brokers)
    c.wait_tree(timeout=40)
    watch_unwanted(c)
    far, mid = n - 1, n // 2
    subs = [
        Subscriber(c, far, ["site/+/temp"], 1),
        Subscriber(c, mid, ["site/a/#"], 2),            # overlaps site/+/temp at site/a/temp
        Subscriber(c, 0, ["site/b/temp", "site/+/hum"], 0),
        Subscriber(c, far, ["site/#"], 2),               # covers the one beside it
        Subscriber(c, 1, ["site/c/#"], 1),               # unsubscribes below
    ]
    offline = Subscriber(c, mid - 1, ["site/a/temp"], 1, client_id="offline-%s" %
                         uuid.uuid4().hex[:6], clean=False)
    in_effect(c, subs + [offline])
    offline.client.close()
    gone = subs.pop()
    gone.client.unsubscribe("site/c/#")
    topics = ["site/a/temp", "site/b/temp", "site/c/temp", "site/a/hum", "site/c/x/y",
              UNWANTED.decode() + "/1", UNWANTED.decode() + "/2/deep"]
    sent = publish_all(c, topics, 2, "m")
    for s in subs:
        check_exactly(s, expected_for(s, sent))
    assert gone.received() == [], gone.received()[:5]
    offline.connect()                                   # its queue: QoS 1 and 2 only
    check_exactly(offline, [(t, p) for t, p, q in sent
                            if q > 0 and topic_matches("site/a/temp", t)])
    assert unwanted_crossings(c) == {}, tree_events(c)
    # the skips were told (a number left out is not a gap), and nothing was reported lost
    assert sys_total(c, "messages/skipped") > 0
    assert sys_total(c, "messages/lost") == 0


def test_the_tree_moves_interest_and_a_stream_loses_nothing(cluster):
    # 0 (root) reaches 2 directly (3 ms) and 1 directly (3 ms); 1 - 2 (15 ms) is blocked.
    # The subscriber is on 2, so 0 tells 1 skips only. When 0 - 2 is cut, 2 is reached
    # through 1: 1's announcement to 0 gains 2's filter, carried, and 0 resyncs that link.
    c = cluster(3, [(0, 1), (0, 2), (1, 2)], [300, 200, 100],
                delays={(0, 1): 3, (0, 2): 3, (1, 2): 15})
    snap = c.wait_tree(timeout=30)
    assert snap.forwarding_edges() == [(0, 1), (0, 2)], snap.describe()
    sub = Subscriber(c, 2, ["t/#"], 1)
    c.wait_interest("t/#", [2], timeout=30)
    stream = NumberedStream(c.client(0, version=5), "t/x", qos=1, tag="s",
                            interval=0.005).start()
    other = NumberedStream(c.client(0, version=5), "u/x", qos=1, tag="u",
                           interval=0.005).start()
    stream.wait_sent(200, timeout=30)
    c.cut(0, 2)
    snap = c.wait_tree(timeout=30)
    assert (0, 1) in snap.forwarding_edges() and (1, 2) in snap.forwarding_edges()
    count = len(stream.sent)
    stream.wait_sent(count + 200, timeout=30)
    sent = stream.stop()
    other.stop()
    want = [("t/x", p) for p in sent]
    wait_until(lambda: set(want) <= set(sub.received()), timeout=30, interval=0.1,
               what="%d of %d" % (len(set(want) & set(sub.received())), len(want)))
    time.sleep(0.5)
    got = sub.received()
    assert len(got) == len(set(got)) == len(want), (len(got), len(set(got)), len(want))
    assert sys_total(c, "messages/lost") == 0


def test_a_will_without_retain_goes_only_where_it_is_wanted(cluster):
    c = cluster(4, line(4), [400, 300, 200, 100], delays={(0, 1): 2, (1, 2): 2, (2, 3): 2})
    c.wait_tree(timeout=30)
    watch_unwanted(c)
    sub = Subscriber(c, 3, ["will/#"], 2)
    c.wait_interest("will/#", [3], timeout=30, exact=True)
    for topic, payload in (("will/gone", b"bye"), (UNWANTED.decode() + "/will", b"x")):
        raw = mp.RawClient(c.brokers[0].host, c.brokers[0].port, version=mp.MQTT5)
        raw.connect("will-" + uuid.uuid4().hex[:8],
                    will={"topic": topic, "payload": payload, "qos": 1})
        raw.close()                                     # no DISCONNECT: the will is sent
    wait_until(lambda: sub.received() == [("will/gone", b"bye")], timeout=20, interval=0.1,
               what="the will on broker 3")
    time.sleep(0.5)
    assert sub.received() == [("will/gone", b"bye")]
    assert unwanted_crossings(c) == {}, "\n".join(b.log_text()[-3000:] for b in c.brokers)


def test_skipped_numbers_leave_no_gaps(cluster):
    # More than PEER_RANGES_MAX (4096) gaps in one origin run would be given up as lost:
    # 4,200 wanted messages between unwanted ones on the same QoS 1 stream leave none.
    c = cluster(2, line(2), [200, 100], delays={(0, 1): 1})
    c.wait_tree(timeout=30)
    sub = Subscriber(c, 1, ["w/#"], 1)
    c.wait_interest("w/#", [1], timeout=30, exact=True)
    pub = c.client(0, version=5)
    count = 4200
    for n in range(count):     # (paced by the wanted ones' PUBACK: no queue limit is met)
        pub.publish(UNWANTED.decode() + "/x", b"%d" % n, qos=1, wait=False)
        pub.publish("w/x", b"%d" % n, qos=1)
    pub.publish("w/x", b"last", qos=1)
    wait_until(lambda: len(sub.received()) == count + 1, timeout=60, interval=0.2,
               what="%d of %d at broker 1" % (len(sub.received()), count + 1))
    b1 = read_stp_once(c.brokers[1])
    assert b1.get("messages/lost") == "0", b1
    assert "are lost" not in c.brokers[1].log_text()
    wait_until(lambda: int(read_stp_once(c.brokers[0]).get("messages/skipped", "0")) >= count,
               timeout=20, interval=0.5, what="broker 0 counting %d skipped" % count)


def test_flaps_and_restarts_lose_nothing_a_subscriber_wants(cluster):
    """Random graph of 10: subscribers on two brokers with different filters, QoS 1 and 2
    streams from two others on wanted and unwanted topics, while tree links are cut and
    healed one after the other and a broker in between is killed and restarted (without
    persistence: it starts fresh). Every QoS 1/2 message a subscriber's filter matches
    arrives once; nothing is reported lost."""
    edges = random_graph(10, 3, seed=2024)
    caps = [100 * k for k in range(1, 11)]
    c = cluster(10, edges, caps, delays=clear_delays(10, edges, caps, seed=2024))
    snap = c.wait_tree(timeout=40)
    subs = [Subscriber(c, 9, ["f/a/#"], 2), Subscriber(c, 4, ["f/+/x"], 1)]
    in_effect(c, subs)
    streams = []
    for i, (topic, qos) in zip((0, 0, 7, 7), (("f/a/x", 2), ("f/b/x", 1), ("f/c/y", 2),
                                              ("f/a/z", 1))):
        streams.append(NumberedStream(c.client(i, version=5), topic, qos=qos,
                                      tag="b%d-%s" % (i, topic.replace("/", "")),
                                      interval=0.01).start())
    busy = {0, 7, 9, 4}
    # a broker whose loss leaves the rest connected, with nobody on it
    victim = next(v for v in range(10) if v not in busy and
                  len(components(set(range(10)) - {v}, edges)) == 1)
    rng = random.Random(20)
    for _ in range(3):
        a, b = rng.choice(sorted(snap.forwarding_edges()))
        if len(components(range(10), [e for e in edges if e != (a, b)])) != 1:
            continue                     # a bridge of the graph: cutting it partitions
        c.cut(a, b)
        snap = c.wait_tree(timeout=40)
        c.heal(a, b)
        snap = c.wait_tree(timeout=40)
    c.kill(victim)
    c.wait_tree(timeout=40, live=set(range(10)) - {victim})
    c.restart(victim)
    c.wait_tree(timeout=40)
    sent = []
    for s in streams:
        for p in s.stop():
            sent.append((s.topic, p))
    for sub in subs:
        want = [(t, p) for t, p in sent if any(topic_matches(f, t) for f in sub.filters)]
        want_set = set(want)
        wait_until(lambda: want_set <= set(sub.received()), timeout=60, interval=0.2,
                   what="b%d %s: %d of %d" % (sub.i, sub.filters,
                                              len(want_set & set(sub.received())), len(want)))
        got = sub.received()
        assert len(got) == len(set(got)), "duplicates at b%d" % sub.i
        assert not [g for g in got if g not in want_set], "b%d got unsubscribed" % sub.i
    assert sys_total(c, "messages/lost") == 0
