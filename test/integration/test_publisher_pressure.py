"""Back-pressure on publishers (max_publisher_backlog, src/core/publisher_pressure.h).

A client's QoS 1/2 message whose delivery has to wait in a connected subscriber's queue (the
subscriber's in-flight window is full) is charged to its publisher; while max_publisher_backlog
or more are charged, the publisher's next PUBLISH is not read, so it gets no acknowledgement
and, pacing itself by them, slows down to what its subscribers take. Checked byte by byte with
raw sockets: which PUBACKs a pipelining publisher gets, and when.

* held: the publisher's PUBACKs stop where its messages start to queue, and go on one by one
  as the subscriber acknowledges; with max_publisher_backlog 0 nothing is held (Mosquitto's
  behaviour);
* a subscriber that takes nothing is cut loose after about a second: the publisher goes on and
  the subscriber's queue ends at max_queued_messages, as in Mosquitto;
* a subscriber that goes offline stops holding its publishers at once;
* no deadlock: clients that publish to each other (or to themselves) while they are owed
  acknowledgements are never held, and every message arrives;
* QoS 0 deliveries never hold a publisher.
"""

import signal
import time

import pytest

import mqttproto as mp
from mqttproto import MQTT311

pytestmark = pytest.mark.arbor_only

# One event loop: these tests count PUBACKs exactly, and with several loops a publisher is
# charged only once its message has reached the subscriber's loop (a turn later), so it may
# get a few more acknowledgements before it is held (test_loops.py checks that it is).
QUIET = ("allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
         "log_type notice", "loops 1")
MESSAGES = 10


def start(broker, backlog, window=2, queue=1000, hold=60):
    """A broker whose subscribers have `window` messages in flight and `queue` queued; a
    subscriber behind for `hold` seconds is cut loose (long by default: the tests that step
    through a hold must not race it on a loaded machine)."""
    return broker(*QUIET, "max_publisher_backlog %d" % backlog,
                  "max_inflight_messages %d" % window, "max_queued_messages %d" % queue,
                  "max_publisher_hold %s" % hold, "sys_interval 1", defaults=False)


def sys_values(raw, b, want, timeout=15.0):
    """Wait until the $SYS/broker/publish/... counters named in want (e.g. {"clients/held":
    "1"}) all have those values; returns the last values seen."""
    m = raw(b)
    m.connect("sys-watch")
    # only these: a burst of $SYS updates larger than a test's max_queued_messages would be
    # dropped for this watcher (QoS 0 beyond the queue limit), as it is for any client
    m.subscribe([("$SYS/broker/publish/" + k, 0) for k in want])
    seen = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(seen.get(k) == v for k, v in want.items()):
            break
        try:
            p = mp.Publish(m.recv(max(0.05, deadline - time.monotonic())), MQTT311)
        except mp.PacketTimeout:
            break
        seen[p.topic[len("$SYS/broker/publish/"):]] = p.payload.decode()
    m.close()
    assert all(seen.get(k) == v for k, v in want.items()), (want, seen)
    return seen


def subscriber(raw, b, topic="press/t", qos=1, client_id="sub", clean=True):
    s = raw(b)
    s.connect(client_id, clean=clean)
    s.subscribe(topic, qos=qos)
    return s


def pipeline(c, count, topic="press/t", qos=1, first=1):
    """Send count QoS 1 PUBLISH packets at once (packet ids first, first+1, ...)."""
    data = b"".join(mp.publish(topic, b"m%d" % (first + i), qos=qos, pid=first + i)
                    for i in range(count))
    c.send(data)


