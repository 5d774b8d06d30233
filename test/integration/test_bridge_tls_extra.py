"""The bridge TLS directives beyond certificates (arbor.conf(5), BRIDGES): bridge_identity and
bridge_psk (TLS with a pre-shared key), bridge_alpn and bridge_require_ocsp.

PSK: Debian's mosquitto 2.0.11 with `psk_hint` and `psk_file` is the remote; messages cross
both ways (TLS 1.3, with keys read as Mosquitto reads them, leading zero bytes included), a TLS
1.2 `openssl s_server -psk` gets the bridge's CONNECT, a wrong key fails and is logged, and
the lines that do not go together stop the start with file:line and the directive.
ALPN: a TLS front (a Python ssl server relaying to a plain mosquitto) that selects the
configured protocol only: the bridge comes up through it with that protocol selected.
OCSP: `openssl s_server -status_file` staples responses made with `openssl ocsp`
(tlscerts.make_ocsp_pki); s_server speaks no MQTT, so "up" is the handshake accepted and the
CONNECT received by s_server, "refused" the failure logged with its reason and no CONNECT.
"""

import os
import select
import socket
import ssl
import subprocess
import threading

import pytest

import tlscerts
from helpers import HOST, free_port, wait_until
from test_bridge import MOSQUITTO, bridge_lines, pki, remote, wait_bridge_up  # noqa: F401

OPENSSL = tlscerts.OPENSSL

pytestmark = [
    pytest.mark.arbor_only,
    pytest.mark.skipif(not os.access(MOSQUITTO, os.X_OK), reason=MOSQUITTO + " not installed"),
]

KEY = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def psk_remote(remote, tmp_path, identity="edge", key=KEY):
    """Debian's mosquitto with a second listener, at .psk_port, that takes only pre-shared
    keys (identity with key); its first is plain, for the test's clients."""
    psk_file = tmp_path / "remote.psk"
    psk_file.write_text("%s:%s\n" % (identity, key))
    os.chmod(str(psk_file), 0o644)
    psk_port = free_port()
    r = remote(lines=["listener %d %s" % (psk_port, HOST), "psk_hint arbor-tests",
                      "psk_file %s" % psk_file])
    r.psk_port = psk_port
    wait_until(lambda: "listen socket on port %d." % psk_port in r.log_text(), timeout=15,
               what="mosquitto's PSK listener")
    return r


def psk_lines(identity="edge", key=KEY):
    return ["bridge_identity " + identity, "bridge_psk " + key]


@pytest.mark.parametrize("key", [KEY, "00abc"])  # "00abc": the bytes 00 0a bc, for both
def test_psk_bridge_messages_cross_both_ways(broker, remote, mqtt, tmp_path, key):
    r = psk_remote(remote, tmp_path, key=key)
    b = broker(*bridge_lines(r.psk_port, "o/# out 1", "i/# in 1", extra=psk_lines(key=key)))
    wait_bridge_up(mqtt, b, r, "o/probe")
    b.wait_log("TLS connection to 127.0.0.1:%d: TLSv1.3" % r.psk_port)
    at_remote = mqtt(r, client_id="at-remote")
    at_remote.subscribe("o/x", 1)
    at_local = mqtt(b, client_id="at-local")
    at_local.subscribe("i/x", 1)
    mqtt(b, client_id="pub-local").publish("o/x", b"out", qos=1)
    mqtt(r, client_id="pub-remote").publish("i/x", b"in", qos=1)
    assert at_remote.get_message(15).payload == b"out"
    assert at_local.get_message(15).payload == b"in"


def test_a_wrong_psk_fails_and_is_logged(broker, remote, tmp_path):
    r = psk_remote(remote, tmp_path)
    b = broker(*bridge_lines(r.psk_port, "o/# out 1", extra=psk_lines(key="0a1b2c3d4e5f")))
    b.wait_log("TLS connection to 127.0.0.1:%d failed: " % r.psk_port)
    b.wait_log("Error creating bridge")
    wait_until(lambda: "binder does not verify" in r.log_text(), timeout=15,
               what="mosquitto refusing the key")
    assert "Received CONNACK" not in b.log_text()


