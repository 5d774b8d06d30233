"""The multi-broker harness itself (peer_net.py), on plain brokers: what the MQTT-ST tests
rely on must work before they can mean anything.

Covers: DelayProxy (a client through it sees the delay each way, changes of delay keep the
byte order, cut("reset") resets existing and new connections, cut_from(host) only those of one
source address, cut("blackhole") stalls them and heal() lets the held data through, close()); the graph helpers (connected random graphs,
delays with clear root-link margins); Snapshot checks, check_spanning_tree() and oracle() on
made-up snapshots (a correct triangle passes, a loop or a wrong role fails); Collector's
exactly-once check (it passes on single copies and catches a duplicate and a missing copy);
NumberedStream; the probe that decides whether the peer tests run. Cluster itself runs here on
brokers without MQTT-ST lines ("plain"): processes (kill, stop, restart, teardown checks),
and wait_tree() / oracle() over $SYS-like views published under a fake prefix.
"""

import socket
import time

import pytest

import mqttproto as mp
import peer_net
from helpers import StolenTime
from peer_net import (FORWARDING_PAIRS, ClusterFactory, Collector, DelayProxy, NumberedStream,
                      Snapshot, check_spanning_tree, clear_delays, components, oracle,
                      random_graph, root_link_margin)


class Via:
    """Where a client should connect: host and port of a proxy."""

    def __init__(self, proxy):
        self.host = "127.0.0.1"
        self.port = proxy.port