def pubacks(c, count, timeout):
    """The packet ids of the PUBACKs that arrive within timeout, at most count of them."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            pkt = c.recv(left)
        except mp.PacketTimeout:
            break
        assert pkt.type == mp.PUBACK, "expected PUBACK, got %r" % (pkt,)
        got.append(mp.Ack(pkt, MQTT311).pid)
    return got


def received(s, count, timeout=10.0, ack=False):
    """count PUBLISH packets from the broker (not acknowledged unless ack)."""
    out = []
    for _ in range(count):
        p = mp.Publish(s.recv_type(mp.PUBLISH, timeout), MQTT311)
        if ack:
            s.send(mp.puback(p.pid))
        out.append(p)
    return out


def test_publisher_held_while_its_messages_wait(broker, raw):
    """Window 2, backlog 1: messages 1 and 2 go in flight, 3 waits (charged), so 4 is held:
    PUBACKs 1-3 only. Each PUBACK the subscriber sends moves one message into flight and lets
    exactly one more PUBLISH in."""
    b = start(broker, backlog=1, window=2)
    s = subscriber(raw, b)
    p = raw(b)
    p.connect("pub")
    pipeline(p, MESSAGES)
    assert pubacks(p, 3, timeout=10) == [1, 2, 3]
    p.expect_no_packet(0.5)  # held: 4 is not read
    sys_values(raw, b, {"clients/held": "1", "clients/holds": "1"})
    first = received(s, 2)
    assert [m.payload for m in first] == [b"m1", b"m2"]
    s.send(mp.puback(first[0].pid))  # 3 goes in flight: nothing waits, 4 is read
    assert pubacks(p, 1, timeout=10) == [4]
    p.expect_no_packet(0.3)  # 4 waits now: 5 is held
    # acknowledging everything as it comes lets all of it through, in order
    got = first[1:] + received(s, 1)
    s.send(mp.puback(first[1].pid))
    acked = [1, 2, 3, 4]
    seen = [m.payload for m in first]
    pending = got[1:]
    deadline = time.monotonic() + 30
    while len(seen) < MESSAGES and time.monotonic() < deadline:
        for m in pending:
            seen.append(m.payload)
            s.send(mp.puback(m.pid))
        acked += pubacks(p, MESSAGES - len(acked), timeout=0.2)
        pending = []
        try:
            pending = [mp.Publish(s.recv_type(mp.PUBLISH, 2.0), MQTT311)]
        except mp.PacketTimeout:
            pass
    acked += pubacks(p, MESSAGES - len(acked), timeout=10)
    assert seen == [b"m%d" % i for i in range(1, MESSAGES + 1)]
    assert acked == list(range(1, MESSAGES + 1))


def pipelining_publisher(broker, raw, backlog):
    """A broker (window 2), a QoS 1 subscriber that acknowledges nothing yet, and a publisher
    that has just sent MESSAGES QoS 1 PUBLISH packets at once: (broker, subscriber, publisher)."""
    b = start(broker, backlog=backlog, window=2)
    s = subscriber(raw, b)
    p = raw(b)
    p.connect("pub")
    pipeline(p, MESSAGES)
    return b, s, p


def test_backlog_zero_holds_nothing(broker, raw):
    """max_publisher_backlog 0: every PUBACK at once (the messages queue, as in Mosquitto)."""
    _, _, p = pipelining_publisher(broker, raw, backlog=0)
    assert pubacks(p, MESSAGES, timeout=10) == list(range(1, MESSAGES + 1))


def test_reload_turning_it_off_releases_held_publishers(broker, raw):
    """A reload to max_publisher_backlog 0 lets a held publisher go at once."""
    b, _, p = pipelining_publisher(broker, raw, backlog=1)
    assert pubacks(p, 3, timeout=10) == [1, 2, 3]
    p.expect_no_packet(0.3)
    text = open(b.conf_path).read().replace("max_publisher_backlog 1", "max_publisher_backlog 0")
    with open(b.conf_path, "w") as f:
        f.write(text)
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("Reloaded configuration.")
    assert pubacks(p, MESSAGES - 3, timeout=10) == list(range(4, MESSAGES + 1))


def test_stuck_subscriber_is_cut_loose(broker, raw):
    """A subscriber that takes nothing holds its publishers for max_publisher_hold (0.5 s
    here, checked each second), then is cut loose: the publisher gets every PUBACK, and the
    subscriber's queue stops at max_queued_messages (5 here) as in Mosquitto."""
    b = start(broker, backlog=1, window=2, queue=5, hold=0.5)
    s = subscriber(raw, b)
    p = raw(b)
    p.connect("pub")
    t0 = time.monotonic()
    pipeline(p, 20)
    assert pubacks(p, 3, timeout=10) == [1, 2, 3]
    p.expect_no_packet(0.3)
    rest = pubacks(p, 17, timeout=15)
    assert rest == list(range(4, 21))
    assert time.monotonic() - t0 >= 0.45  # not before the subscriber counted as far behind
    assert p.is_open()
    sys_values(raw, b, {"clients/held": "0", "subscribers/cut_loose": "1"})
    # the subscriber gets its window, then its queue: 2 + 5, the rest was dropped
    got = received(s, 2, ack=True)
    got += received(s, 5, ack=True)
    s.expect_no_packet(0.5)
    assert [m.payload for m in got] == [b"m%d" % i for i in range(1, 8)]


