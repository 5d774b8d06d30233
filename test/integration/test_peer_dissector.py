"""The Wireshark dissector tools/wireshark/mqtt-st.lua on a real capture of MQTT-ST brokers.

One capture (module scope), taken with dumpcap on loopback while:
  * five real brokers (the paper's triangle and two more below it; peer_net.Cluster: every
    connection of every link runs through a DelayProxy, so both the proxies' and the brokers'
    ports are captured) converge: links of each role pair, root / designated and
    designated / blocked;
  * plain clients (MQTT 5 and 3.1.1, paho and byte by byte) use a broker, and a QoS 1 message
    published on the leaf crosses the tree;
  * a raw peer (peerproto.RawPeer) authenticates to the leaf and sends hand-made BPDUs: a
    keep-alive, one per rejection reason of section 3.4, two valid ones with IPv6 identities,
    then a PUBLISH whose origin is a retained-sync offer and one without an origin.

tshark with the script then decodes the capture, and the tests compare what it shows with
what the brokers reported ($SYS/broker/stp, their logs) and with what the test sent. The
script finds the peer connections by itself (its TCP heuristic), so tshark gets no
`-d tcp.port==...,mqtt` except for the comparison with the built-in dissector alone.

Two more tests read a pcap written here from crafted bytes: IPv6 identity texts and a
Mosquitto bridge's CONNECT, and the script installed in the personal plugin folder. Another
crafted pcap carries the PUBLISH of bridges shared by the tree (section 7.5): announcements
(a holder's, a failing standby's, malformed ones) and messages with mqtt-st-bridge. Another
carries resync packets (section 7.3.1: summaries, lost notices, malformed ones, each also
sent to a real broker, whose verdict must be the dissector's), and a capture of two brokers
whose link is cut and healed shows the real ones. Two more carry interest announcements
(section 7.7) and the shared groups of section 7.9: tables of a link, valid and malformed, and
messages marked with mqtt-st-share, each also sent to a real broker.

Skips when tshark, editcap or dumpcap is missing or capturing on `lo` is not permitted.
"""

import collections
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

import mqttproto as mp
import peerproto as pp
from helpers import HOST, PahoClient, free_port, wait_until
from peer_net import DEFAULT_SECRET, Cluster
from peer_net import peer_support  # noqa: F401 (a pytest fixture)

pytestmark = pytest.mark.arbor_only

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "tools", "wireshark", "mqtt-st.lua")

# five brokers: the triangle of test_peer_tree.py (A (500) root, B (400) beside it, C (300)
# reaches A through B; A keeps the direct A-C link designated and C blocks it), then D (200)
# below C (its link to B is slower, so blocked) and E (100) below D, four hops from the root
CAPABILITIES = [500, 400, 300, 200, 100]
EDGES = [(0, 1), (1, 2), (0, 2), (2, 3), (1, 3), (3, 4)]
DELAYS = {(0, 1): 3, (1, 2): 4, (0, 2): 15, (2, 3): 3, (1, 3): 20, (3, 4): 3}
HELLO = 0.2
LEAF = 4

TOPIC = "dissector/hello"
PAYLOAD = b"across the tree"
PLAIN_IDS = ("dis-sub-v5", "dis-pub-v311", "dis-raw-v5")

# the broker's log text per result code (stp_bpdu_status_text in stp/bpdu.c)
STATUS_LOG_TEXT = {
    "STP_BPDU_TRUNCATED": "truncated",
    "STP_BPDU_BAD_VERSION": "unknown version",
    "STP_BPDU_BAD_FLAGS": "reserved flag bits or invalid role",
    "STP_BPDU_TRAILING_BYTES": "trailing bytes",
    "STP_BPDU_BAD_ID": "invalid broker identity",
    "STP_BPDU_INCONSISTENT": "inconsistent fields",
}
# reason key -> (result code, words of the expert message)
REASONS = {
    "bad_version": ("STP_BPDU_BAD_VERSION", "version byte is not 1"),
    "too_short": ("STP_BPDU_TRUNCATED", "fewer than 19 bytes"),
    "bad_flags": ("STP_BPDU_BAD_FLAGS", "reserved flag bits set, or role bits 00"),
    "truncated": ("STP_BPDU_TRUNCATED", "fewer bytes than the family bits require"),
    "trailing_bytes": ("STP_BPDU_TRAILING_BYTES", "more bytes than the family bits require"),
    "bad_id": ("STP_BPDU_BAD_ID", "identity with port 0"),
    "inconsistent": ("STP_BPDU_INCONSISTENT", "fields contradict each other"),
}

V6_ROOT, V6_SENDER = "[2001:db8::1]:1883", "[fd00::7]:1884"


def crafted_bpdus(raw_id, root_id, epoch):
    """(what, payload, expected reason key; None = valid, "none" = keep-alive) in sending
    order. The valid ones announce a root weaker than the tree's, in its epoch, so the leaf's
    tree does not change."""
    def bpdu(**kw):
        fields = dict(role=pp.ROLE_DESIGNATED, age=1, epoch=epoch, root_capability=300,
                      root_cost=5000, sender_capability=1, root_id=root_id, sender_id=raw_id)
        fields.update(kw)
        return pp.Bpdu(**fields).encode()
    good = bpdu()
    return [
        ("keep-alive (remaining length 0)", b"", "none"),
        ("version 2", b"\x02" + good[1:], "bad_version"),
        ("10 bytes", good[:10], "too_short"),
        ("reserved flag bit", bpdu(flags_extra=0x01), "bad_flags"),
        ("role bits 00", bpdu(role=0), "bad_flags"),
        ("root IPv6 flag on a 6-byte root", bpdu(flags_extra=0x08), "truncated"),
        ("one byte too many", good + b"\x00", "trailing_bytes"),
        ("root port 0", bpdu(root_id="10.0.0.1:0"), "bad_id"),
        ("sender 0.0.0.0", bpdu(sender_id="0.0.0.0:1884"), "bad_id"),
        ("IPv4-mapped root in 18 bytes", bpdu(root_id="[::ffff:10.0.0.1]:1883"), "bad_id"),
        ("root = sender with a cost", bpdu(root_id=raw_id, root_capability=1, root_cost=10,
                                           age=0), "inconsistent"),
        ("root != sender at age 0", bpdu(age=0), "inconsistent"),
        ("both identities IPv6", bpdu(root_id=V6_ROOT, sender_id=V6_SENDER, root_capability=1,
                                      root_cost=1234, age=2, tc=True), None),
        ("IPv6 root, IPv4 sender", bpdu(root_id=V6_ROOT, root_capability=1, root_cost=4321,
                                        role=pp.ROLE_BLOCKED, tca=True), None),
    ]


# ---------------------------------------------------------------- tools and capture

def tool_env(folder):
    """tshark and editcap without the user's Wireshark profile or personal plugins (a copy
    of the script there would be loaded twice)."""
    env = dict(os.environ)
    env["HOME"] = folder
    env["XDG_CONFIG_HOME"] = os.path.join(folder, ".config")
    env.pop("WIRESHARK_CONFIG_DIR", None)
    return env


