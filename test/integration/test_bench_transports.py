"""Integration tests of arbor_bench's transports (test/bench/transport*.c): TLS, WebSockets and
both together (wss) against real brokers, each started here with a TCP, a TLS, a websockets
and a TLS websockets listener, certificates from a throwaway CA made with the openssl CLI.

Debian's mosquitto is always a broker under test (it has had these listeners for years); the
broker of the suite (ARBOR_BIN) is one too once it starts with that configuration (or with
all but the TLS websockets listener, then wss is skipped for it), and is skipped with the
reason while it refuses it. Checks: QoS 1 and 2 runs are exact over every
transport, a full-speed QoS 0 run gets through frames and records larger than one read, and
a broker whose certificate is not trusted, or a listener that speaks something else, makes
arbor_bench fail with a message that says why. The connect loop (--connect-loop, what `make
bench-tls` runs) completes cycles without errors over TLS 1.3, 1.2 and TCP, resumes sessions
with --resume on both brokers, and counts refused handshakes under their reason.
"""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from helpers import ARBOR_BIN, HOST, free_port

BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR", "")
BENCH = os.path.join(BUILD_DIR, "test", "bench", "arbor_bench") if BUILD_DIR else ""
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"

pytestmark = [
    pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                       reason="arbor_bench not built (set ARBOR_BUILD_DIR)"),
    pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl CLI"),
]


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """ca.crt, and server.crt/server.key for 127.0.0.1 and localhost signed by it."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=bench test CA",
            "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    openssl("req", *ec, "-subj", "/CN=localhost", "-keyout", str(d / "server.key"),
            "-out", str(d / "server.csr"))
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"),
            "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
            "-extfile", str(d / "ext"), "-out", str(d / "server.crt"))
    openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=stranger",
            "-keyout", str(d / "other.key"), "-out", str(d / "other.crt"))
    return d


def port_open(port):
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


class Broker:
    """A broker process with one listener of each kind; ports by transport name."""

    def __init__(self, name, binary, certs, tmp_path, transports):
        self.name = name
        self.ports = {t: free_port() for t in ("tcp",) + transports}
        tls = "cafile {0}/ca.crt\ncertfile {0}/server.crt\nkeyfile {0}/server.key\n".format(certs)
        lines = {
            "tcp": "listener {tcp} 127.0.0.1\n",
            "tls": "listener {tls} 127.0.0.1\n" + tls,
            "ws": "listener {ws} 127.0.0.1\nprotocol websockets\n",
            "wss": "listener {wss} 127.0.0.1\nprotocol websockets\n" + tls,
        }
        conf = tmp_path / (name + ".conf")
        conf.write_text(
            "user root\nallow_anonymous true\nlog_dest stderr\nconnection_messages false\n"
            "max_queued_messages 100000\n" +
            "".join(lines[t] for t in self.ports).format(**self.ports))
        self.log = tmp_path / (name + ".log")
        self.proc = subprocess.Popen([binary, "-c", str(conf)], stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline and self.proc.poll() is None:
            if all(port_open(p) for p in self.ports.values()):
                return
            time.sleep(0.05)
        self.stop()
        said = self.log.read_text().splitlines()
        errors = [line for line in said if "rror" in line] or said[-3:]
        raise RuntimeError("; ".join(errors[:3]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module", params=["mosquitto", "arbor"])
def broker(request, certs, tmp_path_factory):
    name = request.param
    binary = MOSQUITTO if name == "mosquitto" else ARBOR_BIN
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("no %s binary" % name)
    b = None
    for transports in (("tls", "ws", "wss"), ("tls", "ws")):
        try:
            b = Broker(name, binary, certs, tmp_path_factory.mktemp(name), transports)
            break
        except RuntimeError as e:
            refusal = str(e)
    if b is None:
        pytest.skip("%s does not start with TLS and websockets listeners: %s" % (name, refusal))
    yield b
    b.stop()


def needs(b, transport):
    if transport not in b.ports:
        pytest.skip("%s has no %s listener yet" % (b.name, transport))


TRANSPORT_ARGS = {
    "tcp": [],
    "tls": ["--cafile", "{certs}/ca.crt"],
    "ws": ["--websockets"],
    "wss": ["--websockets", "--cafile", "{certs}/ca.crt"],
}


def run_bench(b, certs, tmp_path, transport, *args, host=HOST, expect_rc=0):
    out = tmp_path / ("%s.json" % transport)
    extra = [a.format(certs=certs) for a in TRANSPORT_ARGS[transport]]
    cmd = [BENCH, "-b", "%s:%d" % (host, b.ports[transport]), "-P", str(b.proc.pid),
           "--json", str(out), "-Q"] + extra + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert p.returncode == expect_rc, "arbor_bench exited %d:\n%s%s" % (
        p.returncode, p.stdout, p.stderr)
    if expect_rc:
        return p.stderr
    with open(out) as f:
        return json.load(f)


@pytest.mark.parametrize("transport", ["tls", "ws", "wss"])
@pytest.mark.parametrize("qos", [1, 2])
def test_exact_over_transport(broker, certs, tmp_path, transport, qos):
    needs(broker, transport)
    doc = run_bench(broker, certs, tmp_path, transport, "--topics", "3", "--publishers", "2",
                    "--subscribers", "2", "--qos", str(qos), "--inflight", "5", "-i", "0",
                    "-d", "1", "--trim", "0.2", "--drain", "5", "-T", "2")
    assert doc["transport"] == transport
    s = doc["runs"][-1]["summary"]
    assert s["errors"] == 0 and s["unexpected"] == 0 and s["duplicates"] == 0
    assert s["sent"] > 100
    assert s["received"] == s["expected"]
    assert s["broker_cpu_s"] > 0


@pytest.mark.parametrize("transport", ["tls", "ws", "wss"])
def test_full_speed_qos0_over_transport(broker, certs, tmp_path, transport):
    needs(broker, transport)
    # 1 KiB payloads at full speed: TLS records and WebSocket frames span reads
    def run():
        doc = run_bench(broker, certs, tmp_path, transport, "-s", "qos0-1to1", "--payload",
                        "1024", "-d", "1", "--trim", "0.2", "--drain", "3")
        return doc["runs"][-1]["summary"]
    s = run()
    if broker.name == "mosquitto" and s["errors"]:
        # the counterpart is not under test: one error of Debian's mosquitto at full speed
        # over TLS on a loaded box (seen once in a full run) gets a second run
        s = run()
    assert s["errors"] == 0 and s["unexpected"] == 0 and s["duplicates"] == 0, s
    assert s["received"] > 1000


def test_name_checked_against_certificate(broker, certs, tmp_path):
    # localhost is in the certificate too; an untrusted CA is refused
    run_bench(broker, certs, tmp_path, "tls", "-s", "qos1-pairs", "-d", "0.5", "--trim", "0",
              host="localhost")
    err = run_bench(broker, certs, tmp_path, "tls", "-s", "qos1-pairs", "-d", "0.5", "--trim",
                    "0", "--cafile", str(certs / "other.crt"), expect_rc=2)
    assert "certificate" in err, err


def test_wrong_listener_fails_with_reason(broker, certs, tmp_path):
    # TLS to a websockets listener, WebSockets to a plain MQTT listener
    b = broker
    saved = dict(b.ports)
    try:
        b.ports["tls"] = saved["ws"]
        err = run_bench(b, certs, tmp_path, "tls", "-s", "qos1-pairs", "-d", "0.5", "--trim",
                        "0", expect_rc=2)
        assert "TLS" in err, err
        b.ports["ws"] = saved["tcp"]
        err = run_bench(b, certs, tmp_path, "ws", "-s", "qos1-pairs", "-d", "0.5", "--trim",
                        "0", expect_rc=2)
        assert "arbor_bench:" in err, err
    finally:
        b.ports = saved


# ---- the connect loop (arbor_bench --connect-loop: connect, handshake, CONNECT, DISCONNECT) ----

def connect_loop(b, certs, tmp_path, transport, *args, clients=4):
    doc = run_bench(b, certs, tmp_path, transport, "--connect-loop", str(clients), "-d", "2",
                    "--trim", "0.5", "--cycle-timeout", "5", *args)
    assert doc["mode"] == "connect-loop" and doc["clients"] == clients
    return doc["result"]


def check_clean_loop(r):
    assert r["errors_total"] == 0 and r["error_kinds"] == [], r
    assert r["connects"] > 10, r
    # every connect in the window was timed, and its whole cycle ended with the broker's close
    assert r["connect_ms"]["count"] == r["connects"]
    assert abs(r["cycles"] - r["connects"]) <= 4, r
    assert 0 < r["connect_ms"]["p50"] <= r["connect_ms"]["p99"] <= r["connect_ms"]["max"]
    assert r["connect_ms"]["p50"] < r["cycle_ms"]["max"]
    assert r["broker_cpu_s"] > 0 and r["broker_cpu_ms_per_connect"] > 0, r
    assert r["bench_cpu_s"] > 0


def test_connect_loop_full_handshakes(broker, certs, tmp_path):
    r = connect_loop(broker, certs, tmp_path, "tls")
    check_clean_loop(r)
    assert r["tls"]["version"] == "TLSv1.3" and r["tls"]["group"], r["tls"]
    assert r["resumed"] == 0
    assert r["handshake_ms"]["count"] == r["connects"] and r["handshake_ms"]["p50"] > 0

    r12 = connect_loop(broker, certs, tmp_path, "tls", "--tls-version", "1.2")
    check_clean_loop(r12)
    assert r12["tls"]["version"] == "TLSv1.2" and r12["resumed"] == 0


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_connect_loop_resumes_sessions(broker, certs, tmp_path, version):
    # both brokers issue session tickets (OpenSSL's defaults); only each client's first
    # handshake, before the window, is full
    r = connect_loop(broker, certs, tmp_path, "tls", "--tls-version", version, "--resume")
    check_clean_loop(r)
    assert r["tls"]["version"] == "TLSv" + version
    assert r["resumed"] >= r["connects"] - 4, r


def test_connect_loop_over_tcp_and_refusals(broker, certs, tmp_path):
    r = run_bench(broker, certs, tmp_path, "tcp", "--connect-loop", "4", "-d", "2", "--trim",
                  "0.5")["result"]
    check_clean_loop(r)
    assert r["tls"] is None and r["resumed"] == 0
    # an untrusted CA: every handshake fails, counted under its reason, and the run goes on
    bad = connect_loop(broker, certs, tmp_path, "tls", "--cafile", str(certs / "other.crt"))
    assert bad["connects"] == 0 and bad["errors"] > 0
    assert "certificate" in bad["error_kinds"][0]["what"], bad["error_kinds"]
