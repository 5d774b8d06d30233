"""Bad MQTT-ST peers: each is refused or dropped, and nothing else on the broker notices.

Every test runs broker A (root, capability 1000) linked by a `peer` line to broker B
(capability 500), a normal client on each, and plays the bad party byte by byte with
peerproto.py. After the bad party is dealt with, `assert_undisturbed` checks that A's link
to B never left "up" in $SYS/broker/stp/peers/<B>/state, that the normal client on A still
publishes and receives, and that messages still cross the A-B link both ways.
"""

import os
import random
import time
import uuid

import pytest

import mqttproto as mp
import peerproto as pp
from helpers import StolenTime, free_port, wait_until
from peer_net import wait_link_wants

pytestmark = pytest.mark.arbor_only

SECRET = "bad-peer-tests-shared-secret"
HELLO = 0.2
MAX_AGE = 1.0


def peer_lines(port, capability, *extra):
    return ["peer_identity 127.0.0.1:%d" % port,
            "stp_capability %d" % capability,
            "stp_hello_interval %g" % HELLO,
            "stp_max_age %g" % MAX_AGE,
            "peer_restart_timeout 0.1 1",
            "sys_interval 1",
            "peer_secret " + SECRET] + list(extra)


class Net:
    """A (root) -- B, a normal client on each subscribed to norm/#, $SYS watch on A."""

    def __init__(self, broker, mqtt):
        self.b_port, self.a_port = free_port(), free_port()
        self.b = broker(*peer_lines(self.b_port, 500), port=self.b_port)
        self.a = broker(*peer_lines(self.a_port, 1000, "peer 127.0.0.1:%d" % self.b_port),
                        port=self.a_port)
        self.a_id = "127.0.0.1:%d" % self.a_port
        self.b_id = "127.0.0.1:%d" % self.b_port
        self.sys = pp.SysWatch(self.a)
        self.b_state = "peers/%s/state" % self.b_id
        self.sys.wait(self.b_state, "up")
        self.sys.wait("peers/%s/forwarding" % self.b_id, "1")
        self.b_state_seen = len(self.sys.values(self.b_state)) - 1  # the first "up"
        self.client_a = mqtt(self.a, client_id="normal-a")
        self.client_a.subscribe("norm/#", 1)
        self.client_b = mqtt(self.b, client_id="normal-b")
        self.client_b.subscribe("norm/#", 1)
        wait_link_wants(self.a, self.b_id, "norm/#")   # interest routing: in effect
        wait_link_wants(self.b, self.a_id, "norm/#")
        self.raw_peers = []
        assert_undisturbed(self)

    def raw_peer(self, **kw):
        p = pp.RawPeer(self.a.host, self.a_port, SECRET, hello=HELLO, **kw)
        self.raw_peers.append(p)
        return p.start()

    def linked_raw_peer(self, **kw):
        """A raw peer whose link to A is up and forwarding."""
        p = self.raw_peer(**kw)
        self.sys.wait("peers/%s/state" % p.identity, "up")
        self.sys.wait("peers/%s/forwarding" % p.identity, "1")
        return p

    def close(self):
        for p in self.raw_peers:
            p.close()
        self.sys.close()


@pytest.fixture
def net(broker, mqtt):
    n = Net(broker, mqtt)
    yield n
    n.close()


def exactly_one(client, payload, timeout=10.0):
    m = client.get_message(timeout)
    assert m.payload == payload, m
    client.expect_no_message(0.2)


def assert_b_stayed_up(net):
    since_up = net.sys.values(net.b_state)[net.b_state_seen:]
    assert set(since_up) == {"up"}, net.sys.values(net.b_state)


