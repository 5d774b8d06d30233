"""Integration tests of arbor_stp (tools/, man/arbor_stp.1) against real MQTT-ST networks.

A 5-broker network (peer_net.Cluster, two cycles, delays chosen so the tree is unambiguous):

    b0 (5000) --- b1 (4000) --- b4 (1000)
       \\           |             |
        `------ b2 (3000) --- b3 (2000)

- show: the table and --json hold exactly the $SYS/broker/stp values the harness reads (read
  before and after the tool: counters lie between the two reads, the tree values are equal),
  one row / object per peer link.
- tree: every broker is a node, the edges are the configured links (each once), the solid
  edges are the forwarding links the harness sees (parent first: the child's root link), the
  root alone is highlighted, edge labels are the ends' link costs; --png writes a valid PNG
  and --svg an SVG; the summary on stderr counts the brokers and names the root.
- tree with a broker killed behind black-holed links (so that its neighbours still list it)
  and one stopped: both drawn as unreachable with the reason, never left out.
- watch: killing the root prints the root change (and the epoch change) at once; --count
  stops after that many change lines, --timeout after that long, SIGINT ends it with 0.
- exit statuses: 1 for a broker without peering (also Mosquitto), 2 for a refused connection,
  3 for a usage error.

The tool is $ARBOR_BUILD_DIR/tools/arbor_stp (default: next to $ARBOR_BIN).
"""

import json
import os
import queue
import re
import signal
import struct
import subprocess
import threading
import time

import pytest

from conftest import sanitizer_findings
from helpers import ARBOR_BIN, HOST, free_port
from peer_net import Cluster, clear_delays
from peer_net import peer_support  # noqa: F401 (a pytest fixture)
from peer_net import cluster  # noqa: F401 (a pytest fixture)

BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR") or (os.path.dirname(ARBOR_BIN) if ARBOR_BIN else "")
TOOL = os.path.join(BUILD_DIR, "tools", "arbor_stp") if BUILD_DIR else ""

pytestmark = pytest.mark.skipif(not (TOOL and os.access(TOOL, os.X_OK)),
                                reason="arbor_stp not built (set ARBOR_BUILD_DIR)")

EDGES = [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (1, 4)]
CAPABILITIES = [5000, 4000, 3000, 2000, 1000]
DELAYS = clear_delays(5, EDGES, CAPABILITIES, seed=7)
ROOT_FILL = '"#f6c343"'
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# $SYS/broker/stp topics whose values only change when the tree does
TREE_TOPICS = ["id", "capability", "root/id", "root/capability", "root/link", "hops", "epoch",
               "topology_changes"]
COUNTER_TOPICS = ["bpdus/sent", "bpdus/received", "bpdus/rejected", "messages/forwarded",
                  "messages/received", "messages/duplicates", "messages/discarded",
                  "messages/off_tree", "messages/resynced", "messages/lost", "messages/dropped",
                  "messages/skipped", "messages/skip_notices"]
PEER_COUNTERS = ["bpdus/sent", "bpdus/received"]


def run_tool(*args, timeout=30):
    r = subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout)
    assert not sanitizer_findings(r.stderr), r.stderr   # a sanitizer build of the tool
    return r


def at(b):
    return ["-h", HOST, "-p", b.port]


@pytest.fixture(scope="module")
def net(peer_support):
    c = Cluster(5, EDGES, CAPABILITIES, delays=DELAYS)
    yield c
    failures = c.close()
    if failures:
        pytest.fail("cluster teardown check failed:\n" + "\n".join(failures), pytrace=False)


def start_network(make, **kw):
    return make(5, EDGES, CAPABILITIES, delays=DELAYS, **kw)


# ---------------------------------------------------------------- show

def json_path(doc, topic):
    """The value of a $SYS topic (below the prefix) in the JSON of show."""
    for part in topic.split("/"):
        doc = doc[part]
    return doc


