"""peer_net.py: the multi-broker harness of the MQTT-ST tests (test_peer_*.py).

What it provides:
  DelayProxy    (from delay_proxy.py) a TCP proxy on 127.0.0.1 that delays each direction,
                and can cut the path (reset every connection, or black-hole it, or reset those
                of one dialer's source address) and heal it again.
  Cluster       n brokers linked by `peer` lines along given edges, every connection of every
                link through its own DelayProxy, with $SYS/broker/stp watchers, kill / stop /
                restart, per-link delay and cuts, wait_tree(), check_spanning_tree(), oracle().
  Collector     subscribers on several brokers recording every message, for exactly-once checks.
  NumberedStream  a publisher thread sending numbered messages (loss and duplicate checks).
  graphs        line, ring, mesh, random_graph, clear_delays (delays whose tree is unambiguous).
  tls_peer_pki  certificates of peers over TLS (Cluster(..., tls=True)), made once per run.
  fixtures      peer_support (skips when the binary refuses `peer`), cluster (factory).

The wiring of one link (a, b): broker a's `peer` line names proxy P_ab, which forwards to b's
listener; b's `peer` line names P_ba, which forwards to a's listener. Each broker dials its
peers (a's outgoing connection runs through P_ab, b's through P_ba), so a link's two
connections can be delayed and cut independently, and nothing between two brokers bypasses a
proxy (wait_tree() checks that no broker holds a direct connection to another's listener).

Everything here is bounded: every wait has a deadline, proxies and paho loops run in daemon
threads, and processes are only ever signalled by the PID this module started.
"""

import collections
import heapq
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from conftest import (SANITIZER_MARKERS, with_loops, START_TIMEOUT, STOP_TIMEOUT, port_accepts,
                      port_listening)
from delay_proxy import DelayProxy  # noqa: F401 (the tests import it from here too)
from helpers import (ARBOR_BIN, DIE_WITH_PARENT, HOST, NO_PROPERTIES, PahoClient, free_port,
                     wait_until)

DEFAULT_SECRET = "arbor-peer-test-secret-0123456789"
STP_PREFIX = "$SYS/broker/stp/"
FORWARDING_PAIRS = {("root", "designated"), ("designated", "root")}
QUIET_PAIRS = {("designated", "blocked"), ("blocked", "designated")}


# ================================================================ graphs

def line(n):
    return [(i, i + 1) for i in range(n - 1)]


def ring(n):
    return [(i, (i + 1) % n) for i in range(n)]


def mesh(n):
    return [(a, b) for a in range(n) for b in range(a + 1, n)]


def random_graph(n, degree, seed):
    """A connected graph of n nodes and round(n * degree / 2) edges: a random spanning tree
    plus random extra edges. Deterministic for a seed."""
    rng = random.Random(seed)
    order = list(range(n))
    rng.shuffle(order)
    edges = set()
    for k in range(1, n):
        a, b = order[k], order[rng.randrange(k)]
        edges.add((min(a, b), max(a, b)))
    wanted = min(round(n * degree / 2), n * (n - 1) // 2)
    while len(edges) < wanted:
        a, b = rng.sample(range(n), 2)
        edges.add((min(a, b), max(a, b)))
    return sorted(edges)


def neighbours(n, edges):
    out = {i: set() for i in range(n)}
    for a, b in edges:
        out[a].add(b)
        out[b].add(a)
    return out


def components(nodes, edges):
    """Connected components (list of sets) of the graph restricted to `nodes`."""
    nodes = set(nodes)
    adjacent = {i: set() for i in nodes}
    for a, b in edges:
        if a in nodes and b in nodes:
            adjacent[a].add(b)
            adjacent[b].add(a)
    seen, out = set(), []
    for start in sorted(nodes):
        if start in seen:
            continue
        part, stack = set(), [start]
        while stack:
            v = stack.pop()
            if v not in part:
                part.add(v)
                stack.extend(adjacent[v] - part)
        seen |= part
        out.append(part)
    return out


def shortest_costs(n, edges, costs, root):
    """Dijkstra from root; costs[(a, b)] is the cost of edge (a, b) in either direction."""
    adjacent = neighbours(n, edges)
    cost = {}
    for (a, b), c in costs.items():
        cost[(a, b)] = cost[(b, a)] = c
    dist = {root: 0.0}
    heap = [(0.0, root)]
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist.get(v, float("inf")):
            continue
        for u in adjacent[v]:
            nd = d + cost[(v, u)]
            if nd < dist.get(u, float("inf")):
                dist[u] = nd
                heapq.heappush(heap, (nd, u))
    return dist


def root_link_margin(n, edges, delays, root, overhead_ms=0.0):
    """Smallest ratio and gap (RTT ms) between any broker's best and second-best offer of a
    path to `root` (offer through neighbour u = u's distance + the link's RTT, 2 x delay plus
    `overhead_ms` per link for what the proxies and brokers add). Large margins mean the tree
    does not depend on measurement noise or on which offer was heard first (the core keeps a
    root link unless another is 5 % and 200 us cheaper)."""
    rtt = {e: 2.0 * d + overhead_ms for e, d in delays.items()}
    dist = shortest_costs(n, edges, rtt, root)
    adjacent = neighbours(n, edges)
    lookup = dict(rtt)
    lookup.update({(b, a): c for (a, b), c in rtt.items()})
    ratio, gap = float("inf"), float("inf")
    for v in range(n):
        if v == root or v not in dist:
            continue
        offers = sorted(dist[u] + lookup[(u, v)] for u in adjacent[v] if u in dist)
        if len(offers) >= 2:
            ratio = min(ratio, offers[1] / offers[0])
            gap = min(gap, offers[1] - offers[0])
    return ratio, gap


def clear_delays(n, edges, capabilities, seed, low=1, high=12, min_ratio=1.4, min_gap_ms=4.0,
                 overheads_ms=(0.0, 1.5)):
    """One-way proxy delays (ms, per edge) for which every broker's root link is clearly the
    cheapest (root_link_margin at least min_ratio and min_gap_ms, with each per-link overhead
    of overheads_ms), so the tree the brokers build can be compared with the oracle.
    Deterministic for a seed."""
    rng = random.Random(seed)
    root = max(range(n), key=lambda i: capabilities[i])
    for _ in range(5000):
        delays = {tuple(e): rng.randint(low, high) for e in edges}
        margins = [root_link_margin(n, edges, delays, root, extra) for extra in overheads_ms]
        if all(ratio >= min_ratio and gap >= min_gap_ms for ratio, gap in margins):
            return delays
    raise AssertionError("no delays in %d..%d ms give clear margins for %r" % (low, high, edges))


# ================================================================ $SYS/broker/stp views

class _StpWatcher:
    """A paho subscriber to $SYS/broker/stp/# on one broker, holding the current value of
    every topic (retained at subscription time, then every update; an empty payload removes
    it). Reconnects by itself after the broker restarts, starting from an empty view."""

    SETTLE = 0.1   # seconds after SUBACK before the retained burst counts as complete

    def __init__(self, broker, prefix=STP_PREFIX):
        self.broker = broker
        self.prefix = prefix
        self._lock = threading.Lock()
        self._values = {}
        self._subscribed_at = None
        client_id = "stp-watch-%d-%s" % (broker.index, uuid.uuid4().hex[:8])
        self.client = paho.Client(callback_api_version=CallbackAPIVersion.VERSION2,
                                  client_id=client_id, protocol=paho.MQTTv311)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.05, 0.2)
        self.client.connect_async(HOST, broker.port, keepalive=10)
        self.client.loop_start()

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        with self._lock:
            self._values = {}
            self._subscribed_at = None
        client.subscribe(self.prefix + "#", 0)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        with self._lock:
            self._subscribed_at = time.monotonic()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        with self._lock:
            self._values = {}
            self._subscribed_at = None

    def _on_message(self, client, userdata, msg):
        key = msg.topic[len(self.prefix):]
        with self._lock:
            if msg.payload:
                self._values[key] = msg.payload.decode("utf-8", "replace")
            else:
                self._values.pop(key, None)

    def view(self):
        """The current values, or None while not subscribed (or just subscribed)."""
        with self._lock:
            if self._subscribed_at is None or time.monotonic() - self._subscribed_at < self.SETTLE:
                return None
            return dict(self._values)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def collect_messages(broker, topic_filter, qos=0, quiet=0.1, limit=1.0):
    """Messages a new subscription to topic_filter on broker receives until `quiet` seconds
    pass without one (at most `limit` seconds): the retained ones, and whatever is published
    meanwhile."""
    c = PahoClient(broker, client_id="collect-" + uuid.uuid4().hex[:8], version=4)
    try:
        c.subscribe(topic_filter, qos)
        out = []
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                out.append(c.messages.get(
                    timeout=min(quiet, max(0.0, deadline - time.monotonic()))))
            except queue.Empty:
                break
        return out
    finally:
        c.close()