class Dumpcap:
    """dumpcap on lo, limited to the given TCP ports, stopping by itself after `limit` s."""

    def __init__(self, path, ports, folder, limit=60):
        self.path = path
        self.err_path = os.path.join(folder, "dumpcap.err")
        capture_filter = " or ".join("tcp port %d" % p for p in sorted(set(ports)))
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                ["dumpcap", "-i", "lo", "-f", capture_filter, "-w", path,
                 "-a", "duration:%d" % limit],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=tool_env(folder))

    def errors(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_capturing(self, timeout=10.0):
        """True once dumpcap says it captures; False (process ended) when it cannot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Capturing on" in self.errors():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        self.stop()
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_tool(args, folder, timeout=60):
    p = subprocess.run(args, capture_output=True, timeout=timeout, env=tool_env(folder))
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0, "%s exited %d:\n%s" % (args[0], p.returncode, err)
    assert "Lua" not in err or "Error" not in err, "Lua error:\n" + err
    return p.stdout, err


def tshark_json(pcap, folder, script=True, decode_ports=(), display="mqtt || mqttst",
                layers="frame mqtt mqttst"):
    args = ["tshark", "-n", "-r", pcap]
    if script:
        args += ["-X", "lua_script:" + SCRIPT]
    for port in decode_ports:
        args += ["-d", "tcp.port==%d,mqtt" % port]
    args += ["-Y", display, "-T", "json", "--no-duplicate-keys", "-J", layers]
    out, _ = run_tool(args, folder)
    return json.loads(out.decode("utf-8", "replace") or "[]")


def frame_streams(pcap, folder):
    """{frame number: tcp stream}."""
    out, _ = run_tool(["tshark", "-n", "-r", pcap, "-T", "fields", "-e", "frame.number",
                       "-e", "tcp.stream"], folder)
    streams = {}
    for row in out.decode().splitlines():
        number, _, stream = row.partition("\t")
        if stream:
            streams[int(number)] = int(stream)
    return streams


def as_list(value):
    return value if isinstance(value, list) else [value]


def flatten(node, out):
    """Every field below a JSON tree node: {name: [values]} (subtrees merged; a field of no
    value with a subtree, e.g. mqttst.bridge, is there with no values)."""
    if isinstance(node, list):
        for item in node:
            flatten(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict):
                out.setdefault(key, [])
                flatten(value, out)
            elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
                flatten(value, out)
            else:
                out.setdefault(key, []).extend(as_list(value))
    return out


class Pdu:
    """One MQTT-ST tree (one MQTT packet) of a frame."""

    def __init__(self, frame, time_epoch, stream, tree):
        self.frame = frame
        self.time = time_epoch
        self.stream = stream
        self.fields = flatten(tree, {})

    def get(self, name, default=None):
        values = self.fields.get(name)
        return values[0] if values else default

    def has(self, name):
        return name in self.fields

    def bytes(self, name):
        return bytes.fromhex(self.get(name).replace(":", ""))

    def __repr__(self):
        return "Pdu(frame %d: %s)" % (self.frame, {k: v for k, v in self.fields.items()
                                                   if k.startswith(("mqttst.", "_ws.expert.m"))})


def layers_of(packet):
    return packet["_source"]["layers"]


def frame_number(layers):
    return int(layers["frame"]["frame.number"])


def mqttst_pdus(packets, streams):
    out = []
    for packet in packets:
        layers = layers_of(packet)
        if "mqttst" not in layers:
            continue
        n = frame_number(layers)
        t = float(layers["frame"]["frame.time_epoch"])
        for tree in as_list(layers["mqttst"]):
            out.append(Pdu(n, t, streams.get(n), tree))
    return out


# ---------------------------------------------------------------- the scenario

class Run:
    pass


def publish_across_the_tree(cluster, run):
    sub = PahoClient(cluster.brokers[0], client_id=PLAIN_IDS[0], version=5)
    pub = PahoClient(cluster.brokers[LEAF], client_id=PLAIN_IDS[1], version=4)
    try:
        assert sub.subscribe("dissector/#", 1)[0] < 0x80
        cluster.wait_interest("dissector/#", [0])
        run.publish_ms = time.time() * 1000
        pub.publish(TOPIC, PAYLOAD, qos=1)
        m = sub.get_message(5)
        assert (m.topic, m.payload) == (TOPIC, PAYLOAD)
    finally:
        sub.close()
        pub.close()
    raw = mp.RawClient(HOST, cluster.brokers[1].port, mp.MQTT5)
    try:
        raw.connect(PLAIN_IDS[2], keepalive=30)
        raw.send(mp.pingreq())
        raw.recv_type(mp.PINGRESP)
        raw.disconnect()
    finally:
        raw.close()


def play_raw_peer(cluster, raw, run):
    """The raw peer dials the leaf, waits for the leaf's connect-back, then sends the
    crafted BPDUs and two PUBLISH."""
    raw.start()
    assert raw.dialback_up.wait(5), "no connect-back from the leaf: %s" % raw.dialback_errors
    run.rejected_before = int(cluster.stp(LEAF, fresh=True).get("bpdus/rejected", "0"))
    run.crafted = crafted_bpdus(raw.identity, cluster.identity(0), run.leaf_epoch)
    for _, payload, _ in run.crafted:
        raw.send_bpdu(payload)
    raw.wait_all_pings_answered(5)
    run.raw_origin = pp.origin_value(raw.identity, 0x0123456789abcdef, 42,
                                     wall_ms=1764020000123, retained=True, qos=0)
    # another user property first: arbor takes the first one named mqtt-st-origin
    pid = raw.next_pid()
    raw.out.send(mp.publish("dissector/retained", b"offered", qos=2, retain=True, pid=pid,
                            props=[(mp.P_USER_PROPERTY, ("other", "x")),
                                   (mp.P_USER_PROPERTY, (pp.ORIGIN_PROPERTY, run.raw_origin))],
                            version=mp.MQTT5))
    wait_until(lambda: pid in raw.completed, 3, what="PUBCOMP of the retained offer")
    raw.publish("dissector/no-origin", b"x", origin=None, wait=False)
    assert raw.out.closed.wait(5), "a PUBLISH without origin did not close the connection"


@pytest.fixture(scope="module")
def run(peer_support):
    for tool in ("tshark", "dumpcap", "editcap"):
        if shutil.which(tool) is None:
            pytest.skip("%s is not installed (scripts/install-deps.sh installs tshark)" % tool)
    folder = tempfile.mkdtemp(prefix="arbor-dissector-")
    os.chmod(folder, 0o777)
    r = Run()
    r.folder = folder
    r.pcap = os.path.join(folder, "mqtt-st.pcapng")
    cluster = Cluster(len(CAPABILITIES), EDGES, CAPABILITIES, delays=DELAYS, hello=HELLO,
                      tmp_dir=os.path.join(folder, "cluster"), start=False)
    raw = pp.RawPeer(HOST, cluster.brokers[LEAF].port, DEFAULT_SECRET, send_hellos=False)
    capture = None
    failures = []
    try:
        ports = ([b.port for b in cluster.brokers] + [p.port for p in cluster.proxies.values()]
                 + [int(raw.identity.rsplit(":", 1)[1])])
        capture = Dumpcap(r.pcap, ports, folder)
        if not capture.wait_capturing():
            pytest.skip("dumpcap cannot capture on lo here: %s" % capture.errors().strip())
        cluster.start()
        moved = [b for b in cluster.brokers if b.port not in ports]
        assert not moved, "brokers moved to ports outside the capture filter: %s" % moved
        r.ids = [cluster.identity(i) for i in range(len(CAPABILITIES))]
        r.broker_ports = [b.port for b in cluster.brokers]
        first = cluster.wait_tree(timeout=15)
        r.t_converged = time.time()
        time.sleep(0.6)                  # past the settling period (section 7.3)
        publish_across_the_tree(cluster, r)
        time.sleep(3 * HELLO + 0.1)      # every link carries BPDUs of the converged tree
        second = cluster.snapshot()
        r.t_sampled = time.time()
        assert not second.problems() and second.signature() == first.signature(), (
            "the tree changed while it was captured:\n" + second.describe())
        r.views = [first.views, second.views]
        r.edges = EDGES
        r.leaf_epoch = int(second.value(LEAF, "epoch"))
        r.raw_id = raw.identity
        play_raw_peer(cluster, raw, r)
        r.rejected_after = int(cluster.stp(LEAF, fresh=True).get("bpdus/rejected", "0"))
        time.sleep(0.3)
        capture.stop()
        r.leaf_log = cluster.brokers[LEAF].log_text()
    finally:
        if capture is not None:
            capture.stop()
        raw.close()
        failures = cluster.close()
    assert not failures, "cluster teardown:\n" + "\n".join(failures)
    assert os.path.getsize(r.pcap) > 0
    r.streams = frame_streams(r.pcap, folder)
    r.packets = tshark_json(r.pcap, folder)
    r.pdus = mqttst_pdus(r.packets, r.streams)
    yield r
    shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- peer handshakes

def test_peer_connect_and_auth_exchange_decode_and_verify(run):
    """Every dialler -> acceptor pair of the triangle (and the raw peer's two connections)
    shows a peer CONNECT (level 0x85: peer flag, MQTT 5), the AUTH exchange and CONNACK's
    mqtt-st-id; the nonces and proofs the dissector cut out of the authentication data are
    the ones the HMACs of section 1.2 were computed over."""
    by_stream = collections.defaultdict(list)
    for p in run.pdus:
        by_stream[p.stream].append(p)
    verified = set()
    for stream, pdus in by_stream.items():
        connect = next((p for p in pdus if p.has("mqttst.connect.level")), None)
        if connect is None:
            continue
        assert connect.get("mqttst.connect.level") == "0x85", connect
        assert connect.get("mqttst.connect.peer") == "1", connect
        assert connect.get("mqttst.connect.mqtt_level") == "5", connect
        assert connect.get("mqttst.auth.method") == pp.AUTH_METHOD, connect
        client_id = connect.get("mqttst.connect.id")
        nonce = connect.bytes("mqttst.auth.client_nonce")
        assert len(nonce) == pp.NONCE_LEN
        server = next((p for p in pdus if p.has("mqttst.auth.server_proof")), None)
        client = next((p for p in pdus if p.has("mqttst.auth.client_proof")), None)
        connack = next((p for p in pdus if p.has("mqttst.connack.id")), None)
        if server is None or client is None or connack is None:
            continue   # a duplicate connection closed early, or the capture's last one
        assert server.get("mqttst.auth.reason") == "0x18"
        assert client.get("mqttst.auth.reason") == "0x18"
        assert server.get("mqttst.link.direction") == "acceptor to dialler"
        assert client.get("mqttst.link.direction") == "dialler to acceptor"
        server_id = server.get("mqttst.auth.server_id")
        server_nonce = server.bytes("mqttst.auth.server_nonce")
        assert connack.get("mqttst.connack.id") == server_id
        assert connack.get("mqttst.connack.reason") == "0x00"
        assert server.bytes("mqttst.auth.server_proof") == pp.proof(
            DEFAULT_SECRET, True, nonce, server_nonce, client_id, server_id)
        assert client.bytes("mqttst.auth.client_proof") == pp.proof(
            DEFAULT_SECRET, False, nonce, server_nonce, client_id, server_id)
        for p in pdus:
            assert p.get("mqttst.link.dialler") == client_id, p
        verified.add((client_id, server_id))
    ids = run.ids
    wanted = {(ids[a], ids[b]) for a, b in run.edges} | {(ids[b], ids[a]) for a, b in run.edges}
    wanted |= {(run.raw_id, ids[LEAF]), (ids[LEAF], run.raw_id)}
    assert wanted <= verified, "handshakes not seen whole: %s" % sorted(wanted - verified)


# ---------------------------------------------------------------- BPDUs of the tree

def tree_bpdus(run):
    """The last valid BPDU each broker sent on each link while the converged tree was
    captured: {(sender index, neighbour index): Pdu}."""
    index = {identity: i for i, identity in enumerate(run.ids)}
    last = {}
    for p in run.pdus:
        if not p.has("mqttst.bpdu.version") or not run.t_converged <= p.time <= run.t_sampled:
            continue
        sender, acceptor = p.get("mqttst.bpdu.sender"), p.get("mqttst.link.acceptor")
        if sender in index and acceptor in index:
            assert p.get("mqttst.bpdu.valid") == "1", p
            assert p.get("mqttst.link.dialler") == sender, p
            last[(index[sender], index[acceptor])] = p
    return last


def test_bpdus_match_what_the_brokers_report(run):
    """For each broker and each of its links, the last BPDU it sent while the converged tree
    was captured carries what the broker reports in $SYS/broker/stp: its identity and
    capability, its root's identity and capability, its hops as message age, its epoch, its
    root path cost (root/cost_us) and its role for that link."""
    last = tree_bpdus(run)
    first, second = run.views
    roles = set()
    for a, b in run.edges:
        for i, j in ((a, b), (b, a)):
            p = last.get((i, j))
            assert p is not None, "no BPDU from b%d to b%d in %s" % (i, j, sorted(last))
            v = second[i]
            neighbour = run.ids[j]
            assert p.get("mqttst.bpdu.version") == "1"
            assert p.get("mqttst.bpdu.sender") == v["id"] == run.ids[i]
            assert p.get("mqttst.bpdu.sender.ip") == HOST
            assert p.get("mqttst.bpdu.sender.port") == str(run.broker_ports[i])
            assert p.get("mqttst.bpdu.sender_capability") == v["capability"]
            assert p.get("mqttst.bpdu.root") == v["root/id"]
            assert p.get("mqttst.bpdu.root.ip") == HOST
            assert p.get("mqttst.bpdu.root.port") == v["root/id"].rsplit(":", 1)[1]
            assert p.get("mqttst.bpdu.root_capability") == v["root/capability"]
            assert p.get("mqttst.bpdu.age") == v["hops"]
            assert p.get("mqttst.bpdu.epoch") == v["epoch"]
            assert p.get("mqttst.bpdu.root_cost") in (first[i]["root/cost_us"],
                                                       v["root/cost_us"]), (p, v)
            role = v["peers/%s/role" % neighbour]
            assert p.get("mqttst.bpdu.role_name") == role, (i, j, p)
            assert p.get("mqttst.bpdu.role") == {"root": "1", "designated": "2",
                                                 "blocked": "3"}[role]
            for flag in ("tc", "tca", "root_ipv6", "sender_ipv6"):
                assert p.get("mqttst.bpdu." + flag) in ("0", "1"), flag
            assert p.get("mqttst.bpdu.root_ipv6") == "0" and p.get("mqttst.bpdu.sender_ipv6") == "0"
            assert p.get("mqttst.bpdu.reserved") == "0x00"
            assert p.get("mqttst.bpdu.status") == "STP_BPDU_OK"
            roles.add(role)
    assert roles == {"root", "designated", "blocked"}


# ---------------------------------------------------------------- messages

def test_peer_publish_origin_decodes(run):
    """The message published on the leaf crosses both links of the tree as peer PUBLISH
    whose origin names the leaf, a 16-hex-digit incarnation, its sequence, the publishing
    time and QoS 1; every hop carries the same origin."""
    ids = run.ids
    seen = {}
    for p in run.pdus:
        if p.get("mqttst.publish.topic") != TOPIC:
            continue
        assert p.get("mqttst.origin.id") == ids[LEAF], p
        assert p.get("mqttst.origin.qos") == "1"
        assert p.get("mqttst.origin.retained_sync") == "0"
        assert re.fullmatch(r"[0-9a-f]{16}", p.get("mqttst.origin.incarnation"))
        assert int(p.get("mqttst.origin.sequence")) >= 1
        assert abs(int(p.get("mqttst.origin.time_ms")) - run.publish_ms) < 5000
        assert p.bytes("mqttst.publish.payload") == PAYLOAD
        assert not p.has("_ws.expert.message"), p
        origin = (p.get("mqttst.origin.incarnation"), p.get("mqttst.origin.sequence"))
        seen[(p.get("mqttst.link.dialler"), p.get("mqttst.link.acceptor"))] = origin
    # it leaves the leaf and reaches the root (C -> B -> A once the tree has settled; while
    # it settles, a broker sends on every live link)
    assert any(d == ids[LEAF] for d, _ in seen) and any(a == ids[0] for _, a in seen), seen
    assert len(set(seen.values())) == 1, seen


def test_raw_peer_publish_origins(run):
    """A retained-sync origin (" r") after another user property decodes field by field and
    is flagged as not first; a peer PUBLISH without mqtt-st-origin is flagged."""
    mine = [p for p in run.pdus if p.get("mqttst.link.dialler") == run.raw_id and
            p.has("mqttst.publish.topic")]
    offered = next(p for p in mine if p.get("mqttst.publish.topic") == "dissector/retained")
    assert offered.get("mqttst.origin") == run.raw_origin
    assert offered.get("mqttst.origin.id") == run.raw_id
    assert offered.get("mqttst.origin.incarnation") == "0123456789abcdef"
    assert offered.get("mqttst.origin.sequence") == "42"
    assert offered.get("mqttst.origin.time_ms") == "1764020000123"
    assert offered.get("mqttst.origin.qos") == "0"
    assert offered.get("mqttst.origin.retained_sync") == "1"
    assert offered.has("mqttst.origin.not_first")
    missing = next(p for p in mine if p.get("mqttst.publish.topic") == "dissector/no-origin")
    assert missing.has("mqttst.origin.missing")
    assert not missing.has("mqttst.origin.id")


# ---------------------------------------------------------------- malformed BPDUs

def test_malformed_bpdus_flagged_with_their_reason(run):
    """Each BPDU the raw peer sent decodes in order: the keep-alive as such, each malformed
    one flagged (expert info naming the reason, the result code of stp/bpdu.h) exactly as
    the leaf rejected it in its log, the IPv6 ones valid with every identity field."""
    pings = [p for p in run.pdus if p.get("mqttst.link.dialler") == run.raw_id and
             (p.has("mqttst.bpdu.version") or p.has("mqttst.bpdu.none"))]
    assert len(pings) == len(run.crafted), pings
    statuses = []
    for (what, payload, reason), p in zip(run.crafted, pings):
        if reason == "none":
            assert p.has("mqttst.bpdu.none") and not p.has("mqttst.bpdu.version"), (what, p)
            continue
        assert p.bytes("mqttst.bpdu") == payload, (what, p)
        if reason is None:
            assert p.get("mqttst.bpdu.valid") == "1", (what, p)
            assert p.get("mqttst.bpdu.status") == "STP_BPDU_OK"
            assert not p.has("_ws.expert.message"), (what, p)
            continue
        code, words = REASONS[reason]
        assert p.get("mqttst.bpdu.valid") == "0", (what, p)
        assert p.get("mqttst.bpdu.error") == reason, (what, p)
        assert p.get("mqttst.bpdu.status") == code, (what, p)
        assert p.has("mqttst.bpdu.%s_error" % reason), (what, p)
        message = p.get("_ws.expert.message")
        assert message.startswith("Malformed BPDU: ") and words in message, (what, message)
        assert code in message
        statuses.append(code)
    # the leaf rejected the same BPDUs for the same reasons, in the same order
    logged = re.findall(r"rejected BPDU from %s: ([^.]+)\." % re.escape(run.raw_id),
                        run.leaf_log)
    assert logged == [STATUS_LOG_TEXT[c] for c in statuses], "\n".join(logged + statuses)
    assert run.rejected_after - run.rejected_before == len(statuses)


def test_ipv6_identities_decode(run):
    pings = [p for p in run.pdus if p.get("mqttst.link.dialler") == run.raw_id and
             p.get("mqttst.bpdu.valid") == "1"]
    both, mixed = pings
    assert both.get("mqttst.bpdu.root") == V6_ROOT
    assert both.get("mqttst.bpdu.root.ipv6") == "2001:db8::1"
    assert both.get("mqttst.bpdu.root.port") == "1883"
    assert both.get("mqttst.bpdu.sender") == V6_SENDER
    assert both.get("mqttst.bpdu.sender.ipv6") == "fd00::7"
    assert both.get("mqttst.bpdu.sender.port") == "1884"
    assert (both.get("mqttst.bpdu.root_ipv6"), both.get("mqttst.bpdu.sender_ipv6")) == ("1", "1")
    assert (both.get("mqttst.bpdu.tc"), both.get("mqttst.bpdu.tca")) == ("1", "0")
    assert both.get("mqttst.bpdu.role_name") == "designated"
    assert (both.get("mqttst.bpdu.age"), both.get("mqttst.bpdu.root_cost")) == ("2", "1234")
    assert len(both.bytes("mqttst.bpdu")) == 55
    assert mixed.get("mqttst.bpdu.root") == V6_ROOT
    assert mixed.get("mqttst.bpdu.sender") == run.raw_id
    assert mixed.get("mqttst.bpdu.sender.ip") == HOST
    assert not mixed.has("mqttst.bpdu.sender.ipv6")
    assert (mixed.get("mqttst.bpdu.root_ipv6"), mixed.get("mqttst.bpdu.sender_ipv6")) == ("1", "0")
    assert (mixed.get("mqttst.bpdu.tc"), mixed.get("mqttst.bpdu.tca")) == ("0", "1")
    assert mixed.get("mqttst.bpdu.role_name") == "blocked"
    assert len(mixed.bytes("mqttst.bpdu")) == 43


# ---------------------------------------------------------------- ordinary MQTT

def test_plain_clients_decoded_by_the_builtin_dissector_as_before(run):
    """The plain clients' packets get no MQTT-ST tree, and the built-in MQTT dissector shows
    exactly what it shows without the script (there with Decode As on the brokers' ports)."""
    connects = {}
    for packet in run.packets:
        layers = layers_of(packet)
        for mqtt in as_list(layers.get("mqtt", [])):
            client_id = mqtt.get("mqtt.clientid")
            if client_id in PLAIN_IDS:
                connects[client_id] = run.streams[frame_number(layers)]
    assert sorted(connects) == sorted(PLAIN_IDS)
    plain = set(connects.values())
    with_script = {frame_number(layers_of(p)): layers_of(p) for p in run.packets
                   if run.streams.get(frame_number(layers_of(p))) in plain}
    alone = tshark_json(run.pcap, run.folder, script=False, decode_ports=run.broker_ports,
                        display="mqtt", layers="frame mqtt")
    alone = {frame_number(layers_of(p)): layers_of(p) for p in alone
             if run.streams.get(frame_number(layers_of(p))) in plain}
    assert len(alone) >= 12 and sorted(with_script) == sorted(alone)
    versions = set()
    for n, layers in alone.items():
        assert "mqttst" not in with_script[n], with_script[n]
        assert "_ws.malformed" not in layers and "_ws.malformed" not in with_script[n]
        assert with_script[n]["mqtt"] == layers["mqtt"], n
        for mqtt in as_list(layers["mqtt"]):
            if "mqtt.ver" in mqtt:
                versions.add(mqtt["mqtt.ver"])
    assert versions == {"4", "5"}


# ---------------------------------------------------------------- a capture started late

def test_capture_started_after_the_handshakes(run):
    """Cut to the packets of the converged tree (no CONNECT left), the heuristic still
    finds the peer connections by their BPDUs and names each link after the BPDU's sender."""
    late = os.path.join(run.folder, "late.pcapng")
    run_tool(["editcap", "-A", "%.6f" % run.t_converged, "-B", "%.6f" % run.t_sampled,
              run.pcap, late], run.folder)
    pdus = mqttst_pdus(tshark_json(late, run.folder), frame_streams(late, run.folder))
    assert pdus and not any(p.has("mqttst.connect.level") for p in pdus)
    senders = set()
    for p in pdus:
        if p.get("mqttst.bpdu.valid") == "1" and p.get("mqttst.bpdu.sender") in run.ids:
            assert p.get("mqttst.link.dialler") == p.get("mqttst.bpdu.sender"), p
            senders.add(p.get("mqttst.bpdu.sender"))
    assert senders == set(run.ids)
    origins = [p for p in pdus if p.get("mqttst.publish.topic") == TOPIC]
    assert origins and all(p.get("mqttst.origin.id") == run.ids[LEAF] for p in origins)


# ---------------------------------------------------------------- peer links over TLS

def test_peer_links_over_tls_decode_with_the_brokers_key_log(peer_support):
    """Two brokers linked over TLS (peer_net.Cluster tls=True), started with SSLKEYLOGFILE:
    the capture shows nothing of MQTT-ST by itself; with the key log the brokers wrote
    (tls.keylog_file), Wireshark decrypts the links and the script finds the peer connections
    inside TLS by the same heuristic, BPDUs of both brokers included."""
    for tool in ("tshark", "dumpcap"):
        if shutil.which(tool) is None:
            pytest.skip("%s is not installed (scripts/install-deps.sh installs tshark)" % tool)
    folder = tempfile.mkdtemp(prefix="arbor-dissector-tls-")
    os.chmod(folder, 0o777)          # the brokers write the key log after dropping root
    pcap = os.path.join(folder, "tls.pcapng")
    key_log = os.path.join(folder, "keys.log")
    cluster = Cluster(2, [(0, 1)], [200, 100], tls=True, secret=None, hello=HELLO,
                      tmp_dir=os.path.join(folder, "cluster"), start=False)
    capture = None
    saved = os.environ.get("SSLKEYLOGFILE")
    try:
        ports = ([b.peer_port for b in cluster.brokers] +
                 [p.port for p in cluster.proxies.values()])
        capture = Dumpcap(pcap, ports, folder)
        if not capture.wait_capturing():
            pytest.skip("dumpcap cannot capture on lo here: %s" % capture.errors().strip())
        os.environ["SSLKEYLOGFILE"] = key_log    # inherited by the brokers started now
        try:
            cluster.start()
        finally:
            if saved is None:
                os.environ.pop("SSLKEYLOGFILE", None)
            else:
                os.environ["SSLKEYLOGFILE"] = saved
        cluster.wait_tree(timeout=10)
        time.sleep(3 * HELLO)
        capture.stop()
        ids = {cluster.identity(i) for i in range(2)}
        for b in cluster.brokers:
            assert "SSLKEYLOGFILE is set" in b.log_text()
    finally:
        if capture is not None:
            capture.stop()
        failures = cluster.close()
    assert not failures, "cluster teardown:\n" + "\n".join(failures)
    assert os.stat(key_log).st_mode & 0o077 == 0, "the key log must be private"
    with open(key_log) as f:
        assert "CLIENT_TRAFFIC_SECRET_0" in f.read()
    fields = ["-Y", "mqttst.bpdu", "-T", "fields", "-e", "mqttst.bpdu.sender"]
    hidden, _ = run_tool(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + SCRIPT] + fields,
                         folder)
    assert hidden.strip() == b""
    seen, _ = run_tool(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + SCRIPT,
                        "-o", "tls.keylog_file:" + key_log] + fields, folder)
    assert set(seen.decode().replace(",", " ").split()) == ids   # "a,b": two in one frame
    shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- hand-made captures

def write_pcap(path, segments, start=1700000000.0):
    """A classic pcap (raw IPv4 link type) of TCP segments between ports of 127.0.0.1, one
    per (source port, destination port, payload), sequence numbers running per direction."""
    loopback = socket.inet_aton(HOST)
    seq = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
        for k, (src, dst, payload) in enumerate(segments):
            mine, theirs = seq.get((src, dst), 1000), seq.get((dst, src), 1000)
            tcp = struct.pack("!HHIIBBHHH", src, dst, mine, theirs, 5 << 4, 0x18, 65535, 0, 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), k,
                             0x4000, 64, 6, 0, loopback, loopback)
            frame = ip + tcp + payload
            t = start + k * 0.001
            f.write(struct.pack("<IIII", int(t), int(round((t % 1) * 1e6)), len(frame),
                                len(frame)))
            f.write(frame)
            seq[(src, dst)] = mine + len(payload)


