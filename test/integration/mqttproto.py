"""Byte-exact MQTT 3.1 / 3.1.1 / 5.0 packet encoders and decoders, and a raw-socket client.

Used by the integration tests when exact bytes matter: malformed input, packet identifiers,
flags, reason codes and properties. The encoders deliberately allow building invalid packets
(wrong flags, bad lengths, forbidden property combinations); nothing here validates.
"""

import socket
import struct
import time

# Packet types
CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT, AUTH = (
    8, 9, 10, 11, 12, 13, 14, 15)

PACKET_NAMES = {
    CONNECT: "CONNECT", CONNACK: "CONNACK", PUBLISH: "PUBLISH", PUBACK: "PUBACK",
    PUBREC: "PUBREC", PUBREL: "PUBREL", PUBCOMP: "PUBCOMP", SUBSCRIBE: "SUBSCRIBE",
    SUBACK: "SUBACK", UNSUBSCRIBE: "UNSUBSCRIBE", UNSUBACK: "UNSUBACK", PINGREQ: "PINGREQ",
    PINGRESP: "PINGRESP", DISCONNECT: "DISCONNECT", AUTH: "AUTH",
}

MQTT31, MQTT311, MQTT5 = 3, 4, 5

# MQTT 5 property identifiers
P_PAYLOAD_FORMAT = 0x01
P_MESSAGE_EXPIRY = 0x02
P_CONTENT_TYPE = 0x03
P_RESPONSE_TOPIC = 0x08
P_CORRELATION_DATA = 0x09
P_SUBSCRIPTION_ID = 0x0B
P_SESSION_EXPIRY = 0x11
P_ASSIGNED_CLIENT_ID = 0x12
P_SERVER_KEEP_ALIVE = 0x13
P_AUTH_METHOD = 0x15
P_AUTH_DATA = 0x16
P_REQUEST_PROBLEM_INFO = 0x17
P_WILL_DELAY = 0x18
P_REQUEST_RESPONSE_INFO = 0x19
P_RESPONSE_INFO = 0x1A
P_SERVER_REFERENCE = 0x1C
P_REASON_STRING = 0x1F
P_RECEIVE_MAXIMUM = 0x21
P_TOPIC_ALIAS_MAXIMUM = 0x22
P_TOPIC_ALIAS = 0x23
P_MAXIMUM_QOS = 0x24
P_RETAIN_AVAILABLE = 0x25
P_USER_PROPERTY = 0x26
P_MAXIMUM_PACKET_SIZE = 0x27
P_WILDCARD_SUB_AVAILABLE = 0x28
P_SUB_ID_AVAILABLE = 0x29
P_SHARED_SUB_AVAILABLE = 0x2A

_BYTE, _U16, _U32, _VARINT, _STR, _BIN, _PAIR = range(7)
PROPERTY_TYPES = {
    P_PAYLOAD_FORMAT: _BYTE, P_MESSAGE_EXPIRY: _U32, P_CONTENT_TYPE: _STR,
    P_RESPONSE_TOPIC: _STR, P_CORRELATION_DATA: _BIN, P_SUBSCRIPTION_ID: _VARINT,
    P_SESSION_EXPIRY: _U32, P_ASSIGNED_CLIENT_ID: _STR, P_SERVER_KEEP_ALIVE: _U16,
    P_AUTH_METHOD: _STR, P_AUTH_DATA: _BIN, P_REQUEST_PROBLEM_INFO: _BYTE,
    P_WILL_DELAY: _U32, P_REQUEST_RESPONSE_INFO: _BYTE, P_RESPONSE_INFO: _STR,
    P_SERVER_REFERENCE: _STR, P_REASON_STRING: _STR, P_RECEIVE_MAXIMUM: _U16,
    P_TOPIC_ALIAS_MAXIMUM: _U16, P_TOPIC_ALIAS: _U16, P_MAXIMUM_QOS: _BYTE,
    P_RETAIN_AVAILABLE: _BYTE, P_USER_PROPERTY: _PAIR, P_MAXIMUM_PACKET_SIZE: _U32,
    P_WILDCARD_SUB_AVAILABLE: _BYTE, P_SUB_ID_AVAILABLE: _BYTE, P_SHARED_SUB_AVAILABLE: _BYTE,
}


