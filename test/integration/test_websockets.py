"""MQTT over WebSockets (`listener` + `protocol websockets`, arbor.conf(5) "WEBSOCKETS").

A WebSocket connection is an ordinary client: paho-mqtt over WebSockets and Debian's
mosquitto_pub / mosquitto_sub on a TCP listener talk to each other both ways. Frames and
packets are independent (a packet split over frames, several packets in one frame); the
subprotocols are "mqtt" and "mqttv3.1". http_dir serves files to plain HTTP GETs on the same
listener and nothing outside it. A bad upgrade, a wrong subprotocol, a text frame, headers
over websockets_headers_size and a frame over the packet limit close that one connection and
harm no other. A WebSocket client that floods without reading is paused like a TCP client,
and a subscriber that does not read is held to the same output limits.

The last test is a real browser: headless Chromium (Debian's chromium) loads a page and
MQTT.js's browser bundle (npm package mqtt, installed into test/browser by
scripts/install-deps.sh) from http_dir, subscribes and publishes through arbor over ws, and
its messages cross with mosquitto_pub / mosquitto_sub on the TCP listener; a screenshot is
saved in the test's directory. It runs twice: over ws (the page over http) and over wss (the
page over https, with the test CA's server certificate pinned on Chromium's command line).
MQTT over wss is tested in test_wss.py.
"""

import base64
import hashlib
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

import mqttproto as mp
import tlscerts
import wsproto
from conftest import port_listening
from helpers import (ARBOR_BIN, HOST, IS_MOSQUITTO, assert_cpu_goes_quiet, free_port,
                     wait_until)
from mqttproto import MQTT31, MQTT311, MQTT5

PUB = shutil.which("mosquitto_pub")
SUB = shutil.which("mosquitto_sub")
REPO = pathlib.Path(__file__).resolve().parents[2]
MQTT_JS = REPO / "test" / "browser" / "node_modules" / "mqtt" / "dist" / "mqtt.min.js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

need_tools = pytest.mark.skipif(not (PUB and SUB), reason="mosquitto-clients not installed")

INDEX = b"<!doctype html><title>arbor</title><p>hello from http_dir</p>\n"
SECRET = b"secret outside http_dir\n"


def make_http_dir(tmp_path):
    www = tmp_path / "www"
    (www / "sub").mkdir(parents=True)
    (www / "index.html").write_bytes(INDEX)
    (www / "sub" / "page.txt").write_bytes(b"plain text\n")
    (tmp_path / "secret.txt").write_bytes(SECRET)
    os.symlink(tmp_path / "secret.txt", www / "link.txt")    # a link leading out
    os.symlink(tmp_path, www / "up")                          # a directory link leading out
    return www


# For floods of hundreds of thousands of packets: a line for each (log_type all) kept the
# broker busy writing its log for seconds; errors, warnings and notices are kept.
QUIET_LOG = ("allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
             "log_type notice")


def ws_broker(broker, tmp_path, *lines, http=True, ws_lines=(), **kw):
    """A broker with its usual TCP listener (b.port) and a websockets listener (b.ws_port),
    serving tmp_path/www unless http is False. lines go before the websockets listener
    (global settings), ws_lines into its block; kw to the broker fixture."""
    ws_port = free_port()
    www = make_http_dir(tmp_path)
    conf = list(lines) + ["listener %d %s" % (ws_port, HOST), "protocol websockets"]
    if http:
        conf.append("http_dir %s" % www)
    b = broker(*(conf + list(ws_lines)), **kw)
    wait_until(lambda: port_listening(HOST, ws_port), what="websockets listener")
    b.ws_port = ws_port
    b.www = www
    return b


def ws_client(b, cid, version=MQTT311, **kw):
    c = wsproto.ws_raw_client(HOST, b.ws_port, version=version, **kw)
    c.connect(cid)
    return c


def tcp_client(b, cid, version=MQTT311):
    c = mp.RawClient(b.host, b.port, version=version)
    c.connect(cid)
    return c