def crafted_capture(folder, sender="127.0.0.1:1885", addresses=("2001:db8::1",)):
    """A peer CONNECT then, in one segment, a BPDU per root address; a bridge's CONNECT
    (level 0x84) and a PINGREQ with a BPDU-like payload on its connection."""
    bpdus = b"".join(pp.pingreq(pp.Bpdu(pp.ROLE_DESIGNATED, 1, 5, 9, 100, 1,
                                        "[%s]:%d" % (a, 1000 + k), sender).encode())
                     for k, a in enumerate(addresses))
    pcap = os.path.join(folder, "crafted.pcap")
    write_pcap(pcap, [
        (40000, 1884, pp.connect_packet(sender, bytes(range(16)))),
        (40000, 1884, bpdus),
        (40001, 1883, mp.connect("bridge-x", version=mp.MQTT311, proto_level=0x84)),
        (40001, 1883, pp.pingreq(pp.Bpdu(pp.ROLE_ROOT, 1, 5, 9, 100, 1, "10.0.0.1:1",
                                         "10.0.0.2:2").encode())),
    ])
    return pcap


def test_identity_texts_and_bridges_in_a_crafted_capture(tmp_path):
    """IPv6 identities read as arbor prints them (glibc's inet_ntop: the first longest run
    of zero groups as ::, no :: for a single zero group, embedded IPv4 in ::ffff:a.b.c.d),
    several BPDUs in one segment; a Mosquitto bridge's CONNECT (0x84) shows the peer flag
    but is no peer, so a PINGREQ with a payload on its connection is not taken for a BPDU."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    folder = str(tmp_path)
    sender = "127.0.0.1:1885"
    addresses = ["2001:db8::1", "::1", "fe80::1:0:0:1", "2001:db8:0:0:1::1",
                 "1:0:0:2::3", "2001:db8:0:1:1:1:1:1", "::ffff:10.1.2.3", "::10.1.2.3",
                 "fd00::", "1::", "1:2:3:4:5:6:7:8"]
    pcap = crafted_capture(folder, sender, addresses)
    pdus = mqttst_pdus(tshark_json(pcap, folder), frame_streams(pcap, folder))
    connect = pdus[0]
    assert connect.get("mqttst.connect.id") == sender
    assert connect.bytes("mqttst.auth.client_nonce") == bytes(range(16))
    roots = [p for p in pdus if p.has("mqttst.bpdu.version")]
    assert [p.frame for p in roots] == [2] * len(addresses)
    for k, (a, p) in enumerate(zip(addresses, roots)):
        packed = socket.inet_pton(socket.AF_INET6, a)
        assert p.get("mqttst.bpdu.root") == "[%s]:%d" % (
            socket.inet_ntop(socket.AF_INET6, packed), 1000 + k), p
        assert p.get("mqttst.bpdu.root.port") == str(1000 + k)
        assert p.get("mqttst.bpdu.error") == ("bad_id" if a.startswith("::ffff:") else None), p
    bridge = [p for p in pdus if p.frame in (3, 4)]
    assert [p.frame for p in bridge] == [3], bridge
    assert bridge[0].get("mqttst.connect.level") == "0x84"
    assert bridge[0].get("mqttst.connect.peer") == "1"
    assert bridge[0].get("mqttst.connect.mqtt_level") == "4"
    assert bridge[0].has("mqttst.connect.bridge")


def test_installed_in_the_personal_plugin_folder(tmp_path):
    """Copied into ~/.local/lib/wireshark/plugins, the script works without -X; given with
    -X lua_script as well, the second copy stands aside instead of failing."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    folder = str(tmp_path)
    plugins = os.path.join(folder, ".local", "lib", "wireshark", "plugins")
    os.makedirs(plugins)
    shutil.copy(SCRIPT, plugins)
    pcap = crafted_capture(folder)
    for script in (False, True):
        pdus = mqttst_pdus(tshark_json(pcap, folder, script=script),
                           frame_streams(pcap, folder))
        assert [p.get("mqttst.bpdu.root") for p in pdus
                if p.has("mqttst.bpdu.root")] == ["[2001:db8::1]:1000"], script


