"""$SYS topics (Mosquitto's tree, see mosquitto(8) "BROKER STATUS"), with sys_interval 1."""

import re
import time

import mqttproto as mp

SYS_CORE = [
    "$SYS/broker/version",
    "$SYS/broker/uptime",
    "$SYS/broker/clients/total",
    "$SYS/broker/clients/connected",
    "$SYS/broker/clients/disconnected",
    "$SYS/broker/clients/active",
    "$SYS/broker/clients/inactive",
    "$SYS/broker/clients/expired",
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
    "$SYS/broker/load/messages/received/1min",
    "$SYS/broker/load/messages/sent/5min",
    "$SYS/broker/load/bytes/received/15min",
    "$SYS/broker/load/connections/1min",
]


def sys_watcher(b, raw, filt="$SYS/#", cid="sysw"):
    c = raw(b)
    c.connect(cid)
    c.subscribe(filt, 0)
    return c


def wait_value(c, topic, predicate, timeout=5.0):
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


def test_sys_tree_retained_on_subscribe(broker, raw):
    b = broker("sys_interval 1")
    time.sleep(0.1)
    c = sys_watcher(b, raw)
    retained = {}
    try:
        while True:
            m = c.recv_publish(timeout=0.5)
            if m.retain:
                retained[m.topic] = m.payload.decode()
    except mp.PacketTimeout:
        pass
    missing = [t for t in SYS_CORE if t not in retained]
    assert not missing, missing
    assert re.fullmatch(r"\S+ version \d+\.\d+\.\d+\S*", retained["$SYS/broker/version"])
    assert re.fullmatch(r"\d+ seconds", retained["$SYS/broker/uptime"])
    for t in SYS_CORE:
        if "/load/" in t:
            assert re.fullmatch(r"\d+\.\d\d", retained[t]), (t, retained[t])
        elif t not in ("$SYS/broker/version", "$SYS/broker/uptime"):
            assert re.fullmatch(r"\d+", retained[t]), (t, retained[t])


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