def read_stp_once(broker, quiet=0.1, limit=1.0, prefix=STP_PREFIX):
    """Broker's $SYS/broker/stp topics read with a new subscription: {topic below the
    prefix: text}."""
    values = {}
    for m in collect_messages(broker, prefix + "#", 0, quiet, limit):
        key = m.topic[len(prefix):]
        if m.payload:
            values[key] = m.payload.decode("utf-8", "replace")
        else:
            values.pop(key, None)
    return values


def filter_covers(a, b):
    """Whether topic filter a matches every topic filter b matches (interest routing's
    cover, for the filters tests use: '#' does not take the $ topics)."""
    al, bl = a.split("/"), b.split("/")
    for k, x in enumerate(al):
        if x == "#":
            return not (k == 0 and bl[0].startswith("$"))
        if k >= len(bl) or bl[k] == "#":
            return False
        if x == "+":
            if k == 0 and bl[0].startswith("$"):
                return False
            continue
        if x != bl[k]:
            return False
    return len(al) == len(bl)


def wait_link_wants(broker, neighbour_identity, topic_filter, timeout=20.0):
    """Waits until broker's $SYS says its link to neighbour_identity wants topic_filter
    (announced a filter covering it, or everything, or nothing yet): from then on a
    subscription behind that link gets what broker sends (interest routing)."""
    prefix = "peers/%s/interest/" % neighbour_identity
    seen = {}

    def wants():
        values = read_stp_once(broker)
        seen.update(wanted=values.get(prefix + "wanted"), filters=values.get(prefix + "filters"))
        if values.get("peers/%s/state" % neighbour_identity) != "up":
            return False
        if seen["wanted"] in (None, "unknown", "everything"):
            return True
        return any(filter_covers(f, topic_filter) for f in (seen["filters"] or "").split("\n")
                   if f)
    deadline = time.monotonic() + timeout
    while not wants():
        if time.monotonic() >= deadline:
            raise AssertionError("%r: the link to %s does not want %s within %.1fs: %r" % (
                broker, neighbour_identity, topic_filter, timeout, seen))
        time.sleep(0.1)


