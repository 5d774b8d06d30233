"""$SYS topics (Mosquitto's tree, see mosquitto(8) "BROKER STATUS"), with sys_interval 1."""

import re
import socket
import time

import mqttproto as mp

# The complete set Debian's Mosquitto 2.0.11 publishes with sys_interval 1 and no bridges
# (observed with mosquitto_sub -t '$SYS/#'); arbor publishes exactly the same set.
SYS_LOADS = ["messages/received", "messages/sent", "publish/dropped", "publish/received",
             "publish/sent", "bytes/received", "bytes/sent", "sockets", "connections"]
SYS_ALL = sorted([
    "$SYS/broker/version",
    "$SYS/broker/uptime",
    "$SYS/broker/clients/total",
    "$SYS/broker/clients/connected",
    "$SYS/broker/clients/disconnected",
    "$SYS/broker/clients/active",
    "$SYS/broker/clients/inactive",
    "$SYS/broker/clients/maximum",
    "$SYS/broker/clients/expired",
    "$SYS/broker/heap/current",
    "$SYS/broker/heap/maximum",
    "$SYS/broker/messages/received",
    "$SYS/broker/messages/sent",
    "$SYS/broker/messages/stored",
    "$SYS/broker/store/messages/count",
    "$SYS/broker/store/messages/bytes",
    "$SYS/broker/subscriptions/count",
    "$SYS/broker/shared_subscriptions/count",
    "$SYS/broker/retained messages/count",
    "$SYS/broker/publish/messages/received",
    "$SYS/broker/publish/messages/sent",
    "$SYS/broker/publish/messages/dropped",
    "$SYS/broker/publish/bytes/received",
    "$SYS/broker/publish/bytes/sent",
    "$SYS/broker/bytes/received",
    "$SYS/broker/bytes/sent",
] + ["$SYS/broker/load/%s/%s" % (name, span) for name in SYS_LOADS
     for span in ("1min", "5min", "15min")])


def sys_watcher(b, raw, filt="$SYS/#", cid="sysw"):
    c = raw(b)
    c.connect(cid)
    c.subscribe(filt, 0)
    return c