def closed_soon(sock, timeout=10.0):
    """True if the peer closes sock within timeout (whatever it sends before)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


# ---------------------------------------------------------------- MQTT over WebSockets

class PahoWs:
    """paho-mqtt with transport="websockets", its loop in a thread."""

    def __init__(self, b, cid, version):
        protocol = {4: paho.MQTTv311, 5: paho.MQTTv5}[version]
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=cid, protocol=protocol,
                                  transport="websockets")
        self.messages = []
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p=None: self.connected.set()
        self.client.on_subscribe = lambda c, u, mid, rcs, p=None: self.subscribed.set()
        self.client.on_message = lambda c, u, m: self.messages.append((m.topic, m.payload))
        self.client.connect(HOST, b.ws_port, keepalive=30)
        self.client.loop_start()
        assert self.connected.wait(5), "paho did not connect over WebSockets"

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def wait_subscribed(b, cid):
    b.wait_log("Received SUBSCRIBE from %s" % cid)


@need_tools
@pytest.mark.parametrize("version", [4, 5])
def test_paho_websockets_and_tcp_tools_both_ways(broker, tmp_path, version):
    b = ws_broker(broker, tmp_path)
    tool_version = {4: "mqttv311", 5: "mqttv5"}[version]
    sub = subprocess.Popen([SUB, "-h", b.host, "-p", str(b.port), "-V", tool_version,
                            "-i", "toolsub", "-t", "ws/out", "-q", "1", "-C", "2", "-W", "10",
                            "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_subscribed(b, "toolsub")
        ws = PahoWs(b, "paho-ws", version)
        ws.client.subscribe("ws/in", qos=1)
        assert ws.subscribed.wait(5)
        # WebSocket -> TCP: a small message and one far larger than a frame
        big = bytes(range(256)) * 1200
        ws.client.publish("ws/out", b"from websockets", qos=1).wait_for_publish(5)
        ws.client.publish("ws/out", big, qos=1).wait_for_publish(5)
        out, err = sub.communicate(timeout=10)
        assert sub.returncode == 0, err
        assert out.startswith(b"ws/out from websockets\nws/out " + big[:100])
        # TCP -> WebSocket, QoS 0 to 2
        for qos in (0, 1, 2):
            p = subprocess.run([PUB, "-h", b.host, "-p", str(b.port), "-V", tool_version,
                                "-t", "ws/in", "-q", str(qos), "-m", "from tcp q%d" % qos],
                               capture_output=True, timeout=10)
            assert p.returncode == 0, p.stderr
        wait_until(lambda: len(ws.messages) == 3, what="three messages over WebSockets")
        assert ws.messages == [("ws/in", b"from tcp q%d" % q) for q in (0, 1, 2)]
        ws.close()
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    if not IS_MOSQUITTO:   # Mosquitto names the client by its IPv6-mapped address
        assert "New client connected from 127.0.0.1:" in b.log_text()


def test_packets_and_frames_are_independent(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    # CONNECT and everything after it split into 3-byte frames
    c = ws_client(b, "tiny-frames", frame_size=3)
    c.subscribe("split/#", 1)
    c.publish("split/a", b"x" * 1000)
    m = c.recv_publish()
    assert (m.topic, m.payload) == ("split/a", b"x" * 1000)
    # several packets in one frame, and a packet whose end comes in the next frame
    d = wsproto.ws_raw_client(HOST, b.ws_port)
    d.sock.send_frame(mp.connect("many") + mp.subscribe(1, [("many/t", 0)]) +
                      mp.publish("many/t", b"one") + mp.pingreq())
    assert d.recv_type(mp.CONNACK)
    assert d.recv_type(mp.SUBACK)
    assert d.recv_publish().payload == b"one"
    assert d.recv_type(mp.PINGRESP)
    packet = mp.publish("many/t", b"two")
    d.sock.send_frame(packet[:4] + b"", fin=False)
    d.sock.send_frame(packet[4:], opcode=wsproto.CONTINUATION)
    assert d.recv_publish().payload == b"two"
    # a TCP client sees the same messages
    t = tcp_client(b, "tcp-peer")
    t.subscribe("many/t", 0)
    d.publish("many/t", b"three")
    assert t.recv_publish().payload == b"three"
    assert d.recv_publish().payload == b"three"


@pytest.mark.parametrize("offered,chosen,version", [
    ("mqtt", "mqtt", MQTT311),
    ("mqtt", "mqtt", MQTT5),
    ("mqttv3.1", "mqttv3.1", MQTT31),
    ("foo, mqtt", "mqtt", MQTT311),
])
def test_subprotocols(broker, tmp_path, offered, chosen, version):
    b = ws_broker(broker, tmp_path)
    c = wsproto.ws_raw_client(HOST, b.ws_port, version=version, protocol=offered)
    assert c.sock.headers.get("sec-websocket-protocol") == chosen
    c.connect("sub-" + chosen)
    c.subscribe("p/t", 1)
    c.publish("p/t", b"ok")
    assert c.recv_publish().payload == b"ok"


def test_ping_answered_and_close_handshake(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    c = ws_client(b, "pinger")
    c.sock.send_frame(b"are you there", opcode=wsproto.PING)
    sock = c.sock.sock
    sock.settimeout(3)
    buf = bytearray()
    while True:
        f = wsproto.parse_frame(buf)
        if f:
            break
        buf += sock.recv(4096)
    assert f == (True, wsproto.PONG, b"are you there")
    # the client's close: answered with a close, then the connection ends
    c.sock.send_frame(b"\x03\xe8", opcode=wsproto.CLOSE)
    buf = bytearray()
    while True:
        f = wsproto.parse_frame(buf)
        if f:
            break
        more = sock.recv(4096)
        assert more, "closed without a close frame"
        buf += more
    assert f[1] == wsproto.CLOSE
    assert closed_soon(sock)
    b.wait_log("Client pinger closed its connection.")


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 does not time out an idle websockets client")
def test_will_and_keepalive_over_websockets(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    watcher = tcp_client(b, "watcher")
    watcher.subscribe("will/#", 1)
    c = wsproto.ws_raw_client(HOST, b.ws_port)
    c.connect("mortal", keepalive=1, will={"topic": "will/mortal", "payload": b"gone", "qos": 1})
    # silence: the keepalive (1.5 s) ends it and the will goes out
    m = watcher.recv_publish(timeout=15)
    assert (m.topic, m.payload) == ("will/mortal", b"gone")
    assert closed_soon(c.sock.sock)


# ---------------------------------------------------------------- http_dir

def http(port, target, method="GET", headers=()):
    """(status code, headers, body) of one HTTP/1.1 request sent exactly as given."""
    with socket.create_connection((HOST, port), timeout=5) as s:
        req = ["%s %s HTTP/1.1" % (method, target), "Host: %s:%d" % (HOST, port),
               "Connection: close"] + list(headers)
        s.sendall(("\r\n".join(req) + "\r\n\r\n").encode())
        data = b""
        while True:
            try:
                more = s.recv(65536)
            except ConnectionResetError:
                break
            if not more:
                break
            data += more
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                lines = head.decode("latin-1").split("\r\n")
                hdrs = {k.strip().lower(): v.strip()
                        for k, _, v in (line.partition(":") for line in lines[1:])}
                if "content-length" in hdrs and len(body) >= int(hdrs["content-length"]):
                    break
    if not data:
        return None, {}, b""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), hdrs, body


def test_http_dir_serves_files(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    for target in ("/", "/index.html"):
        status, hdrs, body = http(b.ws_port, target)
        assert status == 200 and body == INDEX, (target, status, body)
        assert IS_MOSQUITTO or hdrs["content-type"].startswith("text/html")
    status, hdrs, body = http(b.ws_port, "/sub/page.txt")
    assert (status, body) == (200, b"plain text\n")
    assert IS_MOSQUITTO or hdrs["content-type"].startswith("text/plain")
    big = os.urandom(300000)
    (b.www / "big.bin").write_bytes(big)
    status, _, body = http(b.ws_port, "/big.bin")
    assert status == 200 and body == big
    assert http(b.ws_port, "/missing.html")[0] == 404
    # the same listener still speaks MQTT
    c = ws_client(b, "after-http")
    c.subscribe("h/t", 0)
    c.publish("h/t", b"x")
    assert c.recv_publish().payload == b"x"


@pytest.mark.parametrize("target", [
    "/../secret.txt",
    "/sub/../../secret.txt",
    "/%2e%2e/secret.txt",
    "/sub/%2e%2e/%2e%2e/secret.txt",
    "/..%2fsecret.txt",
    "/link.txt",
    "/up/secret.txt",
    "//etc/passwd",
    "/../../../../../../etc/passwd",
])
def test_http_dir_traversal_refused(broker, tmp_path, target):
    b = ws_broker(broker, tmp_path)
    status, _, body = http(b.ws_port, target)
    assert status is None or status >= 400, (target, status, body)
    assert SECRET not in body and b"root:" not in body


def test_http_needs_http_dir(broker, tmp_path):
    b = ws_broker(broker, tmp_path, http=False)
    status, _, body = http(b.ws_port, "/index.html")
    assert status is None or status == 404
    assert INDEX not in body
    c = ws_client(b, "no-http")
    c.subscribe("n/t", 0)
    c.publish("n/t", b"x")
    assert c.recv_publish().payload == b"x"


@pytest.mark.arbor_only
def test_http_methods_other_than_get_refused(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    status, hdrs, body = http(b.ws_port, "/index.html", method="HEAD")
    assert status == 200 and int(hdrs["content-length"]) == len(INDEX)
    status, _, body = http(b.ws_port, "/index.html", method="POST",
                           headers=["Content-Length: 0"])
    assert status is None or status >= 400
    assert INDEX not in body


# ---------------------------------------------------------------- refusals

def assert_refused(b, **kw):
    """The upgrade (wsproto.handshake keywords) gets no 101 and the connection closes."""
    try:
        sock, status, _, _ = wsproto.handshake(HOST, b.ws_port, **kw)
    except wsproto.HandshakeRefused:
        return
    assert " 101 " not in status, (kw, status)
    assert closed_soon(sock)
    sock.close()


def assert_clients_still_served(b, ws, tcp):
    ws.publish("alive/ws", b"from ws")
    tcp.publish("alive/tcp", b"from tcp")
    got = {tcp.recv_publish().topic, tcp.recv_publish().topic}
    assert got == {"alive/ws", "alive/tcp"}
    got = {ws.recv_publish().topic, ws.recv_publish().topic}
    assert got == {"alive/ws", "alive/tcp"}


@pytest.mark.arbor_only   # Mosquitto 2.0.11 answers 101 to an upgrade without a subprotocol
def test_bad_upgrades_refused_without_harming_others(broker, tmp_path):
    b = ws_broker(broker, tmp_path)
    ws = ws_client(b, "steady-ws")
    ws.subscribe("alive/#", 1)
    tcp = tcp_client(b, "steady-tcp")
    tcp.subscribe("alive/#", 1)
    log_before = len(b.log_text())
    refusals = [
        dict(protocol=None),                                     # no subprotocol at all
        dict(protocol="foo"),                                    # none of ours
        dict(protocol="mqtt", version=99),                       # no such WebSocket version
    ]
    for kw in refusals:
        assert_refused(b, **kw)
    # an upgrade without its key, not HTTP at all (MQTT bytes), and garbage
    no_key = (b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n")
    for junk in (no_key, mp.connect("plain-mqtt"), b"\x00\x01\x02garbage\r\n\r\n"):
        with socket.create_connection((HOST, b.ws_port), timeout=5) as s:
            s.sendall(junk)
            assert closed_soon(s)
    # an upgrade request that never ends: the CONNECT timeout is far, the others go on
    slow = socket.create_connection((HOST, b.ws_port), timeout=5)
    slow.sendall(b"GET /mqtt HTTP/1.1\r\nHost: x\r\n")
    assert_clients_still_served(b, ws, tcp)
    slow.close()
    # nothing of this is an MQTT client: no "New connection" or "Client <unknown>" lines
    later = b.log_text()[log_before:]
    assert "New connection from" not in later and "<unknown>" not in later, later


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 accepts text frames as MQTT")
def test_text_frame_closes_the_connection(broker, tmp_path):
    # MQTT 5.0 section 6: packets go in binary frames; anything else closes [MQTT-6.0.0-1]
    b = ws_broker(broker, tmp_path)
    other = ws_client(b, "bystander")
    c = ws_client(b, "texter")
    c.sock.send_frame(mp.pingreq(), opcode=wsproto.TEXT)
    assert closed_soon(c.sock.sock)
    b.wait_log("Client texter sent a WebSocket text frame")
    other.subscribe("t", 0)
    other.publish("t", b"still here")
    assert other.recv_publish().payload == b"still here"


@pytest.mark.arbor_only
@pytest.mark.parametrize("limit_line,limit,ok_size,bad_size", [
    ("max_packet_size 20000", 20000, 19000, 20001),
    ("message_size_limit 1000", 1000 + 128 * 1024, 1000, 1000 + 128 * 1024 + 1),
])
def test_frame_over_the_packet_limit_closed(broker, tmp_path, limit_line, limit, ok_size,
                                            bad_size):
    b = ws_broker(broker, tmp_path, limit_line)
    sub = tcp_client(b, "frame-sub")
    sub.subscribe("f/#", 0)
    c = ws_client(b, "framer")
    # a frame just within the limit carrying one PUBLISH is fine
    packet = mp.publish("f/ok", b"p" * (ok_size - 12))
    assert len(packet) <= ok_size
    c.sock.send_frame(packet)
    assert sub.recv_publish().topic == "f/ok"
    # a frame announced one byte too large is refused with its first bytes (the header and
    # then a byte of payload), long before the rest could arrive
    c.sock.sock.sendall(wsproto.frame(b"", length=bad_size)[:-4] + b"\0" * 5)
    assert closed_soon(c.sock.sock)
    b.wait_log("Client framer sent a WebSocket frame of %d bytes, more than the %d allowed"
               % (bad_size, limit))
    # and one announcing 2^62 bytes
    d = ws_client(b, "framer2")
    d.sock.sock.sendall(wsproto.frame(b"", length=1 << 62)[:-4] + b"\0" * 5)
    assert closed_soon(d.sock.sock)
    assert sub.is_open()


@pytest.mark.arbor_only
def test_websockets_headers_size(broker, tmp_path):
    b = ws_broker(broker, tmp_path, "websockets_headers_size 600")
    small = ["User-Agent: " + "a" * 100]
    c = wsproto.ws_raw_client(HOST, b.ws_port, headers=small)
    c.connect("small-headers")
    assert_refused(b, headers=["Cookie: " + "c" * 2000])
    c.subscribe("hs/t", 0)
    c.publish("hs/t", b"x")
    assert c.recv_publish().payload == b"x"


@pytest.mark.arbor_only
def test_default_headers_size_takes_a_browser_request(broker, tmp_path):
    # 1024 bytes of header data by default (Mosquitto's): a browser's upgrade fits, a big
    # cookie does not
    b = ws_broker(broker, tmp_path)
    browser_like = [
        "Pragma: no-cache", "Cache-Control: no-cache",
        "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/156.0.0.0 Safari/537.36",
        "Origin: http://127.0.0.1:%d" % b.ws_port, "Accept-Encoding: gzip, deflate, br, zstd",
        "Accept-Language: en-US,en;q=0.9",
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"]
    c = wsproto.ws_raw_client(HOST, b.ws_port, headers=browser_like)
    c.connect("browser-like")
    assert_refused(b, headers=["Cookie: " + "c" * 3000])


@pytest.mark.arbor_only
def test_websockets_log_level(broker, tmp_path):
    b = ws_broker(broker, tmp_path, "websockets_log_level 3", "log_type websockets",
                  "websockets_headers_size 300")
    assert_refused(b, headers=["Cookie: " + "c" * 1000])
    # libwebsockets' own warning, through arbor's log
    b.wait_log("header data space")


# ---------------------------------------------------------------- back-pressure

def rss_bytes(b):
    with open("/proc/%d/status" % b.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def sanitized():
    """ASan's shadow memory and quarantine make RSS meaningless: then only losses count."""
    try:
        return b"__asan_init" in pathlib.Path(ARBOR_BIN).read_bytes()
    except OSError:
        return False


