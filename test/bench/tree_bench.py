#!/usr/bin/env python3
"""tree_bench.py: `make bench-tree` (scripts/run-bench-tree.sh runs it after building).

Compares an arbor MQTT-ST tree with Debian's Mosquitto brokers joined by ordinary bridges into
the same static tree, side by side in one run, on loopback:

  single  one broker (the baseline the per-hop figures subtract)
  line3   A - B - C, root B; publishers on A, subscribers on C (2 hops)
  tree5   root R with children X and Y, Y with children Y1 and Y2; publishers on the leaf Y1,
          subscribers on the leaf X (Y1-Y-R-X, 3 hops), and a second load with subscribers on
          every broker

arbor brokers get `peer` lines (on the child's side, to the parent), a peer_secret and an
stp_capability that makes the intended root win; hello interval and max age are the defaults.
Mosquitto brokers get one `connection` block per edge, on the child's side (topic # both 2,
try_private true). Every broker has the configuration of scripts/run-bench.sh otherwise.

For each network arbor_bench measures (i) latency at 100 msg/s (QoS 0 and 1), (ii) delivered
msg/s at full speed (QoS 0 and 1, four publishers), (iii) broker CPU per delivered message
(-P every broker of the network). (iv) Idle signalling: a second, idle copy of each multi-broker
network runs for the whole measurement with a counting TCP relay in front of every broker, so
that every byte its links carry (both connections of an arbor link, the bridge connection of a
Mosquitto edge) is counted; bytes / links / seconds.

Every process it starts is stopped by pid when it ends (and listed in --pidfile so the calling
script can stop them too if this one is killed). Writes raw results under --out and the section
"MQTT-ST trees against bridged Mosquitto" of --markdown.
"""

import argparse
import json
import os
import platform
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
SECRET = "bench-tree-secret-0123456789"
SECTION = "## MQTT-ST trees against bridged Mosquitto"
KINDS = ("arbor", "mosquitto")

# The configuration every broker gets (scripts/run-bench.sh's, with notices logged so that
# link changes are on record, and $SYS every second so that the counters read after each load
# are fresh); mosquitto.conf syntax, which arbor reads too.
COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "log_type notice", "connection_messages false", "max_inflight_messages 20",
          "max_queued_messages 100000", "sys_interval 1"]
# Counters read from every broker after each load (summed over the network, as deltas).
COUNTERS = ("publish/messages/dropped", "stp/messages/dropped", "stp/messages/duplicates",
            "stp/messages/discarded", "stp/messages/replayed", "stp/topology_changes")

# name -> nodes (parents before children), parent of each non-root node, publishers' broker,
# subscribers' broker, hops between them
TOPOLOGIES = {
    "single": {"nodes": ["A"], "parent": {}, "pub": "A", "sub": "A", "hops": 0},
    "line3": {"nodes": ["B", "A", "C"], "parent": {"A": "B", "C": "B"},
              "pub": "A", "sub": "C", "hops": 2},
    "tree5": {"nodes": ["R", "X", "Y", "Y1", "Y2"],
              "parent": {"X": "R", "Y": "R", "Y1": "Y", "Y2": "Y"},
              "pub": "Y1", "sub": "X", "hops": 3},
}
TOPOLOGY_TEXT = {
    "single": "one broker",
    "line3": "line of 3 (A-B-C), pub A -> sub C, 2 hops",
    "tree5": "tree of 5, pub leaf Y1 -> sub leaf X, 3 hops",
    "tree5-all": "tree of 5, pub leaf Y1 -> a subscriber on each of the 5 brokers",
}


def load_args(quick):
    """name -> (topologies it runs on, placement, arbor_bench arguments)."""
    lat_d, thr_d = ("2", "2") if quick else ("7", "4")
    lat = ["--topics", "1", "--publishers", "1", "--rate", "100", "-d", lat_d, "--trim", "0.5",
           "--drain", "2"]
    # a long drain bound: a run ends 0.5 s after the last arrival, so what is missing then is
    # lost, not late
    thr = ["--topics", "4", "--publishers", "1", "-i", "0", "-d", thr_d,
           "--trim", "0.5" if quick else "1", "--drain", "10"]
    return {
        "lat-q0": (lat + ["--subscribers", "1", "--qos", "0"]),
        "lat-q1": (lat + ["--subscribers", "1", "--qos", "1"]),
        "thr-q1": (thr + ["--subscribers", "1", "--qos", "1", "--inflight", "10"]),
        "thr-q0": (thr + ["--subscribers", "1", "--qos", "0"]),
        "lat-q1-all": (lat + ["--subscribers", "5", "--qos", "1"]),
        "thr-q1-all": (thr + ["--subscribers", "5", "--qos", "1", "--inflight", "10"]),
    }


# In this order on each network (latency first, the open-loop QoS 0 load last).
LOADS = {"single": ["lat-q0", "lat-q1", "thr-q1", "thr-q0"],
         "line3": ["lat-q0", "lat-q1", "thr-q1", "thr-q0"],
         "tree5": ["lat-q0", "lat-q1", "lat-q1-all", "thr-q1", "thr-q1-all", "thr-q0"]}


