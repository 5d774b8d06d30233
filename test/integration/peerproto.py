"""The MQTT-ST peer side of the wire, for tests that play a peer broker byte by byte.

docs/mqtt-st-protocol.md and the peer handshake in src/peer/peer_accept.c / src/peer/peer_dial.c:

  dialler -> server   CONNECT, protocol level 0x85, client id = the dialler's identity text,
                      authentication method MQTT-ST-HMAC-SHA256, data = 16-byte client nonce
  server -> dialler   AUTH 0x18, data = server nonce (16) || server proof (32) || server id
  dialler -> server   AUTH 0x18, data = client proof (32)
  server -> dialler   CONNACK 0, user property mqtt-st-id = server identity text
  proof = HMAC-SHA256(secret, label || 0x00 || client nonce || server nonce || client id ||
                      0x00 || server id), label "mqtt-st client" / "mqtt-st server"

BPDUs ride in PINGREQ (answered with PINGRESP); messages are PUBLISH QoS 2 with the user
property mqtt-st-origin = "<identity> <16 hex incarnation> <sequence> <wall ms> <qos>[ r]".

Contents:
  proof(), connect_packet(), auth_packet(), connack_packet(), parse_connect(), parse_auth()
  Bpdu (encode / decode), identity_bytes(), pingreq()
  origin_value(), publish_packet()
  Conn      a socket with a reader thread: packets go to a handler or a queue
  RawPeer   a whole fake peer: dials the broker, accepts the broker's connect-back, answers
            (or ignores) its PINGREQs and sends BPDUs that make the link forward
  SysWatch  every value published under $SYS/broker/stp/, in order, per topic
"""

import hashlib
import hmac
import ipaddress
import os
import queue
import socket
import struct
import threading
import time

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

import mqttproto as mp

PEER_LEVEL = 0x85
AUTH_METHOD = "MQTT-ST-HMAC-SHA256"
ORIGIN_PROPERTY = "mqtt-st-origin"
ID_PROPERTY = "mqtt-st-id"
INTEREST_PROPERTY = "mqtt-st-interest"  # on a peer's CONNACK: it reads interest announcements
CONTINUE_AUTHENTICATION = 0x18
NONCE_LEN = 16
PROOF_LEN = 32

ROLE_ROOT, ROLE_DESIGNATED, ROLE_BLOCKED = 1, 2, 3

# CONNACK / DISCONNECT reason codes the tests look for
RC_PROTOCOL_ERROR = 0x82
RC_UNSUPPORTED_PROTOCOL_VERSION = 0x84
RC_CLIENT_ID_NOT_VALID = 0x85
RC_NOT_AUTHORIZED = 0x87
RC_BAD_AUTHENTICATION_METHOD = 0x8C


# ---------------------------------------------------------------- handshake packets

def proof(secret, from_server, client_nonce, server_nonce, client_id, server_id):
    label = b"mqtt-st server" if from_server else b"mqtt-st client"
    data = (label + b"\0" + bytes(client_nonce) + bytes(server_nonce) +
            client_id.encode() + b"\0" + server_id.encode())
    return hmac.new(secret.encode(), data, hashlib.sha256).digest()


def connect_packet(client_id, nonce=None, method=AUTH_METHOD, level=PEER_LEVEL, keepalive=60):
    """A peer CONNECT. method=None: no authentication method (and no data)."""
    props = []
    if method is not None:
        props.append((mp.P_AUTH_METHOD, method))
        if nonce is not None:
            props.append((mp.P_AUTH_DATA, bytes(nonce)))
    return mp.connect(client_id, version=mp.MQTT5, keepalive=keepalive, props=props,
                      proto_level=level)


def auth_packet(data, reason=CONTINUE_AUTHENTICATION, method=AUTH_METHOD):
    return mp.auth(reason, [(mp.P_AUTH_METHOD, method), (mp.P_AUTH_DATA, bytes(data))])


def connack_packet(rc=0, identity=None):
    props = [(mp.P_USER_PROPERTY, (ID_PROPERTY, identity))] if identity else None
    return mp.packet(mp.CONNACK, 0, bytes([0, rc]) + mp.properties(props))