# ---------------------------------------------------------------- bridges shared by the tree

ANNOUNCER = "127.0.0.1:1885"
FINGERPRINT = "3f2a9c0d41b7e6a8"
DELIVERED = [("192.168.1.7:1884", "5f0c2a9e11d3b7a4", 1042),
             ("[2001:db8::7]:1884", "0a9e5f0c11d3b7a4", 77)]


def announcement(role="holder", health="ok", priority=0, capability=5234, delivered=(),
                 extra=()):
    """The text of section 7.5, each line ended by LF."""
    lines = ["bridge 1", "fingerprint " + FINGERPRINT, "role " + role, "health " + health,
             "priority %d" % priority, "capability %d" % capability]
    lines += ["delivered %s %s %d" % d for d in delivered] + list(extra)
    return "".join(line + "\n" for line in lines).encode()


def replace_line(text, index, line):
    lines = text.split(b"\n")
    lines[index] = line
    return b"\n".join(lines)


# (what, topic, payload, reason key, words of the expert message) for announcements the
# brokers ignore (src/bridge/bridge_elect.c reads them strictly)
HOLDER = announcement(delivered=DELIVERED)
MALFORMED_ANNOUNCEMENTS = [
    ("no capability line", "$MQTT-ST/bridge/central", HOLDER.split(b"capability")[0], "header",
     "5 lines, the first six are required"),
    ("priority above 65535", "$MQTT-ST/bridge/central", announcement(priority=70000), "header",
     "line 5: priority 0-65535 expected"),
    ("format version 2", "$MQTT-ST/bridge/central", replace_line(HOLDER, 0, b"bridge 2"),
     "version", "line 1: format version 2, not 1"),
    ("role before fingerprint", "$MQTT-ST/bridge/central",
     replace_line(replace_line(HOLDER, 1, b"role holder"), 2, b"fingerprint " +
                  FINGERPRINT.encode()), "header", "line 2: fingerprint expected"),
    ("two blanks", "$MQTT-ST/bridge/central", replace_line(HOLDER, 3, b"health  ok"),
     "empty_field", "line 4: empty line, or a blank"),
    ("no LF after the last line", "$MQTT-ST/bridge/central", HOLDER[:-1], "no_newline",
     "line 8: the last line does not end with LF"),
    ("upper-case incarnation, sequence 0", "$MQTT-ST/bridge/central",
     announcement(delivered=[DELIVERED[0], ("10.0.0.1:1883", "5F0C2A9E11D3B7A4", 0)]),
     "delivered", "line 8: delivered <identity> <incarnation: 16 hex digits>"),
    ("carriage return", "$MQTT-ST/bridge/central", replace_line(HOLDER, 2, b"role holder\r"),
     "control_character", "line 3: control character 0x0d"),
    ("empty payload", "$MQTT-ST/bridge/central", b"", "header",
     "0 lines, the first six are required"),
    ("binary payload", "$MQTT-ST/bridge/central", b"\xff\xfe\x00\x01", "no_newline",
     "line 1: the last line does not end with LF"),
    ("no bridge name", "$MQTT-ST/bridge/", HOLDER, "no_name",
     "no bridge name after $MQTT-ST/bridge/"),
]


def bridge_publishes():
    """(what, PUBLISH bytes, its properties) on a peer link, in sending order: announcements
    (a holder's with two delivered lines, a standby's that fails with later-version lines,
    the malformed ones), then messages that came in over a bridge (mqtt-st-bridge)."""
    out = []

    def publish(what, topic, payload, props, qos=2):
        pid = len(out) + 1
        out.append((what, pp.publish_packet(topic, payload, pid, qos=qos, extra_props=props,
                                            origin=None), props))

    def origin(sequence):
        return (mp.P_USER_PROPERTY, (pp.ORIGIN_PROPERTY, pp.origin_value(
            ANNOUNCER, 0x5f0c2a9e11d3b7a4, sequence, wall_ms=1764020000123, qos=0)))

    def bridge(name):
        return (mp.P_USER_PROPERTY, ("mqtt-st-bridge", name))

    publish("holder", "$MQTT-ST/bridge/central", HOLDER, [origin(1)])
    publish("standby", "$MQTT-ST/bridge/site-uplink",
            announcement(role="standby", health="failing 1500", priority=65535,
                         capability=4294967295, extra=["shards 4 x", "role holder"]),
            [origin(2)])
    publish("standby with delivered", "$MQTT-ST/bridge/central",
            announcement(role="standby", delivered=DELIVERED[:1]), [origin(3)])
    for k, (what, topic, payload, _, _) in enumerate(MALFORMED_ANNOUNCEMENTS):
        publish(what, topic, payload, [origin(4 + k)])
    n = 4 + len(MALFORMED_ANNOUNCEMENTS)
    publish("from bridge", "sensors/1", b"21.5", [origin(n), bridge("central"),
                                                 (mp.P_USER_PROPERTY, ("unit", "C"))])
    publish("bridge after another property", "sensors/2", b"x",
            [origin(n + 1), (mp.P_USER_PROPERTY, ("unit", "C")), bridge("central")])
    publish("bridge before the origin", "sensors/3", b"x", [bridge("central"), origin(n + 2)])
    publish("empty bridge name", "sensors/4", b"x", [origin(n + 3), bridge("")])
    return out


def decoded_peer_packets(tmp_path_factory, name, sender, client_port, packets):
    """`packets` sent on a peer connection of `sender` (after its peer CONNECT), one per
    segment, in a hand-made pcap: (folder, pcap, [Pdu of each packet])."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (scripts/install-deps.sh installs it)")
    folder = str(tmp_path_factory.mktemp(name))
    pcap = os.path.join(folder, name + ".pcap")
    write_pcap(pcap, [(client_port, 1884, pp.connect_packet(sender, bytes(16)))] +
               [(client_port, 1884, packet) for packet in packets])
    pdus = mqttst_pdus(tshark_json(pcap, folder), frame_streams(pcap, folder))
    for p in pdus:
        for message in p.fields.get("_ws.expert.message", []):
            assert "dissector error" not in message, (p, message)
    assert [p.frame for p in pdus] == list(range(1, len(packets) + 2)), pdus
    return folder, pcap, pdus[1:]


@pytest.fixture(scope="module")
def bridge_pdus(tmp_path_factory):
    """The PUBLISH of bridge_publishes(), decoded: {what: Pdu}."""
    publishes = bridge_publishes()
    _, _, pdus = decoded_peer_packets(tmp_path_factory, "bridges", ANNOUNCER, 40002,
                                      [packet for _, packet, _ in publishes])
    return {what: p for (what, _, _), p in zip(publishes, pdus)}


def expert_messages(p):
    return p.fields.get("_ws.expert.message", [])


def assert_flagged(p, prefix, reason, payload, severity, message):
    """p (a PUBLISH of the given payload) is flagged as the brokers refuse it: <prefix>.valid
    0, <prefix>.error the reason key, <prefix>.malformed first among the expert infos, with
    the message and severity given."""
    assert p.get(prefix + ".valid") == "0", p
    assert p.get(prefix + ".error") == reason, p
    assert p.has(prefix + ".malformed"), p
    messages = expert_messages(p)
    assert messages[0].startswith(message), messages
    assert p.get("_ws.expert.severity") == severity, p
    if payload:
        assert p.bytes("mqttst.publish.payload") == payload


def test_bridge_announcement_of_a_holder_decodes(bridge_pdus):
    """A holder's announcement with two delivered lines (one IPv6 identity), field by field."""
    p = bridge_pdus["holder"]
    assert p.get("mqttst.origin.id") == ANNOUNCER
    assert p.has("mqttst.bridge") and p.bytes("mqttst.publish.payload") == HOLDER
    assert p.get("mqttst.bridge.name") == "central"
    assert p.get("mqttst.bridge.version") == "1"
    assert p.get("mqttst.bridge.fingerprint") == FINGERPRINT
    assert p.get("mqttst.bridge.role") == "holder"
    assert p.get("mqttst.bridge.health") == "ok"
    assert not p.has("mqttst.bridge.failing_ms")
    assert p.get("mqttst.bridge.priority") == "0"
    assert p.get("mqttst.bridge.capability") == "5234"
    assert p.fields["mqttst.bridge.delivered"] == ["%s %s %d" % d for d in DELIVERED]
    assert p.fields["mqttst.bridge.delivered.id"] == [d[0] for d in DELIVERED]
    assert p.fields["mqttst.bridge.delivered.incarnation"] == [d[1] for d in DELIVERED]
    assert p.fields["mqttst.bridge.delivered.sequence"] == [str(d[2]) for d in DELIVERED]
    assert not p.has("mqttst.bridge.unknown")
    assert p.get("mqttst.bridge.valid") == "1"
    assert not p.has("mqttst.bridge.error") and not p.has("mqttst.bridge_from")
    assert expert_messages(p) == []


def test_bridge_announcement_of_a_failing_standby_decodes(bridge_pdus):
    """A standby failing for 1500 ms, at the largest priority and capability; lines after
    the first six that are not delivered lines (a later version's, a second role) are shown
    as unknown and do not make it malformed."""
    p = bridge_pdus["standby"]
    assert p.get("mqttst.bridge.name") == "site-uplink"
    assert p.get("mqttst.bridge.role") == "standby"
    assert p.get("mqttst.bridge.health") == "failing"
    assert p.get("mqttst.bridge.failing_ms") == "1500"
    assert p.get("mqttst.bridge.priority") == "65535"
    assert p.get("mqttst.bridge.capability") == "4294967295"
    assert p.fields["mqttst.bridge.unknown"] == ["shards 4 x", "role holder"]
    assert p.fields["mqttst.bridge.role"] == ["standby"]
    assert not p.has("mqttst.bridge.delivered")
    assert p.get("mqttst.bridge.valid") == "1" and not p.has("mqttst.bridge.error")
    assert expert_messages(p) == []


def test_delivered_lines_of_a_standby_flagged(bridge_pdus):
    """Only a holder sends delivered lines (and only a holder's count): a standby's is
    shown, with a warning, and the announcement is still valid (the brokers read it)."""
    p = bridge_pdus["standby with delivered"]
    assert p.get("mqttst.bridge.role") == "standby"
    assert p.fields["mqttst.bridge.delivered.sequence"] == ["1042"]
    assert p.get("mqttst.bridge.valid") == "1"
    assert p.has("mqttst.bridge.standby_delivered")
    assert expert_messages(p) == ["delivered line from a standby (only a holder's count)"]


