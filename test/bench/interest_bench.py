#!/usr/bin/env python3
"""interest_bench.py: `make bench-interest` (scripts/run-bench-interest.sh runs it after building).

Interest routing (issue 20) measured side by side in one run, on loopback, three networks of
three brokers A, B, C (arbor_bench's -b order: A is broker 0):

  arbor-all       arbor, fully meshed (peer lines A-B, C-B, A-C), `peer_routing all`: the
                  MQTT-ST paper's full replication along the spanning tree
  arbor-interest  the same with `peer_routing interest` (the default): a message crosses a link
                  only when the far side's subscriptions want it
  mosquitto       Debian's mosquitto, a static tree A-B-C (bridges on A and C to B, try_private)
                  with per-topic `topic` lines written for this load's placement: a line, in
                  the direction needed, only for a topic that has a publisher on one side of
                  the bridge and a subscriber on the other (the best a static configuration can
                  do, and only when every client's broker is known in advance)

B is the intended root (stp_capability 1000, 100 elsewhere). Loads (arbor_bench):

  paper-spread  the MQTT-ST paper's local scenario with clients spread evenly: 10 publishers
                and 10 subscribers of one topic round-robin over A, B, C, QoS 2, one message
                in flight per publisher, full speed, 100 B: every broker wants every message
                (0 % locality for interest routing)
  paper-local   the same with every client on A (the paper's 100 % locality)
  detti         Detti et al.'s random attach: many topics, one publisher and one subscriber
                each, every client on a broker drawn at random (arbor_bench --placement
                random, a fixed draw this script works out too), QoS 0, 200 B, a few msg/s each

For each run: bytes on the inter-broker TCP connections (payload both ways, from the kernel's
tcp_info via `ss`, no relay in the path), PUBLISH packets between brokers (arbor: the sum of
$SYS/broker/stp/messages/forwarded; Mosquitto: the sum of publish/messages/sent less the
deliveries to clients), the fewest link crossings the load needs on that run's tree (from the
per-topic counts arbor_bench reports), broker CPU per delivered message, end-to-end latency,
loss. Then, on arbor-interest only, the cost of interest itself: 10,000 distinct subscriptions
on one broker (bytes and time until every broker knows them), one change to them, and a churn
of subscribe/unsubscribe pairs (announcement bytes per second).

Every process it starts is stopped by pid when it ends (and listed in --pidfile). Writes raw
results under --out and the section "Interest routing" of --markdown.
"""

import json
import os
import socket
import struct
import subprocess
import sys
import time

import tree_bench
from bridge_bench import cells
from tree_bench import HOST, MiniClient, fmt, log, ratio, retained

SECTION = "## Interest routing: full replication, by interest, static bridges"
SECRET = "bench-interest-secret-0123456789"
NODES = ("A", "B", "C")
ROOT = "B"
MESH = (("A", "B"), ("C", "B"), ("A", "C"))  # arbor: the first dials the second
BRIDGES = (("A", "B"), ("C", "B"))  # Mosquitto: a bridge on the first to the second
KINDS = ("arbor-all", "arbor-interest", "mosquitto")
PREFIX = "interest-bench/"
# Every Mosquitto bridge carries tree_bench's probe topics (so that the script can tell when
# the bridges work); it also keeps a bridge that the load needs nothing from valid (mosquitto
# refuses a bridge without topics).
PROBE_LINE = "topic tree-bench-probe/# both 0"
SUBS_10K = 10000

COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "log_type notice", "connection_messages false", "max_inflight_messages 20",
          "max_queued_messages 100000", "sys_interval 1"]
COUNTERS = ("stp/messages/forwarded", "stp/messages/skipped", "stp/messages/skip_notices",
            "stp/interest/announcements", "stp/interest/bytes", "stp/topology_changes",
            "publish/messages/sent", "publish/messages/dropped", "stp/messages/dropped",
            "stp/messages/lost", "stp/messages/duplicates")


def loads(quick):
    """name -> (arbor_bench arguments, placement, QoS of the Mosquitto topic lines)."""
    d = "3" if quick else "8"
    paper = ["--topics", "1", "--publishers", "10", "--subscribers", "10", "--qos", "2",
             "--inflight", "1", "-i", "0", "--payload", "100", "-d", d, "--trim", "1",
             "--drain", "10", "--topic-prefix", PREFIX]
    detti = ["--topics", "100" if quick else "1000", "--publishers", "1", "--subscribers", "1",
             "--qos", "0", "--rate", "2", "--payload", "200", "-d", d, "--trim", "1",
             "--drain", "3", "--topic-prefix", PREFIX]
    return {"paper-spread": (paper, "spread", 2),
            "paper-local": (paper, "first", 2),
            "detti": (detti, "random", 0)}