class ParsedConnect:
    def __init__(self, pkt):
        r = mp.Reader(pkt.body)
        self.protocol_name = r.string()
        self.level = r.byte()
        self.flags = r.byte()
        self.keepalive = r.u16()
        self.props = r.props() if self.level & 0x7F == 5 else mp.Props()
        self.client_id = r.string()
        self.method = self.props.get(mp.P_AUTH_METHOD)
        self.data = self.props.get(mp.P_AUTH_DATA)


def parse_connect(pkt):
    return ParsedConnect(pkt)


def parse_auth(pkt):
    """(reason, method, data) of an AUTH packet."""
    r = mp.Reader(pkt.body)
    reason = r.byte() if r.remaining() else 0
    props = r.props() if r.remaining() else mp.Props()
    return reason, props.get(mp.P_AUTH_METHOD), props.get(mp.P_AUTH_DATA)


def user_properties(props):
    return props.all(mp.P_USER_PROPERTY)


# ---------------------------------------------------------------- identities and BPDUs

def split_identity(text):
    """"a.b.c.d:port" or "[v6]:port" -> (ipaddress object, port)."""
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
    else:
        host, _, port = text.rpartition(":")
    return ipaddress.ip_address(host), int(port)


def identity_bytes(text):
    addr, port = split_identity(text)
    return addr.packed + struct.pack("!H", port)


def identity_text(data):
    if len(data) == 6:
        return "%s:%d" % (ipaddress.IPv4Address(data[:4]), struct.unpack("!H", data[4:])[0])
    return "[%s]:%d" % (ipaddress.IPv6Address(data[:16]), struct.unpack("!H", data[16:])[0])


class BpduError(ValueError):
    pass


class Bpdu:
    """A version 1 BPDU (docs/mqtt-st-protocol.md, section 3). encode() builds the bytes
    from the fields; `flags_extra` ORs bits into the flags byte (to build invalid ones)."""

    def __init__(self, role, age, epoch, root_capability, root_cost, sender_capability,
                 root_id, sender_id, tc=False, tca=False, version=1, flags_extra=0):
        self.role, self.age, self.epoch = role, age, epoch
        self.root_capability, self.root_cost = root_capability, root_cost
        self.sender_capability = sender_capability
        self.root_id, self.sender_id = root_id, sender_id
        self.tc, self.tca, self.version, self.flags_extra = tc, tca, version, flags_extra

    def encode(self):
        root, sender = identity_bytes(self.root_id), identity_bytes(self.sender_id)
        flags = (self.role & 3) << 4
        flags |= (0x80 if self.tc else 0) | (0x40 if self.tca else 0)
        flags |= (0x08 if len(root) == 18 else 0) | (0x04 if len(sender) == 18 else 0)
        flags |= self.flags_extra
        return (bytes([self.version, flags, self.age]) +
                struct.pack("!IIII", self.epoch, self.root_capability, self.root_cost,
                            self.sender_capability) + root + sender)

    @classmethod
    def decode(cls, data):
        """The checks of section 3.4 (except the receiver's own identity); raises BpduError."""
        data = bytes(data)
        if not data:
            raise BpduError("empty")
        if data[0] != 1:
            raise BpduError("version")
        if len(data) < 19:
            raise BpduError("truncated")
        flags = data[1]
        if flags & 0x03 or not flags & 0x30:
            raise BpduError("flags")
        need = 19 + (18 if flags & 0x08 else 6) + (18 if flags & 0x04 else 6)
        if len(data) != need:
            raise BpduError("length")
        age = data[2]
        epoch, root_cap, cost, sender_cap = struct.unpack("!IIII", data[3:19])
        root_raw = data[19:need - (18 if flags & 0x04 else 6)]
        sender_raw = data[len(root_raw) + 19:]
        for raw in (root_raw, sender_raw):
            if raw[-2:] == b"\0\0" or not any(raw[:-2]):
                raise BpduError("identity")
            if len(raw) == 18 and raw[:12] == bytes(10) + b"\xff\xff":
                raise BpduError("identity")
        b = cls((flags >> 4) & 3, age, epoch, root_cap, cost, sender_cap,
                identity_text(root_raw), identity_text(sender_raw),
                tc=bool(flags & 0x80), tca=bool(flags & 0x40))
        if b.root_id == b.sender_id:
            if cost or age or root_cap != sender_cap or b.role == ROLE_ROOT:
                raise BpduError("inconsistent")
        elif cost == 0 or age == 0:
            raise BpduError("inconsistent")
        return b

    def __repr__(self):
        return "Bpdu(role=%d age=%d epoch=%d root=%s/%d cost=%d sender=%s/%d)" % (
            self.role, self.age, self.epoch, self.root_id, self.root_capability,
            self.root_cost, self.sender_id, self.sender_capability)