def as_sys_text(value):
    """A JSON value back as the $SYS text ("" for null, "1"/"0" for booleans)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def between(value, a, b):
    lo, hi = sorted((int(a), int(b)))
    return lo <= int(value) <= hi


def parse_table(text):
    """(label -> value, [peer row dicts]) from the table of show."""
    head, _, rows = text.partition("\n\n")
    values = {}
    for line in head.splitlines():
        label, value = re.match(r"^(\S.*?)\s{2,}(\S.*)$", line).groups()
        values[label] = value
    lines = rows.split("\n\n")[0].splitlines()  # the lists of filters follow the table
    columns = lines[0].split()
    return values, [dict(zip(columns, line.split())) for line in lines[1:]]


TABLE_LABELS = {"id": "id", "capability": "capability", "root/id": "root id",
                "root/capability": "root capability", "root/cost_us": "root path cost (us)",
                "root/link": "root link", "hops": "hops", "epoch": "epoch",
                "topology_changes": "topology changes", "settling": "settling",
                "bpdus/sent": "BPDUs sent",
                "bpdus/received": "BPDUs received", "bpdus/rejected": "BPDUs rejected",
                "messages/forwarded": "messages forwarded",
                "messages/received": "messages received",
                "messages/duplicates": "messages duplicates",
                "messages/discarded": "messages discarded",
                "messages/off_tree": "messages off tree",
                "messages/resynced": "messages resynced", "messages/lost": "messages lost",
                "messages/dropped": "messages dropped", "messages/skipped": "messages skipped",
                "messages/skip_notices": "skip notices"}


def check_against_sys(doc, before, after):
    """The JSON of show against two reads of the broker's $SYS/broker/stp (before, after)."""
    for topic in TREE_TOPICS:
        assert as_sys_text(json_path(doc, topic)) == before.get(topic, "") == \
            after.get(topic, ""), topic
    for topic in COUNTER_TOPICS + ["root/cost_us"]:
        assert between(json_path(doc, topic), before[topic], after[topic]), topic
    peers = {p["id"]: p for p in doc["peers"]}
    names = {k.split("/")[1] for k in before if k.startswith("peers/")}
    assert set(peers) == names
    for name, p in peers.items():
        key = "peers/%s/" % name
        for topic in ("state", "role", "forwarding"):
            assert as_sys_text(json_path(p, topic)) == before.get(key + topic, "") == \
                after.get(key + topic, ""), (name, topic)
        for topic in PEER_COUNTERS + ["cost_us"]:
            assert between(json_path(p, topic), before[key + topic], after[key + topic]), \
                (name, topic)
        assert p["srtt_us"] > 0


def tree_state(sys):
    """What must not change while show reads it: the tree's topics and the links' roles."""
    return {k: v for k, v in sys.items()
            if k in TREE_TOPICS or (k.startswith("peers/") and
                                    k.rsplit("/", 1)[1] in ("state", "role", "forwarding"))}


def read_while_stable(net, i, attempts=5):
    """$SYS before, show's table and JSON, $SYS after, taken again while the tree moved in
    between (a link's role may follow its measured RTT on a loaded machine)."""
    for _ in range(attempts):
        before = net.stp(i, fresh=True)
        table = run_tool("show", *at(net.brokers[i]))
        js = run_tool("show", "--json", *at(net.brokers[i]))
        after = net.stp(i, fresh=True)
        if tree_state(before) == tree_state(after):
            break
    return before, table, js, after