def assert_undisturbed(net):
    # The good link never went down since it came up, and messages cross it both ways; the
    # normal client on A gets its own message back.
    assert_b_stayed_up(net)
    tag = uuid.uuid4().hex.encode()
    net.client_a.publish("norm/from-a", b"a" + tag, qos=1)
    exactly_one(net.client_a, b"a" + tag)
    exactly_one(net.client_b, b"a" + tag)
    net.client_b.publish("norm/from-b", b"b" + tag, qos=1)
    exactly_one(net.client_b, b"b" + tag)
    exactly_one(net.client_a, b"b" + tag)
    assert_b_stayed_up(net)
    for p in net.raw_peers:  # what the broker sent the raw peers was well-formed
        assert not p.bad_broker_bpdus and not p.dialback_errors, (p.bad_broker_bpdus,
                                                                  p.dialback_errors)


def assert_never_a_peer(net, identity):
    assert not [t for t in net.sys.topics() if identity in t], net.sys.topics()


def refused_with(b, connect):
    """Send `connect` on a new connection to b; the CONNACK's reason code once b has closed
    the connection."""
    conn = pp.Conn.dial(b.host, b.port, "refused")
    try:
        conn.send(connect)
        ack = mp.Connack(conn.recv_type(mp.CONNACK), mp.MQTT5)
        conn.wait_closed(2.0)
        return ack.rc
    finally:
        conn.close()


# ---------------------------------------------------------------- clients claiming to be brokers

@pytest.mark.parametrize("method,data", [
    pytest.param(None, None, id="no-auth-method"),
    pytest.param("SCRAM-SHA-1", bytes(range(16)), id="other-method"),
    pytest.param(pp.AUTH_METHOD, None, id="no-nonce"),
    pytest.param(pp.AUTH_METHOD, bytes(range(15)), id="short-nonce"),
])
def test_peer_connect_without_hmac_authentication_refused(net, method, data):
    fake = "127.0.0.1:%d" % free_port()
    rc = refused_with(net.a, pp.connect_packet(fake, data, method=method))
    assert rc == pp.RC_BAD_AUTHENTICATION_METHOD
    net.a.wait_log("MQTT-ST: refused peer connection from 127.0.0.1")
    assert_undisturbed(net)
    assert_never_a_peer(net, fake)


def test_peer_with_wrong_secret_refused_after_auth(net):
    fake = "127.0.0.1:%d" % free_port()
    conn = pp.Conn.dial(net.a.host, net.a_port, "wrong-secret")
    try:
        hs = pp.client_handshake(conn, SECRET, fake, proof_secret="not-the-secret-at-all")
        # The broker proved itself (with the real secret, so our Python HMAC agrees with
        # it; a peer holding another secret can tell), then refused our proof.
        reason, method, data = hs["auth"]
        assert (reason, method) == (pp.CONTINUE_AUTHENTICATION, pp.AUTH_METHOD)
        assert hs["server_id"] == net.a_id
        assert hs["server_proof_ok"]
        server_nonce, server_proof = data[:16], data[16:48]
        assert server_proof != pp.proof("not-the-secret-at-all", True, hs["nonce"],
                                        server_nonce, fake, net.a_id)
        assert hs["connack"].rc == pp.RC_NOT_AUTHORIZED, hs["connack"]
        conn.wait_closed(2.0)
    finally:
        conn.close()
    net.a.wait_log("MQTT-ST: peer %s (from 127.0.0.1:" % fake)
    net.a.wait_log(") failed authentication: its proof does not match our peer_secret (is "
                   "peer_secret the same on both brokers?).")
    time.sleep(1.2)  # a full sys_interval: nothing about it is ever published
    assert_never_a_peer(net, fake)
    assert_undisturbed(net)


def test_peer_connect_to_broker_without_peering(broker, mqtt):
    b = broker()
    rc = refused_with(b, pp.connect_packet("127.0.0.1:%d" % free_port(), os.urandom(16)))
    assert rc == pp.RC_UNSUPPORTED_PROTOCOL_VERSION
    sub = mqtt(b, client_id="still-fine")
    sub.subscribe("x/#", 1)
    sub.publish("x/y", b"ok", qos=1)
    assert sub.get_message().payload == b"ok"