@pytest.mark.parametrize("case", MALFORMED_ANNOUNCEMENTS, ids=lambda c: c[0])
def test_malformed_bridge_announcement_flagged(bridge_pdus, case):
    """Each announcement the brokers would ignore is flagged with its first problem: a
    warning expert info naming the line, valid 0, the reason key; no Lua error."""
    what, _, payload, reason, words = case
    p = bridge_pdus[what]
    assert_flagged(p, "mqttst.bridge", reason, payload, "6291456",      # PI_WARN
                   "Malformed bridge announcement (the brokers ignore it): " + words)
    assert p.has("mqttst.bridge")


def test_malformed_bridge_announcements_keep_what_they_can_show(bridge_pdus):
    """The lines around the problem still decode, so the reader sees what was meant."""
    order = bridge_pdus["role before fingerprint"]
    assert order.get("mqttst.bridge.role") == "holder"
    assert order.get("mqttst.bridge.fingerprint") == FINGERPRINT
    assert [m for m in expert_messages(order) if "Malformed" in m] == [
        "Malformed bridge announcement (the brokers ignore it): line 2: fingerprint expected",
        "Malformed bridge announcement (the brokers ignore it): line 3: role expected"]
    version = bridge_pdus["format version 2"]
    assert version.get("mqttst.bridge.version") == "2"
    assert version.fields["mqttst.bridge.delivered.sequence"] == ["1042", "77"]
    short = bridge_pdus["no LF after the last line"]
    assert short.fields["mqttst.bridge.delivered.sequence"] == ["1042", "77"]
    bad = bridge_pdus["upper-case incarnation, sequence 0"]
    assert bad.fields["mqttst.bridge.delivered.id"] == [DELIVERED[0][0]]
    nameless = bridge_pdus["no bridge name"]
    assert not nameless.has("mqttst.bridge.name")
    assert nameless.get("mqttst.bridge.role") == "holder"


def test_message_from_a_bridge_names_it(bridge_pdus):
    """mqtt-st-bridge right after mqtt-st-origin is the bridge the message came in over
    (mqttst.bridge_from); anywhere else the brokers do not take it, and it is flagged."""
    p = bridge_pdus["from bridge"]
    assert p.get("mqttst.bridge_from") == "central"
    assert p.get("mqttst.origin.id") == ANNOUNCER
    assert not p.has("mqttst.bridge") and expert_messages(p) == []
    for what in ("bridge after another property", "bridge before the origin"):
        p = bridge_pdus[what]
        assert not p.has("mqttst.bridge_from"), p
        assert p.has("mqttst.bridge_from.misplaced"), p
        assert p.get("mqttst.origin.id") == ANNOUNCER
    assert bridge_pdus["bridge before the origin"].has("mqttst.origin.not_first")
    empty = bridge_pdus["empty bridge name"]
    assert empty.get("mqttst.bridge_from") == ""
    assert empty.has("mqttst.bridge_from.empty")


# ---------------------------------------------------------------- resync of a link (7.3.1)

SUMMARY, LOST, SKIP = "$MQTT-ST/link/summary", "$MQTT-ST/link/lost", "$MQTT-ST/link/skip"
RESYNC_SENDER = "127.0.0.1:1886"
RUNS = [("192.168.1.7:1884", "5f0c2a9e11d3b7a4", "1-1042,1050-1077,2000", 1071, 1, 2000),
        ("[2001:db8::1]:1883", "0000000000000002", "7", 1, 7, 7)]
RUN = "run 10.0.0.1:1883 0000000000000000 "


def resync_text(*lines):
    return "".join(line + "\n" for line in lines).encode()


WANT = resync_text("summary 1 want", *("run %s %s %s" % r[:3] for r in RUNS))

# (what, topic, payload) that the broker accepts: the three of the format, then spellings
# peer_summary.c reads too (so the dissector must not flag them)
VALID_RESYNCS = [
    ("want with two runs", SUMMARY, WANT),
    ("reply fresh", SUMMARY, resync_text("summary 1 reply fresh")),
    ("lost", LOST, resync_text("lost 1", RUN + "1-200")),
    ("skip", SKIP, resync_text("skip 1", RUN + "3,5-9",
                               "run [2001:db8::1]:1883 0000000000000002 7")),
    ("adjacent ranges, leading zeros", SUMMARY, resync_text("summary 1 reply",
                                                            RUN + "1-5,6-9,0010-011")),
    ("one identity, two incarnations", SUMMARY,
     resync_text("summary 1 want fresh", RUN + "3", "run 10.0.0.1:1883 0000000000000001 3")),
    ("the largest sequence number", LOST,
     resync_text("lost 1", RUN + "18446744073709551615")),
    ("identities as inet_pton and strtoul read them", SUMMARY,
     resync_text("summary 1 reply", "run [2001:DB8:0::1]:1883 00000000000000aa 1",
                 "run [10.0.0.2]:1883 00000000000000aa 1",
                 "run [::ffff:10.0.0.3]:+01883 00000000000000aa 1",
                 "run [1:2:3:4:5:6:1.2.3.4]:9 00000000000000aa 1",
                 "run [1:2:3:4:5:6:7::]:9 00000000000000aa 1",
                 "run [::1:2:3:4:5:6:7]:9 00000000000000aa 1")),
    ("identities read as C strings: a tab before the port, a NUL after it", LOST,
     resync_text("lost 1", "run 10.0.0.1:\t1883 00000000000000aa 1",
                 "run 10.0.0.2:1883\0junk 00000000000000aa 1")),
]

# (what, topic, payload, reason key, words of the expert message) for resync packets the
# broker refuses (src/peer/peer_summary.c: it closes the connection, 0x81)
MALFORMED_RESYNCS = [
    ("backwards range", SUMMARY, resync_text("summary 1 want", RUN + "5-3"), "backwards",
     "line 2: range 5-3 runs backwards"),
    ("overlapping ranges", SUMMARY, resync_text("summary 1 want", RUN + "1-5,5-9"), "overlap",
     "line 2: ranges overlap: 5 after 1-5"),
    ("ranges not ascending", SUMMARY, resync_text("summary 1 want", RUN + "9,3"),
     "not_ascending", "line 2: ranges not ascending: 3 after 9-9"),
    ("sequence 0", SUMMARY, resync_text("summary 1 want", RUN + "0-3"), "zero",
     "line 2: sequence number 0"),
    ("15-hex incarnation", SUMMARY,
     resync_text("summary 1 want", "run 10.0.0.1:1883 000000000000000 1"), "incarnation",
     "line 2: incarnation of 16 lower-case hex digits expected"),
    ("upper-case incarnation", SUMMARY,
     resync_text("summary 1 want", "run 10.0.0.1:1883 5F0C2A9E11D3B7A4 1"), "incarnation",
     "line 2: incarnation of 16 lower-case hex digits expected"),
    ("duplicate run", SUMMARY, resync_text("summary 1 want", RUN + "1", RUN + "2"), "duplicate",
     "line 3: run 10.0.0.1:1883 0000000000000000 listed twice"),
    ("duplicate run, spelled otherwise", SUMMARY,
     resync_text("summary 1 want", RUN + "1", "run [::ffff:10.0.0.1]:01883 0000000000000000 2"),
     "duplicate", "line 3: run [::ffff:10.0.0.1]:01883 0000000000000000 listed twice"),
    ("missing LF", SUMMARY, resync_text("summary 1 want", RUN + "1-5")[:-1], "no_newline",
     "line 2: the last line does not end with LF"),
    ("lost with no run", LOST, resync_text("lost 1"), "no_run", "a lost notice without a run"),
    ("skip with no run", SKIP, resync_text("skip 1"), "no_run", "a skip notice without a run"),
    ("lost header on the skip topic", SKIP, resync_text("lost 1", RUN + "1"), "header",
     "line 1: skip 1 expected"),
    ("no ranges", SUMMARY, resync_text("summary 1 want", RUN[:-1]), "run",
     "line 2: run <identity> <incarnation> <ranges> expected"),
    ("trailing comma", SUMMARY, resync_text("summary 1 want", RUN + "1,"), "ranges",
     "line 2: a decimal number expected at character 3"),
    ("range without end", SUMMARY, resync_text("summary 1 want", RUN + "1-"), "ranges",
     "line 2: a decimal number expected at character 3"),
    ("sequence above 2^64-1", SUMMARY,
     resync_text("summary 1 want", RUN + "18446744073709551616"), "ranges",
     "line 2: 18446744073709551616 is above 18446744073709551615"),
    ("carriage return", SUMMARY, resync_text("summary 1 want", RUN + "1-5\r"), "ranges",
     "line 2: ',' expected at character 4"),
    ("two blanks", SUMMARY, resync_text("summary 1 want", RUN.replace(" ", "  ", 1) + "1"),
     "run", "line 2: run <identity> <incarnation> <ranges> expected"),
    ("two blanks after the identity", SUMMARY,
     resync_text("summary 1 want", "run 10.0.0.1:1883  0000000000000000 1"), "run",
     "line 2: run <identity> <incarnation> <ranges> expected"),
    ("version 2", SUMMARY, resync_text("summary 2 want"), "header",
     "line 1: summary 1 want|reply [fresh] expected"),
    ("a word too many", SUMMARY, resync_text("summary 1 want fresh now"), "header",
     "line 1: summary 1 want|reply [fresh] expected"),
    ("blank at the end of the header", SUMMARY, b"summary 1 reply \n", "header",
     "line 1: summary 1 want|reply [fresh] expected"),
    ("lost header on the summary topic", SUMMARY, resync_text("lost 1", RUN + "1"), "header",
     "line 1: summary 1 want|reply [fresh] expected"),
    ("summary header on the lost topic", LOST, resync_text("summary 1 want"), "header",
     "line 1: lost 1 expected"),
    ("empty payload", SUMMARY, b"", "header",
     "empty payload: summary 1 want|reply [fresh] expected"),
]

# identities the brokers do not read (stp_broker_id_from_text), each in a lost notice
BAD_IDENTITIES = [
    ("host name identity", "broker.example:1883"),
    ("octet with a leading zero", "10.0.0.01:1883"),
    ("port 0", "10.0.0.1:0"),
    ("port above 65535", "10.0.0.1:65536"),
    ("unspecified address", "[::]:1883"),
    ("IPv4-mapped 0.0.0.0", "[::ffff:0.0.0.0]:1883"),
    ("IPv6 with a :: of no group", "[1:2:3:4:5:6:7::8]:1883"),
    ("IPv4 with a leading zero in IPv6", "[::01.2.3.4]:1883"),
    ("IPv6 without brackets", "2001:db8::1:1883"),
]
MALFORMED_RESYNCS += [
    (what, LOST, resync_text("lost 1", "run %s 0000000000000000 1" % identity), "identity",
     "line 2: not a broker identity (a.b.c.d:port or [address]:port): " + identity)
    for what, identity in BAD_IDENTITIES]

# PUBLISH without origin that are no resync packets: (what, topic, the broker refuses it)
NOT_RESYNCS = [
    ("ordinary topic without origin", "sensors/1", True),
    ("the link prefix alone", "$MQTT-ST/link/", True),
    ("another version's link-local topic", "$MQTT-ST/link/digest", False),
]


def resync_publishes():
    """(what, topic, payload, PUBLISH bytes) on a peer link, in sending order: the valid and
    malformed resync packets, then those without origin that are not resync packets."""
    cases = [(w, t, p) for w, t, p in VALID_RESYNCS]
    cases += [(w, t, p) for w, t, p, _, _ in MALFORMED_RESYNCS]
    cases += [(w, t, b"digest 1\n") for w, t, _ in NOT_RESYNCS]
    return [(what, topic, payload, pp.publish_packet(topic, payload, k + 1, origin=None))
            for k, (what, topic, payload) in enumerate(cases)]


@pytest.fixture(scope="module")
def resync_capture(tmp_path_factory):
    """The PUBLISH of resync_publishes(), decoded: (folder, pcap, {what: Pdu})."""
    publishes = resync_publishes()
    folder, pcap, pdus = decoded_peer_packets(tmp_path_factory, "resync", RESYNC_SENDER, 40003,
                                              [packet for _, _, _, packet in publishes])
    return folder, pcap, {what: p for (what, _, _, _), p in zip(publishes, pdus)}


@pytest.fixture(scope="module")
def resync_pdus(resync_capture):
    return resync_capture[2]


