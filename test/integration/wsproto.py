"""A small WebSocket client (RFC 6455) for the tests of MQTT over WebSockets and for driving
headless Chromium through its DevTools protocol: the opening handshake, frames both ways,
and a socket-like object that lets mqttproto.RawClient speak MQTT over a WebSocket.

Written for the tests (no third-party WebSocket package in the pinned venv): client frames
are masked, server frames are not; control frames (ping) are answered.
"""

import base64
import hashlib
import os
import select
import socket
import ssl
import struct
import time

import mqttproto

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


class HandshakeRefused(Exception):
    pass


def frame(payload, opcode=BINARY, fin=True, mask=True, length=None):
    """One frame as a client sends it. `length` announces another payload length than the
    payload's (to send a header alone)."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | opcode
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    masked = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return head + key + masked


def parse_frame(buf):
    """(fin, opcode, payload) of the first whole server frame in bytearray buf (removed),
    or None."""
    if len(buf) < 2:
        return None
    fin, opcode = buf[0] & 0x80, buf[0] & 0x0F
    masked, n = buf[1] & 0x80, buf[1] & 0x7F
    i = 2
    if n == 126:
        if len(buf) < 4:
            return None
        n = struct.unpack("!H", bytes(buf[2:4]))[0]
        i = 4
    elif n == 127:
        if len(buf) < 10:
            return None
        n = struct.unpack("!Q", bytes(buf[2:10]))[0]
        i = 10
    key = None
    if masked:
        if len(buf) < i + 4:
            return None
        key = bytes(buf[i:i + 4])
        i += 4
    if len(buf) < i + n:
        return None
    payload = bytes(buf[i:i + n])
    if key:
        payload = bytes(c ^ key[j % 4] for j, c in enumerate(payload))
    del buf[:i + n]
    return bool(fin), opcode, payload


def handshake(host, port, protocol="mqtt", path="/mqtt", headers=(), timeout=5.0, version=13,
              ssl_context=None):
    """Open a TCP connection (TLS with ssl_context, an ssl.SSLContext, for wss: the server is
    checked against the name localhost) and send the upgrade request. Returns (sock, status,
    headers, rest): the status line, the response headers (lower-case names) and bytes after
    them. Raises HandshakeRefused when the server closes without a whole response."""
    sock = socket.create_connection((host, port), timeout=timeout)
    if ssl_context is not None:
        sock = ssl_context.wrap_socket(sock, server_hostname="localhost")
    key = base64.b64encode(os.urandom(16))
    lines = [b"GET " + path.encode() + b" HTTP/1.1", b"Host: %s:%d" % (host.encode(), port),
             b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Key: " + key,
             b"Sec-WebSocket-Version: %d" % version]
    if protocol is not None:
        lines.append(b"Sec-WebSocket-Protocol: " + protocol.encode())
    lines += [h if isinstance(h, bytes) else h.encode() for h in headers]
    sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            more = sock.recv(4096)
        except (ConnectionResetError, socket.timeout, ssl.SSLEOFError):
            more = b""
        if not more:
            sock.close()
            raise HandshakeRefused("closed after %r" % data)
        data += more
    head, rest = data.split(b"\r\n\r\n", 1)
    status, *header_lines = head.decode("latin-1").split("\r\n")
    got = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        got[name.strip().lower()] = value.strip()
    if " 101 " in status + " ":
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        assert got.get("sec-websocket-accept") == accept, got
    return sock, status, got, rest


class WsSocket:
    """The socket-like side of a WebSocket that mqttproto.RawClient uses as its `sock`:
    sendall() sends binary frames (of at most `frame_size` bytes each), recv() returns
    payload bytes of binary frames, b"" once the server closed. Pings are answered."""

    def __init__(self, host, port, protocol="mqtt", frame_size=1 << 20, timeout=5.0, **kw):
        self.sock, self.status, self.headers, rest = handshake(host, port, protocol,
                                                               timeout=timeout, **kw)
        if " 101 " not in self.status + " ":
            self.sock.close()
            raise HandshakeRefused(self.status)
        self.rx = bytearray(rest)
        self.frame_size = frame_size
        self.closed = False
        self.text_frames = 0

    # socket methods RawClient uses
    def settimeout(self, t):
        self.sock.settimeout(t)

    def setblocking(self, flag):
        self.sock.setblocking(flag)

    def setsockopt(self, *a):
        self.sock.setsockopt(*a)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()

    def sendall(self, data):
        data = bytes(data)
        if not data:
            return
        for i in range(0, len(data), self.frame_size):
            self.sock.sendall(frame(data[i:i + self.frame_size]))

    def send_frame(self, payload, opcode=BINARY, fin=True):
        self.sock.sendall(frame(payload, opcode, fin))

    def recv(self, n):
        out = bytearray()
        while not out:
            f = parse_frame(self.rx)
            if f is None:
                if self.closed:
                    return b""
                more = self.sock.recv(65536)   # raises socket.timeout like a socket
                if not more:
                    self.closed = True
                self.rx += more
                continue
            fin, opcode, payload = f
            if opcode == PING:
                self.sock.sendall(frame(payload, PONG))
            elif opcode == CLOSE:
                self.closed = True
            elif opcode in (BINARY, CONTINUATION):
                out += payload
            elif opcode == TEXT:
                self.text_frames += 1
        return bytes(out)


def ws_raw_client(host, port, version=mqttproto.MQTT311, timeout=5.0, **kw):
    """An mqttproto.RawClient whose bytes go in WebSocket frames (kw: WsSocket's)."""
    c = object.__new__(mqttproto.RawClient)
    c.version = version
    c.timeout = timeout
    c.sock = WsSocket(host, port, timeout=timeout, **kw)
    c.buf = bytearray()
    c.closed = False
    c._next_pid = 0
    c.awaiting_pubrel = set()
    return c


class MessageSocket:
    """A WebSocket client of messages (text frames, as the DevTools protocol uses)."""

    def __init__(self, url, timeout=10.0):
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock, status, _, rest = handshake(host, int(port), protocol=None,
                                               path="/" + path, timeout=timeout)
        assert " 101 " in status + " ", status
        self.rx = bytearray(rest)

    def send(self, text):
        self.sock.sendall(frame(text.encode(), TEXT))

    def recv(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        parts = []
        while True:
            f = parse_frame(self.rx)
            if f is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no message")
                r, _, _ = select.select([self.sock], [], [], left)
                if r:
                    more = self.sock.recv(1 << 20)
                    if not more:
                        raise ConnectionError("closed")
                    self.rx += more
                continue
            fin, opcode, payload = f
            if opcode == PING:
                self.sock.sendall(frame(payload, PONG))
                continue
            if opcode == CLOSE:
                raise ConnectionError("closed")
            parts.append(payload)
            if fin:
                return b"".join(parts).decode()

    def close(self):
        self.sock.close()