def arg(argv, name):
    return argv[argv.index(name) + 1]


# ---------------------------------------------------------------------------------------------
# Where arbor_bench puts each client (test/bench/scenario.c scenario_broker_for; the random draw
# is pinned by test_scenario.c's test_placement)

MASK = (1 << 64) - 1


def placement_mix(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def broker_for(placement, kind, n, k):
    """kind 0 publisher, 1 subscriber; n counts that kind over all topics in topic order."""
    if placement == "first":
        return 0
    if placement == "random":
        return placement_mix((kind << 32) | n) % k
    return n % k  # spread


def topic_places(argv, placement):
    """[(topic name, [each publisher's broker name], {subscribers' broker names})]."""
    topics, pubs, subs = (int(arg(argv, o)) for o in ("--topics", "--publishers",
                                                        "--subscribers"))
    out, np, ns = [], 0, 0
    for t in range(topics):
        p = [NODES[broker_for(placement, 0, np + i, len(NODES))] for i in range(pubs)]
        s = {NODES[broker_for(placement, 1, ns + i, len(NODES))] for i in range(subs)}
        np, ns = np + pubs, ns + subs
        out.append((PREFIX + str(t + 1), p, s))
    return out


def side(tree_edges, cut, node):
    """The brokers reachable from node in the tree without crossing the edge `cut`."""
    seen, todo = {node}, [node]
    while todo:
        x = todo.pop()
        for a, b in tree_edges:
            if {a, b} == set(cut):
                continue
            for u, v in ((a, b), (b, a)):
                if u == x and v not in seen:
                    seen.add(v)
                    todo.append(v)
    return seen


def needed_crossings(tree_edges, pub, subs):
    """Links a message from pub must cross: those with a subscriber's broker beyond them."""
    n = 0
    for e in tree_edges:
        near = side(tree_edges, e, pub)
        if any(s not in near for s in subs):
            n += 1
    return n


def bridge_lines(places, qos):
    """Mosquitto's per-topic lines for each bridge (child -> parent) of the static tree."""
    lines = {}
    for child, parent in BRIDGES:
        near = side(BRIDGES, (child, parent), child)
        out = []
        for name, pubs, subs in places:
            go_out = bool(set(pubs) & near) and bool(subs - near)
            go_in = bool(set(pubs) - near) and bool(subs & near)
            if go_out or go_in:
                out.append("topic %s %s %d" % (name, "both" if go_out and go_in else
                                               "out" if go_out else "in", qos))
        lines[child] = out
    return lines


# ---------------------------------------------------------------------------------------------
# Bytes on the inter-broker connections, from the kernel (ss -tie: inode and tcp_info)

def socket_inodes(pid):
    found = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:
        pass
    return found


def link_sockets(net):
    """{inode: (dialer, listener, payload bytes both ways)} of every TCP connection a broker of
    the network holds to another broker's listener."""
    brokers = net["brokers"]
    owner = {}
    for n, b in brokers.items():
        for ino in socket_inodes(b.proc.pid):
            owner[ino] = n
    by_port = {b.port: n for n, b in brokers.items()}
    p = subprocess.run(["ss", "-tinHe", "state", "established"], capture_output=True,
                       text=True, timeout=20)
    out, current = {}, None
    for line in p.stdout.splitlines():
        if not line.startswith((" ", "\t")):
            fields = line.split()
            current = None
            try:
                peer_port = int(fields[3].rsplit(":", 1)[1])
            except (IndexError, ValueError):
                continue
            ino = next((f[4:] for f in fields if f.startswith("ino:")), None)
            if ino in owner and peer_port in by_port and by_port[peer_port] != owner[ino]:
                current = ino
                out[ino] = [owner[ino], by_port[peer_port], 0]
            continue
        if current is None:
            continue
        for f in line.split():
            if f.startswith(("bytes_acked:", "bytes_received:")):
                out[current][2] += int(f.split(":", 1)[1])
        current = None
    return {k: tuple(v) for k, v in out.items()}


def link_bytes(before, after):
    """{"X-Y" (sorted): bytes} moved between the two snapshots (a connection new since before
    counts from its start) and how many connections were new."""
    per, fresh = {}, 0
    for ino, (a, b, total) in after.items():
        key = "-".join(sorted((a, b)))
        if ino not in before:
            fresh += 1
        per[key] = per.get(key, 0) + total - (before[ino][2] if ino in before else 0)
    return per, fresh


# ---------------------------------------------------------------------------------------------
# Networks

class Runner(tree_bench.Runner):
    def __init__(self, args):
        super().__init__(args)
        self.loads = loads(args.quick)

    def start_network(self, kind, tag, topic_lines=None):
        binary = self.args.mosquitto if kind == "mosquitto" else self.args.arbor
        brokers = {n: tree_bench.Broker(kind, n, binary, self.args.out,
                                        "%s-%s-%s" % (tag, kind, n)) for n in NODES}
        order = [ROOT] + [n for n in NODES if n != ROOT]
        for n in order:
            b = brokers[n]
            lines = ["listener %d %s" % (b.port, HOST)] + COMMON
            if kind != "mosquitto":
                if self.args.arbor_loops:
                    lines.append("loops %d" % self.args.arbor_loops)
                if self.args.quick:  # the tree in about a second (a smoke test)
                    lines += ["stp_hello_interval 0.2", "stp_max_age 1"]
                lines += ["peer_identity %s:%d" % (HOST, b.port),
                          "stp_capability %d" % (1000 if n == ROOT else 100),
                          "peer_secret " + SECRET,
                          "peer_routing %s" % ("all" if kind == "arbor-all" else "interest")]
                lines += ["peer %s:%d" % (HOST, brokers[y].port) for x, y in MESH if x == n]
            else:
                for child, parent in BRIDGES:
                    if child == n:
                        lines += ["", "connection bridge-%s-%s-to-%s" % (tag, n, parent),
                                  "address %s:%d" % (HOST, brokers[parent].port),
                                  "try_private true", PROBE_LINE] + topic_lines[n]
            self.launch(b, lines)
        net = {"kind": kind, "brokers": brokers, "started": time.monotonic()}
        deadline = time.monotonic() + 60
        while kind != "mosquitto" and not self.tree(net):
            if time.monotonic() > deadline:
                raise RuntimeError("%s: no tree rooted at B in 60 s" % kind)
            time.sleep(0.3)
        if kind == "mosquitto":
            net["tree"] = [list(e) for e in BRIDGES]
            while not self.probe(net):  # a message from each broker reaches every broker
                if time.monotonic() > deadline:
                    raise RuntimeError("mosquitto: probes not through the bridges in 60 s")
                time.sleep(0.3)
        net["ready_s"] = time.monotonic() - net["started"]
        return net

    def stp(self, net):
        return {n: {k[len("$SYS/broker/stp/"):]: v
                    for k, v in retained(b.port, "$SYS/broker/stp/#").items()}
                for n, b in net["brokers"].items()}

    def tree(self, net):
        """The forwarding links as [[X, Y]] once every broker names B its root and two links
        forward (a tree of 3), else None; kept in net["tree"]."""
        try:
            stp = self.stp(net)
        except (OSError, RuntimeError):
            return None
        ident = {"%s:%d" % (HOST, b.port): n for n, b in net["brokers"].items()}
        root = "%s:%d" % (HOST, net["brokers"][ROOT].port)
        seen = {}
        for n, s in stp.items():
            if s.get("root/id") != root:
                return None
            for key, v in s.items():
                if key.startswith("peers/") and key.endswith("/forwarding") and v == "1":
                    other = ident.get(key[len("peers/"):-len("/forwarding")])
                    if other and s.get(key[:-len("forwarding")] + "state") == "up":
                        e = tuple(sorted((n, other)))
                        seen[e] = seen.get(e, 0) + 1
        agreed = [e for e, ends in seen.items() if ends == 2]  # both ends forward on it
        if len(agreed) != 2 or len(seen) != 2:
            return None
        net["tree"] = [list(e) for e in sorted(agreed)]
        return net["tree"]

    def counters(self, net):
        """COUNTERS summed over the brokers, and how many $SYS messages the reads received.
        A broker that cannot be read is read again (a sum without it would be wrong)."""
        for attempt in range(3):
            per = tree_bench.read_sys(net)
            if all(per.values()):
                break
        else:
            raise RuntimeError("$SYS of %s could not be read" % ", ".join(
                n for n, v in per.items() if not v))
        total = {}
        for c in COUNTERS:
            vals = [per[n].get("$SYS/broker/" + c) for n in per]
            vals = [int(v) for v in vals if v is not None and v.isdigit()]
            total[c] = sum(vals) if vals else None
        total["read"] = sum(len(v) for v in per.values())
        return total

    def quiet_counters(self, net, limit=30.0):
        """Counters once they stop moving (two reads 1.2 s apart agree), or after limit.
        publish/messages/sent is left out of the comparison: every read moves it (the $SYS
        messages it receives); c["read_before"] is how many the reads before the last got."""
        deadline, last, read_before = time.monotonic() + limit, None, 0
        while True:
            time.sleep(1.2)
            c = self.counters(net)
            same = last is not None and all(c[k] == last[k] for k in COUNTERS
                                            if k != "publish/messages/sent")
            if same or time.monotonic() > deadline:
                c["read_before"] = read_before
                return c
            read_before += c["read"]
            last = c

    # -- one load on one network
    def run_load(self, kind, load, rnd):
        argv, placement, qos = self.loads[load]
        places = topic_places(argv, placement)
        net = self.start_network(kind, "r%d-%s" % (rnd, load),
                                 bridge_lines(places, qos) if kind == "mosquitto" else None)
        try:
            self.settle(net)
            before_c = self.counters(net)
            before_s = link_sockets(net)
            tree_before = list(net["tree"])
            key = "r%d__%s__%s" % (rnd, kind, load)
            json_path = os.path.join(self.args.out, key + ".json")
            cmd = [self.args.bench] + argv + ["--placement", placement, "--label", key,
                                              "--json", json_path, "--no-per-second"]
            for n in NODES:
                cmd += ["-b", "%s:%d" % (HOST, net["brokers"][n].port)]
            for b in net["brokers"].values():
                cmd += ["-P", str(b.proc.pid)]
            with open(os.path.join(self.args.out, key + ".txt"), "w") as f:
                p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=300)
            if p.returncode != 0:
                raise RuntimeError("arbor_bench failed for %s (see %s.txt)" % (key, key))
            self.settle(net)
            after_c = self.quiet_counters(net)
            after_s = link_sockets(net)  # what the brokers still sent after the run too
            if kind != "mosquitto":
                self.tree(net)
            with open(json_path) as f:
                doc = json.load(f)
            r = doc["result"]
            topics = doc["runs"][-1]["topics"] if doc.get("runs") else []
            sent = {t["name"]: t["sent"] for t in topics}
            delivered = sum(t["received"] + t["duplicates"] for t in topics)
            per_link, fresh = link_bytes(before_s, after_s)
            d = {c: (after_c[c] - before_c[c] if after_c[c] is not None and
                     before_c[c] is not None else None) for c in COUNTERS}
            if kind == "mosquitto":
                # less what the script's own $SYS reads received in between
                inter = (max(0, d["publish/messages/sent"] - before_c["read"] -
                                 after_c["read_before"] - delivered)
                         if d["publish/messages/sent"] is not None else None)
            else:
                inter = d["stp/messages/forwarded"]
            tree = [tuple(e) for e in net["tree"]]
            # a topic's messages counted as coming evenly from its publishers
            need = sum(sent.get(name, 0) * sum(needed_crossings(tree, p, subs) for p in pubs)
                       / len(pubs) for name, pubs, subs in places)
            published = sum(sent.values())
            r.update({
                "tree": net["tree"], "tree_before": tree_before, "link_bytes": per_link,
                "link_bytes_total": sum(per_link.values()), "new_connections": fresh,
                "inter_publish": inter, "needed_crossings": need, "published": published,
                "delivered": delivered, "full_crossings": published * len(tree),
                "counters": d, "mosquitto_topic_lines": (
                    sum(len(v) for v in bridge_lines(places, qos).values())
                    if kind == "mosquitto" else None)})
            lat = r.get("latency_ms") or {}
            log("  %-14s %-12s bytes %10s  PUBLISH %8s (need %s)  cpu %s us/msg  mean %.2f p99 "
                "%.2f ms  loss %.3f%%  tree %s" % (
                    kind, load, fmt(r["link_bytes_total"]), fmt(inter), fmt(need),
                    fmt(r.get("broker_cpu_us_per_msg"), 2), lat.get("mean") or 0,
                    lat.get("p99") or 0, 100 * (r.get("loss_rate") or 0),
                    " ".join("-".join(e) for e in net["tree"])))
            return r
        finally:
            self.stop_network(net)

    # -- the cost of interest itself (arbor-interest only)
    def interest_cost(self):
        net = self.start_network("arbor-interest", "cost")
        out = {"tree": net["tree"]}
        sub = None
        try:
            tree = [tuple(e) for e in net["tree"]]
            self.settle(net)
            c0, s0 = self.counters(net), link_sockets(net)
            sub = RawSubscriber(net["brokers"]["A"].port, "ib-10k")
            t0 = time.monotonic()
            names = ["%ssub/%05d/value" % (PREFIX, i) for i in range(SUBS_10K)]
            for i in range(0, SUBS_10K, 500):
                sub.subscribe(names[i:i + 500])
            sub.wait_acks(SUBS_10K // 500, 60)
            t_acked = time.monotonic() - t0
            if not self.wait_wanted(net, tree, SUBS_10K, 120):
                raise RuntimeError("10,000 subscriptions not announced across the tree in 120 s")
            out["converge_s"] = time.monotonic() - t0
            out["subscribe_acked_s"] = t_acked
            c1, s1 = self.quiet_counters(net), link_sockets(net)
            out["first"] = {"interest_bytes": c1["stp/interest/bytes"] -
                            c0["stp/interest/bytes"],
                            "announcements": c1["stp/interest/announcements"] -
                            c0["stp/interest/announcements"],
                            "link_bytes": sum(link_bytes(s0, s1)[0].values())}
            # one change: an unsubscribe and a new subscription (the count stays 10,000)
            sub.unsubscribe([names[0]])
            sub.subscribe(["%ssub/new/value" % PREFIX])
            sub.wait_acks(2, 30)
            c2 = self.quiet_counters(net)
            out["update"] = {"interest_bytes": c2["stp/interest/bytes"] -
                             c1["stp/interest/bytes"],
                             "announcements": c2["stp/interest/announcements"] -
                             c1["stp/interest/announcements"]}
            # churn: every 10 ms one of the 10,000 filters replaced by a new one (an
            # unsubscribe, then a subscribe: 200 changes/s) for 10 s; never more than 10,000,
            # which would widen the announcement (peer_interest_max_filters)
            churn_s = 3.0 if self.args.quick else 10.0
            c3, t3, n = self.counters(net), time.monotonic(), 0
            while time.monotonic() - t3 < churn_s and n + 1 < SUBS_10K:
                sub.unsubscribe([names[n + 1]])
                sub.subscribe(["%schurn/%05d/value" % (PREFIX, n)])
                n += 1
                time.sleep(max(0.0, t3 + n * 0.01 - time.monotonic()))
            spent = time.monotonic() - t3
            sub.drain()
            if not self.wait_wanted(net, tree, SUBS_10K, 60):
                raise RuntimeError("churn: the announcements did not settle at 10,000 filters "
                                   "in 60 s")
            c4 = self.quiet_counters(net)
            out["churn"] = {"seconds": spent, "changes": 2 * n,
                            "interest_bytes": c4["stp/interest/bytes"] -
                            c3["stp/interest/bytes"],
                            "announcements": c4["stp/interest/announcements"] -
                            c3["stp/interest/announcements"]}
            log("interest cost: 10,000 filters known everywhere after %.2f s, %s B of "
                "announcements (%s B on the links); one change %s B in %s announcements; churn "
                "%d changes in %.1f s: %s B, %s announcements" % (
                    out["converge_s"], fmt(out["first"]["interest_bytes"]),
                    fmt(out["first"]["link_bytes"]), fmt(out["update"]["interest_bytes"]),
                    out["update"]["announcements"], out["churn"]["changes"], spent,
                    fmt(out["churn"]["interest_bytes"]), out["churn"]["announcements"]))
            return out
        finally:
            if sub:
                sub.close()
            self.stop_network(net)

    def wait_wanted(self, net, tree, count, limit):
        """Every broker but A sees, on its tree link towards A, the neighbour wanting `count`
        filters ($SYS/broker/stp/peers/<id>/interest/wanted)."""
        ident = {n: "%s:%d" % (HOST, b.port) for n, b in net["brokers"].items()}
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                stp = self.stp(net)
            except (OSError, RuntimeError):
                stp = None
            # the tree of now (measured RTTs move under the load of announcing)
            tree = [tuple(e) for e in (self.tree(net) or tree)]
            if stp:
                ok = True
                for n in NODES:
                    if n == "A":
                        continue
                    toward = [m for e in tree for m in e if n in e and m != n and
                              "A" in side(tree, e, m)]
                    for m in toward:
                        if stp[n].get("peers/%s/interest/wanted" % ident[m]) != str(count):
                            ok = False
                if ok:
                    return True
            time.sleep(0.5)
        return False

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        env = tree_bench.environment(a)
        env["loads"] = {k: v[0] + ["--placement", v[1]] for k, v in self.loads.items()}
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for li, load in enumerate(self.loads):
                order = KINDS if (rnd + li) % 2 else KINDS[::-1]
                for kind in order:
                    r = self.run_load(kind, load, rnd)
                    results.setdefault(str(rnd), {}).setdefault(kind, {})[load] = r
                    if r["tree"] != r["tree_before"]:
                        notes.append("round %d, %s %s: the tree changed during the run" % (
                            rnd, kind, load))
        try:
            results["interest_cost"] = self.interest_cost()
        except Exception as e:  # the loads' figures are kept, whatever went wrong here

            notes.append("the cost of interest was not measured: %s" % e)
            log("note: the cost of interest was not measured: %s" % e)
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


class RawSubscriber:
    """An MQTT 3.1.1 connection that subscribes and unsubscribes in bulk, counting acks."""

    def __init__(self, port, client_id):
        self.c = MiniClient(port, client_id)
        self.mid = 0
        self.acks = 0

    def _next(self):
        self.mid = self.mid % 65535 + 1
        return self.mid

    def subscribe(self, filters):
        body = struct.pack("!H", self._next()) + b"".join(
            tree_bench._string(f) + b"\x00" for f in filters)
        self.c._send(0x82, body)

    def unsubscribe(self, filters):
        body = struct.pack("!H", self._next()) + b"".join(tree_bench._string(f)
                                                          for f in filters)
        self.c._send(0xA2, body)

    def wait_acks(self, n, limit):
        deadline = time.monotonic() + limit
        while self.acks < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("only %d of %d acks in %d s" % (self.acks, n, limit))
            first, _ = self.c._packet(left)
            if first is not None and first >> 4 in (9, 11):
                self.acks += 1
        self.acks -= n

    def drain(self):
        while self.c._packet(0.5)[0] is not None:
            pass
        self.acks = 0

    def close(self):
        self.c.close()


# ---------------------------------------------------------------------------------------------
# The markdown section

def val(results, rnd, kind, load, *path):
    r = results.get(rnd, {}).get(kind, {}).get(load)
    for p in path:
        if r is None:
            return None
        r = r.get(p) if isinstance(r, dict) else None
    return r


def per_msg(results, rnd, kind, load, field):
    v, n = val(results, rnd, kind, load, field), val(results, rnd, kind, load, "published")
    return v / n if v is not None and n else None


FIGURES = (
    ("inter-broker bytes (both ways, every link)", 0,
     lambda res, r, k, l: val(res, r, k, l, "link_bytes_total")),
    ("inter-broker bytes per published message", 1,
     lambda res, r, k, l: per_msg(res, r, k, l, "link_bytes_total")),
    ("inter-broker PUBLISH per published message", 3,
     lambda res, r, k, l: per_msg(res, r, k, l, "inter_publish")),
    ("inter-broker bytes per link crossing (bytes / PUBLISH between brokers)", 1,
     lambda res, r, k, l: ratio(val(res, r, k, l, "link_bytes_total"),
                                val(res, r, k, l, "inter_publish"))),
    ("fewest link crossings per published message (this tree)", 3,
     lambda res, r, k, l: per_msg(res, r, k, l, "needed_crossings")),
    ("delivered msg/s", 0, lambda res, r, k, l: val(res, r, k, l, "egress")),
    ("broker CPU per delivered msg (us, all 3)", 2,
     lambda res, r, k, l: val(res, r, k, l, "broker_cpu_us_per_msg")),
    ("end-to-end latency, mean (ms)", 2,
     lambda res, r, k, l: val(res, r, k, l, "latency_ms", "mean")),
    ("end-to-end latency, p99 (ms)", 2,
     lambda res, r, k, l: val(res, r, k, l, "latency_ms", "p99")),
    ("not delivered by the end of the drain (%)", 3,
     lambda res, r, k, l: (val(res, r, k, l, "loss_rate") or 0) * 100
     if val(res, r, k, l, "loss_rate") is not None else None),
)
LOAD_TEXT = {
    "paper-spread": "paper, clients spread (0 % locality)",
    "paper-local": "paper, 100 % locality",
    "detti": "Detti, random attach",
}


def write_section(path, results):
    env, rounds, out = tree_bench.section_head(results, "interest", SECTION)
    out += ["Three brokers A, B, C on loopback: arbor fully meshed with full replication "
            "(`peer_routing all`, the MQTT-ST paper's behaviour) and with interest routing "
            "(`peer_routing interest`, the default), and Debian's mosquitto in the static tree "
            "A-B-C whose bridges have per-topic `topic` lines written for the load's placement "
            "(see below). Bytes are TCP payload on the inter-broker connections, both ways, "
            "BPDUs and announcements included.", "",
            "| Figure | Load | arbor all | arbor interest | mosquitto static | "
            "interest/all | interest/mosquitto |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for load in LOAD_TEXT:
        for figure, digits, get in FIGURES:
            vals = {k: [get(results, r, k, load) for r in rounds] for k in KINDS}
            r1 = [ratio(vals["arbor-interest"][i], vals["arbor-all"][i])
                  for i in range(len(rounds))]
            r2 = [ratio(vals["arbor-interest"][i], vals["mosquitto"][i])
                  for i in range(len(rounds))]
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                figure, LOAD_TEXT[load], cells(vals["arbor-all"], digits),
                cells(vals["arbor-interest"], digits), cells(vals["mosquitto"], digits),
                cells(r1, 2), cells(r2, 2)))
    out += [""] + target_lines(results, rounds) + cost_lines(results) + run_details(
        results, rounds) + method_lines(env)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def target_lines(results, rounds):
    def each(load, field, kind):
        return [val(results, r, kind, load, field) for r in rounds]
    local = [val(results, r, "arbor-interest", "paper-local", "inter_publish") for r in rounds]
    # per published message: the loads are closed loop, so runs publish different amounts
    spread = [ratio(per_msg(results, r, "arbor-interest", "paper-spread", "link_bytes_total"),
                    per_msg(results, r, "arbor-all", "paper-spread", "link_bytes_total"))
              for r in rounds]
    detti_i = each("detti", "inter_publish", "arbor-interest")
    detti_n = each("detti", "needed_crossings", "arbor-interest")
    out = ["Targets (issue 20), every round:", "",
           "- 100 %% locality, zero PUBLISH between brokers with interest routing: **%s** "
           "(%s PUBLISH; link bytes %s, all BPDUs and announcements)" % (
               "met" if all(v == 0 for v in local) else "not met", cells(local, 0),
               cells(each("paper-local", "link_bytes_total", "arbor-interest"), 0)),
           "- 0 %% locality, no more than full replication + 5 %%: **%s** (interest/all bytes "
           "per published message %s)" % (
               "met" if all(v is not None and v <= 1.05 for v in spread) else "not met",
               cells(spread, 3)),
           "- Detti, random attach: interest routing sends %s PUBLISH where the load needs %s "
           "link crossings on its tree (full replication: %s)" % (
               cells(detti_i, 0), cells(detti_n, 0),
               cells(each("detti", "inter_publish", "arbor-all"), 0)), ""]
    return out