def test_show_matches_sys(net):
    snap = net.wait_tree(timeout=20)
    net.check_spanning_tree(snap)
    for i in range(5):
        before, table, js, after = read_while_stable(net, i)
        assert table.returncode == 0 and js.returncode == 0, table.stderr + js.stderr
        assert table.stderr == js.stderr == ""
        doc = json.loads(js.stdout)
        check_against_sys(doc, before, after)

        values, rows = parse_table(table.stdout)
        assert list(values) == list(TABLE_LABELS.values())
        for topic, label in TABLE_LABELS.items():
            if topic in TREE_TOPICS:
                assert values[label] == (before.get(topic) or "-"), label
            else:
                assert between(values[label], before[topic], after[topic]), label
        assert [r["peer"] for r in rows] == [p["id"] for p in doc["peers"]]
        for row in rows:
            key = "peers/%s/" % row["peer"]
            assert row["state"] == before[key + "state"]
            assert row["role"] == before[key + "role"]
            assert row["forwarding"] == {"1": "yes", "0": "no"}[before[key + "forwarding"]]
            assert row["wants"] == before[key + "interest/wanted"]  # nobody subscribes: "0"
            assert between(row["cost_us"], before[key + "cost_us"], after[key + "cost_us"])
            assert between(row["bpdus_sent"], before[key + "bpdus/sent"],
                           after[key + "bpdus/sent"])
    # the root has no root link (cleared): "-" in the table, null in JSON
    root = net.root_index(snap)
    doc = json.loads(run_tool("show", "--json", "-V", "5", *at(net.brokers[root])).stdout)
    assert doc["root"]["link"] is None and doc["root"]["cost_us"] == 0 and doc["hops"] == 0


# ---------------------------------------------------------------- tree

def dot_attributes(text):
    return dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\]\s]+)', text))


def parse_dot(dot):
    """({node id: attributes}, [(a, b, attributes)]) from the DOT text of tree."""
    nodes, edges = {}, []
    for line in dot.splitlines():
        m = re.match(r'^  "([^"]+)" -- "([^"]+)" \[(.*)\];$', line)
        if m:
            edges.append((m.group(1), m.group(2), dot_attributes(m.group(3))))
            continue
        m = re.match(r'^  "([^"]+)" \[(.*)\];$', line)
        if m:
            nodes[m.group(1)] = dot_attributes(m.group(2))
    return nodes, edges


def label_costs(attributes):
    """The costs in an edge label ("1200 us" or "1200 / 1350 us")."""
    m = re.match(r'^"(\d+)(?: / (\d+))? us', attributes["label"])
    assert m, attributes
    return [int(x) for x in m.groups() if x is not None]


def test_tree_dot_is_the_tree(net):
    snap = net.wait_tree(timeout=20)
    ids = [net.identity(i) for i in range(5)]
    before = [net.stp(i, fresh=True) for i in range(5)]
    r = run_tool("tree", *at(net.brokers[3]))
    after = [net.stp(i, fresh=True) for i in range(5)]
    assert r.returncode == 0, r.stderr
    assert r.stderr == "arbor_stp: 5 brokers reached, 0 unreachable, root %s\n" % snap.root
    nodes, edges = parse_dot(r.stdout)
    assert set(nodes) == set(ids)
    assert [n for n, a in nodes.items() if a.get("fillcolor") == ROOT_FILL] == [snap.root]
    for i, name in enumerate(ids):
        label = nodes[name]["label"]
        assert label.startswith('"%s\\ncapability %d\\n' % (name, CAPABILITIES[i])), label

    links = {frozenset((ids[a], ids[b])) for a, b in EDGES}
    assert len(edges) == len(links)
    assert {frozenset((a, b)) for a, b, _ in edges} == links
    forwarding = {frozenset((ids[a], ids[b])) for a, b in snap.forwarding_edges()}
    solid = {frozenset((a, b)) for a, b, attr in edges if attr["style"] == "solid"}
    dashed = {frozenset((a, b)) for a, b, attr in edges if attr["style"] == "dashed"}
    assert solid == forwarding
    assert dashed == links - forwarding
    for a, b, attr in edges:
        ia, ib = ids.index(a), ids.index(b)
        if attr["style"] == "solid":   # parent -- child
            assert snap.value(ib, "root/link") == a, (a, b)
        ends = [(ia, ib), (ib, ia)]
        costs = label_costs(attr)
        reported = [{v[x]["peers/%s/cost_us" % ids[y]] for v in (before, after)}
                    for x, y in ends]
        if len(costs) == 1:   # both ends report the same cost
            costs = costs * 2
        assert str(costs[0]) in reported[0] and str(costs[1]) in reported[1], (a, b, attr)