class Snapshot:
    """What the live brokers report at one moment, with the checks on it.

    ids[i], capabilities[i]  identity text and capability of broker i
    edges                    every configured link (a, b)
    usable                   the links whose two brokers are live and which are not cut
    live                     the brokers taken into account
    views[i]                 broker i's $SYS/broker/stp topics (below the prefix), None if none
    time                     time.monotonic() when it was taken
    """

    def __init__(self, ids, capabilities, edges, usable, live, views, hello=0.2, max_age=1.0,
                 taken=None):
        self.ids = list(ids)
        self.capabilities = list(capabilities)
        self.edges = [tuple(e) for e in edges]
        self.usable = [tuple(e) for e in usable]
        self.live = frozenset(live)
        self.views = dict(views)
        self.hello = hello
        self.max_age = max_age
        self.time = time.monotonic() if taken is None else taken
        self.agreed_at = None

    def value(self, i, key, default=None):
        view = self.views.get(i)
        return default if view is None else view.get(key, default)

    def peer_value(self, a, b, what, default=None):
        return self.value(a, "peers/%s/%s" % (self.ids[b], what), default)

    def root_of(self, i):
        return self.value(i, "root/id")

    def index_of(self, identity):
        return self.ids.index(identity) if identity in self.ids else None

    @property
    def root(self):
        """The root every live broker reports, or None if they do not all agree."""
        roots = {self.root_of(i) for i in self.live}
        return roots.pop() if len(roots) == 1 else None

    def roles(self, a, b):
        return (self.peer_value(a, b, "role", ""), self.peer_value(b, a, "role", ""))

    def forwarding(self, a, b):
        return (self.peer_value(a, b, "forwarding") == "1",
                self.peer_value(b, a, "forwarding") == "1")

    def forwarding_edges(self):
        """Links that both ends report as forwarding (among every configured link)."""
        return [e for e in self.edges if all(self.forwarding(*e))]

    def behind(self, j, i):
        """The live brokers on j's side of link (i, j): reached from j over links both ends
        forward on, without taking (i, j). What j announces to i is their interest."""
        tree = {}
        for a, b in self.forwarding_edges():
            if {a, b} != {i, j} and a in self.live and b in self.live:
                tree.setdefault(a, set()).add(b)
                tree.setdefault(b, set()).add(a)
        seen, todo = {j}, [j]
        while todo:
            for k in tree.get(todo.pop(), ()):
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
        return seen

    def interest_missing(self, topic_filter, at):
        """The up links (i, j) over which broker i does not yet know that j's side wants
        topic_filter, though a broker in `at` is behind j (interest routing: what i would
        not send to j). A link whose interest is unknown or everything gets everything."""
        out = []
        for i in sorted(self.live):
            for j in sorted(self.live):
                if i == j or self.peer_value(i, j, "state") != "up":
                    continue
                if not (self.behind(j, i) & set(at)):
                    continue
                wanted = self.peer_value(i, j, "interest/wanted", "unknown")
                if wanted in ("unknown", "everything"):
                    continue
                filters = self.peer_value(i, j, "interest/filters", "").split("\n")
                if not any(filter_covers(f, topic_filter) for f in filters if f):
                    out.append((i, j))
        return out

    def signature(self):
        """What must stay the same for an agreement to count as stable."""
        return (tuple(sorted((i, self.root_of(i)) for i in self.live)),
                tuple((e, self.roles(*e), self.forwarding(*e)) for e in self.edges))

    def problems(self):
        """Why this is not a converged tree (empty list: every live component agrees on one
        root and on every link; no broker forwards on a link that is not usable)."""
        out = []
        for i in sorted(self.live):
            if self.views.get(i) is None:
                out.append("b%d: no $SYS/broker/stp view yet" % i)
            elif self.root_of(i) is None:
                out.append("b%d: no root/id" % i)
        if out:
            return out
        usable = set(self.usable)
        for part in components(self.live, self.usable):
            roots = {self.root_of(i) for i in part}
            if len(roots) != 1:
                out.append("brokers %s report roots %s" % (sorted(part), sorted(roots)))
                continue
            root = self.index_of(roots.pop())
            if root not in part:
                out.append("brokers %s report root %s, not one of them"
                           % (sorted(part), self.root_of(min(part))))
        for a, b in self.edges:
            ends = [x for x in (a, b) if x in self.live]
            if (a, b) not in usable:
                for x in ends:
                    y = b if x == a else a
                    if self.peer_value(x, y, "forwarding") == "1":
                        out.append("b%d forwards on its link to b%d, which is down or cut"
                                   % (x, y))
                continue
            states = (self.peer_value(a, b, "state"), self.peer_value(b, a, "state"))
            roles, fwd = self.roles(a, b), self.forwarding(a, b)
            if states != ("up", "up"):
                out.append("link b%d-b%d: states %s" % (a, b, states))
            elif roles in FORWARDING_PAIRS and fwd != (True, True):
                out.append("link b%d-b%d: roles %s but forwarding %s" % (a, b, roles, fwd))
            elif roles in QUIET_PAIRS and fwd != (False, False):
                out.append("link b%d-b%d: roles %s but forwarding %s" % (a, b, roles, fwd))
            elif roles not in FORWARDING_PAIRS | QUIET_PAIRS:
                out.append("link b%d-b%d: roles %s do not agree" % (a, b, roles))
        for i in sorted(self.live):
            link = self.value(i, "root/link")
            if self.root_of(i) == self.ids[i]:
                if link not in ("", None):
                    out.append("b%d is root but reports root link %r" % (i, link))
                continue
            j = self.index_of(link)
            if j is None or self.peer_value(i, j, "role") != "root":
                out.append("b%d: root link %r is not a link with role root" % (i, link))
        return out

    def describe(self):
        lines = []
        for i in sorted(self.live):
            lines.append("b%d %s cap %s: root %s via %r cost %s" % (
                i, self.ids[i], self.value(i, "capability"), self.root_of(i),
                self.value(i, "root/link"), self.value(i, "root/cost_us")))
        for a, b in self.edges:
            lines.append("link b%d-b%d%s: roles %s forwarding %s states %s costs %s/%s" % (
                a, b, "" if (a, b) in self.usable else " (not usable)", self.roles(a, b),
                self.forwarding(a, b),
                (self.peer_value(a, b, "state"), self.peer_value(b, a, "state")),
                self.peer_value(a, b, "cost_us"), self.peer_value(b, a, "cost_us")))
        return "\n".join(lines)


def check_spanning_tree(snapshot, live=None, connected=True):
    """The forwarding links form exactly one spanning tree over each connected component of
    the live brokers (over the usable links), and no forwarding link touches a broker that
    is not live. With connected=True the live brokers must also form a single component.
    Returns the forwarding links."""
    live = set(snapshot.live if live is None else live)
    forwarding = snapshot.forwarding_edges()
    stray = [e for e in forwarding if e[0] not in live or e[1] not in live]
    assert not stray, "forwarding links to brokers that are not live: %s\n%s" % (
        stray, snapshot.describe())
    parts = components(live, snapshot.usable)
    if connected:
        assert len(parts) == 1, "live brokers are not connected: %s" % parts
    for part in parts:
        inside = [e for e in forwarding if e[0] in part]
        spanned = components(part, inside)
        assert len(inside) == len(part) - 1 and len(spanned) == 1, (
            "forwarding links %s do not form one spanning tree over %s\n%s"
            % (inside, sorted(part), snapshot.describe()))
    return forwarding


def oracle_path():
    build = os.environ.get("ARBOR_BUILD_DIR") or os.path.dirname(ARBOR_BIN)
    return os.path.join(build, "test", "sim", "arbor_stp_oracle")


def run_oracle(network, timeout=30.0):
    """Runs arbor_stp_oracle on a network description (dict); returns its answer (dict)."""
    path = oracle_path()
    if not os.access(path, os.X_OK):
        pytest.skip("arbor_stp_oracle not built (%s); set ARBOR_BUILD_DIR" % path)
    p = subprocess.run([path], input=json.dumps(network).encode(), capture_output=True,
                       timeout=timeout)
    assert p.returncode == 0, "arbor_stp_oracle exited %d: %s\ninput: %s" % (
        p.returncode, p.stderr.decode(errors="replace"), json.dumps(network))
    return json.loads(p.stdout)


def oracle(snapshot):
    """Feeds the live brokers, the usable links and the link costs the brokers report
    ($SYS .../peers/<id>/cost_us) to arbor_stp_oracle and asserts that the root every broker
    reports and the role of each end of each usable link equal the oracle's. Returns the
    oracle's answer."""
    live = sorted(snapshot.live)
    position = {i: k for k, i in enumerate(live)}
    brokers = [{"id": snapshot.ids[i],
                "capability": int(snapshot.value(i, "capability", snapshot.capabilities[i]))}
               for i in live]
    links = []
    for a, b in snapshot.usable:
        costs = (snapshot.peer_value(a, b, "cost_us"), snapshot.peer_value(b, a, "cost_us"))
        assert all(c not in (None, "", "0") for c in costs), (
            "link b%d-b%d has no cost yet: %s\n%s" % (a, b, costs, snapshot.describe()))
        links.append({"a": position[a], "b": position[b], "cost_ab_us": int(costs[0]),
                      "cost_ba_us": int(costs[1])})
    answer = run_oracle({"brokers": brokers, "links": links,
                         "hello_ms": round(snapshot.hello * 1000),
                         "max_age_ms": round(snapshot.max_age * 1000)})
    wrong = []
    for k, i in enumerate(live):
        want = answer["brokers"][k]["root"]
        if snapshot.root_of(i) != want:
            wrong.append("b%d: root %s, oracle %s" % (i, snapshot.root_of(i), want))
    for link, (a, b) in zip(answer["links"], snapshot.usable):
        got = snapshot.roles(a, b)
        want = (link["role_a"], link["role_b"])
        if got != want:
            wrong.append("link b%d-b%d: roles %s, oracle %s" % (a, b, got, want))
    assert not wrong, "tree differs from the oracle's:\n  %s\n%s\noracle input costs: %s" % (
        "\n  ".join(wrong), snapshot.describe(), links)
    return answer