def cost_lines(results):
    c = results.get("interest_cost")
    if not c:
        return []
    f, u, ch = c["first"], c["update"], c["churn"]
    return ["### What interest costs", "",
            "On a fresh arbor-interest network (tree %s), one client on A subscribes to 10,000 "
            "distinct topics (`%ssub/NNNNN/value`, 30 characters, in SUBSCRIBE packets of 500 "
            "filters). Figures are sums over the three brokers of "
            "`$SYS/broker/stp/interest/bytes` and `.../announcements` (every announcement "
            "packet each broker sent, on every link it announces on, blocked ones included):" % (
                " ".join("-".join(e) for e in c["tree"]), PREFIX), "",
            "| What | Announcements | Bytes | Bytes per filter changed (all directions) |",
            "|---|---:|---:|---:|",
            "| 10,000 filters, first announced (known on every broker after %.2f s; "
            "SUBACKs after %.2f s) | %s | %s | %s |" % (
                c["converge_s"], c["subscribe_acked_s"], fmt(f["announcements"]),
                fmt(f["interest_bytes"]), fmt(f["interest_bytes"] / SUBS_10K, 1)),
            "| one change: an unsubscribe and a new subscription | %s | %s | %s |" % (
                fmt(u["announcements"]), fmt(u["interest_bytes"]),
                fmt(u["interest_bytes"] / 2.0, 1)),
            "| churn: %s changes in %.1f s (every 10 ms a filter replaced by a new one) | %s "
            "(%s/s) | %s (%s B/s) | %s |" % (
                fmt(ch["changes"]), ch["seconds"], fmt(ch["announcements"]),
                fmt(ch["announcements"] / ch["seconds"], 1), fmt(ch["interest_bytes"]),
                fmt(ch["interest_bytes"] / ch["seconds"]),
                fmt(ch["interest_bytes"] / ch["changes"], 1)), "",
            "All bytes on the links while the 10,000 filters were first announced (TCP payload, "
            "BPDUs and acknowledgements included): %s. Each filter travels once per connection "
            "direction that announces it: with three brokers meshed that is four (A to B and "
            "B to C along the tree, A to C and C to A on the blocked link, which learns the "
            "far side's interest before it may have to forward: design section 3), about 33 "
            "bytes each (the filter and its entry header). A broker sends at most one round "
            "of announcements per 100 ms (`PEER_INTEREST_INTERVAL_MS`, spaced further when a "
            "round takes over 10 ms), each a diff against the last, so churn costs at most 10 "
            "announcements per second per connection direction whatever the rate of changes, "
            "each holding the changes since the last; the bytes grow with the changes "
            "themselves (a change that is undone within a round costs nothing)."
            % fmt(f["link_bytes"]), ""]