def test_resync_summary_with_want_decodes(resync_pdus):
    """A summary with want and two runs (one IPv6 identity), field by field; no origin, and
    none missed."""
    p = resync_pdus["want with two runs"]
    assert p.has("mqttst.resync") and p.bytes("mqttst.publish.payload") == WANT
    assert p.get("mqttst.resync.kind") == "summary"
    assert p.get("mqttst.resync.version") == "1"
    assert (p.get("mqttst.resync.want"), p.get("mqttst.resync.fresh")) == ("1", "0")
    assert p.fields["mqttst.resync.run"] == ["run %s %s %s" % r[:3] for r in RUNS]
    assert p.fields["mqttst.resync.run.id"] == [r[0] for r in RUNS]
    assert p.fields["mqttst.resync.run.incarnation"] == [r[1] for r in RUNS]
    assert p.fields["mqttst.resync.run.ranges"] == [r[2] for r in RUNS]
    assert p.fields["mqttst.resync.run.count"] == [str(r[3]) for r in RUNS]
    assert p.fields["mqttst.resync.run.first"] == [str(r[4]) for r in RUNS]
    assert p.fields["mqttst.resync.run.last"] == [str(r[5]) for r in RUNS]
    assert p.get("mqttst.resync.runs") == "2"
    assert p.get("mqttst.resync.count") == str(sum(r[3] for r in RUNS))
    assert p.get("mqttst.resync.valid") == "1" and not p.has("mqttst.resync.error")
    assert not p.has("mqttst.origin.missing") and not p.has("mqttst.origin")
    assert expert_messages(p) == []


def test_resync_reply_and_lost_notice_decode(resync_pdus):
    reply = resync_pdus["reply fresh"]
    assert reply.get("mqttst.resync.kind") == "summary"
    assert (reply.get("mqttst.resync.want"), reply.get("mqttst.resync.fresh")) == ("0", "1")
    assert reply.get("mqttst.resync.runs") == "0" and not reply.has("mqttst.resync.run")
    assert reply.get("mqttst.resync.valid") == "1" and expert_messages(reply) == []
    lost = resync_pdus["lost"]
    assert lost.get("mqttst.resync.kind") == "lost"
    assert not lost.has("mqttst.resync.want") and not lost.has("mqttst.resync.fresh")
    assert lost.get("mqttst.resync.run.id") == "10.0.0.1:1883"
    assert lost.get("mqttst.resync.run.incarnation") == "0000000000000000"
    assert lost.get("mqttst.resync.run.ranges") == "1-200"
    assert lost.get("mqttst.resync.run.count") == lost.get("mqttst.resync.count") == "200"
    assert lost.get("mqttst.resync.valid") == "1" and expert_messages(lost) == []
    skip = resync_pdus["skip"]   # section 7.8: read as a lost notice is
    assert skip.get("mqttst.resync.kind") == "skip"
    assert not skip.has("mqttst.resync.want") and not skip.has("mqttst.resync.fresh")
    assert skip.fields["mqttst.resync.run.ranges"] == ["3,5-9", "7"]
    assert skip.fields["mqttst.resync.run.count"] == ["6", "1"]
    assert skip.get("mqttst.resync.count") == "7" and skip.get("mqttst.resync.runs") == "2"
    assert skip.get("mqttst.resync.valid") == "1" and expert_messages(skip) == []
    largest = resync_pdus["the largest sequence number"]
    assert largest.get("mqttst.resync.run.last") == "18446744073709551615"
    assert largest.get("mqttst.resync.run.count") == "1"


@pytest.mark.parametrize("case", VALID_RESYNCS, ids=lambda c: c[0])
def test_resync_spellings_the_broker_reads_are_valid(resync_pdus, case):
    p = resync_pdus[case[0]]
    assert p.get("mqttst.resync.valid") == "1", p
    assert expert_messages(p) == [], p


def test_resync_info_column(resync_capture):
    """The Info column sums each resync packet up."""
    folder, pcap, _ = resync_capture
    out, _ = run_tool(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + SCRIPT,
                       "-T", "fields", "-e", "_ws.col.Info"], folder)
    rows = out.decode().splitlines()[1:]
    info = {what: row for (what, _, _, _), row in zip(resync_publishes(), rows)}
    assert info["want with two runs"].endswith("[resync summary (want, 2 runs)]"), info
    assert info["reply fresh"].endswith("[resync summary (reply, fresh, 0 runs)]"), info
    assert info["lost"].endswith("[resync lost: 200 messages]"), info
    assert info["skip"].endswith("[skip: 7 messages, 2 runs]"), info
    assert info["backwards range"].endswith("[resync summary: malformed (backwards)]"), info
    assert info["another version's link-local topic"].endswith("[link-local digest (ignored)]")
    assert info["ordinary topic without origin"].endswith("[no origin]"), info


@pytest.mark.parametrize("case", MALFORMED_RESYNCS, ids=lambda c: c[0])
def test_malformed_resync_flagged(resync_pdus, case):
    """Each resync packet the broker refuses is flagged with its first problem: an error
    expert info naming the line, valid 0, the reason key; no Lua error, no missing origin."""
    what, topic, payload, reason, words = case
    p = resync_pdus[what]
    assert p.get("mqttst.resync.kind") == topic.rsplit("/", 1)[1]
    assert_flagged(p, "mqttst.resync", reason, payload, "8388608",      # PI_ERROR
                   "Malformed resync packet (the broker closes the connection, 0x81): " + words)
    assert not p.has("mqttst.origin.missing")


def test_malformed_resync_keeps_what_it_can_show(resync_pdus):
    """The lines around the problem still decode; a duplicate run shows both."""
    dup = resync_pdus["duplicate run, spelled otherwise"]
    assert dup.fields["mqttst.resync.run.id"] == ["10.0.0.1:1883", "[::ffff:10.0.0.1]:01883"]
    assert dup.get("mqttst.resync.runs") == "1"
    short = resync_pdus["missing LF"]
    assert short.get("mqttst.resync.run.ranges") == "1-5"
    assert short.get("mqttst.resync.want") == "1"
    version = resync_pdus["version 2"]
    assert version.get("mqttst.resync.version") == "2"


def test_publish_without_origin_still_flagged_unless_link_local(resync_pdus):
    """Only the topics below $MQTT-ST/link/ go without origin; one the brokers do not know
    (a later version's) is noted and ignored, as they do."""
    for what, topic, refused in NOT_RESYNCS:
        p = resync_pdus[what]
        assert p.get("mqttst.publish.topic") == topic
        assert p.has("mqttst.origin.missing") == refused, p
        assert p.has("mqttst.resync") == (not refused), p
    other = resync_pdus["another version's link-local topic"]
    assert other.get("mqttst.resync.kind") == "digest"
    assert other.has("mqttst.resync.other") and not other.has("mqttst.resync.valid")


def broker_verdicts(broker, cases):
    """Each (what, packet) sent on a peer connection of its own to a new real broker, after
    the handshake: (the broker, {what: "accepted" (PUBREC) or the DISCONNECT's reason})."""
    port = free_port()
    secret = "dissector-verdict-secret"
    b = broker("peer_identity 127.0.0.1:%d" % port, "peer_secret " + secret, port=port)
    verdicts = {}
    for what, packet in cases:
        conn = pp.Conn.dial(b.host, b.port, what)
        try:
            hs = pp.client_handshake(conn, secret, "127.0.0.1:%d" % free_port())
            assert hs["connack"].rc == 0, (what, hs)
            conn.send(packet)
            pkt = conn.recv(5)
            if pkt.type == mp.PUBREC:
                verdicts[what] = "accepted"
            else:
                assert pkt.type == mp.DISCONNECT, (what, pkt)
                verdicts[what] = "0x%02x" % mp.Disconnect(pkt).reason
                conn.wait_closed(5)
        finally:
            conn.close()
    return b, verdicts


def test_resync_verdicts_match_the_broker(broker, resync_pdus):
    """Every case of the hand-made capture, sent to a real broker on a peer connection of
    its own: the broker acknowledges exactly those the dissector takes as valid (PUBREC),
    and closes the connection on the others (0x81 for a malformed resync packet, 0x82 for a
    PUBLISH without origin)."""
    _, verdicts = broker_verdicts(broker, [(what, packet)
                                           for what, _, _, packet in resync_publishes()])
    expected = {}
    for what, p in resync_pdus.items():
        if p.has("mqttst.origin.missing"):
            expected[what] = "0x82"
        elif p.get("mqttst.resync.valid") == "0":
            expected[what] = "0x81"
        else:
            expected[what] = "accepted"
    assert verdicts == expected
    assert sorted(set(expected.values())) == ["0x81", "0x82", "accepted"]


def test_resync_of_a_healed_link_decodes(peer_support):
    """Two real brokers (a log of 3 messages each), captured while QoS 1 messages of broker
    0 cross their link, the link is cut while broker 0 publishes 10 more, then healed. The
    summaries each side sends when the link comes up again name what it has seen (broker 1
    broker 0's first 2, broker 0 its own 12), broker 0's lost notice names the 7 that left
    its log (3-9), which broker 1 counts and logs; every resync packet decodes as valid."""
    for tool in ("tshark", "dumpcap"):
        if shutil.which(tool) is None:
            pytest.skip("%s is not installed (scripts/install-deps.sh installs tshark)" % tool)
    folder = tempfile.mkdtemp(prefix="arbor-dissector-resync-")
    os.chmod(folder, 0o777)
    pcap = os.path.join(folder, "resync.pcapng")
    cluster = Cluster(2, [(0, 1)], [200, 100], hello=HELLO, start=False,
                      extra_lines=["peer_log_max_messages 3"],
                      tmp_dir=os.path.join(folder, "cluster"))
    capture = None
    topic = "dissector/resync"
    try:
        ports = [b.port for b in cluster.brokers] + [p.port for p in cluster.proxies.values()]
        capture = Dumpcap(pcap, ports, folder)
        if not capture.wait_capturing():
            pytest.skip("dumpcap cannot capture on lo here: %s" % capture.errors().strip())
        cluster.start()
        ids = [cluster.identity(i) for i in range(2)]
        cluster.wait_tree(timeout=15)
        sub = cluster.client(1, version=5)
        assert sub.subscribe(topic, 1)[0] < 0x80
        cluster.wait_interest(topic, [1])
        pub = cluster.client(0, version=5)
        for n in range(2):
            pub.publish(topic, b"m%d" % n, qos=1)
        assert [m.payload for m in sub.get_messages(2, 5)] == [b"m0", b"m1"]
        t_cut = time.time()
        cluster.cut(0, 1)
        wait_until(lambda: cluster.snapshot().root_of(1) == ids[1], timeout=15,
                   what="broker 1 on its own")
        for n in range(2, 12):
            pub.publish(topic, b"m%d" % n, qos=1)
        t_heal = time.time()
        cluster.heal(0, 1)
        cluster.wait_tree(timeout=15)
        assert [m.payload for m in sub.get_messages(3, 10)] == [b"m9", b"m10", b"m11"]
        wait_until(lambda: cluster.stp(1, fresh=True).get("messages/lost") == "7", timeout=10,
                   what="broker 1 counts 7 messages lost")
        log = cluster.brokers[1].log_text()
        capture.stop()
    finally:
        if capture is not None:
            capture.stop()
        failures = cluster.close()
    assert not failures, "cluster teardown:\n" + "\n".join(failures)
    assert ("MQTT-ST: 7 messages of %s (sequence 3-9) are lost" % ids[0]) in log
    pdus = mqttst_pdus(tshark_json(pcap, folder), frame_streams(pcap, folder))
    resyncs = [p for p in pdus if p.has("mqttst.resync")]
    for p in resyncs:
        assert p.get("mqttst.resync.valid") == "1", p
        assert expert_messages(p) == [], p
        assert not p.has("mqttst.origin.missing"), p
    # each connection of the link starts with a full interest announcement (7.7), each time
    # the link comes up: nobody subscribes, so it holds no filter
    interests = [p for p in pdus if p.has("mqttst.interest")]
    for p in interests:
        assert p.get("mqttst.interest.valid") == "1" and expert_messages(p) == [], p
    for sender in (0, 1):
        own = [p for p in interests if p.get("mqttst.link.dialler") == ids[sender]]
        assert own and own[0].get("mqttst.interest.kind") == "full", own
        assert own[0].get("mqttst.interest.adds") == "0", own
        assert sum(p.get("mqttst.interest.kind") == "full" for p in own) >= 2, own
    incarnations = {p.get("mqttst.origin.incarnation") for p in pdus
                    if p.get("mqttst.publish.topic") == topic}
    assert len(incarnations) == 1, incarnations
    incarnation = incarnations.pop()

    def summaries(sender, since, until=None):
        return [p for p in resyncs if p.get("mqttst.resync.kind") == "summary" and
                p.get("mqttst.link.dialler") == ids[sender] and
                since <= p.time <= (until or float("inf"))]
    # the link's first start: each end asks for the other's summary and answers it
    for sender in (0, 1):
        first = summaries(sender, 0, t_cut)
        assert {p.get("mqttst.resync.want") for p in first} == {"0", "1"}, first
    # the link's second start: what each has seen of broker 0's run (broker 1 may send a
    # later summary after what the resync brought it)
    seen = {0: "1-12", 1: "1-2"}
    for sender in (0, 1):
        again = summaries(sender, t_heal)
        assert any(p.get("mqttst.resync.want") == "1" for p in again), again
        assert again[0].get("mqttst.resync.run.ranges") == seen[sender], (sender, again)
        for p in again:
            assert p.fields.get("mqttst.resync.run.id") == [ids[0]], p
            assert p.get("mqttst.resync.run.incarnation") == incarnation
            assert p.get("mqttst.resync.fresh") == "0"
    lost = [p for p in resyncs if p.get("mqttst.resync.kind") == "lost"]
    assert lost, "no lost notice in the capture"
    for p in lost:
        assert p.get("mqttst.link.dialler") == ids[0] and p.time >= t_heal, p
        assert p.get("mqttst.resync.run.id") == ids[0]
        assert p.get("mqttst.resync.run.incarnation") == incarnation
        assert p.get("mqttst.resync.run.ranges") == "3-9"
        assert p.get("mqttst.resync.run.count") == p.get("mqttst.resync.count") == "7"
    shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- interest announcements (7.7)