def pingreq(payload=b""):
    return mp.packet(mp.PINGREQ, 0, payload)


# ---------------------------------------------------------------- messages between peers

def origin_value(identity, incarnation, sequence, wall_ms=None, retained=False, qos=2):
    if wall_ms is None:
        wall_ms = int(time.time() * 1000)
    return "%s %016x %d %d %d%s" % (identity, incarnation, sequence, wall_ms, qos,
                                    " r" if retained else "")


def publish_packet(topic, payload, pid, origin=None, qos=2, retain=False, dup=False,
                   extra_props=()):
    """A peer PUBLISH; origin=None leaves the mqtt-st-origin property out."""
    props = []
    if origin is not None:
        props.append((mp.P_USER_PROPERTY, (ORIGIN_PROPERTY, origin)))
    props += list(extra_props)
    return mp.publish(topic, payload, qos=qos, retain=retain, dup=dup, pid=pid, props=props,
                      version=mp.MQTT5)


# ---------------------------------------------------------------- a connection with a reader

class Conn:
    """A TCP connection whose packets are read by a thread: each one goes to `handler`
    (called in that thread; returns True when it consumed the packet) or to a queue that
    recv() reads. send() may be called from any thread."""

    def __init__(self, sock, name=""):
        self.sock = sock
        self.name = name
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        self.packets = queue.Queue()
        self.handler = None
        self.closed = threading.Event()
        self.closed_at = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @classmethod
    def dial(cls, host, port, name="", timeout=5.0):
        return cls(socket.create_connection((host, port), timeout=timeout), name)

    def send(self, data):
        with self._lock:
            try:
                self.sock.sendall(bytes(data))
                return True
            except OSError:
                return False

    def _run(self):
        buf = bytearray()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                buf += data
                while True:
                    pkt = mp.take_packet(buf)
                    if pkt is None:
                        break
                    handler = self.handler
                    if handler is not None and handler(self, pkt):
                        continue
                    self.packets.put(pkt)
        except (OSError, mp.ProtocolError):
            pass
        self.closed_at = time.monotonic()
        self.closed.set()

    def recv(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.packets.get(timeout=0.02)
            except queue.Empty:
                pass
            if self.closed.is_set() and self.packets.empty():
                raise mp.ConnectionClosed("%s: connection closed" % self.name)
            if time.monotonic() >= deadline:
                raise mp.PacketTimeout("%s: no packet within %.1fs" % (self.name, timeout))

    def recv_type(self, ptype, timeout=5.0):
        pkt = self.recv(timeout)
        assert pkt.type == ptype, "%s: expected %s, got %r" % (
            self.name, mp.PACKET_NAMES[ptype], pkt)
        return pkt

    def wait_closed(self, timeout=5.0):
        """The packets that arrived (and were not handled) until the peer closed."""
        assert self.closed.wait(timeout), "%s: still open after %.1fs" % (self.name, timeout)
        got = []
        while not self.packets.empty():
            got.append(self.packets.get())
        return got

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        self._thread.join(2.0)


def client_handshake(conn, secret, client_id, nonce=None, proof_secret=None, timeout=5.0):
    """Dialler's half of the authenticated handshake on `conn`. Sends CONNECT; on AUTH
    answers with a proof made with `proof_secret` (default `secret`). Returns a dict: nonce
    (ours), auth (reason, method, data) or None, server_id, server_proof_ok (checked with
    `secret`), connack (mp.Connack)."""
    nonce = nonce or os.urandom(NONCE_LEN)
    conn.send(connect_packet(client_id, nonce))
    out = {"nonce": nonce, "auth": None, "server_id": None, "server_proof_ok": None,
           "connack": None}
    pkt = conn.recv(timeout)
    if pkt.type == mp.AUTH:
        reason, method, data = parse_auth(pkt)
        out["auth"] = (reason, method, data)
        server_nonce, server_proof = data[:NONCE_LEN], data[NONCE_LEN:NONCE_LEN + PROOF_LEN]
        server_id = data[NONCE_LEN + PROOF_LEN:].decode()
        out["server_id"] = server_id
        out["server_proof_ok"] = hmac.compare_digest(
            server_proof, proof(secret, True, nonce, server_nonce, client_id, server_id))
        mine = proof(proof_secret or secret, False, nonce, server_nonce, client_id, server_id)
        conn.send(auth_packet(mine))
        pkt = conn.recv(timeout)
    assert pkt.type == mp.CONNACK, "expected CONNACK, got %r" % (pkt,)
    out["connack"] = mp.Connack(pkt, mp.MQTT5)
    return out


# ---------------------------------------------------------------- a whole fake peer

class RawPeer:
    """A fake MQTT-ST broker with identity 127.0.0.1:<its own listening port>.

    start() dials the broker (the half of the link that carries our BPDUs and PUBLISH) and
    accepts the broker's connect-back on the listening port (the half that carries the
    broker's), answering its handshake properly. From then on:
      answer_pings  answer the broker's PINGREQs (False: stay silent, as a stuck peer)
      send_hellos   every `hello` seconds (and at once when the broker's BPDU changes) send a
                    BPDU that makes the link forward: we claim the broker's root, through
                    the broker (role root, cost = the broker's + 1000 us, its epoch)
    Attributes for the tests: identity, pings_sent, pingresps, broker_bpdus (decoded),
    received (PUBLISH from the broker), dialbacks (the accepted Conns), dialback_up (Event),
    dialback_up_at (monotonic time of our CONNACK on the latest connect-back).
    """

    def __init__(self, broker_host, broker_port, secret, capability=1, hello=0.2,
                 answer_pings=True, send_hellos=True, host="127.0.0.1"):
        self.broker_addr = (broker_host, broker_port)
        self.secret = secret
        self.capability = capability
        self.hello = hello
        self.answer_pings = answer_pings
        self.send_hellos = send_hellos
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(8)
        self.listener.settimeout(0.1)
        self.identity = "%s:%d" % (host, self.listener.getsockname()[1])
        self.server_id = None
        self.out = None
        self.dialbacks = []
        self.dialback_up = threading.Event()
        self.dialback_up_at = None
        self.dialback_errors = []
        self.broker_bpdus = []
        self.bad_broker_bpdus = []
        self.received = queue.Queue()
        self.pings_sent = 0
        self.pingresps = 0
        self.disconnects = []
        self.completed = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads = []
        self._pid = 0

    # -- our outgoing connection
    def start(self, keepalive=60):
        self._spawn(self._accept_loop)
        self.out = Conn.dial(*self.broker_addr, name="raw-peer out")
        nonce = os.urandom(NONCE_LEN)
        self.out.send(connect_packet(self.identity, nonce, keepalive=keepalive))
        reason, method, data = parse_auth(self.out.recv_type(mp.AUTH))
        assert (reason, method) == (CONTINUE_AUTHENTICATION, AUTH_METHOD)
        server_nonce, server_proof = data[:NONCE_LEN], data[NONCE_LEN:NONCE_LEN + PROOF_LEN]
        self.server_id = data[NONCE_LEN + PROOF_LEN:].decode()
        assert hmac.compare_digest(server_proof, proof(self.secret, True, nonce, server_nonce,
                                                       self.identity, self.server_id))
        self.out.send(auth_packet(proof(self.secret, False, nonce, server_nonce,
                                        self.identity, self.server_id)))
        ack = mp.Connack(self.out.recv_type(mp.CONNACK), mp.MQTT5)
        assert ack.rc == 0, ack
        assert (ID_PROPERTY, self.server_id) in user_properties(ack.props), ack
        self.out.handler = self._on_out_packet
        self._spawn(self._hello_loop)
        return self

    def _on_out_packet(self, conn, pkt):
        if pkt.type == mp.PINGRESP:
            with self._cond:
                self.pingresps += 1
                self._cond.notify_all()
            return True
        if pkt.type == mp.PUBREC:
            pid = struct.unpack("!H", pkt.body[:2])[0]
            conn.send(mp.pubrel(pid))
            return True
        if pkt.type == mp.PUBCOMP:
            with self._cond:
                self.completed.add(struct.unpack("!H", pkt.body[:2])[0])
                self._cond.notify_all()
            return True
        return False  # DISCONNECT and anything unexpected: to the queue

    def send_bpdu(self, payload):
        """A PINGREQ carrying `payload` (bytes or Bpdu) on our outgoing connection."""
        if isinstance(payload, Bpdu):
            payload = payload.encode()
        with self._cond:
            self.pings_sent += 1
        return self.out.send(pingreq(payload))

    def wait_all_pings_answered(self, timeout=3.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.pingresps < self.pings_sent:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%d PINGREQ sent, %d PINGRESP received" % (
                        self.pings_sent, self.pingresps))
                self._cond.wait(left)
            return self.pings_sent

    def next_pid(self):
        self._pid = self._pid % 65535 + 1
        return self._pid

    def publish(self, topic, payload, origin=None, qos=2, wait=True, timeout=3.0, **kw):
        """PUBLISH on our outgoing connection; with wait (QoS 2) until PUBCOMP."""
        pid = self.next_pid()
        self.out.send(publish_packet(topic, payload, pid, origin=origin, qos=qos, **kw))
        if wait and qos == 2:
            deadline = time.monotonic() + timeout
            with self._cond:
                while pid not in self.completed:
                    left = deadline - time.monotonic()
                    assert left > 0, "no PUBCOMP for %d" % pid
                    self._cond.wait(left)
        return pid

    def hello_bpdu(self):
        """What we advertise: the broker's root, one hop and 1 ms further, role root."""
        if not self.broker_bpdus:
            return None
        b = self.broker_bpdus[-1]
        return Bpdu(ROLE_ROOT, min(b.age + 1, 255), b.epoch, b.root_capability,
                    b.root_cost + 1000, self.capability, b.root_id, self.identity)

    def _hello_loop(self):
        while not self._stop.is_set():
            self._wake.wait(self.hello)
            self._wake.clear()
            if self._stop.is_set() or self.out.closed.is_set():
                return
            bpdu = self.hello_bpdu()
            if self.send_hellos and bpdu is not None and self.dialback_up.is_set():
                self.send_bpdu(bpdu)

    # -- the broker's connect-back
    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn = Conn(sock, name="raw-peer connect-back")
            self.dialbacks.append(conn)
            self._spawn(self._serve_dialback, conn)

    def _serve_dialback(self, conn):
        try:
            c = parse_connect(conn.recv_type(mp.CONNECT))
            if (c.level != PEER_LEVEL or c.method != AUTH_METHOD or c.data is None or
                    len(c.data) != NONCE_LEN):
                self.dialback_errors.append("bad CONNECT from the broker: level 0x%02x "
                                            "method %r" % (c.level, c.method))
                conn.send(connack_packet(RC_BAD_AUTHENTICATION_METHOD))
                return
            server_nonce = os.urandom(NONCE_LEN)
            mine = proof(self.secret, True, c.data, server_nonce, c.client_id, self.identity)
            conn.send(auth_packet(server_nonce + mine + self.identity.encode()))
            reason, method, data = parse_auth(conn.recv_type(mp.AUTH))
            expected = proof(self.secret, False, c.data, server_nonce, c.client_id,
                             self.identity)
            if not hmac.compare_digest(data or b"", expected):
                self.dialback_errors.append("the broker's proof is wrong")
                conn.send(connack_packet(RC_NOT_AUTHORIZED))
                return
            self.broker_client_id = c.client_id
            conn.handler = self._on_dialback_packet
            conn.send(connack_packet(0, self.identity))
            self.dialback_up_at = time.monotonic()
            self.dialback_up.set()
        except (AssertionError, mp.PacketTimeout, mp.ConnectionClosed, mp.ProtocolError) as e:
            self.dialback_errors.append("connect-back handshake: %s" % e)

    def _on_dialback_packet(self, conn, pkt):
        if pkt.type == mp.PINGREQ:
            if pkt.body:
                try:
                    b = Bpdu.decode(pkt.body)
                    prev = self.broker_bpdus[-1] if self.broker_bpdus else None
                    self.broker_bpdus.append(b)
                    if prev is None or (prev.epoch, prev.root_id, prev.root_cost) != (
                            b.epoch, b.root_id, b.root_cost):
                        self._wake.set()  # answer a change at once, as a broker does
                except BpduError as e:
                    self.bad_broker_bpdus.append((bytes(pkt.body), str(e)))
            if self.answer_pings:
                conn.send(mp.packet(mp.PINGRESP, 0, b""))
            return True
        if pkt.type == mp.PUBLISH:
            msg = mp.Publish(pkt, mp.MQTT5)
            self.received.put(msg)
            if msg.qos == 1:
                conn.send(mp.puback(msg.pid))
            elif msg.qos == 2:
                conn.send(mp.pubrec(msg.pid))
            return True
        if pkt.type == mp.PUBREL:
            conn.send(mp.pubcomp(struct.unpack("!H", pkt.body[:2])[0]))
            return True
        if pkt.type == mp.DISCONNECT:
            self.disconnects.append(mp.Disconnect(pkt))
            return True
        return False

    # -- lifetime
    def _spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def close(self):
        self._stop.set()
        self._wake.set()
        try:
            self.listener.close()
        except OSError:
            pass
        if self.out is not None:
            self.out.close()
        for c in list(self.dialbacks):
            c.close()
        for t in self._threads:
            t.join(2.0)