class ProtocolError(Exception):
    """The bytes received from the broker do not form a valid packet."""


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset)."""


class PacketTimeout(Exception):
    """No complete packet arrived within the timeout."""


# ---------------------------------------------------------------- primitive encoders

def varint(n):
    if n < 0 or n > 268435455:
        raise ValueError("varint out of range")
    out = bytearray()
    while True:
        byte = n % 128
        n //= 128
        if n:
            byte |= 0x80
        out.append(byte)
        if not n:
            return bytes(out)


def u16(n):
    return struct.pack("!H", n)


def u32(n):
    return struct.pack("!I", n)


def to_bytes(s):
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


def string(s):
    """Length-prefixed UTF-8 string (str) or raw bytes (bytes, may be invalid UTF-8)."""
    b = to_bytes(s)
    return u16(len(b)) + b


binary = string


def properties(props):
    """Encode an MQTT 5 property block. `props` is a list of (id, value) pairs (ids may
    repeat, e.g. user properties) or a dict {id: value}; None means an empty block."""
    if props is None:
        items = []
    elif isinstance(props, dict):
        items = list(props.items())
    else:
        items = list(props)
    body = bytearray()
    for pid, value in items:
        body += varint(pid)
        kind = PROPERTY_TYPES[pid]
        if kind == _BYTE:
            body.append(value)
        elif kind == _U16:
            body += u16(value)
        elif kind == _U32:
            body += u32(value)
        elif kind == _VARINT:
            body += varint(value)
        elif kind in (_STR, _BIN):
            body += string(value)
        else:
            body += string(value[0]) + string(value[1])
    return varint(len(body)) + bytes(body)


def packet(ptype, flags, body):
    """Fixed header + body."""
    return bytes([(ptype << 4) | (flags & 0x0F)]) + varint(len(body)) + bytes(body)


# ---------------------------------------------------------------- packet encoders

def connect(client_id="", version=MQTT311, clean=True, keepalive=60, will=None,
            username=None, password=None, props=None, proto_name=None, proto_level=None,
            flags=None):
    """CONNECT. `will` is a dict: topic, payload, qos=0, retain=False, props=None (v5).
    `flags` overrides the computed connect-flags byte (to build invalid packets)."""
    if proto_name is None:
        proto_name = "MQIsdp" if version == MQTT31 else "MQTT"
    if proto_level is None:
        proto_level = version
    cflags = 0
    if clean:
        cflags |= 0x02
    if will is not None:
        cflags |= 0x04 | (will.get("qos", 0) << 3) | (0x20 if will.get("retain") else 0)
    if password is not None:
        cflags |= 0x40
    if username is not None:
        cflags |= 0x80
    if flags is not None:
        cflags = flags
    body = string(proto_name) + bytes([proto_level, cflags]) + u16(keepalive)
    if version == MQTT5:
        body += properties(props)
    body += string(client_id)
    if will is not None:
        if version == MQTT5:
            body += properties(will.get("props"))
        body += string(will["topic"]) + binary(will.get("payload", b""))
    if username is not None:
        body += string(username)
    if password is not None:
        body += binary(password)
    return packet(CONNECT, 0, body)


def publish(topic, payload=b"", qos=0, retain=False, dup=False, pid=None, props=None,
            version=MQTT311):
    flags = (qos << 1) | (1 if retain else 0) | (0x08 if dup else 0)
    body = string(topic)
    if qos > 0:
        body += u16(pid if pid is not None else 1)
    if version == MQTT5:
        body += properties(props)
    body += to_bytes(payload)
    return packet(PUBLISH, flags, body)


def ack(ptype, pid, reason=None, props=None, flags=None):
    """PUBACK/PUBREC/PUBREL/PUBCOMP. Reason/props only when given (v5)."""
    if flags is None:
        flags = 0x02 if ptype == PUBREL else 0
    body = u16(pid)
    if reason is not None or props is not None:
        body += bytes([reason or 0])
        if props is not None:
            body += properties(props)
    return packet(ptype, flags, body)


def puback(pid, **kw):
    return ack(PUBACK, pid, **kw)


def pubrec(pid, **kw):
    return ack(PUBREC, pid, **kw)


def pubrel(pid, **kw):
    return ack(PUBREL, pid, **kw)


def pubcomp(pid, **kw):
    return ack(PUBCOMP, pid, **kw)


def subscribe(pid, topics, props=None, version=MQTT311, flags=0x02):
    """`topics`: list of (filter, options byte) or a single filter string (options 0)."""
    if isinstance(topics, (str, bytes)):
        topics = [(topics, 0)]
    body = u16(pid)
    if version == MQTT5:
        body += properties(props)
    for filt, opts in topics:
        body += string(filt) + bytes([opts])
    return packet(SUBSCRIBE, flags, body)


def sub_options(qos=0, no_local=False, retain_as_published=False, retain_handling=0):
    return qos | (0x04 if no_local else 0) | (0x08 if retain_as_published else 0) | (
        retain_handling << 4)


def unsubscribe(pid, topics, props=None, version=MQTT311, flags=0x02):
    if isinstance(topics, (str, bytes)):
        topics = [topics]
    body = u16(pid)
    if version == MQTT5:
        body += properties(props)
    for filt in topics:
        body += string(filt)
    return packet(UNSUBSCRIBE, flags, body)


def pingreq():
    return packet(PINGREQ, 0, b"")


def disconnect(reason=None, props=None):
    body = b""
    if reason is not None or props is not None:
        body = bytes([reason or 0])
        if props is not None:
            body += properties(props)
    return packet(DISCONNECT, 0, body)


def auth(reason=0, props=None):
    return packet(AUTH, 0, bytes([reason]) + properties(props))


# ---------------------------------------------------------------- decoders

class Props:
    """Decoded MQTT 5 properties: id -> list of values, in order."""

    def __init__(self):
        self.items = []

    def add(self, pid, value):
        self.items.append((pid, value))

    def get(self, pid, default=None):
        for k, v in self.items:
            if k == pid:
                return v
        return default

    def all(self, pid):
        return [v for k, v in self.items if k == pid]

    def __contains__(self, pid):
        return any(k == pid for k, _ in self.items)

    def ids(self):
        return [k for k, _ in self.items]

    def __repr__(self):
        return "Props(%r)" % (self.items,)


class Reader:
    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def remaining(self):
        return len(self.data) - self.pos

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ProtocolError("truncated packet body")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def byte(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("!H", self.take(2))[0]

    def u32(self):
        return struct.unpack("!I", self.take(4))[0]

    def varint(self):
        mult, value = 1, 0
        for _ in range(4):
            b = self.byte()
            value += (b & 0x7F) * mult
            if not b & 0x80:
                return value
            mult *= 128
        raise ProtocolError("varint longer than 4 bytes")

    def binary(self):
        return self.take(self.u16())

    def string(self):
        return self.binary().decode("utf-8")

    def rest(self):
        out = self.data[self.pos:]
        self.pos = len(self.data)
        return out

    def props(self):
        length = self.varint()
        sub = Reader(self.take(length))
        out = Props()
        while sub.remaining():
            pid = sub.varint()
            kind = PROPERTY_TYPES.get(pid)
            if kind is None:
                raise ProtocolError("unknown property 0x%02x" % pid)
            if kind == _BYTE:
                val = sub.byte()
            elif kind == _U16:
                val = sub.u16()
            elif kind == _U32:
                val = sub.u32()
            elif kind == _VARINT:
                val = sub.varint()
            elif kind == _STR:
                val = sub.string()
            elif kind == _BIN:
                val = sub.binary()
            else:
                val = (sub.string(), sub.string())
            out.add(pid, val)
        return out


class Packet:
    """One complete packet as received: type, flags, body (after the remaining length)."""

    def __init__(self, first_byte, body, raw):
        self.type = first_byte >> 4
        self.flags = first_byte & 0x0F
        self.body = body
        self.raw = raw

    @property
    def name(self):
        return PACKET_NAMES.get(self.type, "TYPE%d" % self.type)

    def __repr__(self):
        return "<%s flags=%x body=%s>" % (self.name, self.flags, self.body.hex())


class Connack:
    def __init__(self, pkt, version):
        r = Reader(pkt.body)
        self.ack_flags = r.byte()
        self.session_present = bool(self.ack_flags & 1)
        self.rc = r.byte()
        self.props = r.props() if version == MQTT5 and r.remaining() else Props()
        self.extra = r.rest()

    def __repr__(self):
        return "Connack(sp=%s rc=0x%02x props=%r)" % (self.session_present, self.rc, self.props)


class Publish:
    def __init__(self, pkt, version):
        self.dup = bool(pkt.flags & 0x08)
        self.qos = (pkt.flags >> 1) & 0x03
        self.retain = bool(pkt.flags & 0x01)
        r = Reader(pkt.body)
        self.topic = r.binary().decode("utf-8")
        self.pid = r.u16() if self.qos else None
        self.props = r.props() if version == MQTT5 else Props()
        self.payload = r.rest()

    def __repr__(self):
        return "Publish(%r q%d r%d d%d pid=%s %r %r)" % (
            self.topic, self.qos, self.retain, self.dup, self.pid, self.payload, self.props)


class Ack:
    """PUBACK/PUBREC/PUBREL/PUBCOMP/UNSUBACK-less-payload; reason 0 when omitted."""

    def __init__(self, pkt, version):
        r = Reader(pkt.body)
        self.type = pkt.type
        self.pid = r.u16()
        self.reason = 0
        self.props = Props()
        self.reason_present = False
        if version == MQTT5 and r.remaining():
            self.reason = r.byte()
            self.reason_present = True
            if r.remaining():
                self.props = r.props()


class Suback:
    """SUBACK or UNSUBACK: packet id, properties (v5), list of return/reason codes."""

    def __init__(self, pkt, version):
        r = Reader(pkt.body)
        self.pid = r.u16()
        self.props = r.props() if version == MQTT5 else Props()
        self.codes = list(r.rest())


class Disconnect:
    def __init__(self, pkt, version=MQTT5):
        r = Reader(pkt.body)
        self.reason = r.byte() if r.remaining() else 0
        self.props = r.props() if r.remaining() else Props()


def take_packet(buf):
    """The first whole packet in bytearray `buf` (removed from it), or None."""
    if len(buf) < 2:
        return None
    mult, length, i = 1, 0, 1
    while True:
        if i >= len(buf):
            return None
        b = buf[i]
        length += (b & 0x7F) * mult
        i += 1
        if not b & 0x80:
            break
        mult *= 128
        if i > 4:
            raise ProtocolError("broker sent a remaining length over 4 bytes")
    if len(buf) < i + length:
        return None
    raw = bytes(buf[:i + length])
    pkt = Packet(buf[0], raw[i:], raw)
    del buf[:i + length]
    return pkt


# ---------------------------------------------------------------- raw socket client

class RawClient:
    """A TCP connection speaking MQTT byte by byte.

    recv() returns whole packets (fixed header + varint remaining length + body) or raises
    PacketTimeout / ConnectionClosed. Convenience methods do the common handshakes and
    assert on the broker's answers.
    """

    def __init__(self, host, port, version=MQTT311, timeout=5.0):
        self.version = version
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.closed = False
        self._next_pid = 0
        self.awaiting_pubrel = set()

    # -- transport
    def send(self, data):
        self.sock.sendall(bytes(data))

    def try_send(self, data):
        """Send, ignoring errors from a broker that already closed the connection."""
        try:
            self.sock.sendall(bytes(data))
            return True
        except OSError:
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _parse_buffered(self):
        return take_packet(self.buf)

    def recv(self, timeout=None):
        """Next whole packet. Raises PacketTimeout or ConnectionClosed. PUBRELs for QoS 2
        messages acknowledged through ack_publish() are answered here and skipped."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            pkt = self._parse_buffered()
            if pkt is not None and pkt.type == PUBREL and len(pkt.body) >= 2:
                pid = struct.unpack("!H", pkt.body[:2])[0]
                if pid in self.awaiting_pubrel:
                    self.awaiting_pubrel.discard(pid)
                    self.try_send(pubcomp(pid))
                    continue
            if pkt is not None:
                return pkt
            if self.closed:
                raise ConnectionClosed("connection closed with %d stray bytes" % len(self.buf))
            left = deadline - time.monotonic()
            if left <= 0:
                raise PacketTimeout("no packet within %.1fs" % timeout)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                self.closed = True
                continue
            if not data:
                self.closed = True
                continue
            self.buf += data

    def recv_type(self, ptype, timeout=None):
        pkt = self.recv(timeout)
        assert pkt.type == ptype, "expected %s, got %r" % (PACKET_NAMES[ptype], pkt)
        return pkt

    def expect_no_packet(self, timeout=0.5):
        """Assert nothing arrives for `timeout` seconds (connection stays open)."""
        try:
            pkt = self.recv(timeout)
        except PacketTimeout:
            return
        raise AssertionError("unexpected packet %r" % (pkt,))

    def wait_closed(self, timeout=None):
        """Wait until the broker closes the connection; return the packets it sent first.
        Raises AssertionError if the connection is still open after `timeout`."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        got = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("broker did not close the connection within %.1fs "
                                     "(received %r)" % (timeout, got))
            try:
                got.append(self.recv(left))
            except ConnectionClosed:
                return got
            except PacketTimeout:
                continue

    def is_open(self, timeout=5.0):
        """True if a PINGREQ is still answered by PINGRESP (within `timeout`: a busy broker
        may be slow to answer, a closed connection is seen at once)."""
        if not self.try_send(pingreq()):
            return False
        try:
            while True:
                pkt = self.recv(timeout)
                if pkt.type == PINGRESP:
                    return True
        except (ConnectionClosed, PacketTimeout):
            return False

    # -- helpers
    def next_pid(self):
        self._next_pid = self._next_pid % 65535 + 1
        return self._next_pid

    def connect(self, client_id="", expect_rc=0, **kw):
        """Send CONNECT, return the decoded CONNACK; assert its code if expect_rc not None."""
        kw.setdefault("version", self.version)
        self.send(connect(client_id, **kw))
        ack = Connack(self.recv_type(CONNACK), self.version)
        if expect_rc is not None:
            assert ack.rc == expect_rc, "CONNACK %r, expected rc 0x%02x" % (ack, expect_rc)
        return ack

    def subscribe(self, topics, qos=0, props=None, pid=None):
        """SUBSCRIBE and return the Suback. `topics` is a filter or list of (filter, opts)."""
        if isinstance(topics, (str, bytes)):
            topics = [(topics, qos)]
        pid = pid or self.next_pid()
        self.send(subscribe(pid, topics, props=props, version=self.version))
        ack = Suback(self.recv_type(SUBACK), self.version)
        assert ack.pid == pid
        return ack

    def unsubscribe(self, topics, props=None, pid=None):
        pid = pid or self.next_pid()
        self.send(unsubscribe(pid, topics, props=props, version=self.version))
        ack = Suback(self.recv_type(UNSUBACK), self.version)
        assert ack.pid == pid
        return ack

    def publish(self, topic, payload=b"", qos=0, retain=False, props=None, pid=None,
                dup=False, complete=True):
        """PUBLISH; with complete=True runs the QoS 1/2 handshake and returns the last ack
        (Ack object) or None for QoS 0."""
        if qos and pid is None:
            pid = self.next_pid()
        self.send(publish(topic, payload, qos=qos, retain=retain, dup=dup, pid=pid,
                          props=props, version=self.version))
        if not complete or qos == 0:
            return pid
        if qos == 1:
            a = Ack(self.recv_type(PUBACK), self.version)
            assert a.pid == pid
            return a
        rec = Ack(self.recv_type(PUBREC), self.version)
        assert rec.pid == pid
        if rec.reason >= 0x80:
            return rec
        self.send(pubrel(pid))
        comp = Ack(self.recv_type(PUBCOMP), self.version)
        assert comp.pid == pid
        return comp

    def recv_publish(self, timeout=None, ack=True):
        """Next PUBLISH, decoded; acknowledges it (QoS 1: PUBACK; QoS 2: full flow) if ack."""
        msg = Publish(self.recv_type(PUBLISH, timeout), self.version)
        if ack:
            self.ack_publish(msg)
        return msg

    def ack_publish(self, msg):
        """QoS 1: PUBACK. QoS 2: PUBREC now; the PUBREL that follows is answered with
        PUBCOMP by recv() whenever it arrives (and not returned to the caller)."""
        if msg.qos == 1:
            self.send(puback(msg.pid))
        elif msg.qos == 2:
            self.send(pubrec(msg.pid))
            self.awaiting_pubrel.add(msg.pid)

    def drain_publishes(self, timeout=0.4, ack=True, expect=0, wait=None):
        """Every PUBLISH that arrives until `timeout` passes without one, decoded.

        expect=N: the first N are waited for as long as `wait` (default: the client's
        timeout) each, so that a broker slowed down by a loaded machine is not taken for one
        that sends nothing; only after them does the quiet `timeout` end the drain (it then
        catches any extra message the test must not get)."""
        out = []
        wait = self.timeout if wait is None else wait
        try:
            while True:
                out.append(self.recv_publish(timeout=wait if len(out) < expect else timeout,
                                             ack=ack))
        except PacketTimeout:
            return out

    def disconnect(self, reason=None, props=None, wait=2.0):
        """Send DISCONNECT and wait (up to `wait` s) until the broker has closed the socket,
        so that what the test does next happens after the broker processed the DISCONNECT."""
        self.try_send(disconnect(reason, props))
        deadline = time.monotonic() + wait
        while not self.closed and time.monotonic() < deadline:
            try:
                self.recv(deadline - time.monotonic())
            except (ConnectionClosed, PacketTimeout):
                break
        self.close()