INTEREST = "$MQTT-ST/link/interest"
INTEREST_SENDER = "127.0.0.1:1887"


def interest_payload(kind, generation, flags, *entries):
    """The binary payload: version 1, kind, generation, flags, then (op, filter bytes)."""
    out = struct.pack(">BBIB", 1, kind, generation, flags)
    for op, text in entries:
        out += struct.pack(">BH", op, len(text)) + text
    return out


ADD, REMOVE = 1, 2
FULL = interest_payload(0, 1, 0, (ADD, b"shop/+/temp"), (ADD, "site/caf\u00e9 1/#".encode()))
UPDATE = interest_payload(1, 2, 2, (REMOVE, b"shop/+/temp"), (ADD, b"alarms"))

# (what, payload) the broker accepts
VALID_INTERESTS = [
    ("full with two filters", FULL),
    ("carried update", UPDATE),
    ("full: everything", interest_payload(0, 7, 1)),
    ("request", interest_payload(2, 0, 0)),
    ("full with no filter", interest_payload(0, 1, 0)),
    ("filter with a line feed and a blank", interest_payload(0, 1, 0, (ADD, b"a b\nc/#"))),
]

# (what, payload, the dissector's reason) the broker refuses (0x81)
MALFORMED_INTERESTS = [
    ("short header", b"\x01\x00\x00\x00", "the header needs 7 bytes, the payload has 4"),
    ("empty payload", b"", "the header needs 7 bytes, the payload has 0"),
    ("version 2", b"\x02" + FULL[1:], "version 2, not 1"),
    ("kind 3", b"\x01\x03" + FULL[2:], "unknown kind 3"),
    ("unknown flag", FULL[:6] + b"\x04" + FULL[7:], "unknown flags 0x04"),
    ("entries after everything", FULL[:6] + b"\x01" + FULL[7:], "entries after everything"),
    ("entries in a request", b"\x01\x02" + FULL[2:], "entries in a request"),
    ("unknown operation", interest_payload(0, 1, 0, (3, b"a")), "unknown operation 0x03"),
    ("remove in a full", interest_payload(0, 1, 0, (REMOVE, b"a")),
     "a remove in a full announcement"),
    ("entry cut short", interest_payload(0, 1, 0) + b"\x01\x00", "an entry cut short at byte 7"),
    ("filter past the end", interest_payload(0, 1, 0) + b"\x01\x00\x09abc",
     "a filter of 9 bytes runs past the payload at byte 7"),
    ("hash inside a level", interest_payload(0, 1, 0, (ADD, b"a#/b")), "not a topic filter: a#/b"),
    ("hash not last", interest_payload(1, 1, 0, (ADD, b"#/b")), "not a topic filter: #/b"),
    ("empty filter", interest_payload(0, 1, 0, (ADD, b"")), "not a topic filter: "),
    ("NUL in a filter", interest_payload(0, 1, 0, (ADD, b"a\x00b")),
     "a filter that is not UTF-8 as MQTT wants it"),
    ("overlong UTF-8", interest_payload(0, 1, 0, (ADD, b"\xc0\xaf")),
     "a filter that is not UTF-8 as MQTT wants it"),
    ("surrogate", interest_payload(0, 1, 0, (ADD, b"\xed\xa0\x80")),
     "a filter that is not UTF-8 as MQTT wants it"),
]


def interest_publishes():
    cases = VALID_INTERESTS + [(w, p) for w, p, _ in MALFORMED_INTERESTS]
    return [(what, payload, pp.publish_packet(INTEREST, payload, k + 1, origin=None))
            for k, (what, payload) in enumerate(cases)]


@pytest.fixture(scope="module")
def interest_capture(tmp_path_factory):
    publishes = interest_publishes()
    folder, pcap, pdus = decoded_peer_packets(tmp_path_factory, "interest", INTEREST_SENDER,
                                              40004, [packet for _, _, packet in publishes])
    return folder, pcap, {what: p for (what, _, _), p in zip(publishes, pdus)}


def test_interest_announcements_decode(interest_capture):
    """A full announcement and a carried update, field by field; everything and a request."""
    p = interest_capture[2]["full with two filters"]
    assert p.get("mqttst.interest.version") == "1"
    assert p.get("mqttst.interest.kind") == "full"
    assert p.get("mqttst.interest.generation") == "1"
    assert (p.get("mqttst.interest.everything"), p.get("mqttst.interest.carried")) == ("0", "0")
    assert p.fields["mqttst.interest.add"] == ["shop/+/temp", "site/caf\u00e9 1/#"]
    assert not p.has("mqttst.interest.remove")
    assert (p.get("mqttst.interest.adds"), p.get("mqttst.interest.removes")) == ("2", "0")
    assert p.get("mqttst.interest.valid") == "1" and expert_messages(p) == []
    assert not p.has("mqttst.origin.missing") and not p.has("mqttst.resync.other")
    u = interest_capture[2]["carried update"]
    assert (u.get("mqttst.interest.kind"), u.get("mqttst.interest.generation")) == ("update", "2")
    assert u.get("mqttst.interest.carried") == "1"
    assert u.fields["mqttst.interest.remove"] == ["shop/+/temp"]
    assert u.fields["mqttst.interest.add"] == ["alarms"]
    everything = interest_capture[2]["full: everything"]
    assert everything.get("mqttst.interest.everything") == "1"
    assert everything.get("mqttst.interest.adds") == "0"
    assert interest_capture[2]["request"].get("mqttst.interest.kind") == "request"
    for what, _ in VALID_INTERESTS:
        q = interest_capture[2][what]
        assert q.get("mqttst.interest.valid") == "1" and expert_messages(q) == [], q


def info_columns(capture, publishes):
    """{what: Info column} of the crafted capture's link-local PUBLISH packets (the first
    packet, before them, is the connection's)."""
    folder, pcap, _ = capture
    out, _ = run_tool(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + SCRIPT,
                       "-T", "fields", "-e", "_ws.col.Info"], folder)
    rows = out.decode().splitlines()[1:]
    return {what: row for (what, _, _), row in zip(publishes, rows)}


def test_interest_info_column(interest_capture):
    info = info_columns(interest_capture, interest_publishes())
    assert info["full with two filters"].endswith("[interest full 1: 2 filters]"), info
    assert info["carried update"].endswith("[interest update 2: +1 -1, carried]"), info
    assert info["full: everything"].endswith("[interest full 7: everything]"), info
    assert info["request"].endswith("[interest request for a full announcement]"), info
    assert info["kind 3"].endswith("[interest: malformed (unknown kind 3)]"), info


@pytest.mark.parametrize("case", MALFORMED_INTERESTS, ids=lambda c: c[0])
def test_malformed_interest_flagged(interest_capture, case):
    what, payload, reason = case
    p = interest_capture[2][what]
    assert_flagged(p, "mqttst.interest", reason, payload, "8388608",   # PI_ERROR
                   "Malformed interest announcement (the broker closes the connection, 0x81): "
                   + reason)
    assert not p.has("mqttst.origin.missing")


def test_interest_verdicts_match_the_broker(broker, interest_capture):
    """Each announcement of the capture on a peer connection of its own to a real broker: it
    acknowledges those the dissector takes as valid and closes the others with 0x81."""
    b, verdicts = broker_verdicts(broker, [(what, packet)
                                           for what, _, packet in interest_publishes()])
    expected = {what: "accepted" if p.get("mqttst.interest.valid") == "1" else "0x81"
                for what, p in interest_capture[2].items()}
    assert verdicts == expected
    assert b.log_text().count("malformed interest announcement from") == len(MALFORMED_INTERESTS)


# ---------------------------------------------------------------- shared groups (7.9)

SHARES = "$MQTT-ST/link/shares"
SHARES_SENDER = "127.0.0.1:1888"


def shares_payload(*entries):
    """The binary table: version 1, then (distance, key bytes) per entry."""
    out = b"\x01"
    for distance, key in entries:
        out += struct.pack(">BH", distance, len(key)) + key
    return out


TWO_GROUPS = shares_payload((0, b"g1/a/#"), (3, b"g2/shop/+/temp"))

# (what, payload, [(distance, key)]) the broker accepts
VALID_SHARES = [
    ("two groups", TWO_GROUPS, [(0, "g1/a/#"), (3, "g2/shop/+/temp")]),
    ("empty table", b"\x01", []),
    ("a prefix first, the largest distance", shares_payload((64, b"g/a"), (1, b"g/a/b")),
     [(64, "g/a"), (1, "g/a/b")]),
    # byte order, whatever the locale: 0xc3 (the first byte of \u00e9) sorts after z
    ("bytes above ASCII after z", shares_payload((1, b"z/+"), (2, "\u00e9t\u00e9/#".encode())),
     [(1, "z/+"), (2, "\u00e9t\u00e9/#")]),
]

# (what, payload, the dissector's reason) the broker refuses (0x81)
MALFORMED_SHARES = [
    ("empty payload", b"", "no version byte (an empty payload)"),
    ("version 2", b"\x02" + TWO_GROUPS[1:], "version 2, not 1"),
    ("distance 65", shares_payload((65, b"g/a")), "distance 65 at byte 1, above 64"),
    ("distance 65 in the second entry", shares_payload((0, b"g/a"), (65, b"h/a")),
     "distance 65 at byte 7, above 64"),
    ("keys out of order", shares_payload((0, b"g2/a"), (0, b"g1/a")),
     "keys out of order: g1/a after g2/a"),
    ("a longer key first", shares_payload((0, b"g/a/b"), (0, b"g/a")),
     "keys out of order: g/a after g/a/b"),
    ("key repeated", shares_payload((0, b"g/a"), (1, b"g/a")), "key g/a repeated"),
    ("plus in the group", shares_payload((0, b"g+/a")),
     "not a key: g+/a ('+' or '#' in the group)"),
    ("hash as the group", shares_payload((0, b"#/a")), "not a key: #/a ('+' or '#' in the group)"),
    ("empty group", shares_payload((0, b"/a")), "not a key: /a (an empty group)"),
    ("no slash", shares_payload((0, b"group")), "not a key: group (no '/' after the group)"),
    ("empty filter", shares_payload((0, b"g/")),
     "not a key: g/ (the filter is not a topic filter)"),
    ("hash not last in the filter", shares_payload((0, b"g/#/a")),
     "not a key: g/#/a (the filter is not a topic filter)"),
    ("plus inside a level", shares_payload((0, b"g/a+/b")),
     "not a key: g/a+/b (the filter is not a topic filter)"),
    ("entry cut short", shares_payload((0, b"g/a")) + b"\x00\x00",
     "an entry cut short at byte 7"),
    ("key past the end", b"\x01\x00\x00\x09g/a",
     "a key of 9 bytes runs past the payload at byte 1"),
    ("surrogate in a key", shares_payload((0, b"g/\xed\xa0\x80")),
     "a key that is not UTF-8 as MQTT wants it"),
    ("NUL in a key", shares_payload((0, b"g/a\x00b")), "a key that is not UTF-8 as MQTT wants it"),
]