# ---------------------------------------------------------------- $SYS/broker/stp/

class SysWatch:
    """Subscribes to $SYS/broker/stp/# on a broker and keeps every value published, per
    topic (relative to $SYS/broker/stp/), in arrival order."""

    PREFIX = "$SYS/broker/stp/"

    def __init__(self, b, timeout=5.0):
        self.history = {}
        self._cond = threading.Condition()
        self.client = paho.Client(callback_api_version=CallbackAPIVersion.VERSION2,
                                  client_id="", protocol=paho.MQTTv311)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: subscribed.set()
        connected = threading.Event()
        self.client.on_connect = lambda *a: connected.set()
        self.client.connect(b.host, b.port, 30)
        self.client.loop_start()
        assert connected.wait(timeout), "$SYS watcher: no CONNACK"
        self.client.subscribe(self.PREFIX + "#", 0)
        assert subscribed.wait(timeout), "$SYS watcher: no SUBACK"

    def _on_message(self, client, userdata, msg):
        name = msg.topic[len(self.PREFIX):]
        with self._cond:
            self.history.setdefault(name, []).append(msg.payload.decode("utf-8", "replace"))
            self._cond.notify_all()

    def get(self, name):
        with self._cond:
            values = self.history.get(name)
            return values[-1] if values else None

    def values(self, name):
        with self._cond:
            return list(self.history.get(name, []))

    def topics(self):
        with self._cond:
            return list(self.history)

    def wait(self, name, predicate, timeout=5.0):
        """Wait until the latest value of `name` satisfies predicate (a value or callable)."""
        test = predicate if callable(predicate) else (lambda v: v == predicate)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                values = self.history.get(name)
                if values and test(values[-1]):
                    return values[-1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("$SYS/broker/stp/%s: %r after %.1fs" % (
                        name, self.history.get(name), timeout))
                self._cond.wait(left)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()