def log(*a):
    print("===", *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def port_open(port):
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# A minimal MQTT 3.1.1 client: enough to read retained $SYS topics and to send probes.

def _remaining_length(n):
    out = bytearray()
    while True:
        b, n = n % 128, n // 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(s):
    b = s.encode()
    return struct.pack("!H", len(b)) + b


class MiniClient:
    def __init__(self, port, client_id, timeout=5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = b""
        body = _string("MQTT") + bytes([4, 0x02]) + struct.pack("!H", 60) + _string(client_id)
        self._send(0x10, body)
        ptype, payload = self._packet(timeout)
        if ptype != 0x20 or payload[1] != 0:
            raise RuntimeError("CONNACK refused by port %d" % port)

    def _send(self, first, body):
        self.sock.sendall(bytes([first]) + _remaining_length(len(body)) + body)

    def _packet(self, timeout):
        """One packet (type byte, body), or None when nothing arrives within timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 2:
                length, mult, i = 0, 1, 1
                while i < len(self.buf):
                    length += (self.buf[i] & 0x7F) * mult
                    mult *= 128
                    i += 1
                    if not self.buf[i - 1] & 0x80:
                        if len(self.buf) >= i + length:
                            first, body = self.buf[0], self.buf[i:i + length]
                            self.buf = self.buf[i + length:]
                            return first, body
                        break
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None, None
            if not data:
                raise RuntimeError("connection closed")
            self.buf += data

    def subscribe(self, topic):
        self._send(0x82, struct.pack("!H", 1) + _string(topic) + b"\x00")

    def publish(self, topic, payload):
        self._send(0x30, _string(topic) + payload)

    def messages(self, quiet=0.3, limit=5.0):
        """(topic, payload) of every PUBLISH until nothing arrives for `quiet` seconds."""
        out, deadline = [], time.monotonic() + limit
        while time.monotonic() < deadline:
            first, body = self._packet(quiet)
            if first is None:
                break
            if first >> 4 == 3:
                n = struct.unpack("!H", body[:2])[0]
                pos = 2 + n + (2 if (first >> 1) & 3 else 0)
                out.append((body[2:2 + n].decode(errors="replace"), body[pos:]))
        return out

    def wait_for(self, topic, limit):
        """True as soon as a PUBLISH on `topic` arrives, False after `limit` s without one."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            first, body = self._packet(max(0.01, deadline - time.monotonic()))
            if first is None:
                return False
            if first >> 4 == 3:
                n = struct.unpack("!H", body[:2])[0]
                if body[2:2 + n].decode(errors="replace") == topic:
                    return True
        return False

    def close(self):
        try:
            self._send(0xE0, b"")
        except OSError:
            pass
        self.sock.close()


def retained(port, pattern, quiet=0.3):
    c = MiniClient(port, "tb-sys-%d-%d" % (os.getpid(), time.monotonic_ns()))
    try:
        c.subscribe(pattern)
        return {t: p.decode(errors="replace") for t, p in c.messages(quiet=quiet) if p}
    finally:
        c.close()


def read_sys(net):
    """{broker name: {topic: payload}} of every retained $SYS/broker/# topic of each broker of
    net["brokers"], read concurrently ({} for a broker that could not be read)."""
    per = {}

    def read(n, b):
        try:
            per[n] = retained(b.port, "$SYS/broker/#", quiet=0.2)
        except (OSError, RuntimeError):
            per[n] = {}
    threads = [threading.Thread(target=read, args=item) for item in net["brokers"].items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per


# ---------------------------------------------------------------------------------------------
# Counting TCP relay (for the idle signalling figure): one thread, every relay of a run.

class Relays(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.counts = {}  # group -> bytes
        self.stopping = False
        self.sockets = []

    def add(self, group, target_port):
        """Listen on a free port and relay every connection to target_port; returns the port."""
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((HOST, 0))
        ls.listen(16)
        ls.setblocking(False)
        self.sockets.append(ls)
        with self.lock:
            self.counts.setdefault(group, 0)
        self.sel.register(ls, selectors.EVENT_READ, ("listen", group, target_port))
        return ls.getsockname()[1]

    def run(self):
        while not self.stopping:
            for key, _ in self.sel.select(timeout=0.2):
                what = key.data
                if what[0] == "listen":
                    try:
                        a, _ = key.fileobj.accept()
                        b = socket.create_connection((HOST, what[2]), timeout=2)
                    except OSError:
                        continue
                    for s in (a, b):
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        s.settimeout(5)
                        self.sockets.append(s)
                    self.sel.register(a, selectors.EVENT_READ, ("pipe", what[1], b))
                    self.sel.register(b, selectors.EVENT_READ, ("pipe", what[1], a))
                    continue
                src, dst = key.fileobj, what[2]
                try:
                    data = src.recv(65536)
                    if data:
                        dst.sendall(data)
                except OSError:
                    data = b""
                if not data:
                    for s in (src, dst):
                        try:
                            self.sel.unregister(s)
                        except (KeyError, ValueError):
                            pass
                        s.close()
                    continue
                with self.lock:
                    self.counts[what[1]] += len(data)

    def snapshot(self):
        with self.lock:
            return dict(self.counts)

    def stop(self):
        self.stopping = True
        self.join(2)
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# Brokers and networks

class Broker:
    def __init__(self, kind, name, binary, out_dir, tag):
        self.kind, self.name, self.binary = kind, name, binary
        self.port = free_port()
        self.addr_port = self.port  # where other brokers reach it (a relay when counting)
        self.conf = os.path.join(out_dir, "%s.conf" % tag)
        self.log = os.path.join(out_dir, "%s.log" % tag)
        self.proc = None


class Runner:
    def __init__(self, args):
        self.args = args
        self.procs = []
        self.bench_loads = load_args(args.quick)

    # -- processes
    def spawn(self, argv, log_path):
        f = open(log_path, "ab")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        f.close()
        self.procs.append(p)
        if self.args.pidfile:
            with open(self.args.pidfile, "a") as pf:
                pf.write("%d\n" % p.pid)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for p in self.procs:
            self.stop(p)

    # -- networks
    def launch(self, b, lines):
        """Write broker b's config (lines), start it and wait until it listens."""
        with open(b.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.start_broker(b)

    def start_broker(self, b):
        """Start broker b from its config file and wait until it listens."""
        b.proc = self.spawn([b.binary, "-c", b.conf], b.log)
        deadline = time.monotonic() + 15
        while not port_open(b.port):
            if b.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("%s %s did not start; see %s" % (b.kind, b.name, b.log))
            time.sleep(0.02)

    def start_network(self, kind, topo, tag, relays=None):
        t = TOPOLOGIES[topo]
        binary = self.args.arbor if kind == "arbor" else self.args.mosquitto
        brokers = {n: Broker(kind, n, binary, self.args.out, "%s-%s-%s" % (tag, kind, n))
                   for n in t["nodes"]}
        if relays is not None:
            for b in brokers.values():
                b.addr_port = relays.add("%s-%s" % (kind, topo), b.port)
        root = t["nodes"][0]
        for n in t["nodes"]:  # parents first, so that every dial finds its peer listening
            b = brokers[n]
            lines = ["listener %d %s" % (b.port, HOST)] + COMMON
            if kind == "arbor" and self.args.arbor_loops:
                lines.append("loops %d" % self.args.arbor_loops)
            parent = brokers.get(t["parent"].get(n))
            if kind == "arbor" and len(t["nodes"]) > 1:
                lines += ["peer_identity %s:%d" % (HOST, b.addr_port),
                          "stp_capability %d" % (1000 if n == root else 100),
                          "peer_secret " + SECRET]
                if parent:
                    lines.append("peer %s:%d" % (HOST, parent.addr_port))
            elif kind == "mosquitto" and parent:
                lines += ["", "connection bridge-%s-%s-to-%s" % (tag, n, parent.name),
                          "address %s:%d" % (HOST, parent.addr_port),
                          "topic # both 2", "try_private true"]
            self.launch(b, lines)
        net = {"kind": kind, "topo": topo, "brokers": brokers, "started": time.monotonic()}
        self.wait_ready(net)
        return net

    def wait_ready(self, net):
        brokers = net["brokers"]
        deadline = time.monotonic() + 60
        if net["kind"] == "arbor" and len(brokers) > 1:
            while not self.tree_formed(net):
                if time.monotonic() > deadline:
                    raise RuntimeError("arbor %s: tree not formed in 60 s" % net["topo"])
                time.sleep(0.2)
        net["tree_s"] = time.monotonic() - net["started"]
        while not self.probe(net):
            if time.monotonic() > deadline:
                raise RuntimeError("%s %s: probes not delivered everywhere in 60 s"
                                   % (net["kind"], net["topo"]))
            time.sleep(0.3)
        net["ready_s"] = time.monotonic() - net["started"]

    def tree_formed(self, net):
        """Every link up and forwarding, the intended root everywhere, each broker at its depth."""
        t, brokers = TOPOLOGIES[net["topo"]], net["brokers"]
        ident = {n: "%s:%d" % (HOST, b.addr_port) for n, b in brokers.items()}
        root = t["nodes"][0]
        try:
            stp = {n: retained(b.port, "$SYS/broker/stp/#") for n, b in brokers.items()}
        except (OSError, RuntimeError):
            return False
        for n in brokers:
            s = {k[len("$SYS/broker/stp/"):]: v for k, v in stp[n].items()}
            depth, m = 0, n
            while m in t["parent"]:
                depth, m = depth + 1, t["parent"][m]
            if s.get("root/id") != ident[root] or s.get("hops") != str(depth):
                return False
            neighbours = [c for c, p in t["parent"].items() if p == n]
            if n in t["parent"]:
                neighbours.append(t["parent"][n])
            for o in neighbours:
                role = "root" if t["parent"].get(n) == o else "designated"
                if (s.get("peers/%s/state" % ident[o]) != "up" or
                        s.get("peers/%s/forwarding" % ident[o]) != "1" or
                        s.get("peers/%s/role" % ident[o]) != role):
                    return False
        return True

    def probe(self, net):
        """A message published on each broker reaches a subscriber on every broker."""
        brokers = net["brokers"]
        subs = {}
        try:
            tag = "%d-%d" % (os.getpid(), time.monotonic_ns())
            for n, b in brokers.items():
                subs[n] = MiniClient(b.port, "tb-probe-sub-%s-%s" % (n, tag))
                subs[n].subscribe("tree-bench-probe/%s/#" % tag)
            time.sleep(0.1)
            for n, b in brokers.items():
                p = MiniClient(b.port, "tb-probe-pub-%s-%s" % (n, tag))
                p.publish("tree-bench-probe/%s/%s" % (tag, n), b"probe")
                p.close()
            want = sorted("tree-bench-probe/%s/%s" % (tag, n) for n in brokers)
            for c in subs.values():
                got = sorted(t for t, _ in c.messages(quiet=0.5, limit=3))
                if got != want:
                    return False
            return True
        except (OSError, RuntimeError):
            return False
        finally:
            for c in subs.values():
                c.close()

    def cpu_ticks(self, pids):
        total = 0
        for pid in pids:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                pass
        return total

    def settle(self, net, limit=20.0):
        """Wait until the network is quiet (brokers below 5% of one CPU over 0.5 s)."""
        pids = [b.proc.pid for b in net["brokers"].values()]
        hz = os.sysconf("SC_CLK_TCK")
        start = time.monotonic()
        while time.monotonic() - start < limit:
            a = self.cpu_ticks(pids)
            time.sleep(0.5)
            if (self.cpu_ticks(pids) - a) / hz < 0.025:
                return time.monotonic() - start
        return None

    def counters(self, net):
        """COUNTERS summed over the network's brokers (read concurrently), and per broker."""
        per = read_sys(net)
        total = {}
        for c in COUNTERS:
            values = [per[n].get("$SYS/broker/" + c) for n in per]
            values = [int(v) for v in values if v is not None and v.isdigit()]
            total[c] = sum(values) if values else None
        brokers = {n: {k[len("$SYS/broker/"):]: v for k, v in per[n].items()
                       if k.startswith("$SYS/broker/stp/") or k.endswith("/dropped")}
                   for n in per}
        return total, brokers

    def stop_network(self, net):
        for b in net["brokers"].values():
            self.stop(b.proc)
        for b in net["brokers"].values():
            if b.proc.returncode not in (0, -signal.SIGTERM):
                log("note: %s %s exited with status %s" % (net["kind"], b.name,
                                                             b.proc.returncode))

    # -- measurements
    def run_load(self, net, load, rnd):
        t = TOPOLOGIES[net["topo"]]
        brokers = net["brokers"]
        if load.endswith("-all"):
            order = [t["pub"]] + [n for n in t["nodes"] if n != t["pub"]]
            placement = "first-to-all"
        else:
            order = [t["pub"], t["sub"]] if t["pub"] != t["sub"] else [t["pub"]]
            placement = "ends"
        key = "r%d__%s__%s__%s" % (rnd, net["kind"], net["topo"], load)
        json_path = os.path.join(self.args.out, key + ".json")
        cmd = [self.args.bench] + self.bench_loads[load] + ["--placement", placement,
                                                             "--label", key, "--json", json_path,
                                                             "--no-per-second"]
        for n in order:
            cmd += ["-b", "%s:%d" % (HOST, brokers[n].port)]
        for b in brokers.values():
            cmd += ["-P", str(b.proc.pid)]
        with open(os.path.join(self.args.out, key + ".txt"), "w") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("arbor_bench failed for %s (see %s.txt)" % (key, key))
        with open(json_path) as f:
            r = json.load(f)["result"]
        # $SYS is published every second: wait for the network to go quiet and for a fresh copy
        ended = time.monotonic()
        r["settle_s"] = self.settle(net)
        time.sleep(max(0.0, 1.2 - (time.monotonic() - ended)))
        after, _ = self.counters(net)
        r["counters"] = {c: (after[c] - net["counters"][c]
                             if after[c] is not None and net["counters"][c] is not None else None)
                         for c in COUNTERS}
        net["counters"] = after
        lat = r.get("latency_ms") or {}
        log("  %-9s %-6s %-10s egress %10.0f msg/s  p50 %7.3f  p99 %7.3f ms  loss %6.2f%%  "
            "dup %d  cpu %s us/msg  dropped %s" % (
                net["kind"], net["topo"], load, r["egress"], lat.get("p50") or 0,
                lat.get("p99") or 0, 100 * r["loss_rate"], r["duplicates"],
                "%.2f" % r["broker_cpu_us_per_msg"]
                if r.get("broker_cpu_us_per_msg") is not None else "n/a",
                r["counters"]["publish/messages/dropped"]))
        return r

    def measure_network(self, kind, topo, rnd, results, notes):
        net = self.start_network(kind, topo, "r%d-%s" % (rnd, topo))
        log("%s %s up (tree %.1f s, probes through %.1f s)" % (kind, topo, net["tree_s"],
                                                              net["ready_s"]))
        try:
            time.sleep(1.2)
            net["counters"], _ = self.counters(net)
            for load in LOADS[topo]:
                r = self.run_load(net, load, rnd)
                name = topo + ("-all" if load.endswith("-all") else "")
                results.setdefault(str(rnd), {}).setdefault(kind, {}).setdefault(
                    name, {})[load.replace("-all", "")] = r
                if r["settle_s"] is None:
                    notes.append("round %d, %s %s: brokers still busy 20 s after %s" % (
                        rnd, kind, topo, load))
            results.setdefault("sys", {})["r%d-%s-%s" % (rnd, kind, topo)] = \
                self.counters(net)[1]
        finally:
            self.stop_network(net)

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        env = environment(a)
        # (iv) idle copies of the multi-broker networks, behind counting relays
        relays = Relays()
        relays.start()
        idle = []
        for topo in ("line3", "tree5"):
            for kind in KINDS:
                idle.append(self.start_network(kind, topo, "idle-%s" % topo, relays))
        time.sleep(1.0)
        idle_start, idle_base = time.monotonic(), relays.snapshot()
        log("idle networks formed; counting their link bytes during the measurements")
        try:
            for rnd in range(1, a.rounds + 1):
                log("round %d" % rnd)
                for ti, topo in enumerate(("single", "line3", "tree5")):
                    order = KINDS if (rnd + ti) % 2 else KINDS[::-1]
                    for kind in order:
                        self.measure_network(kind, topo, rnd, results, notes)
            idle_s = time.monotonic() - idle_start
            if not a.quick and idle_s < 20:
                time.sleep(20 - idle_s)
                idle_s = time.monotonic() - idle_start
            counts = relays.snapshot()
            results["idle"] = {}
            for topo in ("line3", "tree5"):
                links = len(TOPOLOGIES[topo]["parent"])
                for kind in KINDS:
                    g = "%s-%s" % (kind, topo)
                    b = counts[g] - idle_base[g]
                    results["idle"][g] = {"bytes": b, "seconds": idle_s, "links": links,
                                          "per_link_per_s": b / links / idle_s}
                    log("idle %s: %d bytes over %d links in %.0f s = %.2f B/link/s"
                        % (g, b, links, idle_s, b / links / idle_s))
            for net in idle:
                results.setdefault("sys", {})["idle-%s-%s" % (net["kind"], net["topo"])] = \
                    self.counters(net)[1]
        finally:
            for net in idle:
                self.stop_network(net)
            relays.stop()
        self.finish(results, env, notes, t0, lambda path: write_section(path, results, a.quick))

    def finish(self, results, env, notes, t0, write):
        """Complete env (duration, load, notes) as results["env"], write results.json under
        --out and, with --markdown, the section (write(path))."""
        a = self.args
        env["duration_s"] = time.monotonic() - t0
        env["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
        env["notes"] = notes
        results["env"] = env
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        for note in notes:
            log("note: " + note)
        if a.markdown:
            write(a.markdown)
            log("wrote the section of %s" % a.markdown)
        log("took %.0f s" % env["duration_s"])


def first_line(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def environment(a):
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "nproc": os.cpu_count(), "kernel": platform.release(),
            "arbor": first_line([a.arbor, "-h"]), "mosquitto": first_line([a.mosquitto, "-h"]),
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "loadavg_before": open("/proc/loadavg").read().split()[:3],
            "rounds": a.rounds, "quick": a.quick, "loads": load_args(a.quick),
            "arbor_loops": getattr(a, "arbor_loops", 0)}


# ---------------------------------------------------------------------------------------------
# The markdown section

def fmt(v, digits=0):
    if v is None:
        return "n/a"
    if digits == 0:
        return "{:,.0f}".format(v)
    return "{:,.{d}f}".format(v, d=digits)


def get(results, rnd, kind, topo, load, *path):
    r = results.get(str(rnd), {}).get(kind, {}).get(topo, {}).get(load)
    for p in path:
        if r is None:
            return None
        r = r.get(p)
    return r


def per_hop_us(results, rnd, kind, topo, qos, pct):
    hops = TOPOLOGIES[topo]["hops"]
    path = get(results, rnd, kind, topo, "lat-q%d" % qos, "latency_ms", pct)
    base = get(results, rnd, kind, "single", "lat-q%d" % qos, "latency_ms", pct)
    if path is None or base is None:
        return None
    return (path - base) * 1000.0 / hops


def scaled(x, factor):
    return factor * x if x is not None else None


# The full-speed rows of the summary: arbor_bench result field, figure, digits, scale.
FULL_SPEED_FIGURES = (("egress", "delivered msg/s, full speed, QoS %d", 0, 1),
                      ("loss_rate", "lost at full speed, QoS %d (%%)", 2, 100),
                      ("broker_cpu_us_per_msg", "broker CPU per delivered msg, QoS %d (us)", 2, 1))
# field -> target text, target name, check of one arbor/mosquitto ratio
FULL_SPEED_TARGETS = {
    "egress": ("ratio >= 2", "throughput >= 2x", lambda x: x >= 2),
    "broker_cpu_us_per_msg": ("ratio <= 0.5", "CPU per message <= 0.5x", lambda x: x <= 0.5),
}


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def figures(results):
    """The summary table's rows: figure, network, digits, value(round, kind), target text and
    check (given every round's values of both kinds and their ratios)."""
    rows = []
    for qos in (0, 1):
        for pct in ("p50", "p99"):
            for topo in ("line3", "tree5"):
                target = pct == "p50"
                rows.append({
                    "figure": "added latency per hop, %s, QoS %d (us)" % (pct, qos),
                    "topo": topo, "digits": 1,
                    "value": (lambda r, k, topo=topo, qos=qos, pct=pct:
                              per_hop_us(results, r, k, topo, qos, pct)),
                    "target": "arbor <= 100 us" if target else "",
                    "group": ("per-hop p50 <= 100 us", qos) if target else None,
                    "check": (lambda vals: all(v is not None and v <= 100
                                               for v in vals["arbor"])) if target else None})
    for field, figure, digits, scale in FULL_SPEED_FIGURES:
        for qos in (0, 1):
            for topo in ("single", "line3", "tree5") + (("tree5-all",) if qos else ()):
                row = {"figure": figure % qos, "topo": topo, "digits": digits, "target": "",
                       "check": None, "no_ratio": field == "loss_rate",
                       "value": (lambda r, k, topo=topo, qos=qos, field=field, scale=scale:
                                 scaled(get(results, r, k, topo, "thr-q%d" % qos, field),
                                        scale))}
                if field in FULL_SPEED_TARGETS and topo != "single":
                    text, group, ok = FULL_SPEED_TARGETS[field]
                    row.update(target=text, group=(group, qos),
                               check=lambda vals, ok=ok: all(x is not None and ok(x)
                                                             for x in vals["ratio"]))
                if field == "egress":
                    row["lossy"] = (lambda r, k, topo=topo, qos=qos: (get(
                        results, r, k, topo, "thr-q%d" % qos, "loss_rate") or 0) > 0)
                rows.append(row)
    return rows


def write_section(path, results, quick):
    env = results["env"]
    rounds = [str(r) for r in range(1, env["rounds"] + 1)]
    out = [SECTION, "", generated_line("tree", env, quick), ""]
    out += ["| Figure | Network | arbor | mosquitto | arbor/mosquitto | Target | Met |",
            "|---|---|---:|---:|---:|---|---|"]
    groups = {}
    for row in figures(results):
        vals = {k: [row["value"](int(r), k) for r in rounds] for k in KINDS}
        vals["ratio"] = [ratio(vals["arbor"][i], vals["mosquitto"][i])
                         for i in range(len(rounds))]
        met = ""
        if row["check"]:
            met = "yes" if row["check"](vals) else "no"
            lossy = [k for k in KINDS if "lossy" in row and
                     any(row["lossy"](int(r), k) for r in rounds)]
            groups.setdefault(row["group"], []).append((met == "yes", vals, bool(lossy)))
            if lossy:
                met += " (%s lost messages)" % " and ".join(lossy)
        cells = [" / ".join(fmt(v, row["digits"]) for v in vals[k]) for k in KINDS]
        cells.append("" if row.get("no_ratio") else " / ".join(fmt(v, 2) for v in vals["ratio"]))
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            row["figure"], row["topo"], cells[0], cells[1], cells[2], row["target"], met))
    idle = results.get("idle", {})
    for topo in ("line3", "tree5"):
        a, m = idle.get("arbor-" + topo), idle.get("mosquitto-" + topo)
        if not (a and m):
            continue
        out.append("| idle signalling, bytes per link per second | %s | %s | %s | %s | | |" % (
            topo, fmt(a["per_link_per_s"], 1), fmt(m["per_link_per_s"], 2),
            fmt(ratio(a["per_link_per_s"], m["per_link_per_s"]), 1)))
    out += ["", "Networks: " + "; ".join("`%s` %s" % (k, v) for k, v in TOPOLOGY_TEXT.items())
            + ".", ""]
    out += targets(groups, idle) + findings(results, rounds)

    out += ["### Run details", "",
            "Every arbor_bench run of the section (latency in ms over the trimmed window; loss "
            "and duplicates over the whole run; dropped: the brokers' own count of messages "
            "they dropped during the load, `$SYS/broker/publish/messages/dropped` summed over "
            "the network; CPU is the sum over every broker of the network).", "",
            "| Round | Broker | Network | Load | ingress msg/s | delivered msg/s | p50 / p99 ms "
            "| loss % | dup | dropped | broker CPU % | us/msg |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for kind in KINDS:
            for topo in ("single", "line3", "tree5", "tree5-all"):
                for load, s in sorted(results.get(r, {}).get(kind, {}).get(topo, {}).items()):
                    lat = s.get("latency_ms") or {}
                    dropped = (s.get("counters") or {}).get("publish/messages/dropped")
                    out.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %d | %s | %s | %s |"
                               % (r, kind, topo, load, fmt(s["ingress"]), fmt(s["egress"]),
                                  fmt(lat.get("p50"), 3), fmt(lat.get("p99"), 3),
                                  fmt(100 * s["loss_rate"], 2), s["duplicates"], fmt(dropped),
                                  fmt(s.get("broker_cpu_pct")),
                                  fmt(s.get("broker_cpu_us_per_msg"), 2)))
    out += ["", "Idle signalling (a separate idle copy of each network, behind counting relays, "
            "for the whole run):", "",
            "| Network | Broker | links | seconds | bytes | bytes/link/s |",
            "|---|---|---:|---:|---:|---:|"]
    for g, v in sorted(idle.items()):
        kind, topo = g.split("-", 1)
        out.append("| %s | %s | %d | %.0f | %s | %s |" % (
            topo, kind, v["links"], v["seconds"], fmt(v["bytes"]), fmt(v["per_link_per_s"], 2)))
    out += ["", "Took %.0f s (both rounds, the idle networks alongside)." % env["duration_s"], ""]
    out += METHOD_TEXT(env)
    replace_section(path, SECTION, "\n".join(out) + "\n")


def generated_line(name, env, quick):
    """The first line of a section written by `make bench-NAME` (scripts/run-bench-NAME.sh,
    test/bench/NAME_bench.py): when, where, how busy, how many rounds."""
    rounds = env["rounds"]
    return ("Generated by `make bench-%s` (scripts/run-bench-%s.sh, test/bench/%s_bench.py) on "
            "%s: %s, %d CPUs, shared with other work while it ran (load average %s before, %s "
            "after), so the figures are noisy; %s.%s" % (
                name, name, name, env["date"], env["cpu"], env["nproc"],
                " ".join(env["loadavg_before"]), " ".join(env["loadavg_after"]),
                "the run made %d rounds, each cell shows them as `%s`" % (
                    rounds, " / ".join("round %d" % r for r in range(1, rounds + 1)))
                if rounds > 1 else "one round",
                " **Quick run (BENCH_%s_QUICK=1): figures not meaningful.**" % name.upper()
                if quick else "") + (" arbor ran with `loops %d`." % env["arbor_loops"]
                                     if env.get("arbor_loops") else ""))


def section_head(results, name, title):
    """What a section written by `make bench-NAME` starts with: (env, the rounds as "1", "2",
    ..., its first lines: the heading and the generated_line)."""
    env = results["env"]
    rounds = [str(r) for r in range(1, env["rounds"] + 1)]
    return env, rounds, [title, "", generated_line(name, env, env["quick"]), ""]


def replace_section(path, title, text):
    """Write `text` (starting with the heading `title`) into the markdown file at path: in place
    of the section with that heading (up to the next "## "), which moves to the end, or
    appended; the rest of the file is kept."""
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find(title + "\n")
    if i >= 0:
        j = old.find("\n## ", i + len(title))
        old = old[:i].rstrip("\n") + ("\n" + old[j:] if j >= 0 else "")
    with open(path, "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + text)


def span(values, digits):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return fmt(lo, digits) if fmt(lo, digits) == fmt(hi, digits) else "%s to %s" % (
        fmt(lo, digits), fmt(hi, digits))


def targets(groups, idle):
    """One line per target and QoS: met in every round and network or not, with the range."""
    out = ["Targets, over every round and multi-broker network of this run:", ""]
    for (name, qos), rows in groups.items():
        met = all(m for m, _, _ in rows)
        if name.startswith("per-hop"):
            detail = "arbor %s us per hop, Mosquitto %s us" % (
                span([v for _, vals, _ in rows for v in vals["arbor"]], 0),
                span([v for _, vals, _ in rows for v in vals["mosquitto"]], 0))
        else:
            detail = "arbor/mosquitto %s" % span(
                [v for _, vals, _ in rows for v in vals["ratio"]], 2)
        if any(lossy for _, _, lossy in rows):
            detail += "; some of these runs lost messages, see the loss rows and below"
        out.append("- %s, QoS %d: **%s** (%s)" % (name, qos, "met" if met else "not met",
                                                  detail))
    per_link = {k: [v["per_link_per_s"] for g, v in idle.items() if g.startswith(k + "-")]
                for k in KINDS}
    if all(per_link.values()):
        out.append("- idle signalling (no target): arbor %s bytes per link per second, "
                   "Mosquitto %s" % (span(per_link["arbor"], 1), span(per_link["mosquitto"], 2)))
    return out + [""]


def findings(results, rounds):
    """Loss at QoS 1 and what the brokers say about it, from the figures of this run."""
    out = ["QoS 1 messages lost at full speed on the `line3` and `tree5` paths, summed over the "
           "rounds (acknowledged to the publisher, never delivered; counted by arbor_bench "
           "after a drain that ends 0.5 s after the last arrival), next to what the brokers "
           "counted as dropped in those runs (`$SYS/broker/publish/messages/dropped`, summed "
           "over the network; arbor counts the drops on peer links in "
           "`$SYS/broker/stp/messages/dropped` too):", "",
           "| Broker | runs | messages sent | lost | dropped (publish) | dropped (stp) |",
           "|---|---:|---:|---:|---:|---:|"]
    notes = []
    for kind in KINDS:
        runs = expected = lost = dropped = stp = 0
        for r in rounds:
            for topo in ("line3", "tree5"):
                s = results.get(r, {}).get(kind, {}).get(topo, {}).get("thr-q1")
                if not s:
                    continue
                c = s.get("counters") or {}
                runs += 1
                expected += s["expected"]
                lost += s["expected"] - s["received"]
                dropped += c.get("publish/messages/dropped") or 0
                stp += c.get("stp/messages/dropped") or 0
        out.append("| %s | %d | %s | %s | %s | %s |" % (
            kind, runs, fmt(expected), fmt(lost), fmt(dropped),
            fmt(stp) if kind == "arbor" else "n/a"))
        notes.append("%s: %s" % (kind, "every lost message was counted as dropped by a broker"
                                 if lost == dropped else
                                 "%s lost, %s counted as dropped" % (fmt(lost), fmt(dropped))))
    return out + ["", "; ".join(notes) + ".", ""]


def METHOD_TEXT(env):
    loads = env["loads"]
    lines = ["### How it was run", "", "```sh", "make bench-tree", "```", "",
             "installs Mosquitto if it is missing, builds into `build/` (`make bench-tree "
             "BUILD=dir` for another tree; the run above is `BUILD=build-bench "
             "scripts/run-bench-tree.sh`, the same without the install step) and runs "
             "everything on loopback. For each round and network the script "
             "starts the brokers fresh, waits until the arbor tree is formed (every link `up`, "
             "forwarding, with the intended role, every broker naming the intended root at its "
             "depth in `$SYS/broker/stp`) and until a probe published on each broker reaches a "
             "subscriber on every broker (both kinds), then runs these loads one after the other "
             "(waiting for the brokers to go quiet between them):", "", "```"]
    for name, args in loads.items():
        placement = "first-to-all" if name.endswith("-all") else "ends"
        lines.append("%-10s arbor_bench %s --placement %s" % (name, " ".join(args), placement))
    lines += ["```", "",
              "with `-b` the publishers' broker first and the subscribers' last (`-all`: the "
              "publishers' broker, then the other four) and `-P` the pid of every broker of the "
              "network. Configuration of every broker (the `make bench` one, notices logged, "
              "$SYS every second):",
              "", "```"] + ["listener PORT 127.0.0.1"] + COMMON + ["```", "",
              "arbor brokers add `peer_identity 127.0.0.1:PORT`, `stp_capability 1000` on the "
              "root (100 elsewhere), `peer_secret ...` and, on each child, `peer 127.0.0.1:"
              "PARENT_PORT`; hello interval and max age are the defaults (2 s, 7 s). Mosquitto "
              "brokers add on each child:", "", "```",
              "connection bridge-NAME-to-PARENT", "address 127.0.0.1:PARENT_PORT",
              "topic # both 2", "try_private true", "```", "",
              "### How to read it", "",
              "- **Added latency per hop** = (p50 over the path - p50 of one broker) / hops, "
              "from the 100 msg/s runs (one publisher, one subscriber, both latencies from the "
              "same round); likewise p99. p99 comes from about 600 samples, so one slow "
              "wake-up moves it: a negative p99 per hop means the one-broker run had the worse "
              "tail. On a Mosquitto bridge a QoS 0 message is one packet per hop and a QoS 1 "
              "message two (PUBLISH, PUBACK); arbor forwards every message at QoS 2 whatever "
              "its QoS, four packets per hop (PUBLISH, PUBREC, PUBREL, PUBCOMP), each waking a "
              "broker on a machine whose 2 CPUs also run the other brokers and the load "
              "generator.",
              "- **Delivered msg/s** is arbor_bench's egress at full speed: four publishers "
              "(one topic each) on the publishers' broker, as fast as TCP (QoS 0) or a window "
              "of 10 unacknowledged messages per publisher (QoS 1) allows, subscribers at the "
              "far end (`tree5-all`: five subscribers per topic, one on each broker, and the "
              "figure counts deliveries). The publisher's window is acknowledged by the first "
              "broker, not by the subscriber, so neither network slows the publishers down to "
              "what the far end receives: what the first broker accepts beyond that is queued "
              "on the way and, once a queue is full, dropped. Read the delivered rate together "
              "with the loss rows and the table above it.",
              "- **QoS 0 at full speed** is open loop: arbor's first broker accepts millions of "
              "messages per second (the `single` row), far more than a peer link carries, and "
              "drops the rest when the link's queue is full; the CPU it spends accepting them "
              "counts in CPU per delivered message, and it competes for the 2 CPUs with the "
              "brokers that forward. Mosquitto accepts less, so less of it is dropped. These "
              "rows measure behaviour under overload, not the capacity of the tree.",
              "- **Where messages are lost**: arbor queues the messages for a peer link behind "
              "that link's window of 1000 QoS 2 messages in flight, and drops a message for "
              "the link when its queue is full (`PEER_QUEUE_MAX` 100000 in src/peer/peer_net.h; the "
              "queue grows by doubling from 64, so it stops at 131072), whatever the message's "
              "QoS, after the publisher has had its PUBACK. Mosquitto drops at its queue "
              "limits too (`max_queued_messages 100000`). Both count these drops in "
              "`$SYS/broker/publish/messages/dropped` (see the table under the targets).",
              "- **Broker CPU per delivered msg** = CPU (user + system) of all brokers of the "
              "network over the measured window / messages delivered in it, from the full-speed "
              "runs: the cost of carrying one message across the whole network.",
              "- **Idle signalling**: bytes of MQTT (TCP payload, both directions, both "
              "connections of an arbor link, the bridge connection of a Mosquitto edge) per "
              "link per second on copies of the networks that nothing publishes to, counted by "
              "a relay in front of every broker (`peer_identity` and bridge `address` point at "
              "the relay). arbor sends a BPDU in a PINGREQ on each of a link's two connections "
              "every hello interval (2 s) and gets a PINGRESP back; a Mosquitto bridge only "
              "pings after 60 s of silence (its default keepalive). The idle networks run for "
              "the whole measurement rather than 20 s, because a 20 s window would usually "
              "contain no Mosquitto ping at all.",
              "- Ratios are arbor/mosquitto, per round. **Met** says whether every round met "
              "the target: per-hop p50 <= 100 us (arbor), throughput >= 2x and CPU per message "
              "<= 0.5x the bridged Mosquitto tree; `(... lost messages)` flags rows whose runs "
              "lost messages.",
              "- The machine has 2 CPUs and was shared with other work: on a full-speed run "
              "the brokers of a 5-broker network and the load generator compete for them, so "
              "the figures measure total CPU efficiency more than one broker's speed, and "
              "latencies depend on how quickly an idle broker is woken. Compare the two "
              "brokers within a round; between rounds the figures move by tens of percent.",
              ""]
    return lines


def bench_parser(description):
    """The options every comparison script of this folder takes (tree_bench, bridge_bench)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--arbor")
    ap.add_argument("--mosquitto")
    ap.add_argument("--bench", help="arbor_bench binary")
    ap.add_argument("--out", help="directory for configs, logs and raw JSON")
    ap.add_argument("--render", metavar="RESULTS_JSON",
                    help="measure nothing: write --markdown from an earlier run's results.json")
    ap.add_argument("--markdown", help="write the section into this file (docs/benchmarks.md)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    ap.add_argument("--pidfile", help="append the pid of every process started here")
    return ap


def add_arbor_loops(ap):
    """--arbor-loops N: the arbor brokers run with `loops N` (the section says so)."""
    ap.add_argument("--arbor-loops", type=int, default=0,
                    help="run the arbor brokers with `loops N` (default: the config's default)")


def measure(ap, args, runner_class):
    """Run runner_class(args).main(), stopping every process it started however it ends
    (SIGTERM and SIGINT end it too)."""
    if not (args.arbor and args.mosquitto and args.bench and args.out):
        ap.error("--arbor, --mosquitto, --bench and --out are needed to measure")
    runner = runner_class(args)

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        runner.main()
    finally:
        runner.stop_all()
    return 0


def render_or_measure(ap, args, runner_class, write):
    """With --render, write(path, results) of an earlier run's results.json into --markdown;
    else measure (see measure)."""
    if args.render:
        with open(args.render) as f:
            write(args.markdown, json.load(f))
        return 0
    return measure(ap, args, runner_class)


def main():
    ap = bench_parser(__doc__.split("\n")[0])
    add_arbor_loops(ap)
    args = ap.parse_args()
    return render_or_measure(ap, args, Runner, lambda path, results: write_section(
        path, results, results["env"]["quick"]))


if __name__ == "__main__":
    sys.exit(main())