def shares_publishes():
    cases = [(w, p) for w, p, _ in VALID_SHARES] + [(w, p) for w, p, _ in MALFORMED_SHARES]
    return [(what, payload, pp.publish_packet(SHARES, payload, k + 1, origin=None))
            for k, (what, payload) in enumerate(cases)]


@pytest.fixture(scope="module")
def shares_capture(tmp_path_factory):
    publishes = shares_publishes()
    folder, pcap, pdus = decoded_peer_packets(tmp_path_factory, "shares", SHARES_SENDER, 40005,
                                              [packet for _, _, packet in publishes])
    return folder, pcap, {what: p for (what, _, _), p in zip(publishes, pdus)}


def test_shared_group_tables_decode(shares_capture):
    """A table with two groups, field by field; an empty one; every valid table: each entry's
    distance and key, the count, valid, no expert info, no missing origin."""
    p = shares_capture[2]["two groups"]
    assert p.has("mqttst.shares") and p.bytes("mqttst.publish.payload") == TWO_GROUPS
    assert p.get("mqttst.shares.version") == "1"
    assert p.fields["mqttst.shares.distance"] == ["0", "3"]
    assert p.fields["mqttst.shares.key"] == ["g1/a/#", "g2/shop/+/temp"]
    assert p.fields["mqttst.shares.group"] == ["g1", "g2"]
    assert p.fields["mqttst.shares.filter"] == ["a/#", "shop/+/temp"]
    assert p.get("mqttst.shares.count") == "2"
    assert p.get("mqttst.shares.valid") == "1" and not p.has("mqttst.shares.error")
    assert not p.has("mqttst.origin.missing") and not p.has("mqttst.resync")
    assert not p.has("mqttst.interest") and expert_messages(p) == []
    empty = shares_capture[2]["empty table"]
    assert empty.get("mqttst.shares.version") == "1"
    assert empty.get("mqttst.shares.count") == "0"
    assert not empty.has("mqttst.shares.entry") and not empty.has("mqttst.shares.key")
    assert empty.get("mqttst.shares.valid") == "1" and expert_messages(empty) == []
    for what, _, entries in VALID_SHARES:
        q = shares_capture[2][what]
        assert q.fields.get("mqttst.shares.distance", []) == [str(d) for d, _ in entries], q
        assert q.fields.get("mqttst.shares.key", []) == [k for _, k in entries], q
        assert q.get("mqttst.shares.count") == str(len(entries)), q
        assert q.get("mqttst.shares.valid") == "1" and expert_messages(q) == [], q


def test_shared_group_table_info_column(shares_capture):
    info = info_columns(shares_capture, shares_publishes())
    assert info["two groups"].endswith("[shares: 2 groups]"), info
    assert info["empty table"].endswith("[shares: empty (every group withdrawn)]"), info
    assert info["version 2"].endswith("[shares: malformed (version 2, not 1)]"), info


@pytest.mark.parametrize("case", MALFORMED_SHARES, ids=lambda c: c[0])
def test_malformed_shared_group_table_flagged(shares_capture, case):
    what, payload, reason = case
    p = shares_capture[2][what]
    assert p.has("mqttst.shares")
    assert_flagged(p, "mqttst.shares", reason, payload, "8388608",   # PI_ERROR
                   "Malformed shared-group table (the broker closes the connection, 0x81): "
                   + reason)
    assert not p.has("mqttst.origin.missing")


def test_malformed_shared_group_tables_keep_what_they_can_show(shares_capture):
    """The entries up to the problem still decode."""
    order = shares_capture[2]["keys out of order"]
    assert order.fields["mqttst.shares.key"] == ["g2/a", "g1/a"]
    assert order.fields["mqttst.shares.distance"] == ["0", "0"]
    far = shares_capture[2]["distance 65 in the second entry"]
    assert far.fields["mqttst.shares.distance"] == ["0", "65"]
    assert far.fields["mqttst.shares.key"] == ["g/a", "h/a"]
    plus = shares_capture[2]["plus in the group"]
    assert plus.get("mqttst.shares.key") == "g+/a" and not plus.has("mqttst.shares.group")
    cut = shares_capture[2]["entry cut short"]
    assert cut.fields["mqttst.shares.key"] == ["g/a"]


def test_shared_group_table_verdicts_match_the_broker(broker, shares_capture):
    """Each table of the capture on a peer connection of its own to a real broker: it
    acknowledges those the dissector takes as valid and closes the others with 0x81."""
    b, verdicts = broker_verdicts(broker, [(what, packet)
                                           for what, _, packet in shares_publishes()])
    expected = {what: "accepted" if p.get("mqttst.shares.valid") == "1" else "0x81"
                for what, p in shares_capture[2].items()}
    assert verdicts == expected
    assert sorted(set(expected.values())) == ["0x81", "accepted"]
    assert b.log_text().count("malformed shared-group table from") == len(MALFORMED_SHARES)


MARKER = "127.0.0.1:1889"


def marked_publishes():
    """(what, PUBLISH bytes) of messages on a peer link carrying mqtt-st-share marks, in and
    out of their place (after mqtt-st-origin and mqtt-st-bridge, before the message's own)."""
    out = []

    def publish(what, props):
        out.append((what, pp.publish_packet("sensors/%d" % (len(out) + 1), b"21.5",
                                            len(out) + 1, extra_props=props)))

    def origin():
        return (mp.P_USER_PROPERTY, (pp.ORIGIN_PROPERTY, pp.origin_value(
            MARKER, 0x5f0c2a9e11d3b7a4, len(out) + 1, wall_ms=1764020000123, qos=2)))

    def share(key):
        return (mp.P_USER_PROPERTY, ("mqtt-st-share", key))

    def bridge(name):
        return (mp.P_USER_PROPERTY, ("mqtt-st-bridge", name))

    unit = (mp.P_USER_PROPERTY, ("unit", "C"))
    publish("two marks", [origin(), share("g1/a/#"), share("g2/sensors/+"), unit])
    publish("bridge then a mark", [origin(), bridge("central"), share("g/sensors/#")])
    publish("invalid mark", [origin(), share("g1/a/#"), share("g+/a")])
    publish("mark without a filter", [origin(), share("nogroup")])
    publish("mark before the origin", [share("g/a"), origin()])
    publish("mark after an own property", [origin(), unit, share("g/a")])
    publish("bridge after a mark", [origin(), share("g/a"), bridge("central")])
    publish("64 marks", [origin()] + [share("g%02d/sensors/#" % k) for k in range(64)])
    publish("65 marks", [origin()] + [share("g%02d/sensors/#" % k) for k in range(65)])
    return out


@pytest.fixture(scope="module")
def marked_pdus(tmp_path_factory):
    publishes = marked_publishes()
    _, _, pdus = decoded_peer_packets(tmp_path_factory, "marks", MARKER, 40006,
                                      [packet for _, packet in publishes])
    return {what: p for (what, _), p in zip(publishes, pdus)}


INVALID_MARK = ("mqtt-st-share value is not a shared group's key (the broker closes the "
                "connection, 0x82): ")
MISPLACED_MARK = ("mqtt-st-share is not among the user properties that follow mqtt-st-origin "
                  "(the brokers do not take it for a mark): ")


def test_share_marks_decode(marked_pdus):
    """Marks right after the origin (and after the bridge property) each name a group: key,
    group and filter; the count; no expert info."""
    p = marked_pdus["two marks"]
    assert p.get("mqttst.origin.id") == MARKER
    assert p.fields["mqttst.share_mark"] == ["g1/a/#", "g2/sensors/+"]
    assert p.fields["mqttst.share_mark.group"] == ["g1", "g2"]
    assert p.fields["mqttst.share_mark.filter"] == ["a/#", "sensors/+"]
    assert p.get("mqttst.share_marks") == "2"
    assert not p.has("mqttst.bridge_from") and expert_messages(p) == []
    b = marked_pdus["bridge then a mark"]
    assert b.get("mqttst.bridge_from") == "central"
    assert b.fields["mqttst.share_mark"] == ["g/sensors/#"]
    assert b.get("mqttst.share_marks") == "1" and expert_messages(b) == []
    many = marked_pdus["64 marks"]
    assert many.get("mqttst.share_marks") == "64"
    assert many.fields["mqttst.share_mark"] == ["g%02d/sensors/#" % k for k in range(64)]
    assert expert_messages(many) == []


def test_invalid_share_marks_flagged(marked_pdus):
    """A mark whose value is no key, or a 65th: an error expert info (the broker closes the
    connection, 0x82); the marks still show."""
    p = marked_pdus["invalid mark"]
    assert p.fields["mqttst.share_mark"] == ["g1/a/#", "g+/a"]
    assert p.fields["mqttst.share_mark.group"] == ["g1"]
    assert p.has("mqttst.share_mark.invalid")
    assert expert_messages(p) == [INVALID_MARK + "'+' or '#' in the group"]
    assert p.get("_ws.expert.severity") == "8388608"     # PI_ERROR
    nofilter = marked_pdus["mark without a filter"]
    assert nofilter.get("mqttst.share_mark") == "nogroup"
    assert expert_messages(nofilter) == [INVALID_MARK + "no '/' after the group"]
    many = marked_pdus["65 marks"]
    assert many.get("mqttst.share_marks") == "65"
    assert many.has("mqttst.share_mark.too_many")
    assert expert_messages(many) == [
        "More than 64 mqtt-st-share marks (the broker closes the connection, 0x82)"]


def test_misplaced_share_marks_flagged(marked_pdus):
    """A mqtt-st-share before the origin or after the message's own properties is no mark
    (the brokers pass it over): a warning, no mqttst.share_mark. A bridge property after a
    mark is not taken for the bridge."""
    for what in ("mark before the origin", "mark after an own property"):
        p = marked_pdus[what]
        assert not p.has("mqttst.share_mark") and not p.has("mqttst.share_marks"), p
        assert p.has("mqttst.share_mark.misplaced"), p
        assert MISPLACED_MARK + "g/a" in expert_messages(p), p
        assert p.get("mqttst.origin.id") == MARKER
    late = marked_pdus["bridge after a mark"]
    assert late.fields["mqttst.share_mark"] == ["g/a"]
    assert not late.has("mqttst.bridge_from") and late.has("mqttst.bridge_from.misplaced")


def test_share_marks_info_column(tmp_path):
    """The Info column names the marked groups (up to three), or counts them."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (scripts/install-deps.sh installs it)")
    folder = str(tmp_path)
    pcap = os.path.join(folder, "marks.pcap")
    publishes = marked_publishes()
    write_pcap(pcap, [(40007, 1884, pp.connect_packet(MARKER, bytes(16)))] +
               [(40007, 1884, packet) for _, packet in publishes])
    out, _ = run_tool(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + SCRIPT,
                       "-T", "fields", "-e", "_ws.col.Info"], folder)
    info = {what: row for (what, _), row in zip(publishes, out.decode().splitlines()[1:])}
    assert info["two marks"].endswith("; marked g1/a/#, g2/sensors/+]"), info
    assert info["bridge then a mark"].endswith("; via bridge central; marked g/sensors/#]"), info
    assert info["64 marks"].endswith("; marked for 64 shared groups]"), info


def test_share_mark_verdicts_match_the_broker(broker, marked_pdus):
    """Each marked message on a peer connection of its own to a real broker: it closes the
    connection (0x82) on exactly those the dissector flags with an error, and acknowledges
    the others (marks out of place are passed over)."""
    _, verdicts = broker_verdicts(broker, marked_publishes())
    expected = {what: "0x82" if "8388608" in p.fields.get("_ws.expert.severity", [])   # PI_ERROR
                else "accepted" for what, p in marked_pdus.items()}
    assert verdicts == expected
    assert sorted(what for what, v in expected.items() if v == "0x82") == [
        "65 marks", "invalid mark", "mark without a filter"]
