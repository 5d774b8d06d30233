"""MQTT over WebSockets over TLS (wss): a `listener` with `protocol websockets` and certfile /
keyfile (arbor.conf(5) "WEBSOCKETS" and "TLS"), with certificates the test makes with the
openssl command line (tlscerts.py; no key is committed).

paho-mqtt over wss and Debian's mosquitto_pub / mosquitto_sub on a TCP listener talk to each
other both ways, with small and large messages and bursts of packets. A client that does not
trust the broker's CA gives up; with require_certificate a client certificate of the CA gets
in and none, another CA's, an expired or a revoked one do not (crlfile), each refusal logged
with OpenSSL's reason. use_identity_as_username / use_subject_as_username take the user name
from the certificate. A plain WebSocket client, bytes that are not TLS and a TLS client
speaking garbage are dropped without harming a connected client. http_dir is served over
HTTPS. capath, dhparamfile, tls_version and the cipher lists apply. Two wss listeners serve
their own certificates. SIGHUP: new connections get the renewed certificate, open ones go on, and the
old certificate is let go of once its last connection closes; a reload whose files are bad
keeps the current one. Bad files stop the start with file:line. (A real browser over wss:
test_websockets.py, the last test.)

The tests not marked arbor_only also pass against Debian's mosquitto 2.0.11
(ARBOR_BIN=/usr/sbin/mosquitto), which is how their expectations were checked; on websockets
listeners Mosquitto 2.0.11 ignores capath, crlfile, dhparamfile and tls_version and does not
reload the certificate on SIGHUP.
"""

import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

import mqttproto as mp
import tlscerts
import wsproto
from conftest import port_listening
from helpers import ARBOR_BIN, HOST, IS_MOSQUITTO, free_port, wait_until

PUB = shutil.which("mosquitto_pub")
SUB = shutil.which("mosquitto_sub")
OPENSSL = tlscerts.OPENSSL

pytestmark = pytest.mark.skipif(not (PUB and SUB and os.access(OPENSSL, os.X_OK)),
                                reason="needs mosquitto-clients and the openssl command")