def test_subscriber_going_offline_releases_publisher(broker, raw):
    """A persistent subscriber that disconnects stops holding the publisher: its queued
    messages are kept for it (delivered on reconnect), the publisher goes on at once."""
    b = start(broker, backlog=1, window=2)
    s = subscriber(raw, b, client_id="persist", clean=False)
    p = raw(b)
    p.connect("pub")
    pipeline(p, MESSAGES)
    assert pubacks(p, 3, timeout=10) == [1, 2, 3]
    s.send(mp.disconnect())
    s.close()
    assert pubacks(p, MESSAGES - 3, timeout=0.9) == list(range(4, MESSAGES + 1))
    back = raw(b)
    assert back.connect("persist", clean=False).session_present
    got = received(back, MESSAGES, ack=True)
    assert sorted(m.payload for m in got) == sorted(b"m%d" % i for i in range(1, MESSAGES + 1))


def test_clients_publishing_to_each_other_never_deadlock(broker, raw):
    """A and B each subscribe to the other's topic and to their own, and pipeline QoS 1 at
    each other with window 1; each acknowledges what it receives only after all its own
    PUBLISH packets were sent. Clients owed acknowledgements are never held, so all of it
    arrives, in order, and every publish is acknowledged."""
    b = start(broker, backlog=1, window=1)
    count = 50
    a = raw(b)
    a.connect("a")
    a.subscribe([("to/a", 1), ("to/b", 1)])
    c = raw(b)
    c.connect("b")
    c.subscribe([("to/b", 1), ("to/a", 1)])
    pipeline(a, count, topic="to/b")
    pipeline(c, count, topic="to/a")
    results = {}
    for name, cl in (("a", a), ("b", c)):
        results[name] = {"pubacks": [], "to/a": [], "to/b": []}
    deadline = time.monotonic() + 60
    done = lambda r: len(r["pubacks"]) == count and len(r["to/a"]) == count and \
        len(r["to/b"]) == count
    while not all(done(r) for r in results.values()) and time.monotonic() < deadline:
        for name, cl in (("a", a), ("b", c)):
            try:
                pkt = cl.recv(0.05)
            except mp.PacketTimeout:
                continue
            if pkt.type == mp.PUBACK:
                results[name]["pubacks"].append(mp.Ack(pkt, MQTT311).pid)
            else:
                m = mp.Publish(pkt, MQTT311)
                results[name][m.topic].append(m.payload)
                cl.send(mp.puback(m.pid))
    expect = [b"m%d" % i for i in range(1, count + 1)]
    for name, r in results.items():
        assert r["pubacks"] == list(range(1, count + 1)), name
        assert r["to/a"] == expect and r["to/b"] == expect, name


def test_qos0_never_holds(broker, raw):
    """A QoS 0 delivery is not charged: a QoS 1 publisher whose only subscriber takes QoS 0
    and reads nothing gets every PUBACK at once (max_publisher_hold is long: a hold would
    show), and the subscriber's messages beyond its queue limit are dropped."""
    b = start(broker, backlog=1, window=2, queue=5)
    subscriber(raw, b, qos=0)
    p = raw(b)
    p.connect("pub")
    pipeline(p, 20)
    assert pubacks(p, 20, timeout=10) == list(range(1, 21))