@pytest.mark.arbor_only   # Mosquitto 2.0.11 sends every packet in a frame of its own: too slow
def test_flood_without_reading_is_paused(broker, tmp_path):
    # A WebSocket client that sends PINGREQ without reading stops being read (connection.c's
    # back-pressure through the transport): the broker's memory does not follow the flood,
    # nothing is lost, other clients are served meanwhile.
    b = ws_broker(broker, tmp_path, *QUIET_LOG, defaults=False)
    c = ws_client(b, "ws-flooder")
    sock = c.sock.sock
    before = rss_bytes(b)
    chunk = wsproto.frame(mp.pingreq() * 32768)    # 64 KiB of PINGREQ in one frame
    sock.setblocking(False)
    sent = 0
    tail = b""
    start = time.monotonic()
    while time.monotonic() - start < 3.0 and sent < 300 * 1024 * 1024:
        _, w, _ = select.select([], [sock], [], 0.5)
        if not w:
            break
        try:
            n = sock.send(chunk)
        except BlockingIOError:
            continue
        if n < len(chunk):
            tail = chunk[n:]
            sent += 1
            break
        sent += 1
    grown = rss_bytes(b) - before
    print("WebSocket PINGREQ flood: %d frames, RSS +%d KiB" % (sent, grown // 1024))
    if not sanitized():
        assert grown < 4 * 1024 * 1024, "RSS grew by %d bytes" % grown
    time.sleep(1.0)
    other = tcp_client(b, "other")
    other.subscribe("o/t", 0)
    other.publish("o/t", b"served")
    assert other.recv_publish().payload == b"served"
    # now read: every PINGREQ gets its PINGRESP
    expected = sent * 32768 * 2
    got = 0
    rx = bytearray()
    deadline = time.monotonic() + 60
    while got < expected:
        assert time.monotonic() < deadline, "only %d of %d bytes of PINGRESP" % (got, expected)
        r, w, _ = select.select([sock], [sock] if tail else [], [], 1.0)
        if w and tail:
            try:
                tail = tail[sock.send(tail):]
            except BlockingIOError:
                pass
        if r:
            data = sock.recv(1 << 20)
            assert data, "broker closed the connection after %d bytes" % got
            rx += data
            while True:
                f = wsproto.parse_frame(rx)
                if f is None:
                    break
                assert f[1] == wsproto.BINARY
                assert set(f[2][0::2] if got % 2 == 0 else f[2][1::2]) <= {0xD0}
                got += len(f[2])
    assert got == expected


def test_subscriber_that_does_not_read_is_bounded(broker, tmp_path):
    # The same output limits as for TCP: a QoS 0 subscriber that does not read holds the
    # kernel's buffers plus max_queued_messages, the rest is dropped for it.
    b = ws_broker(broker, tmp_path, "max_queued_messages 100")
    sub = ws_client(b, "slow-ws-sub")
    sub.subscribe("flood/#", 0)
    pub = tcp_client(b, "fast-pub")
    before = rss_bytes(b)
    payload = b"z" * 8000
    for _ in range(40):
        pub.send(b"".join(mp.publish("flood/t", payload) for _ in range(100)))
    assert pub.is_open(timeout=10)
    time.sleep(0.5)
    grown = rss_bytes(b) - before
    print("slow WebSocket subscriber: 32 MB published, RSS +%d KiB" % (grown // 1024))
    if not sanitized():
        assert grown < 6 * 1024 * 1024, "RSS grew by %d bytes" % grown
    # the subscriber reads again: whole messages, then a new one
    got = sub.drain_publishes(timeout=1.0, expect=100)
    assert 100 <= len(got) < 4000 and all(m.payload == payload for m in got), len(got)
    pub.publish("flood/last", b"last")
    assert sub.recv_publish(timeout=5).topic == "flood/last"


@pytest.mark.arbor_only
def test_waiting_connections_do_not_spin(broker, tmp_path):
    # A paused subscriber, a file download nobody reads and an idle keep-alive HTTP
    # connection: the broker waits for their sockets instead of servicing them in a loop.
    b = ws_broker(broker, tmp_path)
    (b.www / "big.bin").write_bytes(os.urandom(4 << 20))
    sub = ws_client(b, "paused-ws")
    sub.subscribe("spin/#", 0)
    pub = tcp_client(b, "spin-pub")
    for _ in range(20):
        pub.send(b"".join(mp.publish("spin/t", b"s" * 8000) for _ in range(100)))
    sub.sock.sendall(mp.pingreq() * 50000)
    download = socket.create_connection((HOST, b.ws_port))
    download.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    idle = socket.create_connection((HOST, b.ws_port))
    idle.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)
    assert_cpu_goes_quiet(b.proc.pid, 0.3, what="while waiting")
    download.close()
    idle.close()


# ---------------------------------------------------------------- configuration

@pytest.mark.arbor_only
def test_configuration_errors(run_broker, tmp_path):
    rc, out = run_broker(conf_lines=["listener %d" % free_port(), "http_dir %s" % tmp_path])
    assert rc not in (0, None)
    assert "http_dir: only a listener with protocol websockets serves HTTP" in out
    missing = tmp_path / "no-such-dir"
    rc, out = run_broker(conf_lines=["listener %d %s" % (free_port(), HOST),
                                     "protocol websockets", "http_dir %s" % missing])
    assert rc not in (0, None)
    assert "http_dir %s" % missing in out and "No such file or directory" in out
    rc, out = run_broker(conf_lines=["websockets_headers_size 70000"])
    assert rc not in (0, None) and "websockets_headers_size" in out


# ---------------------------------------------------------------- a real browser

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>arbor over WebSockets</title>
<style>body{font:16px sans-serif;margin:2em} li{margin:.3em 0}</style></head>
<body><h1>MQTT.js in Chromium, through arbor</h1><ul id="log"></ul>
<script src="mqtt.min.js"></script>
<script>
window.state = {connected: false, subscribed: false, received: [], errors: [],
                published: false};
function note(text) {
  const li = document.createElement("li"); li.textContent = text;
  document.getElementById("log").appendChild(li);
}
const scheme = location.protocol === "https:" ? "wss://" : "ws://";
const client = mqtt.connect(scheme + location.host + "/mqtt",
                            {clientId: "browser-page", protocolVersion: 4, reconnectPeriod: 0});
client.on("connect", () => {
  state.connected = true; note("connected to " + scheme + location.host);
  client.subscribe("browser/in", {qos: 1}, (err) => {
    state.subscribed = !err; note(err ? "subscribe failed: " + err : "subscribed to browser/in");
  });
});
client.on("message", (topic, payload) => {
  const text = payload.toString();
  state.received.push(topic + " " + text); note("received " + topic + ": " + text);
  if (text === "hello-from-tcp")
    client.publish("browser/out", "hello-from-browser", {qos: 1}, (err) => {
      state.published = !err; note(err ? "publish failed: " + err : "published to browser/out");
    });
});
client.on("error", (e) => { state.errors.push(String(e)); note("error: " + e); });
</script></body></html>
"""


class DevTools:
    """Chromium's DevTools protocol over wsproto.MessageSocket."""

    def __init__(self, url):
        self.ws = wsproto.MessageSocket(url)
        self.next_id = 0

    def call(self, method, timeout=20.0, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(max(0.1, deadline - time.monotonic())))
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError("%s: %s" % (method, msg["error"]))
                return msg["result"]

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r["result"].get("value")


def start_chromium(profile, log_path, extra_args=()):
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--window-size=900,600", "--remote-debugging-port=0",
         "--user-data-dir=%s" % profile] + list(extra_args) + ["about:blank"],
        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    active = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not active.exists() or len(active.read_text().split()) < 2:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_chromium(proc)
            pytest.fail("chromium did not start:\n" + pathlib.Path(log_path).read_text()[-3000:])
        time.sleep(0.1)
    port = int(active.read_text().split()[0])
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=5) as r:
                targets = json.load(r)
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return proc, pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop_chromium(proc)
            pytest.fail("chromium shows no page target")
        time.sleep(0.2)


def stop_chromium(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)   # its own process group (start_new_session)
    except ProcessLookupError:
        return
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def spki_sha256(cert_path):
    """The base64 SHA-256 of a certificate's public key, as Chromium's
    --ignore-certificate-errors-spki-list takes it."""
    der = subprocess.run(["sh", "-c", "openssl x509 -in \"$1\" -pubkey -noout | "
                          "openssl pkey -pubin -outform der", "sh", cert_path],
                         capture_output=True, check=True, timeout=20).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


@need_tools
@pytest.mark.parametrize("scheme", [
    "ws",
    # Mosquitto 2.0.11 lets libwebsockets offer HTTP/2 over TLS, which Chromium takes and on
    # which its http_dir serves nothing: the page never gets its script
    pytest.param("wss", marks=pytest.mark.arbor_only)])
def test_browser_mqtt_js_over_websockets(broker, tmp_path, scheme):
    if not CHROMIUM:
        pytest.skip("chromium not installed (scripts/install-deps.sh installs Debian's chromium)")
    if not MQTT_JS.exists():
        pytest.skip("MQTT.js not installed: scripts/install-deps.sh runs npm ci in test/browser")
    ws_lines, browser_args = (), ()
    if scheme == "wss":
        # The page comes over https and MQTT.js connects to wss://; Chromium accepts the
        # test CA's server certificate because its key is pinned on its command line.
        pki = tlscerts.make_pki(str(tmp_path / "pki"))
        ws_lines = ("certfile " + pki["server"], "keyfile " + pki["server_key"])
        browser_args = ("--ignore-certificate-errors-spki-list=" + spki_sha256(pki["server"]),)
    b = ws_broker(broker, tmp_path, ws_lines=ws_lines)
    shutil.copy(MQTT_JS, b.www / "mqtt.min.js")
    (b.www / "index.html").write_text(PAGE)
    sub = subprocess.Popen([SUB, "-h", b.host, "-p", str(b.port), "-i", "tool-sub",
                            "-t", "browser/out", "-q", "1", "-C", "1", "-W", "60", "-v"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    proc, url = start_chromium(profile, tmp_path / "chromium.log", browser_args)
    try:
        wait_subscribed(b, "tool-sub")
        tools = DevTools(url)
        tools.call("Page.enable")
        page_scheme = "https" if scheme == "wss" else "http"
        tools.call("Page.navigate", url="%s://%s:%d/index.html" % (page_scheme, HOST, b.ws_port))
        wait_until(lambda: (tools.evaluate("window.state && window.state.subscribed") or
                            bool(tools.evaluate("window.state && window.state.errors.length"))),
                   timeout=30, interval=0.2, what="MQTT.js connected and subscribed")
        state = tools.evaluate("JSON.stringify(window.state)")
        assert json.loads(state)["subscribed"], state
        p = subprocess.run([PUB, "-h", b.host, "-p", str(b.port), "-t", "browser/in", "-q", "1",
                            "-m", "hello-from-tcp"], capture_output=True, timeout=10)
        assert p.returncode == 0, p.stderr
        out, err = sub.communicate(timeout=30)
        assert sub.returncode == 0, err
        assert out == b"browser/out hello-from-browser\n"
        wait_until(lambda: tools.evaluate("window.state.published"), timeout=10,
                   what="the page's PUBACK")
        state = json.loads(tools.evaluate("JSON.stringify(window.state)"))
        assert state["received"] == ["browser/in hello-from-tcp"], state
        assert state["errors"] == [], state
        shot = tools.call("Page.captureScreenshot", format="png")
        png = base64.b64decode(shot["data"])
        (tmp_path / "browser.png").write_bytes(png)
        assert png.startswith(b"\x89PNG") and len(png) > 1000
        print("screenshot: %s" % (tmp_path / "browser.png"))
        if os.environ.get("ARBOR_BROWSER_SCREENSHOT"):   # a copy that outlives the test
            shutil.copy(tmp_path / "browser.png", os.environ["ARBOR_BROWSER_SCREENSHOT"])
        tools.ws.close()
    finally:
        stop_chromium(proc)
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    log = b.log_text()
    assert "http serving file" in log or IS_MOSQUITTO
    assert "New client connected from 127.0.0.1" in log and "as browser-page" in log