# ================================================================ brokers and clusters

class BrokerError(Exception):
    pass


def _conf_value(seconds):
    return ("%.3f" % seconds).rstrip("0").rstrip(".")


def _listening(port):
    listening = port_listening(HOST, port)
    return port_accepts(HOST, port) if listening is None else listening


def find_in_file(path, needles, start=0, chunk=1 << 20):
    """(the set of `needles` (bytes) found in the file from byte `start` on, where to start
    next time to see only what is written after this). Reads a chunk at a time: a broker's
    log at log_type all grows by about 700 bytes per message it forwards, gigabytes in a long
    partition test. A file shorter than `start` (replaced) is read from its beginning."""
    found = set()
    overlap = max(len(n) for n in needles) - 1
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < start:
                start = 0
            f.seek(start)
            tail = b""
            while True:
                data = f.read(chunk)
                if not data:
                    break
                window = tail + data
                found.update(n for n in needles if n in window)
                tail = window[-overlap:] if overlap else b""
                start += len(data)
            start -= len(tail)
    except FileNotFoundError:
        pass
    return found, start


class PeerBroker:
    """One broker of a Cluster (host and port, like conftest's Broker, so PahoClient and
    Collector accept it). peer_port is the listener peers dial (its identity's port): the
    same as port, or in a TLS cluster a TLS listener of its own."""

    def __init__(self, cluster, index, port, capability, peer_port=None):
        self.cluster = cluster
        self.index = index
        self.host = HOST
        self.port = port
        self.peer_port = port if peer_port is None else peer_port
        self.capability = capability
        self.name = "b%d" % index
        base = os.path.join(cluster.tmp_dir, self.name)
        self.conf_path = base + ".conf"
        self.log_path = base + ".log"        # log_dest file
        self.out_path = base + ".out"        # stdout and stderr (sanitizers, crashes)
        self.proc = None
        self.stopped = False                 # SIGSTOPped
        self.exit_codes = []                 # per finished run; None for deliberate kills
        self._reaped = False

    @property
    def identity(self):
        return "%s:%d" % (HOST, self.peer_port)

    def __repr__(self):
        return "PeerBroker(b%d %s)" % (self.index, self.identity)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        out = []
        for path in (self.log_path, self.out_path):
            try:
                with open(path, "rb") as f:
                    out.append(f.read().decode("utf-8", "replace"))
            except FileNotFoundError:
                pass
        return "\n".join(out)

    def log_tail(self, size=3000):
        """The last `size` bytes of the log and of stdout/stderr, without reading the rest (a
        long test at log_type all writes hundreds of megabytes)."""
        out = []
        for path in (self.log_path, self.out_path):
            try:
                with open(path, "rb") as f:
                    f.seek(max(0, os.path.getsize(path) - size))
                    out.append(f.read().decode("utf-8", "replace"))
            except FileNotFoundError:
                pass
        return "\n".join(out)[-size:]

    def wait_log(self, text, timeout=15.0):
        """Until `text` is in the log (or stdout/stderr): what was there before counts; each
        look reads only what was written since the last one."""
        offsets = dict.fromkeys((self.log_path, self.out_path), 0)

        def found():
            hit = False
            for path, start in offsets.items():
                seen, offsets[path] = find_in_file(path, [text.encode()], start)
                hit = hit or bool(seen)
            return hit
        return wait_until(found, timeout, what="%r in b%d's log" % (text, self.index))

    def spawn(self):
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(DIE_WITH_PARENT + [ARBOR_BIN, "-c", self.conf_path],
                                         stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.cluster.tmp_dir)
        self.stopped = False
        self._reaped = False

    def wait_listening(self, deadline):
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError("b%d exited with %s during start-up:\n%s" % (
                    self.index, self.proc.returncode, self.log_tail()))
            if all(_listening(p) for p in {self.port, self.peer_port}):
                return
            time.sleep(0.01)
        raise BrokerError("b%d did not listen on %d within %.0fs:\n%s" % (
            self.index, self.port, START_TIMEOUT, self.log_tail()))

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)

    def reap(self, deliberate, timeout=STOP_TIMEOUT):
        """Wait for the process to end; record its exit code (None when it was deliberate).
        Returns the exit code ("hung" when it had to be killed after `timeout`)."""
        if self.proc is None:
            return None
        if self._reaped:
            return self.proc.returncode
        try:
            self.proc.wait(timeout)
            rc = self.proc.returncode
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "hung"
        self._reaped = True
        self.exit_codes.append(None if deliberate and rc != "hung" else rc)
        return rc

    def problems(self):
        out = ["exit status %s" % rc for rc in self.exit_codes if rc not in (0, None)]
        markers = [m.encode() for m in SANITIZER_MARKERS]
        seen = set()
        for path in (self.log_path, self.out_path):
            seen |= find_in_file(path, markers)[0]
        found = [m for m in SANITIZER_MARKERS if m.encode() in seen]
        if found:
            out.append("sanitizer reports %s" % ", ".join(found))
        return out


