"""MQTT-ST peer links over TLS (arbor.conf(5) PEERS: peer_cafile, peer_capath, peer_certfile,
peer_keyfile; docs/mqtt-st-protocol.md 1.2): who is admitted as a peer and who is not, the
dialler's check of the broker it dials, SIGHUP and the peer certificate, the identity taken
from the TLS listener, and start-up errors. The trees themselves run over TLS in
test_peer_tree.py (every shape) and test_peer_failures.py (root killed).

Certificates come from tlscerts.make_peer_pki (peer_net.tls_peer_pki): a peer CA issuing every
broker's certificate (IP SAN 127.0.0.1), a peer-CA certificate naming another address, one
shaped like a peer's from another CA (rogue), and a client CA with an ordinary client
certificate. Raw peers are played over Python's ssl module, read and written from the test's
thread only (TlsConn).

Most tests run A (b0, root) -- B (b1), a peer_net.Cluster over TLS whose peer listeners trust
the peer CA and the client CA (one listener for peers and certificate clients, the case where
the peer CA must be checked explicitly), and end by checking that the A-B link never went down
and still carries messages both ways.
"""

import os
import signal
import socket
import ssl
import time
import uuid

import pytest

import mqttproto as mp
import peerproto as pp
from helpers import HOST, free_port, wait_until
from peer_net import DEFAULT_SECRET, tls_peer_pki
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only

HELLO = 0.2
MAX_AGE = 1.0


@pytest.fixture(scope="module")
def pki():
    return tls_peer_pki(10)