@pytest.fixture
def proxies():
    made = []

    def make(*args, **kw):
        p = DelayProxy(*args, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def assert_refused_at_once(port, send=b""):
    """A connection to the port is reset (or closed) without an answer within 2 s; the reset
    may come while connecting already."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2.0)
    except (ConnectionResetError, ConnectionRefusedError):
        return
    try:
        s.settimeout(2.0)
        if send:
            s.sendall(send)
        assert s.recv(10) == b""
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()


def timed_ping(c, b, timeout=10.0):
    """(round trip of a PINGREQ, time the test and broker b waited for a CPU meanwhile): a
    bound on how fast the round trip is allows for the second (zero on an idle machine)."""
    stolen = StolenTime(b)
    start = time.monotonic()
    c.send(mp.pingreq())
    c.recv_type(mp.PINGRESP, timeout)
    return time.monotonic() - start, stolen.seconds()


# ---------------------------------------------------------------- DelayProxy

def test_proxy_delays_each_direction_and_changes_at_run_time(broker, proxies, mqtt):
    b = broker()
    p = proxies(0, b.port, delay_ms=100)
    c = mp.RawClient("127.0.0.1", p.port, version=mp.MQTT311)
    start = time.monotonic()
    c.connect("through-proxy")
    assert time.monotonic() - start >= 0.2          # CONNECT and CONNACK, 100 ms each
    rtt, stolen = timed_ping(c, b)
    assert 0.2 <= rtt < 1.0 + stolen, (rtt, stolen)

    p.set_delay(150, direction="up")
    assert p.delay_ms == (150, 100)
    rtt, stolen = timed_ping(c, b)
    assert 0.25 <= rtt < 1.0 + stolen, (rtt, stolen)
    p.set_delay(0)
    rtt, stolen = timed_ping(c, b)
    assert rtt < 0.2 + stolen, (rtt, stolen)

    # a paho client through the proxy sees the delay on a QoS 1 round trip as well
    p.set_delay(80)
    client = mqtt(Via(p), client_id="paho-through-proxy")
    start = time.monotonic()
    client.publish("t/x", b"1", qos=1)
    assert time.monotonic() - start >= 0.16
    c.close()
    assert p.accepted == 2 and p.forwarded[0] > 0 and p.forwarded[1] > 0


def test_proxy_keeps_order_when_the_delay_drops(broker, proxies, mqtt):
    b = broker()
    p = proxies(0, b.port, delay_ms=150)
    sub = mqtt(b, client_id="direct-sub")
    sub.subscribe("order/#", 0)
    pub = mp.RawClient("127.0.0.1", p.port)
    pub.connect("delayed-pub")
    for n in range(20):
        pub.send(mp.publish("order/t", b"%d" % n))
    p.set_delay(0)                                  # later bytes must not overtake
    for n in range(20, 40):
        pub.send(mp.publish("order/t", b"%d" % n))
    got = [int(m.payload) for m in sub.get_messages(40)]
    assert got == list(range(40))
    pub.close()


def test_proxy_cut_reset_closes_connections_and_refuses_new_ones(broker, proxies, mqtt):
    b = broker()
    p = proxies(0, b.port)
    raw = mp.RawClient("127.0.0.1", p.port)
    raw.connect("to-be-reset")
    client = mqtt(Via(p), client_id="paho-to-be-reset")
    p.cut("reset")
    assert p.connection_count() == 0
    with pytest.raises(mp.ConnectionClosed):
        raw.recv(2.0)
    client.wait_disconnected(2.0)

    # while cut, a new connection is reset at once (before anything reaches the broker)
    assert_refused_at_once(p.port, mp.connect("during-cut"))

    p.heal()
    again = mp.RawClient("127.0.0.1", p.port)
    again.connect("after-heal")
    assert again.is_open()
    again.close()
    raw.close()


def test_proxy_cut_from_resets_one_source_only(broker, proxies):
    b = broker()
    p = proxies(0, b.port)

    def dial(source, client_id):
        """A connection from source with a CONNECT sent; None when it was reset already
        (while being set up: a cut source's connection may be reset that early)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2.0)
        s.bind((source, 0))
        try:
            s.connect(("127.0.0.1", p.port))
            s.sendall(mp.connect(client_id))
        except ConnectionResetError:
            s.close()
            return None
        return s

    def is_reset(s):
        if s is None:  # reset while it was being set up
            return True
        try:
            return s.recv(10) == b""
        except ConnectionResetError:
            return True
        finally:
            s.close()

    cut = dial("127.1.0.1", "cut")
    spared = dial("127.1.1.1", "spared")
    for s in (cut, spared):
        assert s.recv(4)[:1] == b"\x20"               # CONNACK
    p.cut_from("127.1.0.1")
    assert p.connection_count() == 1
    assert is_reset(cut)
    spared.sendall(mp.pingreq())
    assert spared.recv(2) == b"\xd0\x00"              # PINGRESP: the other dialer is untouched
    assert is_reset(dial("127.1.0.1", "during-cut"))  # new ones from there are reset at once
    other = dial("127.1.1.1", "other-during-cut")
    assert other.recv(4)[:1] == b"\x20"
    p.heal_from("127.1.0.1")
    again = dial("127.1.0.1", "after-heal")
    assert again.recv(4)[:1] == b"\x20"
    for s in (spared, other, again):
        s.close()


def test_proxy_blackhole_stalls_and_heal_delivers_what_was_held(broker, proxies):
    b = broker()
    p = proxies(0, b.port, delay_ms=20)
    old = mp.RawClient("127.0.0.1", p.port)
    old.connect("before-blackhole")
    p.cut("blackhole")
    old.send(mp.pingreq())
    old.expect_no_packet(0.5)                       # no answer, and the socket stays open

    held = mp.RawClient("127.0.0.1", p.port)        # accepted and held
    held.send(mp.connect("during-blackhole"))
    held.expect_no_packet(0.5)
    assert p.connection_count() == 2

    p.heal()
    old.recv_type(mp.PINGRESP, 2.0)
    assert mp.Connack(held.recv_type(mp.CONNACK, 2.0), mp.MQTT311).rc == 0
    assert held.is_open()
    old.close()
    held.close()


def test_proxy_to_a_closed_port_resets_the_dialer_and_close_stops_listening(proxies):
    dead = peer_net.free_port()
    p = proxies(0, dead)
    assert_refused_at_once(p.port)
    port = p.port
    p.close()
    assert not p._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


def test_proxy_passes_a_half_close_through(broker, proxies):
    b = broker()
    p = proxies(0, b.port, delay_ms=30)
    c = mp.RawClient("127.0.0.1", p.port)
    c.connect("half-close")
    c.sock.shutdown(socket.SHUT_WR)                 # the broker sees EOF and closes
    c.wait_closed(3.0)
    c.close()
    deadline = time.monotonic() + 2.0
    while p.connection_count() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert p.connection_count() == 0


# ---------------------------------------------------------------- graphs and checks

def test_random_graph_is_connected_deterministic_and_of_the_asked_degree():
    edges = random_graph(10, 3, seed=7)
    assert edges == random_graph(10, 3, seed=7)
    assert len(edges) == 15 and len(set(edges)) == 15
    assert all(a < b for a, b in edges)
    assert len(components(range(10), edges)) == 1


def test_clear_delays_give_margins():
    edges = random_graph(10, 3, seed=3)
    caps = [100 * ((i * 7) % 10 + 1) for i in range(10)]
    delays = clear_delays(10, edges, caps, seed=1)
    root = max(range(10), key=lambda i: caps[i])
    ratio, gap = root_link_margin(10, edges, delays, root)
    assert ratio >= 1.4 and gap >= 4.0
    assert clear_delays(10, edges, caps, seed=1) == delays


TRIANGLE_IDS = ["127.0.0.1:1884", "127.0.0.1:1885", "127.0.0.1:1886"]
TRIANGLE_EDGES = [(0, 1), (1, 2), (0, 2)]


TRIANGLE_COSTS = {(0, 1): 2000, (1, 0): 2100, (1, 2): 3000, (2, 1): 2900, (0, 2): 9000,
                  (2, 0): 9100}
TRIANGLE_ROLES = {(0, 1): "designated", (1, 0): "root", (1, 2): "designated", (2, 1): "root",
                  (0, 2): "designated", (2, 0): "blocked"}


def triangle_views(ids, roles=None):
    """$SYS/broker/stp views of a converged triangle (costs as in
    test/sim/oracle_triangle.json): b0 root, b1 through b0, b2 through b1. roles[(a, b)]
    overrides a's role towards b (forwarding follows from the pair)."""
    role = dict(TRIANGLE_ROLES)
    role.update(roles or {})
    views = {}
    for i in range(3):
        v = {"id": ids[i], "capability": str(300 - 100 * i), "root/id": ids[0],
             "root/link": ["", ids[0], ids[1]][i]}
        for (a, b), r in role.items():
            if a == i:
                prefix = "peers/%s/" % ids[b]
                v[prefix + "role"] = r
                v[prefix + "forwarding"] = "1" if (r, role[(b, a)]) in FORWARDING_PAIRS else "0"
                v[prefix + "state"] = "up"
                v[prefix + "cost_us"] = str(TRIANGLE_COSTS[(a, b)])
        views[i] = v
    return views


def triangle_snapshot(roles):
    return Snapshot(TRIANGLE_IDS, [300, 200, 100], TRIANGLE_EDGES, TRIANGLE_EDGES, {0, 1, 2},
                    triangle_views(TRIANGLE_IDS, roles), hello=0.2, max_age=1.0)


def test_snapshot_checks_and_oracle_accept_the_right_triangle():
    snap = triangle_snapshot({})
    assert snap.problems() == []
    assert snap.root == TRIANGLE_IDS[0]
    assert sorted(check_spanning_tree(snap)) == [(0, 1), (1, 2)]
    answer = oracle(snap)
    assert answer["root"] == TRIANGLE_IDS[0]


def test_snapshot_checks_and_oracle_catch_a_wrong_triangle():
    # b2 claims the expensive direct link as its root link: roles still pair up, so the
    # snapshot is an agreement and even a spanning tree, but not the one the costs give
    wrong = triangle_snapshot({(2, 0): "root", (2, 1): "blocked"})
    wrong.views[2]["root/link"] = TRIANGLE_IDS[0]
    assert wrong.problems() == []
    check_spanning_tree(wrong)
    with pytest.raises(AssertionError, match="differs from the oracle"):
        oracle(wrong)

    loop = triangle_snapshot({(2, 0): "root"})      # forwarding on all three links
    loop.views[0]["peers/%s/forwarding" % TRIANGLE_IDS[2]] = "1"
    loop.views[2]["peers/%s/forwarding" % TRIANGLE_IDS[0]] = "1"
    with pytest.raises(AssertionError, match="spanning tree"):
        check_spanning_tree(loop)

    disagree = triangle_snapshot({})
    disagree.views[2]["root/id"] = TRIANGLE_IDS[2]
    assert any("roots" in p for p in disagree.problems())

    down = Snapshot(TRIANGLE_IDS, [300, 200, 100], TRIANGLE_EDGES, [(0, 1)], {0, 1},
                    triangle_snapshot({}).views)
    assert any("down or cut" in p for p in down.problems())


# ---------------------------------------------------------------- Cluster on plain brokers

FAKE_PREFIX = "fake/broker/stp/"


@pytest.fixture
def plain_cluster(tmp_path):
    """Factory: a Cluster without MQTT-ST lines whose $SYS views are read from FAKE_PREFIX."""
    make = ClusterFactory(tmp_path, plain=True, stp_prefix=FAKE_PREFIX)
    yield make
    failures = make.close()
    assert not failures, "\n".join(failures)


def publish_views(c, views):
    """Publishes views[i] as retained messages under FAKE_PREFIX on broker i."""
    for i, view in views.items():
        pub = c.client(i, version=4)
        for key, value in view.items():
            pub.publish(FAKE_PREFIX + key, value.encode(), qos=1, retain=True)
        pub.close()


def test_cluster_processes_kill_stop_restart(plain_cluster):
    c = plain_cluster(3, peer_net.ring(3))
    assert c.live() == {0, 1, 2}
    assert "peer " not in open(c.brokers[0].conf_path).read()
    assert c.proxy(0, 1).target_port == c.brokers[1].port
    assert c.proxy(1, 0).target_port == c.brokers[0].port
    col = Collector(c.brokers, "k/#", qos=1)
    try:
        pub = c.client(0, version=5)
        pub.publish("k/t", b"x", qos=1)
        col.wait_for(["x"], timeout=3, subscribers=[0])
        assert col.payloads(1) == [] and col.payloads(2) == []     # no peers: no flooding
    finally:
        col.close()
    assert c.kill(1) == -9
    assert c.live() == {0, 2}
    c.stop(2)
    assert c.live() == {0}
    c.cont(2)
    assert c.live() == {0, 2}
    c.restart(1)
    c.restart(2)                                    # SIGTERM, exit 0, start again
    assert c.live() == {0, 1, 2}
    assert c.direct_connections() == []


def test_cluster_close_reports_a_broker_that_died_by_itself(plain_cluster):
    c = plain_cluster(2, [(0, 1)])
    c.brokers[1].proc.kill()                        # not through Cluster.kill: unexpected
    c.brokers[1].proc.wait()
    failures = c.close()
    assert len(failures) == 1 and failures[0].startswith("b1") and "exit status -9" in failures[0]


def test_cluster_wait_tree_oracle_and_watchers_on_a_fake_tree(plain_cluster):
    c = plain_cluster(3, TRIANGLE_EDGES, capabilities=[300, 200, 100])
    ids = [c.identity(i) for i in range(3)]
    publish_views(c, triangle_views(ids))
    snap = c.wait_tree(timeout=5)
    assert snap.root == ids[0] and c.root_index(snap) == 0
    assert sorted(c.check_spanning_tree(snap)) == [(0, 1), (1, 2)]
    c.oracle(snap)
    assert c.stp(1)["root/link"] == ids[0]
    assert c.stp(2, fresh=True)["peers/%s/role" % ids[1]] == "root"

    # b2 changes its mind about the b0 link: the ends no longer agree
    publish_views(c, {2: {"peers/%s/role" % ids[0]: "designated"}})
    with pytest.raises(AssertionError, match="no stable tree"):
        c.wait_tree(timeout=0.5)

    # a restarted broker's watcher reconnects and starts from what the broker holds then
    c.restart(2)
    with pytest.raises(AssertionError, match="b2: no root/id"):
        c.wait_tree(timeout=1.0)
    publish_views(c, {2: triangle_views(ids)[2]})
    c.wait_tree(timeout=5)

    # a stopped broker is left out; its neighbours must not forward towards it
    c.stop(2)
    with pytest.raises(AssertionError, match="b1 forwards on its link to b2"):
        c.wait_tree(timeout=0.5)
    c.cont(2)
    c.cut(1, 2)
    assert c.usable_links() == [(0, 1), (0, 2)]
    c.heal(1, 2)
    assert c.usable_links() == TRIANGLE_EDGES


# ---------------------------------------------------------------- Collector

def test_collector_counts_copies_per_broker(broker, mqtt):
    brokers = [broker(), broker()]
    col = Collector(brokers, "col/#", qos=1)
    try:
        for b in brokers:
            pub = mqtt(b, client_id="col-pub", version=5)
            for n in range(3):
                pub.publish("col/t", b"%d" % n, qos=1)
            pub.close()
        col.assert_exactly_once(["0", "1", "2"], timeout=5)
        assert [m.broker for m in col.records(1)] == [1, 1, 1]

        extra = mqtt(brokers[1], client_id="col-dup", version=5)
        extra.publish("col/t", b"1", qos=1)          # a second copy on one broker only
        with pytest.raises(AssertionError, match="not exactly once"):
            col.assert_exactly_once(["0", "1", "2"], timeout=5)
        with pytest.raises(AssertionError, match="missing"):
            col.wait_for(["3"], timeout=0.3)
    finally:
        col.close()


def test_numbered_stream_is_counted_exactly_once(broker, mqtt):
    b = broker()
    with Collector([b], "n/#", qos=2) as col:
        s = NumberedStream(mqtt(b, client_id="stream", version=5), "n/t", qos=1, tag="s",
                           interval=0.005).start()
        s.wait_sent(20)
        sent = s.stop()
        assert sent[:3] == [b"s-0", b"s-1", b"s-2"] and len(sent) >= 20
        col.assert_exactly_once(sent, timeout=5)
        assert [m.payload for m in col.records(0)] == sent       # in order, too


# ---------------------------------------------------------------- the probe

def test_peer_support_probe_decides_quickly(tmp_path):
    start = time.monotonic()
    ok, reason = peer_net.probe_peer_support(str(tmp_path))
    assert time.monotonic() - start < 10
    assert ok or "not supported yet" in reason