@pytest.fixture(scope="module")
def pki():
    """The certificates of tlscerts.make_pki, once for the module, in a directory the broker
    can still read after dropping privileges (when the suite runs as root)."""
    top = tempfile.mkdtemp(prefix="arbor-wss-")
    os.chmod(top, 0o755)
    try:
        yield tlscerts.make_pki(os.path.join(top, "pki"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def wss_lines(pki, port, *lines, cert="server", ca=True):
    out = ["listener %d %s" % (port, HOST), "protocol websockets",
           "certfile " + pki[cert], "keyfile " + pki[cert + "_key"]]
    if ca:
        out.append("cafile " + pki["ca"])
    return out + list(lines)


def wss_broker(broker, pki, *ws_lines, before=(), after=(), ca=True, **kw):
    """A broker with its usual TCP listener (b.port) and a wss listener (b.ws_port); before
    go ahead of the wss listener (global settings), ws_lines into its block, after behind."""
    ws_port = free_port()
    b = broker(*(list(before) + wss_lines(pki, ws_port, *ws_lines, ca=ca) + list(after)), **kw)
    wait_until(lambda: port_listening(HOST, ws_port), what="wss listener")
    b.ws_port = ws_port
    return b


def client_context(pki, cert=None, ca="ca", maximum=None):
    ctx = ssl.create_default_context(cafile=pki[ca])
    if cert:
        ctx.load_cert_chain(pki[cert], pki[cert + "_key"])
    if maximum:
        ctx.maximum_version = maximum
    return ctx


def wss_paho(mqtt, b, pki, cert=None, port=None, **kw):
    """paho-mqtt over wss (transport="websockets" with a TLS context), connected."""
    return mqtt(b, transport="websockets", port=port or b.ws_port,
                tls_context=client_context(pki, cert), **kw)


def wss_raw(b, pki, cid=None, cert=None, port=None, version=mp.MQTT311, **kw):
    """A raw MQTT client (mqttproto.RawClient) over wss; connected as cid if given."""
    c = wsproto.ws_raw_client(HOST, port or b.ws_port, version=version,
                              ssl_context=client_context(pki, cert), **kw)
    if cid:
        c.connect(cid)
    return c


def paho_refused(mqtt, b, pki, cert=None, ca="ca"):
    """True when a paho client over wss does not get connected: the TLS handshake or the
    WebSocket upgrade fails (an exception in connect) or no CONNACK comes."""
    try:
        c = mqtt(b, transport="websockets", port=b.ws_port,
                 tls_context=client_context(pki, cert, ca), connect=False, timeout=3)
        c.connect()
    except (OSError, AssertionError, ValueError) as e:   # ssl.SSLError is an OSError
        return repr(e) or True
    return False


def run(argv, timeout=20, stdin=""):
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)


def tcp_pub(b, topic, message, qos=1):
    return run([PUB, "-h", HOST, "-p", str(b.port), "-t", topic, "-m", message, "-q", str(qos)])


def tcp_sub(b, topic, count=1, extra=()):
    """mosquitto_sub on the TCP listener printing "topic payload" lines."""
    return subprocess.Popen([SUB, "-h", HOST, "-p", str(b.port), "-t", topic, "-v", "-C",
                             str(count), "-W", "20"] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_subscribed(b, topic, count=1):
    """Both brokers log each subscription's filter on a line of its own (log_type all)."""
    wait_until(lambda: b.log_text().count("\t%s (QoS" % topic) >= count,
               what="subscription to %s" % topic)


def s_client(port, *args):
    """openssl s_client against a listener; returns (returncode, output)."""
    argv = [OPENSSL, "s_client", "-connect", "%s:%d" % (HOST, port), "-servername",
            "localhost"] + list(args)
    r = run(argv)
    return r.returncode, r.stdout + r.stderr


def s_client_ok(port, *args):
    rc, out = s_client(port, *args)
    return rc == 0 and "Cipher is (NONE)" not in out and re.search(r"Cipher is \S+", out)


def served_serial(port, pki):
    """The serial number of the certificate the listener presents now."""
    rc, out = s_client(port, "-CAfile", pki["ca"], "-verify_return_error")
    assert rc == 0, out
    pem = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
    assert pem, out
    return tlscerts.serial_of(pem=pem.group(0))


def closed_soon(sock, timeout=10.0):
    """True if the peer closes sock within timeout (whatever it sends before)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except socket.timeout:
        return False
    return False


# ---------------------------------------------------------------- MQTT over wss

@pytest.mark.parametrize("version", [4, 5])
def test_paho_wss_and_tcp_tools_both_ways(broker, mqtt, pki, version):
    b = wss_broker(broker, pki)
    tool_version = {4: "mqttv311", 5: "mqttv5"}[version]
    sub = tcp_sub(b, "wss/out", count=2, extra=["-V", tool_version, "-q", "1"])
    try:
        wait_subscribed(b, "wss/out")
        ws = wss_paho(mqtt, b, pki, client_id="paho-wss", version=version)
        assert ws.subscribe("wss/in", qos=1) == [1]
        # wss -> TCP: a small message and one of many TLS records and WebSocket frames
        big = bytes(range(256)) * 1200
        ws.publish("wss/out", b"from wss", qos=1)
        ws.publish("wss/out", big, qos=1)
        out, err = sub.communicate(timeout=20)
        assert sub.returncode == 0, err
        assert out.startswith(b"wss/out from wss\nwss/out " + big[:100]), out[:200]
        # TCP -> wss, QoS 0 to 2
        for qos in (0, 1, 2):
            r = run([PUB, "-h", HOST, "-p", str(b.port), "-V", tool_version, "-t", "wss/in",
                     "-q", str(qos), "-m", "from tcp q%d" % qos])
            assert r.returncode == 0, r.stderr
        got = [(m.topic, m.payload) for m in ws.get_messages(3)]
        assert got == [("wss/in", b"from tcp q%d" % q) for q in (0, 1, 2)]
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()


def test_large_messages_and_bursts_arrive_whole(broker, mqtt, pki):
    # Several MB in one packet, and a burst of small packets in big frames: many TLS records
    # per read of the socket, packets across records and frames.
    b = wss_broker(broker, pki, before=["max_queued_messages 0"])
    sub = mqtt(b, client_id="tcp-sub")
    assert sub.subscribe("burst/#", qos=0) == [0]
    pub = wss_raw(b, pki, "wss-blaster")
    big = os.urandom(3 << 20)
    pub.publish("burst/big", big)
    count = 20000
    packets = [mp.publish("burst/small", b"%07d" % i) for i in range(count)]
    for start in range(0, count, 2000):
        pub.send(b"".join(packets[start:start + 2000]))
    got = sub.get_messages(count + 1, timeout=30)
    assert got[0].payload == big
    assert [m.payload for m in got[1:]] == [b"%07d" % i for i in range(count)]
    pub.send(mp.pingreq())
    assert pub.recv_type(mp.PINGRESP)


def test_client_that_does_not_trust_the_ca_gives_up(broker, mqtt, pki):
    b = wss_broker(broker, pki)
    good = wss_paho(mqtt, b, pki, client_id="good")
    assert good.subscribe("ca/#", qos=1) == [1]
    why = paho_refused(mqtt, b, pki, ca="other_ca")
    assert why and "CERTIFICATE_VERIFY_FAILED" in why, why
    good.publish("ca/1", b"unharmed", qos=1)
    assert good.get_message().payload == b"unharmed"
    if not IS_MOSQUITTO:
        b.wait_log("alert unknown ca")


def strict_broker(broker, pki, *lines, **kw):
    return wss_broker(broker, pki, "require_certificate true", "crlfile " + pki["crl"],
                      *lines, **kw)


def test_client_certificate_required(broker, mqtt, pki):
    b = wss_broker(broker, pki, "require_certificate true")
    good = wss_paho(mqtt, b, pki, cert="alice", client_id="good")
    assert good.subscribe("cert/#", qos=1) == [1]
    for cert in [None, "stranger", "expired"]:
        assert paho_refused(mqtt, b, pki, cert=cert), "%s: accepted" % cert
    other = wss_raw(b, pki, "bob-raw", cert="bob")
    other.publish("cert/bob", b"bob's certificate is fine", qos=1)
    assert good.get_message().payload == b"bob's certificate is fine"
    assert good.client.is_connected()


@pytest.mark.arbor_only   # Mosquitto 2.0.11 ignores crlfile on websockets listeners
def test_crlfile_refuses_a_revoked_certificate(broker, mqtt, pki):
    b = strict_broker(broker, pki)
    assert paho_refused(mqtt, b, pki, cert="revoked")
    assert not paho_refused(mqtt, b, pki, cert="bob")
    # the positive control: without the CRL the same certificate gets in
    b2 = wss_broker(broker, pki, "require_certificate true")
    assert not paho_refused(mqtt, b2, pki, cert="revoked")


@pytest.mark.arbor_only
def test_refused_certificates_are_logged_with_address_and_reason(broker, mqtt, pki):
    b = strict_broker(broker, pki)
    reasons = {None: "peer did not return a certificate",
               "stranger": "(unable to get local issuer certificate)",
               "expired": "(certificate has expired)",
               "revoked": "(certificate revoked)"}
    for cert, reason in reasons.items():
        assert paho_refused(mqtt, b, pki, cert=cert)
        b.wait_log(reason)
    log = b.log_text()
    assert log.count("OpenSSL Error[0]: error:") == 4, log
    assert re.search(r"Client connection from 127\.0\.0\.1:\d+ failed: certificate verify "
                     r"failed \(certificate revoked\)\.", log), log
    # a failed handshake is not an MQTT client: no "New connection" or "closed" line for it
    assert "New connection from" not in log and "<unknown>" not in log, log


# ---------------------------------------------------------------- certificate names as users

def test_identity_as_username_over_wss(broker, mqtt, pki, tmp_path):
    acl = tmp_path / "acl"
    acl.write_text("user alice\ntopic readwrite alice/#\nuser bob\ntopic read alice/#\n")
    b = strict_broker(broker, pki, "use_identity_as_username true", "acl_file %s" % acl,
                      before=["allow_anonymous false", "log_dest stderr", "log_type all"],
                      defaults=False)
    bob = wss_paho(mqtt, b, pki, cert="bob", client_id="bob-sub")
    assert bob.subscribe("#", qos=1) == [1]
    b.wait_log("u'bob'")
    alice = wss_paho(mqtt, b, pki, cert="alice", client_id="alice-pub", username="mallory",
                     password="wrong")
    alice.publish("alice/x", b"from alice", qos=1)
    alice.publish("bob/x", b"alice may not", qos=1)
    assert bob.get_message().payload == b"from alice"
    bob.expect_no_message(0.5)
    assert "u'alice'" in b.log_text() and "mallory" not in b.log_text()


def test_subject_as_username_over_wss(broker, mqtt, pki, tmp_path):
    subject = tlscerts.subject_of(pki["alice"])
    acl = tmp_path / "acl"
    acl.write_text("user %s\ntopic readwrite subj/#\n" % subject)
    b = strict_broker(broker, pki, "use_subject_as_username true", "acl_file %s" % acl,
                      before=["allow_anonymous false", "log_dest stderr", "log_type all"],
                      defaults=False)
    alice = wss_paho(mqtt, b, pki, cert="alice", client_id="alice")
    assert alice.subscribe("subj/#", qos=1) == [1]
    assert "u'%s'" % subject in b.log_text()
    bob = wss_paho(mqtt, b, pki, cert="bob", client_id="bob")
    bob.publish("subj/1", b"bob is nobody here", qos=1)
    alice.publish("subj/2", b"by subject", qos=1)
    assert alice.get_message().payload == b"by subject"
    alice.expect_no_message(0.3)


# ---------------------------------------------------------------- robustness

def test_plain_and_garbage_clients_are_dropped_alone(broker, mqtt, pki):
    b = wss_broker(broker, pki, "http_dir " + pki["capath"])
    good = wss_paho(mqtt, b, pki, client_id="good")
    assert good.subscribe("ok/#", qos=1) == [1]
    # a plain (ws://) WebSocket client on the wss port
    with pytest.raises((wsproto.HandshakeRefused, OSError)):
        wsproto.handshake(HOST, b.ws_port)
    # bytes that are not TLS at all, and a ClientHello cut short followed by garbage
    for data in (os.urandom(2000), b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" +
                 os.urandom(600)):
        s = socket.create_connection((HOST, b.ws_port), timeout=5)
        s.sendall(data)
        assert closed_soon(s)
        s.close()
    # a TLS client that speaks garbage instead of HTTP, then one that sends a request lws
    # cannot parse
    for data in (os.urandom(3000), b"\x00\x01\x02 not http at all\r\n\r\n"):
        t = client_context(pki).wrap_socket(socket.create_connection((HOST, b.ws_port),
                                                                     timeout=5),
                                            server_hostname="localhost")
        t.sendall(data)
        assert closed_soon(t)
        t.close()
    # a TLS client whose upgrade names no MQTT subprotocol
    if not IS_MOSQUITTO:   # Mosquitto 2.0.11 answers 101 to an upgrade without a subprotocol
        with pytest.raises(wsproto.HandshakeRefused):
            wsproto.WsSocket(HOST, b.ws_port, protocol="chat", ssl_context=client_context(pki))
    assert good.client.is_connected()
    r = tcp_pub(b, "ok/1", "unharmed")
    assert r.returncode == 0, r.stderr
    assert good.get_message().payload == b"unharmed"
    if not IS_MOSQUITTO:
        log = b.log_text()
        assert "failed: http request." in log, log
        assert "failed: wrong version number." in log or "failed: packet length too long" in log


def rss_bytes(b):
    with open("/proc/%d/status" % b.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def sanitized():
    """ASan's shadow memory and quarantine make RSS meaningless: then only losses count."""
    try:
        with open(ARBOR_BIN, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


@pytest.mark.arbor_only   # Mosquitto 2.0.11 sends every packet in a frame of its own: too slow
def test_flood_without_reading_is_paused(broker, mqtt, pki):
    # A wss client that sends PINGREQ without reading stops being read, TLS or not: the
    # broker's memory does not follow the flood, other clients are served meanwhile, and
    # every PINGREQ gets its PINGRESP once the client reads. Errors, warnings and notices
    # only: a log line per PINGREQ kept the broker busy writing its log for seconds.
    b = wss_broker(broker, pki, before=("allow_anonymous true", "log_dest stderr",
                                        "log_type error", "log_type warning", "log_type notice"),
                   defaults=False)
    c = wss_raw(b, pki, "wss-flooder")
    sock = c.sock.sock                               # the ssl.SSLSocket under the frames
    before = rss_bytes(b)
    pings = 8192
    chunk = wsproto.frame(mp.pingreq() * pings)      # 16 KiB of PINGREQ in one frame
    sock.setblocking(False)
    chunks, pending, blocked = 0, None, False
    start = time.monotonic()
    while time.monotonic() - start < 10.0 and not blocked:
        _, w, _ = select.select([], [sock], [], 0.5)
        if not w:
            blocked = True
            break
        try:
            sock.send(chunk)                         # all of it, or SSLWantWriteError
            chunks += 1
        except (ssl.SSLWantWriteError, BlockingIOError):
            pending = chunk                          # to be offered again, as OpenSSL wants
            blocked = True
    grown = rss_bytes(b) - before
    print("wss PINGREQ flood: %d frames, RSS +%d KiB" % (chunks, grown // 1024))
    assert blocked, "the broker read %d frames of 16 KiB without pausing" % chunks
    if not sanitized():
        assert grown < 4 * 1024 * 1024, "RSS grew by %d bytes" % grown
    other = mqtt(b, client_id="other")
    assert other.subscribe("o/t", qos=0) == [0]
    other.publish("o/t", b"served")
    assert other.get_message().payload == b"served"
    # now read (and finish the frame that did not fit): every PINGREQ gets its PINGRESP
    expected = (chunks + (1 if pending else 0)) * pings * 2
    got = 0
    rx = bytearray()
    deadline = time.monotonic() + 60
    while got < expected:
        assert time.monotonic() < deadline, "only %d of %d bytes of PINGRESP" % (got, expected)
        if pending:
            try:
                sock.send(pending)
                pending = None
            except (ssl.SSLWantWriteError, BlockingIOError):
                pass
        r, _, _ = select.select([sock], [], [], 0.2) if not sock.pending() else ([sock], 0, 0)
        if not r:
            continue
        try:
            data = sock.recv(1 << 20)
        except (ssl.SSLWantReadError, BlockingIOError):
            continue
        assert data, "broker closed the connection after %d bytes" % got
        rx += data
        while True:
            f = wsproto.parse_frame(rx)
            if f is None:
                break
            assert f[1] == wsproto.BINARY
            got += len(f[2])
    assert got == expected


def cpu_seconds(b):
    with open("/proc/%d/stat" % b.proc.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


@pytest.mark.arbor_only
def test_clients_that_close_abruptly_do_not_make_the_broker_spin(broker, mqtt, pki):
    # Clients that close the socket without a TLS close_notify, after the handshake or after
    # the upgrade: libwebsockets' TLS shutdown then waits seconds for a socket that stays
    # readable; the broker must close them, not service them in a loop.
    b = wss_broker(broker, pki)
    good = wss_paho(mqtt, b, pki, client_id="good")
    upgrade = (b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n")
    for request in (None, upgrade, upgrade + wsproto.frame(mp.connect("abrupt"))):
        t = client_context(pki).wrap_socket(socket.create_connection((HOST, b.ws_port),
                                                                     timeout=5),
                                            server_hostname="localhost")
        if request:
            t.sendall(request)
            time.sleep(0.2)
        t.close()                            # no close_notify, no WebSocket close
    time.sleep(0.5)
    before = cpu_seconds(b)
    time.sleep(1.5)
    used = cpu_seconds(b) - before
    assert used < 0.3, "broker used %.2f s of CPU in 1.5 s after the clients left" % used
    assert good.subscribe("still/here", qos=1) == [1]


def test_http_dir_over_https(broker, pki, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_bytes(b"<p>hello over https</p>\n")
    os.chmod(str(www), 0o755)
    os.chmod(str(www / "index.html"), 0o644)
    b = wss_broker(broker, pki, "http_dir %s" % www)
    t = client_context(pki).wrap_socket(socket.create_connection((HOST, b.ws_port), timeout=5),
                                        server_hostname="localhost")
    t.sendall(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    t.settimeout(5)
    while True:
        try:
            more = t.recv(65536)
        except (ssl.SSLError, ConnectionResetError):
            break
        if not more:
            break
        data += more
        if data.endswith(b"<p>hello over https</p>\n"):
            break
    t.close()
    assert re.match(rb"HTTP/1\.[01] 200 ", data), data[:200]
    assert data.endswith(b"<p>hello over https</p>\n"), data[-200:]


# ---------------------------------------------------------------- versions, ciphers, listeners

@pytest.mark.arbor_only   # Mosquitto 2.0.11 ignores tls_version on websockets listeners
def test_tls_version_is_the_lowest_allowed(broker, mqtt, pki):
    b = wss_broker(broker, pki, "tls_version tlsv1.3")
    assert s_client_ok(b.ws_port, "-tls1_3")
    assert not s_client_ok(b.ws_port, "-tls1_2")
    with pytest.raises(ssl.SSLError):
        client_context(pki, maximum=ssl.TLSVersion.TLSv1_2).wrap_socket(
            socket.create_connection((HOST, b.ws_port), timeout=5), server_hostname="localhost")
    c = wss_paho(mqtt, b, pki, client_id="tls13")
    assert c.subscribe("v", qos=0) == [0]


def test_ciphers_and_tls13_ciphersuites(broker, pki):
    b = wss_broker(broker, pki, "ciphers ECDHE-RSA-AES128-GCM-SHA256",
                   "ciphers_tls1.3 TLS_CHACHA20_POLY1305_SHA256")
    assert s_client_ok(b.ws_port, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
    assert not s_client_ok(b.ws_port, "-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384")
    rc, out = s_client(b.ws_port, "-tls1_3")
    assert rc == 0 and "Cipher is TLS_CHACHA20_POLY1305_SHA256" in out, out
    assert not s_client_ok(b.ws_port, "-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384")


@pytest.mark.arbor_only   # Mosquitto 2.0.11 ignores capath on websockets listeners
def test_capath_instead_of_cafile(broker, mqtt, pki):
    b = wss_broker(broker, pki, "capath " + pki["capath"], "require_certificate true", ca=False)
    assert not paho_refused(mqtt, b, pki, cert="alice")
    assert paho_refused(mqtt, b, pki, cert="stranger")


@pytest.mark.arbor_only   # Mosquitto 2.0.11 ignores dhparamfile on websockets listeners
def test_dhparamfile(broker, pki):
    b = wss_broker(broker, pki, "dhparamfile " + pki["dhparam"])
    rc, out = s_client(b.ws_port, "-tls1_2", "-cipher", "DHE-RSA-AES128-GCM-SHA256")
    assert rc == 0, out
    assert "Server Temp Key: DH, 3072 bits" in out, out  # the file's ffdhe3072 group


@pytest.mark.parametrize("plain_first", [False, True])
def test_each_listener_serves_its_own_certificate(broker, mqtt, pki, plain_first):
    # Two wss listeners with different certificates and a plain ws one: libwebsockets would
    # move a connection to another listener's certificate by its SNI name, and it does move
    # its HTTP to another listener's vhost by the Host header (websocket.c). Each listener
    # still serves its own certificate, and MQTT and HTTP keep working wherever lws moved them
    # (the order of the listeners decides which vhost that is).
    second, plain = free_port(), free_port()
    plain_lines = ["listener %d %s" % (plain, HOST), "protocol websockets",
                   "http_dir " + pki["capath"]]
    b = wss_broker(broker, pki, before=plain_lines if plain_first else (),
                   after=wss_lines(pki, second, cert="server2") +
                   ([] if plain_first else plain_lines))
    wait_until(lambda: port_listening(HOST, plain), what="ws listener")
    assert served_serial(b.ws_port, pki) == tlscerts.serial_of(pki["server"])
    assert served_serial(second, pki) == tlscerts.serial_of(pki["server2"])
    one = wss_paho(mqtt, b, pki, client_id="one")
    two = wss_paho(mqtt, b, pki, client_id="two", port=second)
    three = mqtt(b, client_id="three", transport="websockets", port=plain)
    for c in (one, two, three):
        assert c.subscribe("all", qos=1) == [1]
    three.publish("all", b"to everyone", qos=1)
    for c in (one, two, three):
        assert c.get_message().payload == b"to everyone"
    # HTTP keep-alive on the plain listener: each request is moved again (Mosquitto 2.0.11
    # answers in HTTP/1.0 and closes)
    s = socket.create_connection((HOST, plain), timeout=5)
    for _ in range(1 if IS_MOSQUITTO else 2):
        s.sendall(b"GET /ca.pem HTTP/1.1\r\nHost: localhost\r\n\r\n")
        data = b""
        while b"-----END CERTIFICATE-----" not in data:
            more = s.recv(65536)
            assert more, data
            data += more
        assert re.match(rb"HTTP/1\.[01] 200 ", data), data[:100]
    s.close()


# ---------------------------------------------------------------- reload

@pytest.mark.arbor_only   # Mosquitto 2.0.11 does not reload a websockets listener's certificate
def test_sighup_renews_the_certificate_for_new_connections(broker, mqtt, pki, tmp_path):
    crt, key = str(tmp_path / "live.crt"), str(tmp_path / "live.key")
    shutil.copy(pki["server"], crt)
    shutil.copy(pki["server_key"], key)
    for path in (crt, key):
        os.chmod(path, 0o644)
    port = free_port()
    b = broker("listener %d %s" % (port, HOST), "protocol websockets", "cafile " + pki["ca"],
               "certfile " + crt, "keyfile " + key)
    wait_until(lambda: port_listening(HOST, port), what="wss listener")
    b.ws_port = port
    assert served_serial(port, pki) == tlscerts.serial_of(pki["server"])
    before = wss_paho(mqtt, b, pki, client_id="before")
    assert before.subscribe("r/#", qos=1) == [1]
    shutil.copy(pki["server2"], crt)
    shutil.copy(pki["server2_key"], key)
    b.proc.send_signal(signal.SIGHUP)
    new_serial = tlscerts.serial_of(pki["server2"])
    wait_until(lambda: served_serial(port, pki) == new_serial, timeout=10,
               what="the new certificate served")
    after = wss_paho(mqtt, b, pki, client_id="after")
    assert after.subscribe("r/#", qos=1) == [1]
    assert tcp_pub(b, "r/1", "both").returncode == 0
    assert before.get_message().payload == b"both"
    assert after.get_message().payload == b"both"
    # The connection made before the reload ends; the one made after it (which libwebsockets
    # may have moved to the old certificate's vhost by its Host header) is not harmed when
    # the old vhost is let go of, a tick later.
    before.disconnect()
    time.sleep(2.5)
    assert after.client.is_connected()
    assert tcp_pub(b, "r/2", "after the old certificate went").returncode == 0
    assert after.get_message().payload == b"after the old certificate went"
    late = wss_raw(b, pki, "late")
    late.subscribe("r/#", 1)
    assert tcp_pub(b, "r/3", "late").returncode == 0
    assert late.recv_publish().payload == b"late"
    assert after.get_message().payload == b"late"
    # once no connection is left on it, the old certificate's vhost goes; new ones still come.
    # libwebsockets finishes closing a connection once the client has closed its side too or
    # after a timeout of its own (about 5 s: a paho client may keep its socket that long)
    late.close()
    after.disconnect()
    start = time.monotonic()
    try:
        b.wait_log("the TLS setup of before a reload is released", timeout=30)
    except AssertionError:
        raise AssertionError("old vhost not released:\n" + b.log_text()[-6000:]) from None
    print("old vhost released %.1f s after the last connection closed"
          % (time.monotonic() - start))
    again = wss_raw(b, pki, "again")
    again.subscribe("r/#", 1)
    assert tcp_pub(b, "r/4", "again").returncode == 0
    assert again.recv_publish().payload == b"again"
    assert served_serial(port, pki) == new_serial


@pytest.mark.arbor_only
def test_failed_certificate_reload_keeps_the_current_one(broker, mqtt, pki, tmp_path):
    crt, key = str(tmp_path / "live.crt"), str(tmp_path / "live.key")
    shutil.copy(pki["server"], crt)
    shutil.copy(pki["server_key"], key)
    for path in (crt, key):
        os.chmod(path, 0o644)
    port = free_port()
    b = broker("listener %d %s" % (port, HOST), "protocol websockets", "certfile " + crt,
               "keyfile " + key)
    wait_until(lambda: port_listening(HOST, port), what="wss listener")
    b.ws_port = port
    c = wss_paho(mqtt, b, pki, client_id="stays")
    shutil.copy(pki["server2"], crt)  # a new certificate, but the old key: they do not match
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("config reload failed; keeping the current configuration.")
    assert re.search(r"broker0\.conf:8: keyfile: the private key in \"%s\" does not belong to "
                     r"the certificate in \"%s\"" % (re.escape(key), re.escape(crt)),
                     b.log_text()), b.log_text()
    assert served_serial(port, pki) == tlscerts.serial_of(pki["server"])
    assert c.subscribe("kept", qos=0) == [0]
    assert not paho_refused(mqtt, b, pki)


# ---------------------------------------------------------------- start-up errors

@pytest.mark.arbor_only
@pytest.mark.parametrize("case", ["missing_cert", "key_mismatch", "psk"])
def test_bad_wss_settings_stop_the_start(run_broker, pki, tmp_path, case):
    listener = ["listener %d 127.0.0.1" % free_port(), "protocol websockets"]
    missing = str(tmp_path / "missing.pem")
    conf, expected = {
        "missing_cert": (["certfile " + missing, "keyfile " + pki["server_key"]],
                         ':3: certfile: cannot load the certificate chain in "%s": ' % missing),
        "key_mismatch": (["certfile " + pki["server"], "keyfile " + pki["alice_key"]],
                         ':4: keyfile: the private key in "%s" does not belong to the '
                         'certificate in "%s"' % (pki["alice_key"], pki["server"])),
        "psk": (["psk_hint h", "psk_file " + missing],
                ":3: psk_hint: pre-shared keys are not supported on a websockets listener"),
    }[case]
    rc, out = run_broker(conf_lines=listener + conf)
    assert rc == 1, out
    assert "Error: " + run_broker.conf_path + expected in out, out
    assert "running" not in out