class TlsConn:
    """A connection to port, over TLS (presenting pki[cert] when cert is given) or plain TCP,
    read and written only from the calling thread (an SSL object must not be used by two
    threads at once). Enough for peerproto.client_handshake: send(), recv(timeout)."""

    def __init__(self, pki, port, cert=None, tls=True):
        sock = socket.create_connection((HOST, port), timeout=5)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(pki["peer_ca"])
            if cert:
                ctx.load_cert_chain(pki[cert], pki[cert + "_key"])
            sock = ctx.wrap_socket(sock, server_hostname=HOST)
        self.sock = sock
        self.buf = bytearray()

    def send(self, data):
        self.sock.sendall(bytes(data))

    def recv(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            pkt = mp.take_packet(self.buf)
            if pkt is not None:
                return pkt
            left = deadline - time.monotonic()
            if left <= 0:
                raise mp.PacketTimeout("no packet within %.1fs" % timeout)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as e:          # ssl.SSLError too: a TLS alert
                raise mp.ConnectionClosed(repr(e))
            if not data:
                raise mp.ConnectionClosed("closed")
            self.buf += data

    def connack(self, timeout=5.0):
        pkt = self.recv(timeout)
        assert pkt.type == mp.CONNACK, pkt
        return mp.Connack(pkt, mp.MQTT5)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class TlsNet:
    """A (b0, root) -- B (b1) over TLS, peer listeners trusting the peer and client CAs, a
    normal client on each subscribed to norm/#, A's $SYS/broker/stp watched."""

    def __init__(self, make, pki, secret=None):
        self.pki = pki
        self.secret = secret
        self.c = make(2, [(0, 1)], [1000, 500], tls=pki, secret=secret,
                      tls_listener_ca=pki["listener_ca"])
        self.c.wait_tree(timeout=10)
        self.a, self.b = self.c.brokers
        self.sys = pp.SysWatch(self.a)
        self.b_state = "peers/%s/state" % self.b.identity
        self.sys.wait(self.b_state, "up")
        self.b_state_seen = len(self.sys.values(self.b_state)) - 1
        self.client_a = self.c.client(0, version=5)
        self.client_a.subscribe("norm/#", 1)
        self.client_b = self.c.client(1, version=5)
        self.client_b.subscribe("norm/#", 1)
        self.c.wait_interest("norm/#", [0, 1])
        self.assert_undisturbed()

    def dial(self, cert=None, tls=True):
        """A raw connection to A's peer listener (tls) or to its plain client port."""
        return TlsConn(self.pki, self.a.peer_port if tls else self.a.port, cert, tls)

    def assert_undisturbed(self):
        since_up = self.sys.values(self.b_state)[self.b_state_seen:]
        assert set(since_up) == {"up"}, self.sys.values(self.b_state)
        tag = uuid.uuid4().hex.encode()
        self.client_a.publish("norm/from-a", b"a" + tag, qos=1)
        self.client_b.publish("norm/from-b", b"b" + tag, qos=1)
        for client in (self.client_a, self.client_b):
            got = sorted(client.get_message(3.0).payload for _ in range(2))
            assert got == [b"a" + tag, b"b" + tag], got
            client.expect_no_message(0.2)

    def assert_never_a_peer(self, identity):
        assert not [t for t in self.sys.topics() if identity in t], self.sys.topics()

    def close(self):
        self.sys.close()


@pytest.fixture
def mtls(cluster, pki):
    """TlsNet without peer_secret: the peer CA alone admits peers."""
    net = TlsNet(cluster, pki)
    yield net
    net.close()


@pytest.fixture
def mtls_secret(cluster, pki):
    """TlsNet with peer_secret: a peer needs both the certificate and the secret."""
    net = TlsNet(cluster, pki, secret=DEFAULT_SECRET)
    yield net
    net.close()


def fake_identity():
    return "127.0.0.1:%d" % free_port()


# ---------------------------------------------------------------- who is a peer (accepting side)

def test_peer_ca_certificate_alone_admits_a_peer(mtls):
    a = mtls.a
    fake = fake_identity()
    conn = mtls.dial(cert="peer5")
    try:
        conn.send(pp.connect_packet(fake, method=None))
        ack = conn.connack()
        assert ack.rc == 0, ack
        assert pp.user_properties(ack.props) == [(pp.ID_PROPERTY, a.identity),
                                                 (pp.INTEREST_PROPERTY, "1")]
    finally:
        conn.close()
    a.wait_log("MQTT-ST: peer %s connected from 127.0.0.1" % fake)
    a.wait_log("(certificate CN=b5)")
    # without a secret, a peer that authenticates is refused, as without TLS
    conn = mtls.dial(cert="peer5")
    try:
        conn.send(pp.connect_packet(fake_identity(), os.urandom(16)))
        assert conn.connack().rc == pp.RC_BAD_AUTHENTICATION_METHOD
    finally:
        conn.close()
    mtls.assert_undisturbed()


def test_client_certificate_of_another_ca_claiming_to_be_a_peer_refused(mtls):
    # The listener trusts the client CA, so the TLS handshake succeeds; the peer CA does not.
    fake = fake_identity()
    conn = mtls.dial(cert="client")
    try:
        conn.send(pp.connect_packet(fake, method=None))
        assert conn.connack().rc == pp.RC_NOT_AUTHORIZED
    finally:
        conn.close()
    mtls.a.wait_log("MQTT-ST: refused peer connection from 127.0.0.1")
    mtls.a.wait_log("no TLS client certificate issued by the peer CA")
    # the same certificate is welcome as an ordinary client on that listener
    conn = mtls.dial(cert="client")
    try:
        conn.send(mp.connect("ordinary-" + uuid.uuid4().hex[:6], version=mp.MQTT5))
        assert conn.connack().rc == 0
    finally:
        conn.close()
    time.sleep(1.2)  # a full sys_interval: nothing about it is ever published
    mtls.assert_never_a_peer(fake)
    mtls.assert_undisturbed()


def test_peer_without_certificate_refused(mtls):
    # The peer listener requires a certificate: the handshake fails, no CONNACK ever comes.
    conn = mtls.dial(cert=None)
    try:
        conn.send(pp.connect_packet(fake_identity(), method=None))
        with pytest.raises(mp.ConnectionClosed):
            conn.recv(3.0)
    except (ssl.SSLError, OSError):
        pass  # refused during the handshake or the write
    finally:
        conn.close()
    mtls.a.wait_log("Client connection from 127.0.0.1")
    # On a plain listener there is no certificate at all.
    fake = fake_identity()
    conn = mtls.dial(tls=False)
    try:
        conn.send(pp.connect_packet(fake, method=None))
        assert conn.connack().rc == pp.RC_NOT_AUTHORIZED
    finally:
        conn.close()
    mtls.a.wait_log("no TLS client certificate issued by the peer CA")
    mtls.assert_never_a_peer(fake)
    mtls.assert_undisturbed()


def rogue_lines(pki, peer_port, capability, *extra, cert="rogue", ca="rogue_ca"):
    """A broker's TLS peer listener and peer TLS, with the given certificate."""
    return ["listener %d %s" % (peer_port, HOST),
            "certfile " + pki[cert], "keyfile " + pki[cert + "_key"],
            "cafile " + pki[ca], "require_certificate true",
            "peer_identity %s:%d" % (HOST, peer_port),
            "stp_capability %d" % capability,
            "stp_hello_interval %g" % HELLO, "stp_max_age %g" % MAX_AGE,
            "peer_restart_timeout 0.1 1", "sys_interval 1",
            "peer_cafile " + pki["peer_ca"],
            "peer_certfile " + pki[cert], "peer_keyfile " + pki[cert + "_key"]] + list(extra)


def test_broker_with_certificate_of_another_ca_refused(mtls, broker, pki):
    # A real broker whose certificate (shaped like a peer's) comes from another CA dials A.
    rogue_port = free_port()
    rogue = broker(*rogue_lines(pki, rogue_port, 5000,
                                "peer %s:%d" % (HOST, mtls.a.peer_port)))
    rogue.wait_log("MQTT-ST: cannot connect to %s:%d" % (HOST, mtls.a.peer_port), timeout=15)
    mtls.a.wait_log("Client connection from 127.0.0.1", timeout=15)
    assert "unable to get local issuer certificate" in mtls.a.log_text()
    time.sleep(1.2)
    mtls.assert_never_a_peer("%s:%d" % (HOST, rogue_port))
    snap = mtls.c.snapshot()
    assert snap.root == mtls.a.identity        # its capability 5000 won nothing
    mtls.assert_undisturbed()


# ---------------------------------------------------------------- the dialler's check

@pytest.mark.parametrize("cert,why", [
    pytest.param("rogue", "unable to get local issuer certificate", id="another-ca"),
    pytest.param("elsewhere", "IP address mismatch", id="names-another-address"),
])
def test_dialled_broker_must_show_a_peer_ca_certificate_naming_the_address(mtls, broker, pki,
                                                                            cert, why):
    target_port = free_port()
    broker("listener %d %s" % (target_port, HOST), "certfile " + pki[cert],
           "keyfile " + pki[cert + "_key"], "cafile " + pki["peer_ca"],
           "require_certificate true")
    a = mtls.c.brokers[0]
    with open(a.conf_path, "w") as f:
        f.write("\n".join(mtls.c.config_lines(0) + ["peer %s:%d" % (HOST, target_port)]) + "\n")
    a.signal(signal.SIGHUP)
    a.wait_log("MQTT-ST: peer %s:%d added by the configuration." % (HOST, target_port))
    a.wait_log("TLS connection to %s:%d failed: certificate verify failed (%s)."
               % (HOST, target_port, why))
    a.wait_log("MQTT-ST: cannot connect to %s:%d" % (HOST, target_port))
    mtls.assert_undisturbed()


# ---------------------------------------------------------------- with a secret too

def test_secret_still_checked_over_tls(mtls_secret):
    net, a = mtls_secret, mtls_secret.a
    fake = fake_identity()
    conn = net.dial(cert="peer5")
    try:
        hs = pp.client_handshake(conn, DEFAULT_SECRET, fake, proof_secret="not-the-secret-at-all")
        assert hs["server_proof_ok"] and hs["server_id"] == a.identity
        assert hs["connack"].rc == pp.RC_NOT_AUTHORIZED
    finally:
        conn.close()
    a.wait_log("failed authentication: its proof does not match our peer_secret")
    # a certificate without the secret is not enough either
    conn = net.dial(cert="peer5")
    try:
        conn.send(pp.connect_packet(fake_identity(), method=None))
        assert conn.connack().rc == pp.RC_BAD_AUTHENTICATION_METHOD
    finally:
        conn.close()
    # and the secret does not replace the certificate: a client CA's, or none (plain TCP)
    for kwargs in ({"cert": "client"}, {"tls": False}):
        conn = net.dial(**kwargs)
        try:
            hs = pp.client_handshake(conn, DEFAULT_SECRET, fake_identity())
            assert hs["auth"] is None and hs["connack"].rc == pp.RC_NOT_AUTHORIZED, kwargs
        finally:
            conn.close()
    # both together admit the peer
    admitted = fake_identity()
    conn = net.dial(cert="peer6")
    try:
        hs = pp.client_handshake(conn, DEFAULT_SECRET, admitted)
        assert hs["server_proof_ok"] and hs["connack"].rc == 0
    finally:
        conn.close()
    a.wait_log("MQTT-ST: peer %s connected from 127.0.0.1" % admitted)
    net.assert_never_a_peer(fake)
    net.assert_undisturbed()


# ---------------------------------------------------------------- SIGHUP

def link_state(c):
    return c.snapshot().peer_value(0, 1, "state")


def test_sighup_reloads_the_peer_certificate_for_new_dials(cluster, pki):
    c = cluster(2, [(0, 1)], [1000, 500], tls=pki, secret=None)
    c.wait_tree(timeout=10)
    b = c.brokers[1]

    def reconfigure(cert, key):
        lines = [line for line in c.config_lines(1)
                 if not line.startswith(("peer_certfile ", "peer_keyfile "))]
        with open(b.conf_path, "w") as f:
            f.write("\n".join(lines + ["peer_certfile " + cert, "peer_keyfile " + key]) + "\n")
        reloads = b.log_text().count("Reloading config file")
        b.signal(signal.SIGHUP)
        wait_until(lambda: b.log_text().count("Reloading config file") > reloads, timeout=15,
                   what="b1 reloading")

    def cut_and_heal():
        c.cut(0, 1)
        wait_until(lambda: link_state(c) != "up", timeout=15, what="link down after the cut")
        c.heal(0, 1)

    # b1's peer certificate replaced by one of another CA: the open link stays up...
    reconfigure(pki["rogue"], pki["rogue_key"])
    time.sleep(0.5)
    assert link_state(c) == "up"
    # ...but b1's next dial is refused by b0, so the link cannot come back
    refusals = c.brokers[0].log_text().count("Client connection from 127.0.0.1")
    cut_and_heal()
    wait_until(lambda: c.brokers[0].log_text().count("Client connection from 127.0.0.1") >
               refusals, timeout=15, what="b0 refusing b1's new certificate")
    time.sleep(2 * MAX_AGE)
    assert link_state(c) != "up"
    # the right certificate again: b1's dials succeed
    reconfigure(pki["peer1"], pki["peer1_key"])
    c.wait_tree(timeout=10)
    # a certificate that does not load: the reload fails and the one in use stays
    reconfigure(pki["peer1"] + ".missing", pki["peer1_key"])
    b.wait_log("config reload failed; keeping the current configuration")
    assert "peer_certfile: cannot load the certificate chain" in b.log_text()
    cut_and_heal()
    c.wait_tree(timeout=10)


# ---------------------------------------------------------------- identity and configuration

def test_identity_is_the_first_tls_listener_requiring_certificates(broker, pki):
    asks_nothing, requires = free_port(), free_port()
    b = broker("listener %d %s" % (asks_nothing, HOST),
               "certfile " + pki["peer0"], "keyfile " + pki["peer0_key"],
               "listener %d %s" % (requires, HOST),
               "certfile " + pki["peer0"], "keyfile " + pki["peer0_key"],
               "cafile " + pki["peer_ca"], "require_certificate true",
               "peer_cafile " + pki["peer_ca"], "peer_certfile " + pki["peer0"],
               "peer_keyfile " + pki["peer0_key"])
    b.wait_log("MQTT-ST: identity %s:%d, capability" % (HOST, requires))
    b.wait_log("MQTT-ST: peer links use TLS; peers authenticate with a certificate of the "
               "peer CA.")
    assert "peer_allow_unauthenticated is set" not in b.log_text()


def test_without_a_tls_listener_requiring_certificates_peer_identity_is_needed(run_broker,
                                                                              pki):
    port = free_port()
    rc, out = run_broker(conf_lines=["listener %d %s" % (port, HOST),
                                     "peer_cafile " + pki["peer_ca"],
                                     "peer_certfile " + pki["peer0"],
                                     "peer_keyfile " + pki["peer0_key"]])
    assert rc not in (0, None), out
    assert "no TLS listener with require_certificate true" in out, out


@pytest.mark.parametrize("lines,message", [
    pytest.param(lambda p: ["peer_certfile " + p["peer0"] + ".missing",
                            "peer_keyfile " + p["peer0_key"]],
                 ":3: peer_certfile: cannot load the certificate chain", id="missing-certificate"),
    pytest.param(lambda p: ["peer_certfile " + p["peer0"], "peer_keyfile " + p["peer1_key"]],
                 ":4: peer_keyfile: the private key in", id="key-of-another-certificate"),
    pytest.param(lambda p: ["peer_certfile " + p["peer0"], "peer_keyfile " + p["peer0_key"],
                            "peer_cafile " + p["peer_ca"] + ".missing"],
                 ":5: peer_cafile: cannot load CA certificates", id="missing-ca"),
])
def test_peer_tls_files_that_do_not_load_stop_the_start(run_broker, pki, lines, message):
    conf = ["listener %d %s" % (free_port(), HOST), "peer_identity 127.0.0.1:1884"]
    conf += lines(pki)
    if not any(line.startswith("peer_cafile") for line in conf):
        conf.append("peer_cafile " + pki["peer_ca"])
    rc, out = run_broker(conf_lines=conf)
    assert rc not in (0, None), out
    assert message in out, out


def test_connect_back_over_tls_with_peer_capath_and_a_host_name(broker, pki):
    """Two brokers directly, trusting the peer CA through peer_capath. Only b1 has a peer
    line, naming b0 by host name (the certificate's DNS name; by address when localhost does
    not resolve to 127.0.0.1 first); b0 dials back to the identity b1 announced, over TLS,
    checking its address against the certificate."""
    ports = [free_port(), free_port()]
    first = socket.getaddrinfo("localhost", ports[0], type=socket.SOCK_STREAM)[0]
    by_name = first[0] == socket.AF_INET and first[4][0] == HOST
    brokers = []
    for i in (0, 1):
        lines = ["listener %d %s" % (ports[i], HOST),
                 "certfile " + pki["peer%d" % i], "keyfile " + pki["peer%d_key" % i],
                 "cafile " + pki["peer_ca"], "require_certificate true",
                 "stp_hello_interval %g" % HELLO, "stp_max_age %g" % MAX_AGE,
                 "peer_restart_timeout 0.1 1",
                 "peer_capath " + pki["peer_capath"], "peer_certfile " + pki["peer%d" % i],
                 "peer_keyfile " + pki["peer%d_key" % i]]
        if i == 1:
            lines.append("peer %s:%d" % ("localhost" if by_name else HOST, ports[0]))
        brokers.append(broker(*lines))
    for i in (0, 1):
        brokers[i].wait_log("MQTT-ST: link to %s:%d up" % (HOST, ports[1 - i]), timeout=10)
    brokers[0].wait_log("MQTT-ST: connected to %s:%d" % (HOST, ports[1]))  # the dial back
    brokers[1].wait_log("(certificate CN=b0)")