class SServer:
    """`openssl s_server` on a free port with args; its output (what it received included)
    goes to a file. stdin stays open: s_server stops at its end."""

    def __init__(self, tmp_path, *args):
        self.port = free_port()
        self.out_path = str(tmp_path / ("s_server-%d.out" % self.port))
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([OPENSSL, "s_server", "-accept", "%s:%d" % (HOST, self.port)]
                                     + list(args), stdin=subprocess.PIPE, stdout=self._out,
                                     stderr=subprocess.STDOUT)
        wait_until(lambda: "ACCEPT" in self.text() or self.proc.poll() is not None, timeout=15,
                   what="s_server listening")
        assert self.proc.poll() is None, self.text()

    def text(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self._out.close()


@pytest.fixture
def s_server(tmp_path):
    """Factory: s_server(*args) -> SServer, stopped at the end of the test."""
    made = []

    def make(*args):
        made.append(SServer(tmp_path, *args))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def wait_connect_received(s, client_id):
    """s_server prints what it received: the bridge's CONNECT carries its client id."""
    wait_until(lambda: client_id in s.text(), timeout=15, what="CONNECT at s_server")


def test_psk_over_tls_1_2(broker, s_server):
    s = s_server("-tls1_2", "-nocert", "-psk", KEY, "-psk_identity", "edge",
                 "-psk_hint", "arbor-tests")
    b = broker(*bridge_lines(s.port, "o/# out 1", extra=psk_lines()))
    b.wait_log("TLS connection to 127.0.0.1:%d: TLSv1.2, " % s.port)
    wait_connect_received(s, "edge-%d" % s.port)
    assert "-PSK-" in s.text() or "CIPHER is PSK" in s.text()


@pytest.mark.parametrize("lines,where,directive,text", [
    (["bridge_identity edge"], 4, "bridge_identity", "needs bridge_psk"),
    (["bridge_psk ab"], 4, "bridge_psk", "needs bridge_identity"),
    (["bridge_psk 0xab", "bridge_identity e"], 4, "bridge_psk", "not hexadecimal"),
    (["bridge_psk 0", "bridge_identity e"], 4, "bridge_psk", "the key is empty"),
    (["bridge_psk ab", "bridge_identity e", "bridge_cafile /ca.pem"], 4, "bridge_psk",
     "certificate and pre-shared key based TLS cannot be used on one bridge at once, and "
     "bridge_cafile is given at"),
    (["bridge_certfile /c.pem", "bridge_keyfile /k.pem", "bridge_identity e",
      "bridge_psk ab"], 7, "bridge_psk", "bridge_certfile is given at"),
    (["bridge_psk ab", "bridge_identity e", "bridge_insecure true"], 4, "bridge_psk",
     "bridge_insecure is about certificates"),
    (["bridge_alpn mqtt"], 4, "bridge_alpn", "needs TLS"),
    (["bridge_require_ocsp true"], 4, "bridge_require_ocsp", "needs TLS with certificates"),
    (["bridge_psk ab", "bridge_identity e", "bridge_require_ocsp true"], 6,
     "bridge_require_ocsp", "a pre-shared key has no certificate"),
])
def test_tls_lines_that_do_not_go_together_stop_the_start(broker, lines, where, directive,
                                                           text):
    b = broker("connection x", "address 127.0.0.1:1", "topic a", *lines, defaults=False,
               start=False)
    proc = subprocess.run([os.environ.get("ARBOR_BIN", "build/arbor"), "-c", b.conf_path],
                          capture_output=True, timeout=15)
    assert proc.returncode != 0
    err = (proc.stdout + proc.stderr).decode()
    # the config's first line is the listener: the bridge lines start at line 2
    assert "%s:%d: %s: " % (b.conf_path, where + 1, directive) in err and text in err, err


class AlpnFront:
    """A TLS front for a plain remote: a Python ssl server (pki's server certificate) that
    selects only the ALPN protocols given, notes the protocol each handshake selected (None:
    the client offered none of them) and relays the bytes to 127.0.0.1:target_port."""

    def __init__(self, pki, target_port, protocols):
        self.target_port = target_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(pki["server"], pki["server_key"])
        self.context.set_alpn_protocols(protocols)
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.selected = []
        self.stopping = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stopping:
            readable, _, _ = select.select([self.listener], [], [], 0.2)
            if not readable:
                continue
            try:
                conn, _ = self.listener.accept()
                tls = self.context.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                continue
            self.selected.append(tls.selected_alpn_protocol())
            t = threading.Thread(target=self._relay, args=(tls,), daemon=True)
            self.threads.append(t)
            t.start()

    def _relay(self, tls):
        """One thread a connection, so that the SSL object is used by one thread only."""
        try:
            upstream = socket.create_connection((HOST, self.target_port))
        except OSError:
            tls.close()
            return
        try:
            while not self.stopping:
                readable, _, _ = select.select([tls, upstream], [], [], 0.2)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    (upstream if s is tls else tls).sendall(data)
                    while s is tls and tls.pending():
                        upstream.sendall(tls.recv(65536))
        except (OSError, ssl.SSLError):
            pass
        finally:
            upstream.close()
            tls.close()

    def close(self):
        self.stopping = True
        for t in self.threads:
            t.join(5)
        self.listener.close()


def test_bridge_alpn_is_offered_and_selected(broker, remote, mqtt, pki):
    r = remote()
    front = AlpnFront(pki, r.port, ["x-arbor-bridge"])
    try:
        b = broker(*bridge_lines(front.port, "o/# out 1", "i/# in 1",
                                 extra=["bridge_cafile " + pki["ca"],
                                        "bridge_alpn x-arbor-bridge"]))
        wait_bridge_up(mqtt, b, r, "o/probe")
        assert front.selected and set(front.selected) == {"x-arbor-bridge"}, front.selected
        at_local = mqtt(b, client_id="at-local")
        at_local.subscribe("i/x", 1)
        mqtt(r, client_id="pub-remote").publish("i/x", b"through the front", qos=1)
        assert at_local.get_message(15).payload == b"through the front"
    finally:
        front.close()


@pytest.fixture(scope="module")
def ocsp_pki():
    """tlscerts.make_ocsp_pki's certificates and responses, readable by the brokers."""
    with tlscerts.temporary(tlscerts.make_ocsp_pki, "arbor-bridge-ocsp-") as p:
        yield p


def ocsp_bridge(broker, port, ocsp_pki):
    return broker(*bridge_lines(port, "o/# out 1",
                                extra=["bridge_cafile " + ocsp_pki["ca"],
                                       "bridge_require_ocsp true"]))


@pytest.mark.parametrize("version", ["-tls1_2", "-tls1_3"])
def test_require_ocsp_accepts_a_good_stapled_response(broker, s_server, ocsp_pki, version):
    s = s_server(version, "-cert", ocsp_pki["server"], "-key", ocsp_pki["server_key"],
                 "-status_file", ocsp_pki["good_response"])
    b = ocsp_bridge(broker, s.port, ocsp_pki)
    b.wait_log("TLS connection to 127.0.0.1:%d: TLSv1.%s, " % (s.port, version[-1]))
    wait_connect_received(s, "edge-%d" % s.port)
    assert "OCSP" not in b.log_text()


@pytest.mark.parametrize("cert,response,reason", [
    ("server", None, "the server stapled no OCSP response"),
    ("revoked", "revoked_response", "the server's certificate is revoked"),
    ("server", "unknown_response", "the server's certificate has the status unknown"),
    ("server", "forged_response",
     "the response is not signed by the certificate's issuer or its responder"),
    ("revoked", "good_response", "the response is not about the server's certificate"),
])
def test_require_ocsp_refuses_without_a_good_response(broker, s_server, ocsp_pki, cert,
                                                      response, reason):
    args = ["-cert", ocsp_pki[cert], "-key", ocsp_pki[cert + "_key"]]
    if response:
        args += ["-status_file", ocsp_pki[response]]
    s = s_server(*args)
    b = ocsp_bridge(broker, s.port, ocsp_pki)
    b.wait_log("TLS connection to 127.0.0.1:%d failed: OCSP: %s." % (s.port, reason))
    b.wait_log("Error creating bridge")
    assert "edge-%d" % s.port not in s.text()  # no CONNECT went out


def test_without_require_ocsp_no_response_is_needed(broker, s_server, ocsp_pki):
    """The same remote that stapled nothing, and the bridge without bridge_require_ocsp:
    the refusal above is the directive's doing."""
    s = s_server("-cert", ocsp_pki["server"], "-key", ocsp_pki["server_key"])
    broker(*bridge_lines(s.port, "o/# out 1", extra=["bridge_cafile " + ocsp_pki["ca"]]))
    wait_connect_received(s, "edge-%d" % s.port)