class Cluster:
    """n brokers linked along `edges`, each link's two connections through DelayProxies.

    Cluster(n, edges, capabilities=None, secret=DEFAULT_SECRET, extra_lines=(), hello=0.2,
            max_age=1.0, delays=None, tmp_dir=None, start=True)
      capabilities   per broker (default 1000 * (n - i): broker 0 is the root)
      secret         peer_secret; None: peer_allow_unauthenticated true instead
      extra_lines    added to every broker's config ("{index}" replaced by its index)
      broker_lines   {index: [lines]}: added to that broker's config after extra_lines (for
                     values that differ per broker in other ways than by the index)
      delays         {(a, b): one-way delay in ms} applied to both proxies of the link
      plain          True: leave out every MQTT-ST line (peer, peer_*, stp_*), so that the
                     harness itself can be tested on a broker without peer support
      tls            True: peer links over TLS (see tls_peer_pki): each broker gets a second
                     listener, TLS with require_certificate and the peer CA as cafile, on
                     peer_port (its identity; the proxies lead there, TLS passes through
                     them), and peer_cafile/peer_certfile/peer_keyfile; clients and $SYS
                     watchers stay on the plain `port`. With secret None nothing else
                     authenticates the peers (mutual TLS alone); a dict: the certificates to
                     use (tlscerts.make_peer_pki with at least n brokers)
      tls_listener_ca  the cafile of the peer listeners (default: the peer CA alone)
      stp_prefix     where the $SYS views are read (the harness's tests use a fake tree)

    brokers[i]      PeerBroker (host, port, identity, log_text(), wait_log())
    proxy(a, b)     the proxy carrying a's connection to b
    kill(i, sig)    signal broker i (default SIGKILL) and wait for it to end
    stop(i) / cont(i)   SIGSTOP / SIGCONT
    restart(i)      start broker i again (SIGTERM first if it runs)
    set_delay(a, b, ms), cut(a, b, mode), heal(a, b)   on both proxies of the link
    stp(i)          {topic below $SYS/broker/stp/: value} as broker i reports it now
    snapshot()      Snapshot of every live broker
    wait_tree(timeout)   the first snapshot of a stable agreement (see Snapshot.problems)
    check_spanning_tree(snapshot), oracle(snapshot)   as the module functions
    client(i, **kw) a PahoClient on broker i, closed with the cluster
    close()         stop everything; returns the problems found (exit codes, sanitizers)
    """

    def __init__(self, n, edges, capabilities=None, secret=DEFAULT_SECRET, extra_lines=(),
                 hello=0.2, max_age=1.0, delays=None, tmp_dir=None, start=True, plain=False,
                 stp_prefix=STP_PREFIX, tls=False, tls_listener_ca=None, broker_lines=None):
        self.n = n
        self.plain = plain
        self.pki = (tls if isinstance(tls, dict) else tls_peer_pki(n)) if tls else None
        self.tls_listener_ca = tls_listener_ca or (self.pki["peer_ca"] if self.pki else None)
        self.stp_prefix = stp_prefix
        self.edges = []
        for a, b in edges:
            if not (0 <= a < n and 0 <= b < n) or a == b:
                raise ValueError("bad edge (%r, %r) for %d brokers" % (a, b, n))
            if (a, b) in self.edges or (b, a) in self.edges:
                raise ValueError("duplicate edge (%r, %r)" % (a, b))
            self.edges.append((a, b))
        self.capabilities = list(capabilities or [1000 * (n - i) for i in range(n)])
        self.secret = secret
        self.extra_lines = list(extra_lines)
        self.broker_lines = {i: list(v) for i, v in (broker_lines or {}).items()}
        self.hello = hello
        self.max_age = max_age
        self._own_tmp = tmp_dir is None
        self.tmp_dir = str(tmp_dir) if tmp_dir else tempfile.mkdtemp(prefix="arbor-cluster-")
        os.makedirs(self.tmp_dir, exist_ok=True)
        if os.geteuid() == 0:
            # brokers started as root run as an unprivileged user (see conftest's tmp_path)
            os.chmod(self.tmp_dir, 0o777)
        self.cut_links = {}
        self._clients = []
        self._watchers = [None] * n
        self._closed = False
        # The proxies listen first (on ports the kernel picks), then the brokers' ports are
        # chosen: a port picked for a broker but not bound yet could otherwise be handed to a
        # proxy, and the broker would have to move (out of a capture filter, for example).
        self.proxies = {}
        delays = delays or {}
        for a, b in self.edges:
            ms = delays.get((a, b), delays.get((b, a), 0))
            self.proxies[(a, b)] = DelayProxy(0, None, ms, "b%d->b%d" % (a, b))
            self.proxies[(b, a)] = DelayProxy(0, None, ms, "b%d->b%d" % (b, a))
        wanted = 2 * n if self.pki else n
        ports = set()
        while len(ports) < wanted:
            ports.add(free_port())
        ports = sorted(ports)
        self.brokers = [PeerBroker(self, i, ports[i], self.capabilities[i],
                                   ports[n + i] if self.pki else None) for i in range(n)]
        for (a, b), proxy in self.proxies.items():
            proxy.target_port = self.brokers[b].peer_port
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------ configuration

    def config_lines(self, i):
        b = self.brokers[i]
        common = ["listener %d %s" % (b.port, HOST),
                  "allow_anonymous true",
                  "sys_interval 1",
                  "log_dest file %s" % b.log_path,
                  "log_type all"]
        # "{index}" in an extra line becomes the broker's index (a file of its own)
        extra = [text.replace("{index}", str(i))
                 for text in self.extra_lines + self.broker_lines.get(i, [])]
        if self.plain:
            return with_loops(common + extra)
        lines = ["peer_identity %s" % b.identity,
                 "stp_capability %d" % b.capability,
                 "stp_hello_interval %s" % _conf_value(self.hello),
                 "stp_max_age %s" % _conf_value(self.max_age),
                 "peer_restart_timeout 0.1 1"]
        if self.secret is not None:
            lines.append("peer_secret %s" % self.secret)
        elif not self.pki:
            lines.append("peer_allow_unauthenticated true")
        if self.pki:
            lines = self.tls_lines(i) + lines
        for j in sorted(self.neighbours(i)):
            lines.append("peer %s:%d" % (HOST, self.proxies[(i, j)].port))
        return with_loops(common + lines + extra)

    def tls_lines(self, i):
        """Broker i's peer listener and peer TLS lines (a TLS cluster)."""
        b, pki = self.brokers[i], self.pki
        cert, key = pki["peer%d" % i], pki["peer%d_key" % i]
        return ["listener %d %s" % (b.peer_port, HOST),
                "certfile " + cert, "keyfile " + key, "cafile " + self.tls_listener_ca,
                "require_certificate true",
                "peer_cafile " + pki["peer_ca"], "peer_certfile " + cert, "peer_keyfile " + key]

    def _write_config(self, i):
        with open(self.brokers[i].conf_path, "w") as f:
            f.write("\n".join(self.config_lines(i)) + "\n")

    def _move(self, i):
        """Give broker i a new port (its old one was taken by someone else)."""
        taken = {p for b in self.brokers for p in (b.port, b.peer_port)}
        fresh = []
        while len(fresh) < (2 if self.pki else 1):
            port = free_port()
            if port not in taken:
                taken.add(port)
                fresh.append(port)
        self.brokers[i].port = fresh[0]
        self.brokers[i].peer_port = fresh[-1]
        for (a, b), proxy in self.proxies.items():
            if b == i:
                proxy.target_port = fresh[-1]

    # ------------------------------------------------------------ processes

    def start(self):
        for i in range(self.n):
            self._write_config(i)
            self.brokers[i].spawn()
        deadline = time.monotonic() + START_TIMEOUT
        for i in range(self.n):
            self._wait_started(i, deadline)
        for i in range(self.n):
            self._watch(i)
        return self

    def _wait_started(self, i, deadline, attempts=3):
        b = self.brokers[i]
        for attempt in range(attempts):
            try:
                b.wait_listening(deadline)
                return
            except BrokerError:
                b.reap(deliberate=True, timeout=1.0)
                if "in use" not in b.log_text() or attempt == attempts - 1:
                    raise
            self._move(i)          # other configs name proxies, which follow the new port
            self._write_config(i)
            b.spawn()

    def _watch(self, i):
        if self._watchers[i] is None:
            self._watchers[i] = _StpWatcher(self.brokers[i], self.stp_prefix)

    def neighbours(self, i):
        return {b if a == i else a for a, b in self.edges if i in (a, b)}

    def identity(self, i):
        return self.brokers[i].identity

    def index_of(self, identity):
        for b in self.brokers:
            if b.identity == identity:
                return b.index
        return None

    def live(self):
        """Brokers that run and are not stopped."""
        return {b.index for b in self.brokers if b.running() and not b.stopped}

    def kill(self, i, sig=signal.SIGKILL, timeout=STOP_TIMEOUT):
        """Send sig to broker i and wait until it has ended (a stopped broker is continued
        first unless sig is SIGKILL). Returns the exit code."""
        b = self.brokers[i]
        if b.stopped and sig != signal.SIGKILL:
            self.cont(i)
        b.signal(sig)
        return b.reap(deliberate=True, timeout=timeout)

    def stop(self, i):
        self.brokers[i].signal(signal.SIGSTOP)
        self.brokers[i].stopped = True

    def cont(self, i):
        self.brokers[i].signal(signal.SIGCONT)
        self.brokers[i].stopped = False

    def restart(self, i):
        """Start broker i again with the same config (ending it with SIGTERM first if it
        runs; it must then exit 0)."""
        b = self.brokers[i]
        if b.running():
            if b.stopped:
                self.cont(i)
            b.signal(signal.SIGTERM)
            rc = b.reap(deliberate=False)
            if rc != 0:
                raise BrokerError("b%d exited with %s on SIGTERM" % (i, rc))
        b.spawn()
        b.wait_listening(time.monotonic() + START_TIMEOUT)
        return b

    # ------------------------------------------------------------ links

    def proxy(self, a, b):
        return self.proxies[(a, b)]

    def _link(self, a, b):
        if (a, b) in self.edges:
            return (a, b)
        if (b, a) in self.edges:
            return (b, a)
        raise KeyError("no link between b%d and b%d" % (a, b))

    def set_delay(self, a, b, ms, both=True):
        """One-way delay of the link's connections: a's (through P_ab) and, with both=True,
        b's (through P_ba) too. RTTs grow by twice the delay."""
        self._link(a, b)
        self.proxies[(a, b)].set_delay(ms)
        if both:
            self.proxies[(b, a)].set_delay(ms)

    def cut(self, a, b, mode="reset"):
        link = self._link(a, b)
        self.cut_links[link] = mode
        self.proxies[(a, b)].cut(mode)
        self.proxies[(b, a)].cut(mode)

    def heal(self, a, b):
        link = self._link(a, b)
        self.cut_links.pop(link, None)
        self.proxies[(a, b)].heal()
        self.proxies[(b, a)].heal()

    def usable_links(self, live=None):
        live = self.live() if live is None else set(live)
        return [e for e in self.edges
                if e[0] in live and e[1] in live and e not in self.cut_links]

    def direct_connections(self):
        """(i, j) for every broker i holding an established TCP connection straight to broker
        j's listener, bypassing the proxies (read from /proc; [] where /proc is missing)."""
        ports = {b.peer_port: b.index for b in self.brokers}
        inodes = {}
        for b in self.brokers:
            if not b.running():
                continue
            try:
                for fd in os.listdir("/proc/%d/fd" % b.proc.pid):
                    target = os.readlink("/proc/%d/fd/%s" % (b.proc.pid, fd))
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = b.index
            except OSError:
                continue
        found = set()
        try:
            with open("/proc/net/tcp") as f:
                next(f)
                for row in f:
                    fields = row.split()
                    if fields[3] != "01" or fields[9] not in inodes:
                        continue
                    remote = int(fields[2].split(":")[1], 16)
                    owner = inodes[fields[9]]
                    if remote in ports and ports[remote] != owner:
                        found.add((owner, ports[remote]))
        except OSError:
            return []
        return sorted(found)

    # ------------------------------------------------------------ the tree

    def stp(self, i, fresh=False):
        """Broker i's $SYS/broker/stp topics ({"root/id": ..., "peers/<id>/role": ...}).
        fresh=True reads them with a new subscription instead of the running watcher."""
        if fresh:
            return read_stp_once(self.brokers[i], prefix=self.stp_prefix)
        view = self._watchers[i].view() if self._watchers[i] else None
        return view if view is not None else read_stp_once(self.brokers[i],
                                                           prefix=self.stp_prefix)

    def snapshot(self, live=None):
        live = self.live() if live is None else set(live)
        views = {i: self._watchers[i].view() if self._watchers[i] else None for i in live}
        return Snapshot([b.identity for b in self.brokers], self.capabilities, self.edges,
                        self.usable_links(live), live, views, self.hello, self.max_age)

    def wait_tree(self, timeout=10.0, live=None, stable=0.3, poll=0.02):
        """Waits until the live brokers agree (Snapshot.problems() is empty) and keep the
        same agreement for `stable` seconds; returns the first snapshot of that agreement
        (its .time is when it was first seen) with .agreed_at set to the same time. Also
        asserts that no broker bypasses the proxies."""
        deadline = time.monotonic() + timeout
        first = None
        last = None
        while True:
            snap = self.snapshot(live)
            last = snap
            if not snap.problems():
                if first is None or first.signature() != snap.signature():
                    first = snap
                elif snap.time - first.time >= stable:
                    first.agreed_at = first.time
                    bypass = self.direct_connections()
                    assert not bypass, ("brokers connected directly, not through the "
                                        "proxies: %s" % bypass)
                    return first
            else:
                first = None
            if time.monotonic() >= deadline:
                raise AssertionError("no stable tree within %.1fs:\n  %s\n%s" % (
                    timeout, "\n  ".join(last.problems()[:20]), last.describe()))
            time.sleep(poll)

    def wait_interest(self, topic_filter, at, timeout=20.0, poll=0.05, exact=False):
        """Waits until a subscription to topic_filter on the brokers `at` (indices) is in
        effect network-wide: every live broker's announced interest on every up link leads
        it there (docs/interest-routing-design.md section 4). Immediate with full
        replication. exact=True (to count what crosses the links): also no up link's
        interest is unknown (such a link gets everything) and no broker is settling."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot()
            missing = snap.interest_missing(topic_filter, at)
            if exact:
                missing += [(i, "settling") for i in sorted(snap.live)
                            if snap.value(i, "settling") != "0"]
                missing += [(i, j, "unknown") for i in sorted(snap.live)
                            for j in sorted(snap.live)
                            if snap.peer_value(i, j, "state") == "up" and
                            snap.peer_value(i, j, "interest/wanted") in (None, "unknown")]
            if not missing:
                return snap
            if time.monotonic() >= deadline:
                raise AssertionError("%s on %s not in effect within %.1fs: links (from, to) "
                                     "still without it: %s\n%s" % (
                                         topic_filter, sorted(at), timeout, missing,
                                         snap.describe()))
            time.sleep(poll)

    def check_spanning_tree(self, snapshot, live=None, connected=True):
        return check_spanning_tree(snapshot, live, connected)

    def oracle(self, snapshot):
        return oracle(snapshot)

    def root_index(self, snapshot):
        return snapshot.index_of(snapshot.root)

    def best_root(self, live=None):
        """The broker that should be root among `live`: highest capability, then lowest
        identity (as addresses are all 127.0.0.1 here, the lowest peer port)."""
        live = self.live() if live is None else live
        return min(live, key=lambda i: (-self.capabilities[i], self.brokers[i].peer_port))

    # ------------------------------------------------------------ clients and teardown

    def client(self, i, **kw):
        kw.setdefault("client_id", "c%d-%s" % (i, uuid.uuid4().hex[:8]))
        c = PahoClient(self.brokers[i], **kw)
        self._clients.append(c)
        return c

    def close(self):
        """Stops clients, watchers, brokers (SIGTERM, each must exit 0 unless it was killed
        on purpose) and proxies. Returns the problems found, one string per broker."""
        if self._closed:
            return []
        self._closed = True
        for c in self._clients:
            c.close()
        for w in self._watchers:
            if w is not None:
                w.close()
        for b in self.brokers:
            if b.running():
                if b.stopped:
                    self.cont(b.index)
                b.signal(signal.SIGTERM)
        for b in self.brokers:
            if b.proc is not None and not b._reaped:
                b.reap(deliberate=False)
        for p in self.proxies.values():
            p.close()
        failures = []
        for b in self.brokers:
            problems = b.problems()
            if problems:
                failures.append("b%d (%s): %s\n--- log tail ---\n%s" % (
                    b.index, b.identity, "; ".join(problems), b.log_tail()))
        if self._own_tmp and not failures:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
        return failures


# ================================================================ certificates

_PEER_PKI = {}


def tls_peer_pki(n):
    """tlscerts.make_peer_pki for at least n brokers (and at least 10), made once per process
    in a directory removed at exit: every TLS cluster shares it."""
    import atexit
    import tlscerts
    have = _PEER_PKI.get("pki")
    if have is None or "peer%d" % (n - 1) not in have:
        top = tempfile.mkdtemp(prefix="arbor-peer-pki-")
        os.chmod(top, 0o755)
        atexit.register(shutil.rmtree, top, True)
        _PEER_PKI["pki"] = tlscerts.make_peer_pki(os.path.join(top, "pki"), max(n, 10))
    return _PEER_PKI["pki"]


# ================================================================ message collection

class Collector:
    """Subscribers (one paho client each) on several brokers, recording every message.

    Collector(brokers, topic, qos=2, version=5)   brokers: objects with host and port
    records(k)        Messages received by the subscriber on brokers[k] (each has .broker = k)
    payloads(k)       their payloads
    wait_for(payloads, timeout, subscribers=None)   until every subscriber (or those listed)
                      has every payload (at least once)
    assert_exactly_once(payloads, timeout, quiet)   wait_for, then `quiet` more seconds, then
                      every subscriber has every payload exactly once and nothing else, and
                      no message carries the internal mqtt-st-origin user property
    Usable as a context manager (closes the subscribers).

    Each message is recorded as it arrives (in the client's network thread), compactly: its
    payload, its topic (one string per distinct topic), a byte for QoS and retain, and its
    properties only if it has any. A partition of 30 minutes (make partition-soak) brings
    about two million messages to the subscribers of one test; whole paho messages would
    take gigabytes, and a full garbage collection over them seconds during which no thread
    of the process (the DelayProxies included) runs.
    """

    INTERNAL_PROPERTY = "mqtt-st-origin"

    def __init__(self, brokers, topic, qos=2, version=5, name="collector"):
        self.brokers = list(brokers)
        self.topic = topic
        self._lock = threading.Lock()
        self._topics = {}
        self._received = [_Received() for _ in self.brokers]
        self.clients = []
        try:
            for k, b in enumerate(self.brokers):
                c = PahoClient(b, client_id="%s-%d-%s" % (name, k, uuid.uuid4().hex[:6]),
                               version=version, sink=self._recorder(k))
                self.clients.append(c)
                codes = c.subscribe(topic, qos)
                assert codes[0] < 0x80, "subscription refused on %r: %s" % (b, codes)
            # interest routing: messages published before the subscriptions are in effect
            # network-wide may or may not reach them, so wait for that
            cluster = getattr(self.brokers[0], "cluster", None) if self.brokers else None
            if cluster is not None and hasattr(cluster, "wait_interest") and \
                    all(getattr(b, "cluster", None) is cluster for b in self.brokers):
                live = cluster.live()
                cluster.wait_interest(topic, [b.index for b in self.brokers if b.index in live])
        except BaseException:
            self.close()
            raise

    def _recorder(self, k):
        def record(m):
            with self._lock:
                self._received[k].add(m, self._topics.setdefault(m.topic, m.topic))
        return record

    def records(self, k):
        with self._lock:
            return self._received[k].messages(k)

    def payloads(self, k):
        return self._payloads(k)

    def _payloads(self, k, start=0):
        with self._lock:
            return self._received[k].payloads[start:]

    def _with_properties(self, k):
        with self._lock:
            return list(self._received[k].props.values())

    def wait_for(self, payloads, timeout=10.0, subscribers=None):
        """Until each subscriber (all, or the indices given) has every payload."""
        wanted = [p if isinstance(p, bytes) else str(p).encode() for p in payloads]
        which = range(len(self.clients)) if subscribers is None else subscribers
        lacking = {k: set(wanted) for k in which}
        seen = dict.fromkeys(which, 0)     # how many of each subscriber's records are counted
        deadline = time.monotonic() + timeout
        while True:
            for k in which:
                new = self._payloads(k, seen[k])
                seen[k] += len(new)
                lacking[k].difference_update(new)
            if not any(lacking.values()):
                return
            if time.monotonic() >= deadline:
                missing = {k: [p for p in wanted if p in v] for k, v in lacking.items() if v}
                raise AssertionError(
                    "after %.1fs still missing (subscriber: how many of %d, the first 10): %s" % (
                        timeout, len(wanted),
                        {k: (len(v), v[:10]) for k, v in missing.items()}))
            time.sleep(0.02)

    def assert_exactly_once(self, payloads, timeout=10.0, quiet=0.3):
        wanted = [p if isinstance(p, bytes) else str(p).encode() for p in payloads]
        self.wait_for(wanted, timeout)
        time.sleep(quiet)
        wanted = set(wanted)
        wrong = {}
        for k in range(len(self.clients)):
            counts = collections.Counter(self.payloads(k))
            bad = {p: n for p, n in counts.items() if n != 1 or p not in wanted}
            if bad:
                wrong[k] = bad
            for props in self._with_properties(k):   # a message without any has no leak
                self.assert_no_internal_property(props)
        assert not wrong, "not exactly once (subscriber: {payload: count}): %s" % wrong

    @classmethod
    def assert_no_internal_property(cls, props):
        user = getattr(props, "UserProperty", None) or []
        leaked = [kv for kv in user if kv[0] == cls.INTERNAL_PROPERTY]
        assert not leaked, "internal property reached a client: %r" % (leaked,)

    def clear(self):
        with self._lock:
            self._received = [_Received() for _ in self.clients]

    def close(self):
        for c in self.clients:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Received:
    """One Collector subscriber's messages in arrival order: payloads (bytes), topics (shared
    strings), flags (a byte each: QoS, and 4 for retain) and props {index: Properties} of the
    messages that had any (the others share helpers.NO_PROPERTIES, or None before MQTT 5)."""

    def __init__(self):
        self.payloads = []
        self.topics = []
        self.flags = bytearray()
        self.props = {}
        self.no_props = None

    def add(self, m, topic):
        if m.props is None or m.props is NO_PROPERTIES:
            self.no_props = m.props
        else:
            self.props[len(self.payloads)] = m.props
        self.topics.append(topic)
        self.flags.append(m.qos | (4 if m.retain else 0))
        self.payloads.append(m.payload)

    def messages(self, k):
        return [Record(t, p, f & 3, bool(f & 4), self.props.get(i, self.no_props), k)
                for i, (t, p, f) in enumerate(zip(self.topics, self.payloads, self.flags))]


# A message as a Collector gives it back: the attributes of helpers.Message, and the
# subscriber's index as .broker.
Record = collections.namedtuple("Record", "topic payload qos retain props broker")


class NumberedStream:
    """Publishes "<tag>-<n>" (n = 0, 1, ...) on topic through a PahoClient from a thread, one
    message every `interval` seconds at `qos`, each waiting for its acknowledgement.

    start(); wait_sent(count, timeout); stop() -> the payloads sent, in order (raises what
    went wrong in the thread, e.g. an acknowledgement that never came); slowest: the longest
    a publish took (seconds, its acknowledgement included)."""

    def __init__(self, client, topic, qos=1, tag="m", interval=0.02):
        self.client = client
        self.topic = topic
        self.qos = qos
        self.tag = tag
        self.interval = interval
        self.sent = []
        self.slowest = 0.0
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="NumberedStream-%s" % tag)

    def _run(self):
        n = 0
        try:
            while not self._stop.is_set():
                payload = ("%s-%d" % (self.tag, n)).encode()
                began = time.monotonic()
                self.client.publish(self.topic, payload, qos=self.qos)
                self.slowest = max(self.slowest, time.monotonic() - began)
                self.sent.append(payload)
                n += 1
                self._stop.wait(self.interval)
        except BaseException as e:      # handed to stop()
            self.error = e

    def start(self):
        self._thread.start()
        return self

    def wait_sent(self, count, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.sent) < count:
            if self.error is not None or time.monotonic() >= deadline:
                raise AssertionError("stream %s: %d of %d sent (%r)" % (
                    self.tag, len(self.sent), count, self.error))
            time.sleep(0.01)

    def stop(self, timeout=10.0):
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "stream %s did not stop" % self.tag
        if self.error is not None:
            raise AssertionError("stream %s failed after %d messages: %r" % (
                self.tag, len(self.sent), self.error))
        return list(self.sent)


def retained_messages(broker, topic_filter, quiet=0.2, limit=3.0):
    """{topic: payload} of the retained messages broker holds under topic_filter."""
    return {m.topic: m.payload for m in collect_messages(broker, topic_filter, 1, quiet, limit)
            if m.retain}


# ================================================================ fixtures

_support = {}


def probe_peer_support(tmp_dir):
    """Starts the binary with a peer line (the config a Cluster broker gets, its peer
    pointing at a closed port). Returns (True, "") when it runs, (False, reason) when it
    exits saying the peer directive is not supported yet; raises BrokerError when it exits
    for any other reason."""
    cluster = Cluster(1, [], tmp_dir=tmp_dir, start=False)
    b = cluster.brokers[0]
    try:
        lines = cluster.config_lines(0) + ["peer %s:%d" % (HOST, free_port())]
        with open(b.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        b.spawn()
        try:
            b.wait_listening(time.monotonic() + START_TIMEOUT)
        except BrokerError:
            for row in b.log_text().splitlines():
                if "not supported yet" in row:
                    found = re.search(r"\b(peer\w*: .*)$", row)
                    return False, (found.group(1) if found else row).strip()
            raise
        b.signal(signal.SIGTERM)
        rc = b.reap(deliberate=False)
        if rc != 0:
            raise BrokerError("probe broker exited with %s on SIGTERM:\n%s" % (
                rc, b.log_text()[-3000:]))
        return True, ""
    finally:
        if b.running():
            b.proc.kill()
            b.reap(deliberate=True)
        cluster.close()


@pytest.fixture(scope="session")
def peer_support():
    """Skips the test when $ARBOR_BIN refuses the `peer` directive ("not supported yet");
    fails it when the binary exits for another reason with a cluster broker's config."""
    if "result" not in _support:
        tmp_dir = tempfile.mkdtemp(prefix="arbor-peer-probe-")
        try:
            _support["result"] = probe_peer_support(tmp_dir)
        except BrokerError as e:
            _support["result"] = (None, str(e))
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    ok, reason = _support["result"]
    if ok is None:
        pytest.fail("the broker does not run with a cluster broker's config:\n" + reason,
                    pytrace=False)
    if not ok:
        pytest.skip("broker has no MQTT-ST peer support yet: " + reason)
    return True