def run_details(results, rounds):
    out = ["### Run details", "",
           "| Round | Network | Load | tree (forwarding links) | bytes per link | PUBLISH "
           "between brokers | skipped | dropped | topology changes | new link connections |",
           "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for kind in KINDS:
            for load in LOAD_TEXT:
                x = results.get(r, {}).get(kind, {}).get(load)
                if not x:
                    continue
                c = x["counters"]
                out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    r, kind, load, " ".join("-".join(e) for e in x["tree"]),
                    ", ".join("%s %s" % (k, fmt(v)) for k, v in sorted(x["link_bytes"].items())),
                    fmt(x["inter_publish"]),
                    fmt(c.get("stp/messages/skipped")) if kind != "mosquitto" else "n/a",
                    fmt((c.get("publish/messages/dropped") or 0) +
                        (c.get("stp/messages/dropped") or 0)),
                    fmt(c.get("stp/topology_changes")) if kind != "mosquitto" else "n/a",
                    x["new_connections"]))
    notes = results.get("env", {}).get("notes") or []
    return out + [""] + ["- " + n for n in notes] + ([""] if notes else [])


def method_lines(env):
    lines = ["### How it was run", "", "```sh", "make bench-interest", "```", "",
             "installs Mosquitto if it is missing, builds into `build/` and runs everything on "
             "loopback. For each round, load and network the script starts three fresh "
             "brokers, waits for the tree (arbor: every broker names B the root and two links "
             "forward; Mosquitto: both bridges connected), runs arbor_bench once with `-b` A, "
             "B, C and `-P` every broker, and reads the kernel's byte counts of every "
             "inter-broker connection (`ss -tinHe state established`: `bytes_acked` + "
             "`bytes_received` of each "
             "connection a broker opened to another broker's listener) before and after:", "",
             "```"]
    for name, argv in env["loads"].items():
        lines.append("%-12s arbor_bench %s" % (name, " ".join(argv)))
    lines += ["```", "",
              "Every broker: `listener PORT 127.0.0.1` and", "", "```"] + COMMON + ["```", "",
              "arbor adds `peer_identity`, `stp_capability 1000` on B (100 on A and C), "
              "`peer_secret`, `peer_routing all|interest` and the mesh's `peer` lines (A to B, "
              "C to B, A to C). Mosquitto adds on A and on C a `connection` to B with "
              "`try_private true` and one `topic NAME out|in|both QOS` line per topic that has "
              "a publisher on one side of the bridge and a subscriber on the other (QoS 2 for "
              "the paper loads, 0 for Detti), and `%s` (the probes that tell when the bridges "
              "work; nothing else is published there)." % PROBE_LINE, "",
              "### How to read it", "",
              "- **PUBLISH per published message** is the number of times a message crossed "
              "a link. Full replication crosses every tree link (2 with 3 brokers). The "
              "**fewest crossings** are the links between the publisher's broker and the "
              "brokers of its subscribers on the run's tree, from arbor_bench's per-topic "
              "counts: what any routing must send for every message to arrive (a message that "
              "was still queued at the end, or dropped, crossed fewer links: Mosquitto's "
              "paper-spread column). For Mosquitto the PUBLISH count is derived (the sum of "
              "`$SYS/broker/publish/messages/sent` less the deliveries to the load's "
              "subscribers and to the script's `$SYS` reader), so it is approximate.",
              "- **The static Mosquitto tree is given the placement**: its topic lines carry a "
              "topic only where this run needs it. Real deployments do not know in advance "
              "which broker a client attaches to (random attach moves them on every "
              "reconnection), so a static configuration has to carry every topic both ways, "
              "which is full replication; arbor's interest routing reaches the tailored "
              "figure by itself, and follows clients when they move.",
              "- **Not delivered by the end of the drain**: arbor_bench waits up to 10 s "
              "(paper loads; 3 s Detti) after publishing stops, and counts what has not "
              "arrived by then. A broker that acknowledges QoS 2 publishers faster than it "
              "delivers to the subscribers builds a queue, and what is still queued then "
              "counts here (lost for the run, though the broker may deliver it later); a broker "
              "that drops a message counts it in `$SYS/broker/publish/messages/dropped` (run "
              "details).",
              "- **Bytes per published message** on arbor are higher than on the static "
              "Mosquitto tree for the same crossings: arbor carries every message at QoS 2 on "
              "a peer link (PUBLISH, PUBREC, PUBREL, PUBCOMP) with its origin and sequence "
              "number (MQTT-ST properties), where a Mosquitto bridge sends a QoS 2 message "
              "with the same four packets and no such properties, and a QoS 0 message (Detti) "
              "as one PUBLISH: see the bytes per link crossing.",
              "- The paper loads are closed loop (one QoS 2 message in flight per publisher), "
              "so latency and delivered msg/s move together; Detti's is open loop at a fixed "
              "rate (a fixed interval, not Poisson), so latency there is the cost of the "
              "path: a message that crosses a link goes through a second broker.",
              "- On this 2-CPU machine the three brokers and the load generator share the "
              "CPUs: fewer crossings free CPU for the rest, which is most of the difference in "
              "throughput and CPU per message at 100 % locality.", ""]
    return lines


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    tree_bench.add_arbor_loops(ap)
    args = ap.parse_args()
    return tree_bench.render_or_measure(ap, args, Runner, write_section)


if __name__ == "__main__":
    sys.exit(main())