@pytest.mark.parametrize("client_id,why", [
    pytest.param("{own}", "it claims this broker's own identity", id="own-identity"),
    pytest.param("broker-7", "client identifier is not a broker identity", id="not-an-identity"),
    pytest.param("0.0.0.0:1884", "client identifier is not a broker identity",
                 id="unspecified-address"),
])
def test_peer_with_unacceptable_identity_refused(net, client_id, why):
    rc = refused_with(net.a, pp.connect_packet(client_id.format(own=net.a_id), os.urandom(16)))
    assert rc == pp.RC_CLIENT_ID_NOT_VALID
    net.a.wait_log(why)
    assert_undisturbed(net)


# ---------------------------------------------------------------- garbage BPDUs

def garbage_bpdus(peer, a_id):
    """(label, payload) pairs, every one of which a receiver must reject (section 3.4)."""
    good = peer.hello_bpdu()
    assert good is not None
    v = good.encode()

    def variant(**kw):
        fields = dict(role=good.role, age=good.age, epoch=good.epoch,
                      root_capability=good.root_capability, root_cost=good.root_cost,
                      sender_capability=good.sender_capability, root_id=good.root_id,
                      sender_id=good.sender_id)
        fields.update(kw)
        return pp.Bpdu(**fields).encode()

    out = [
        ("version 2", bytes([2]) + v[1:]),
        ("version 0", bytes([0]) + v[1:]),
        ("truncated to 1 byte", v[:1]),
        ("truncated header", v[:12]),
        ("truncated identity", v[:-1]),
        ("trailing byte", v + b"\0"),
        ("reserved flag bit 0", variant(flags_extra=0x01)),
        ("reserved flag bit 1", variant(flags_extra=0x02)),
        ("role 00", bytes([v[0], v[1] & ~0x30 & 0xFF]) + v[2:]),
        ("ipv6 flag on ipv4 identities", bytes([v[0], v[1] | 0x08]) + v[2:]),
        ("sender port 0", v[:-2] + b"\0\0"),
        ("root address 0.0.0.0", v[:19] + bytes(4) + v[23:]),
        ("self-rooted with a cost", variant(root_id=peer.identity, root_cost=5, age=0,
                                            root_capability=peer.capability,
                                            role=pp.ROLE_DESIGNATED)),
        ("self-rooted as root role", variant(root_id=peer.identity, root_cost=0, age=0,
                                             root_capability=peer.capability,
                                             role=pp.ROLE_ROOT)),
        ("self-rooted, other capability", variant(root_id=peer.identity, root_cost=0, age=0,
                                                  root_capability=peer.capability + 9,
                                                  role=pp.ROLE_DESIGNATED)),
        ("foreign root at cost 0", variant(root_cost=0)),
        ("foreign root at age 0", variant(age=0)),
        # a well-formed root advertisement, so that only the identity is wrong with it
        ("the broker's own identity as sender", variant(sender_id=a_id, root_id=a_id,
                                                        root_cost=0, age=0,
                                                        root_capability=good.sender_capability,
                                                        role=pp.ROLE_DESIGNATED)),
    ]
    rng = random.Random(8)
    wanted = len(out) + 8
    while len(out) < wanted:
        data = bytes(rng.randrange(256) for _ in range(rng.choice([3, 31, 31, 43, 200])))
        if rng.random() < 0.5:
            data = b"\x01" + data[1:]
        try:
            pp.Bpdu.decode(data)
            continue  # valid by chance: not garbage
        except pp.BpduError:
            out.append(("random %d bytes" % len(data), data))
    return out