def test_tree_pictures(net, tmp_path):
    net.wait_tree(timeout=20)
    png, svg, dot = tmp_path / "tree.png", tmp_path / "tree.svg", tmp_path / "tree.dot"
    r = run_tool("tree", *at(net.brokers[0]), "--png", png, "--svg", svg, "--dot", dot)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100
    assert "<svg" in svg.read_text()
    nodes, _ = parse_dot(dot.read_text())
    assert len(nodes) == 5
    r = run_tool("tree", *at(net.brokers[0]), "--png", tmp_path / "no" / "such" / "dir.png")
    assert r.returncode == 4 and "dot -Tpng" in r.stderr


def test_tree_draws_unreachable_brokers(cluster):
    """b4 is killed after its links were black-holed (so b1 and b3 see nothing of it and still
    list it, until max_age), b3 is stopped (its port still accepts TCP, nothing answers): both
    must be drawn, dashed grey with their reason, with the links the others report."""
    c = start_network(cluster, hello=0.5, max_age=5)
    snap = c.wait_tree(timeout=20)
    ids = [c.identity(i) for i in range(5)]
    for j in c.neighbours(4):
        c.cut(4, j, "blackhole")
    c.kill(4)
    c.stop(3)
    r = run_tool("tree", *at(c.brokers[0]))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "arbor_stp: 3 brokers reached, 2 unreachable, root %s\n" % snap.root
    nodes, edges = parse_dot(r.stdout)
    assert set(nodes) == set(ids)
    refused, silent = nodes[ids[4]], nodes[ids[3]]
    assert "unreachable: Connection refused" in refused["label"], refused
    assert "unreachable: no CONNACK within" in silent["label"], silent
    for attr in (refused, silent):
        assert attr["style"] == '"rounded,dashed"' and attr["color"] == "grey50"
    for i in range(3):
        assert "unreachable" not in nodes[ids[i]]["label"]
    # every link one of the brokers read reports is drawn (b3-b4 joins two lost brokers:
    # nobody can tell of it); those to the lost brokers from the end that was read
    assert {frozenset((a, b)) for a, b, _ in edges} == {frozenset((ids[a], ids[b]))
                                                        for a, b in EDGES if (a, b) != (3, 4)}
    for a, b, attr in edges:
        lost = {a, b} & {ids[3], ids[4]}
        assert (attr.get("color") == "grey50") == bool(lost), (a, b, attr)


# ---------------------------------------------------------------- watch