class ClusterFactory:
    """make(n, edges, **keywords) -> a started Cluster in its own folder below tmp_dir, with
    `defaults` as keywords unless given; close() closes every cluster made and returns the
    problems found (see Cluster.close)."""

    def __init__(self, tmp_dir, **defaults):
        self.tmp_dir = str(tmp_dir)
        self.defaults = defaults
        self.made = []

    def __call__(self, n, edges, capabilities=None, **kw):
        kw = dict(self.defaults, **kw)
        if capabilities is not None:
            kw["capabilities"] = capabilities
        folder = os.path.join(self.tmp_dir, "cluster%d" % len(self.made))
        c = Cluster(n, edges, tmp_dir=folder, **kw)
        self.made.append(c)
        return c

    def close(self):
        return [problem for c in self.made for problem in c.close()]


@pytest.fixture
def cluster(tmp_path, peer_support):
    """Factory: cluster(n, edges, **Cluster keywords) -> started Cluster. At teardown every
    broker gets SIGTERM; the test fails if one exited non-zero (other than on purpose),
    hung or printed a sanitizer report."""
    make = ClusterFactory(tmp_path)
    yield make
    failures = make.close()
    if failures:
        pytest.fail("cluster teardown check failed:\n" + "\n".join(failures), pytrace=False)