def wait_value(c, topic, predicate, timeout=15.0):
    """Read $SYS publications until `topic` has a payload satisfying predicate."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            m = c.recv_publish(timeout=max(0.05, deadline - time.monotonic()))
        except mp.PacketTimeout:
            break
        if m.topic == topic:
            seen.append(m.payload)
            if predicate(m.payload.decode()):
                return m
    raise AssertionError("%s never satisfied the condition; saw %r" % (topic, seen))


def check_format(topic, value):
    if topic == "$SYS/broker/version":
        assert re.fullmatch(r"\S+ version \d+\.\d+\.\d+\S*", value), value
    elif topic == "$SYS/broker/uptime":
        assert re.fullmatch(r"\d+ seconds", value), value
    elif "/load/" in topic:
        assert re.fullmatch(r"\d+\.\d\d", value), (topic, value)
    else:
        assert re.fullmatch(r"\d+", value), (topic, value)


def collect(c, seconds, until=None, limit=15.0):
    """Every $SYS publication for `seconds`: {topic: [payloads]}, and the retained set.
    With `until`, collecting goes on past `seconds` (up to `limit`) until until(seen,
    retained) holds: a broker slowed down by a loaded machine is given the time it needs,
    the verdict is still made on what it sent."""
    seen, retained = {}, set()
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds and (until is None or until(seen, retained) or elapsed >= limit):
            break
        wait = seconds - elapsed if elapsed < seconds else 0.1
        try:
            m = c.recv_publish(timeout=max(0.05, wait))
        except mp.PacketTimeout:
            continue
        seen.setdefault(m.topic, []).append(m.payload.decode())
        if m.retain:
            retained.add(m.topic)
    return seen, retained


def test_sys_tree_is_mosquittos_set(broker, raw):
    """Exactly Mosquitto 2.0's topics, no more, no fewer, retained, in its value formats,
    republished only when they change."""
    b = broker("sys_interval 1")
    time.sleep(0.1)
    c = sys_watcher(b, raw)
    pub = raw(b)
    pub.connect("pub")
    pub.publish("some/topic", b"x", qos=1)
    seen, _ = collect(c, 2.5, until=lambda seen, _: set(SYS_ALL) <= set(seen) and len(
        seen.get("$SYS/broker/uptime", [])) >= 2)
    assert sorted(seen) == SYS_ALL, (sorted(set(seen) - set(SYS_ALL)),
                                     sorted(set(SYS_ALL) - set(seen)))
    late = sys_watcher(b, raw, cid="late-watcher")
    _, retained = collect(late, 0.5, until=lambda _, retained: set(SYS_ALL) <= retained)
    assert sorted(retained) == SYS_ALL, sorted(set(SYS_ALL) - retained)
    for topic, values in seen.items():
        for value in values:
            check_format(topic, value)
    # As Mosquitto, a value is published again only when it changes: the version once (the
    # retained copy), the uptime every second.
    assert len(seen["$SYS/broker/version"]) == 1, seen["$SYS/broker/version"]
    assert len(seen["$SYS/broker/uptime"]) >= 2
    heap = int(seen["$SYS/broker/heap/current"][-1])
    assert heap > 0
    assert int(seen["$SYS/broker/heap/maximum"][-1]) >= heap


def latest(c, topics, seconds):
    seen, _ = collect(c, seconds)
    return {t: float(seen[t][-1]) for t in topics}


def test_sys_load_sockets_and_connections(broker, raw):
    """load/sockets counts accepted sockets, load/connections accepted CONNECTs (as
    Mosquitto: bare TCP connections raise only the first)."""
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/load/+/1min")
    bare = [socket.create_connection((b.host, b.port)) for _ in range(6)]
    try:
        topics = ["$SYS/broker/load/sockets/1min", "$SYS/broker/load/connections/1min"]
        values = latest(c, topics, 2.5)
        # 7 sockets (6 bare and the watcher's), 1 CONNECT: rates in the ratio 7:1.
        assert values[topics[0]] > 5 * values[topics[1]] > 0, values
    finally:
        for s in bare:
            s.close()


def test_sys_version_exact_subscription(broker, raw):
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/version")
    m = c.recv_publish(timeout=3)
    assert m.retain and m.topic == "$SYS/broker/version"
    assert b"version" in m.payload


def test_sys_uptime_advances(broker, raw):
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/uptime")
    first = int(c.recv_publish(timeout=3).payload.split()[0])
    m = wait_value(c, "$SYS/broker/uptime", lambda v: int(v.split()[0]) > first, 4)
    assert m.payload.endswith(b" seconds")


def test_sys_clients_connected_tracks_clients(broker, raw):
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/clients/connected")
    others = []
    for i in range(3):
        o = raw(b)
        o.connect("o%d" % i)
        others.append(o)
    wait_value(c, "$SYS/broker/clients/connected", lambda v: v == "4")
    others[0].disconnect()
    others[1].close()
    wait_value(c, "$SYS/broker/clients/connected", lambda v: v == "2")


def test_sys_messages_received_counts(broker, raw):
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/publish/messages/received")
    first = c.recv_publish(timeout=3)
    base = int(first.payload)
    pub = raw(b)
    pub.connect("pub")
    for i in range(5):
        pub.publish("count/me", b"x", qos=1)
    wait_value(c, "$SYS/broker/publish/messages/received", lambda v: int(v) >= base + 5)
    c2 = sys_watcher(b, raw, "$SYS/broker/messages/received", cid="sysw2")
    m = c2.recv_publish(timeout=3)
    assert int(m.payload) >= 5


def test_sys_subscription_and_retained_counts(broker, raw):
    b = broker("sys_interval 1")
    c = sys_watcher(b, raw, "$SYS/broker/subscriptions/count")
    c.recv_publish(timeout=3)      # retained value, possibly from before we subscribed
    s = raw(b)
    s.connect("s")
    s.subscribe([("a", 0), ("b", 0), ("c/#", 1)])
    # The watcher's own subscription plus these three.
    wait_value(c, "$SYS/broker/subscriptions/count", lambda v: int(v) == 4)
    r = sys_watcher(b, raw, "$SYS/broker/retained messages/count", cid="sysw2")
    base = int(r.recv_publish(timeout=3).payload)
    s.publish("ret/1", b"x", qos=1, retain=True)
    s.publish("ret/2", b"y", qos=1, retain=True)
    wait_value(r, "$SYS/broker/retained messages/count", lambda v: int(v) >= base + 2)