class Lines:
    """The lines a process writes to stdout, read by a thread."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if predicate(line):
                return line
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if predicate(line):
                return line
        raise AssertionError("no such line within %.1fs; got:\n%s" % (timeout,
                                                                        "\n".join(self.lines)))

    def finish(self, timeout):
        rc = self.proc.wait(timeout)
        errors = self.proc.stderr.read()
        assert not sanitizer_findings(errors), errors
        while True:
            try:
                line = self._queue.get(timeout=2)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return rc


STAMP = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} "


def watch(b, *args):
    proc = subprocess.Popen([TOOL, "watch", "-h", HOST, "-p", str(b.port)] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = Lines(proc)
    try:
        lines.wait_for(lambda l: re.match(STAMP + "watching ", l), 10)
    except AssertionError:
        proc.kill()
        raise
    return lines


def describe_links(c, snap, i):
    """How watch's first line lists broker i's peer links."""
    out = []
    for j in sorted(c.neighbours(i), key=lambda j: c.brokers[j].port):
        role, fwd = snap.peer_value(i, j, "role"), snap.peer_value(i, j, "forwarding") == "1"
        out.append("%s up %s%s" % (c.identity(j), role, " forwarding" if fwd else ""))
    return ", ".join(out)


def test_watch_prints_the_root_change(cluster):
    c = start_network(cluster)
    snap = c.wait_tree(timeout=20)
    old_root, epoch = snap.root, snap.value(3, "epoch")
    assert old_root == c.identity(0)
    counted = watch(c.brokers[3], "--count", "2", "--timeout", "30")
    following = watch(c.brokers[4])
    # the cost is measured round-trip time and moves between the snapshot and watch's start
    assert re.match(STAMP + re.escape(
        "watching %s: capability 1000, root %s via %s (2 hops, cost " % (
            c.identity(4), old_root, snap.value(4, "root/link"))) + r"\d+" + re.escape(
        " us), epoch %s, 2 peer links: %s" % (snap.value(4, "epoch"),
                                              describe_links(c, snap, 4))) + "$",
        following.lines[0]), following.lines[0]
    c.kill(0)
    new = c.wait_tree(timeout=20)
    assert new.root == c.identity(1)

    # --count 2: the root change and the epoch change of the first burst, then exit 0
    assert counted.finish(20) == 0, counted.lines
    assert len(counted.lines) == 3, counted.lines
    assert all(re.match(STAMP, line) for line in counted.lines)
    assert re.match(STAMP + r"root %s -> 127\.0\.0\.1:\d+ " % re.escape(old_root),
                    counted.lines[1]), counted.lines
    assert re.match(STAMP + r"epoch %s -> \d+, topology changes \d+ -> \d+$" % epoch,
                    counted.lines[2]), counted.lines

    # without limits: from the old root to the new one (b4 reaches b1 directly now)
    following.wait_for(lambda l: re.match(
        STAMP + r"root .* -> %s via %s \(1 hop, cost \d+ us\)$" % (
            re.escape(new.root), re.escape(c.identity(1))), l), 10)
    roots = [l for l in following.lines if re.match(STAMP + "root ", l)]
    assert re.match(STAMP + "root %s -> " % re.escape(old_root), roots[0]), roots
    following.proc.send_signal(signal.SIGINT)
    assert following.finish(10) == 0
    # counters, RTTs and costs are not changes
    assert not any(re.search(r"bpdus|srtt|messages|cost_us", l) for l in following.lines), \
        following.lines


def test_watch_timeout(net):
    net.wait_tree(timeout=20)
    started = time.monotonic()
    r = run_tool("watch", "--timeout", "1", *at(net.brokers[2]))
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    assert 1.0 <= took < 10.0, took   # ends after its 1 s (the rest: start-up on a busy machine)
    lines = r.stdout.splitlines()
    assert re.match(STAMP + "watching %s: capability 3000, root %s via " % (
        re.escape(net.identity(2)), re.escape(net.identity(0))), lines[0]), lines


# ---------------------------------------------------------------- exit statuses

def test_broker_without_peering(broker):
    b = broker("sys_interval 1")
    for command in (["show"], ["show", "--json"], ["tree"], ["watch", "--timeout", "5"]):
        r = run_tool(*command, *at(b))
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert r.stdout == ""
        assert "publishes no $SYS/broker/stp topics: MQTT-ST peering is not configured" in \
            r.stderr


def test_connection_refused():
    port = free_port()
    for command in (["show"], ["tree"], ["watch"]):
        r = run_tool(*command, "-h", HOST, "-p", port)
        assert r.returncode == 2, (command, r.stderr)
        assert r.stderr == "arbor_stp: cannot read %s:%d: Connection refused\n" % (HOST, port)


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["show", "-p", "0"], ["show", "-V", "4"],
                                  ["show", "--png", "x.png"], ["tree", "--json"],
                                  ["watch", "--count", "0"], ["watch", "--timeout", "-1"],
                                  ["show", "extra"], ["show", "-P", "secret"]])
def test_usage_errors(args):
    r = run_tool(*args)
    assert r.returncode == 3, r
    assert r.stdout == "" and r.stderr.startswith(("arbor_stp: ", "Usage: "))


def test_help_and_version():
    r = run_tool("--help")
    assert r.returncode == 0 and "arbor_stp show" in r.stdout and "watch" in r.stdout
    assert run_tool("tree", "--help").returncode == 0
    r = run_tool("--version")
    assert r.returncode == 0 and re.match(r"^arbor_stp \d+\.\d+\.\d+\n$", r.stdout)


# ---------------------------------------------------------------- TLS

def test_tree_over_tls_peer_listeners(cluster):
    """The deployment guide's TLS layout: every identity is a TLS-only peer listener with
    require_certificate. Without TLS options the walk reaches nothing past its start (issue 17:
    "1 broker reached, 1 unreachable"); with --cafile/--cert/--key (a broker's own certificate,
    as an operator has at hand) it reaches every broker; the certificate must name the address
    dialled unless --insecure."""
    from peer_net import tls_peer_pki
    pki = tls_peer_pki(3)
    c = cluster(3, [(0, 1), (1, 2)], [1000, 500, 200], tls=pki,
                tls_listener_ca=pki["listener_ca"])
    snap = c.wait_tree(timeout=15)
    start = c.brokers[1]
    tls = ["--cafile", pki["peer_ca"], "--cert", pki["peer0"], "--key", pki["peer0_key"]]
    plain = run_tool("tree", "-h", HOST, "-p", start.peer_port)
    assert plain.returncode == 2, plain.stderr
    r = run_tool("tree", "-h", HOST, "-p", start.peer_port, *tls)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "arbor_stp: 3 brokers reached, 0 unreachable, root %s\n" % snap.root
    nodes, edges = parse_dot(r.stdout)
    assert set(nodes) == {c.identity(i) for i in range(3)}
    assert len(edges) == 2
    show = run_tool("show", "-h", HOST, "-p", start.peer_port, *tls, "--json")
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["id"] == start.identity
    # no client certificate: the listener requires one
    no_cert = run_tool("show", "-h", HOST, "-p", start.peer_port, "--cafile", pki["peer_ca"])
    assert no_cert.returncode == 2, no_cert.stderr
    # usage errors
    assert run_tool("show", "--cert", pki["peer0"], "--key", pki["peer0_key"]).returncode == 3
    assert run_tool("show", "--cafile", pki["peer_ca"], "--cert", pki["peer0"]).returncode == 3


def test_tls_certificate_must_name_the_host_unless_insecure(broker):
    """A TLS listener whose certificate names elsewhere.example: arbor_stp refuses it (exit 2,
    the reason said) unless --insecure, which gets as far as the $SYS topics (exit 1: this
    broker has no MQTT-ST)."""
    from peer_net import tls_peer_pki
    pki = tls_peer_pki(3)
    port = free_port()
    broker("listener %d %s" % (port, HOST), "certfile " + pki["elsewhere"],
           "keyfile " + pki["elsewhere_key"])
    at_tls = ["-h", HOST, "-p", port, "--cafile", pki["peer_ca"]]
    refused = run_tool("show", *at_tls)
    assert refused.returncode == 2, refused.stderr
    assert "certificate verify failed (IP address mismatch)" in refused.stderr, refused.stderr
    insecure = run_tool("show", *at_tls, "--insecure")
    assert insecure.returncode == 1, insecure.stderr
    assert "no $SYS/broker/stp" in insecure.stderr, insecure.stderr
    wrong_ca = run_tool("show", "-h", HOST, "-p", port, "--cafile", pki["client_ca"])
    assert wrong_ca.returncode == 2, wrong_ca.stderr
    assert "certificate verify failed" in wrong_ca.stderr, wrong_ca.stderr