def wait_settled(read, quiet, timeout=20.0):
    """read() once it has returned the same value for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "still changing after %.0f s: %r" % (timeout, value)
        time.sleep(0.05)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


def test_garbage_bpdus_rejected_tree_unchanged(net):
    peer = net.linked_raw_peer()
    peer_id = peer.identity
    watched = ["epoch", "topology_changes", "root/id", "hops", "root/link",
               "peers/%s/role" % net.b_id, "peers/%s/forwarding" % net.b_id,
               "peers/%s/state" % peer_id, "peers/%s/role" % peer_id,
               "peers/%s/forwarding" % peer_id]
    # settled: nothing changes any more while valid hellos keep coming (0.6 s without a
    # change; on a loaded machine the raw peer's arrival may take longer to settle)
    before = wait_settled(lambda: {k: net.sys.get(k) for k in watched}, 0.6)
    assert before["root/id"] == net.a_id and before["peers/%s/forwarding" % peer_id] == "1"
    rejected_before = int(net.sys.get("bpdus/rejected"))
    log_before = net.a.log_text().count("MQTT-ST: rejected BPDU from %s" % peer_id)

    garbage = garbage_bpdus(peer, net.a_id)
    for label, data in garbage:
        assert peer.send_bpdu(data), label
        time.sleep(0.01)
    peer.wait_all_pings_answered()

    net.sys.wait("bpdus/rejected", lambda v: int(v) >= rejected_before + len(garbage))
    wait_until(lambda: net.a.log_text().count("MQTT-ST: rejected BPDU from %s: " % peer_id)
               >= log_before + len(garbage), what="a warning per rejected BPDU")
    time.sleep(0.5)
    assert int(net.sys.get("bpdus/rejected")) == rejected_before + len(garbage)
    assert {k: net.sys.get(k) for k in watched} == before
    assert "it claims this broker's identity" in net.a.log_text()
    assert not peer.out.closed.is_set(), "the broker closed the peer's connection"
    peer.wait_all_pings_answered()
    assert_undisturbed(net)


def test_empty_pingreq_on_a_peer_link_is_a_keepalive(net):
    peer = net.linked_raw_peer()
    rejected = int(net.sys.get("bpdus/rejected"))
    for _ in range(3):
        peer.send_bpdu(b"")
    peer.wait_all_pings_answered()
    time.sleep(0.3)
    assert int(net.sys.get("bpdus/rejected")) == rejected
    assert net.sys.get("peers/%s/state" % peer.identity) == "up"


# ---------------------------------------------------------------- a peer that stops answering

def test_silent_connect_back_dropped_within_max_age(net):
    stolen = StolenTime(net.a)
    peer = net.raw_peer(answer_pings=False)
    assert peer.dialback_up.wait(15.0), peer.dialback_errors
    first = peer.dialbacks[0]
    up_at = peer.dialback_up_at
    assert first.closed.wait(MAX_AGE + 10.0), "the broker kept a silent connection"
    elapsed = first.closed_at - up_at
    # at most 0.8 s late, plus the time the broker and the test waited for a CPU
    assert 0.8 * MAX_AGE <= elapsed <= MAX_AGE + 0.8 + stolen.seconds(), (
        elapsed, stolen.seconds())
    net.a.wait_log("no PINGRESP within stp_max_age")
    assert peer.broker_bpdus, "the broker sent no BPDU on its connection"
    assert "up" in net.sys.values("peers/%s/state" % peer.identity)
    net.sys.wait("peers/%s/state" % peer.identity, lambda v: v != "up")
    assert_undisturbed(net)


# ---------------------------------------------------------------- PUBLISH from peers

def origin(peer, seq, incarnation=0x0123456789ABCDEF):
    return pp.origin_value(peer.identity, incarnation, seq)


def subscribe_raw_topics(net):
    net.client_a.subscribe("raw/#", 1)
    net.client_b.subscribe("raw/#", 1)
    wait_link_wants(net.a, net.b_id, "raw/#")   # what a raw peer sends A goes on to B
    wait_link_wants(net.b, net.a_id, "raw/#")


def test_stamped_peer_publish_is_delivered(net):
    # The control for the bad PUBLISH tests: a well-formed one reaches both brokers.
    peer = net.linked_raw_peer()
    subscribe_raw_topics(net)
    peer.publish("raw/ok", b"stamped", origin=origin(peer, 1))
    exactly_one(net.client_a, b"stamped")
    exactly_one(net.client_b, b"stamped")


BAD_ORIGINS = [
    pytest.param(None, id="missing"),
    pytest.param("", id="empty"),
    pytest.param("{id}", id="identity-only"),
    pytest.param("{id} 0123456789abcdef 7", id="no-wall-time"),
    pytest.param("{id} 0123456789abcdef 7 1764020000123", id="no-qos"),
    pytest.param("{id} 0123456789abcdef 7 1764020000123 3", id="qos-3"),
    pytest.param("{id} 0123456789abcdef 0 1764020000123 2", id="sequence-0"),
    pytest.param("{id} zz 7 1764020000123 2", id="incarnation-not-hex"),
    pytest.param("127.0.0.1 0123456789abcdef 7 1764020000123 2", id="identity-without-port"),
    pytest.param("{id} 0123456789abcdef 7 1764020000123 2 junk", id="trailing-junk"),
    pytest.param("{id} 0123456789abcdef -1 1764020000123 2", id="negative-sequence"),
    pytest.param("{id} 0123456789abcdef +7 1764020000123 2", id="signed-sequence"),
    pytest.param("{id} 0123456789abcdef 7 -1764020000123 2", id="negative-time"),
    pytest.param("{id} ff 7 1764020000123 2", id="incarnation-not-16-digits"),
]


@pytest.mark.parametrize("bad", BAD_ORIGINS)
def test_peer_publish_with_bad_origin_closes_the_connection(net, bad):
    peer = net.linked_raw_peer()
    subscribe_raw_topics(net)
    value = None if bad is None else bad.format(id=peer.identity)
    peer.publish("raw/bad", b"must not arrive", origin=value, wait=False)
    got = peer.out.wait_closed(3.0)
    disconnects = [mp.Disconnect(p) for p in got if p.type == mp.DISCONNECT]
    assert [d.reason for d in disconnects] == [pp.RC_PROTOCOL_ERROR], got
    net.client_a.expect_no_message(0.5)
    net.client_b.expect_no_message(0.1)
    net.a.wait_log("MQTT-ST: bad packet (type 3) from peer %s" % peer.identity)
    assert_undisturbed(net)


def test_same_origin_and_sequence_delivered_once(net):
    peer = net.linked_raw_peer()
    subscribe_raw_topics(net)
    dups = int(net.sys.get("messages/duplicates"))
    o = origin(peer, 41)
    peer.publish("raw/dup", b"first copy", origin=o)
    peer.publish("raw/dup", b"second copy", origin=o)           # another packet id
    peer.publish("raw/dup", b"first copy", origin=o, dup=True)  # the DUP flag changes nothing
    peer.publish("raw/dup", b"next", origin=origin(peer, 42))
    assert [m.payload for m in net.client_a.get_messages(2)] == [b"first copy", b"next"]
    assert [m.payload for m in net.client_b.get_messages(2)] == [b"first copy", b"next"]
    net.client_a.expect_no_message(0.3)
    net.client_b.expect_no_message(0.1)
    net.sys.wait("messages/duplicates", lambda v: int(v) >= dups + 2)
    assert not peer.out.closed.is_set()
    assert_undisturbed(net)


def test_peer_publish_to_sys_not_delivered(net):
    peer = net.linked_raw_peer()
    net.client_a.subscribe("$SYS/broker/injected/#", 1)
    net.client_b.subscribe("$SYS/broker/injected/#", 1)
    discarded = int(net.sys.get("messages/discarded"))
    peer.publish("$SYS/broker/injected/x", b"fake", origin=origin(peer, 1))
    peer.publish("$SYS/broker/injected/y", b"fake retained", origin=origin(peer, 2),
                 retain=True)
    net.client_a.expect_no_message(0.5)
    net.client_b.expect_no_message(0.1)
    net.sys.wait("messages/discarded", lambda v: int(v) >= discarded + 2)
    assert not peer.out.closed.is_set()
    # Nor was anything retained: a new subscriber gets nothing either.
    net.client_a.subscribe("$SYS/broker/injected/#", 1)
    net.client_a.expect_no_message(0.3)
    assert_undisturbed(net)
