#!/usr/bin/env python3
"""partition_bench.py: `make bench-partition` (scripts/run-bench-partition.sh runs it after building).

The drain of a partition's backlog, on loopback, two brokers A (the edge) and B (the central)
whose link runs through a TCP proxy (test/integration/delay_proxy.py) that the script cuts
and heals, side by side in one run:

  arbor      A and B are peers (MQTT-ST): each has a `peer` line naming a proxy in front of
             the other (a link is a pair of connections, one dialled by each side), so the cut
             takes both; when the link comes back they exchange summaries and each sends the
             other what it lacks from its message log (docs/mqtt-st-protocol.md 7.3)
  mosquitto  Debian's mosquitto on both, A with a `connection` block to B through the proxy,
             `cleansession false`, `topic bench/# out 1`, `restart_timeout 1`: A queues what
             the bridge could not deliver and sends it when the bridge reconnects

Each broker has `max_queued_messages 0` (no queue limit); A has `persistence true` in a
directory of its own with `autosave_interval 0` (snapshot at SIGUSR1 and at a clean stop).

Per kind (arbor first, then mosquitto; with 2 rounds the second round starts with mosquitto):
two subscribers (QoS 1) on B, connected throughout, one to bench/backlog and one to bench/live;
once a probe published on A reaches B, the link is cut (reset) and, as soon as A reports it
down, a publisher on A sends QoS 1 messages on bench/backlog at --rate msg/s for
--partition-seconds, each payload carrying its sequence number and send time, every one
acknowledged by A. A's resident memory (VmRSS) is read before the cut and at the end of the
partition, and A is told to save (SIGUSR1): the size of its persistence directory then is the
backlog on disk. Then the link heals and a second publisher on A sends QoS 1 messages on
bench/live at 100 msg/s until the subscriber on B has the whole backlog. Measured: heal to
first and to last backlog message, the drain rate (first to last), every backlog message
exactly once (distinct, missing, duplicates), the latency of the live messages (publish to
arrival, same clock) during the drain, A's and B's CPU per drained message, and the size of
A's persistence directory after A is stopped with SIGTERM.

Publishers and subscribers are processes of their own (raw MQTT 3.1.1 sockets), so that none
of them waits for another's Python. Every process started here stops by itself: the brokers
by pid when the run ends (and listed in --pidfile, so that the calling script can stop them if
this one is killed), the clients when told to or at their deadline, or when their broker goes.
Writes raw results under --out and the section "Partitions: MQTT-ST resync or a Mosquitto
bridge" of --markdown.
"""

import json
import multiprocessing
import os
import select
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
from delay_proxy import DelayProxy  # noqa: E402 (stdlib only: runs under the system python3)

import bridge_bench  # noqa: E402
import persist_bench  # noqa: E402
import tree_bench  # noqa: E402
from bridge_bench import cells, value  # noqa: E402
from tree_bench import HOST, Broker, fmt, log, ratio, retained  # noqa: E402

SECTION = "## Partitions: MQTT-ST resync or a Mosquitto bridge"
KINDS = ("arbor", "mosquitto")
BACKLOG_TOPIC = "bench/backlog"
LIVE_TOPIC = "bench/live"
LIVE_RATE = 100
PAYLOAD_SIZE = 32  # "%08d %019d" (sequence number, send time in ns) and padding
PING_EVERY = 15.0  # s between PINGREQs of an idle client (keepalive 60)

# Every broker (mosquitto.conf syntax, which arbor reads too): the bridge benchmark's, with $SYS
# every second (A's link state is read from it).
COMMON = bridge_bench.COMMON + ["sys_interval 1"]
# A, after COMMON (DIR its own directory).
EDGE_PERSISTENCE = ["persistence true", "persistence_location DIR/", "autosave_interval 0"]
# arbor, both brokers: ID is the broker's own listener, PROXY the proxy in front of the other.
ARBOR_PEER = ["peer_identity 127.0.0.1:ID", "stp_capability CAPABILITY",
              "peer_secret " + tree_bench.SECRET, "peer_restart_timeout 1",
              "peer 127.0.0.1:PROXY"]
ARBOR_CAPABILITY = {"edge": 100, "central": 1000}
# mosquitto, A only: the bridge benchmark's `out` bridge, to the proxy, with cleansession false.
BRIDGE = [x.replace("CENTRAL_PORT", "PROXY").replace("DIRECTION", "out")
          for x in bridge_bench.BRIDGE] + ["cleansession false"]


def payload(seq):
    return (b"%08d %019d" % (seq, time.monotonic_ns())).ljust(PAYLOAD_SIZE, b".")


# ---------------------------------------------------------------------------------------------
# The clients: each runs in a process of its own (multiprocessing, spawn) and talks to the
# runner over a Pipe. Messages to a client: ("go",), ("stop",), ("expect", n), ("status",),
# ("finish", quiet_s); from it: ("ready",), ("complete", t), ("status", ...), ("result", dict)
# or ("error", text).

def packets(buf):
    """(first byte, body) of every whole packet at the start of buf, which loses them."""
    out, used = [], 0
    while True:
        parsed = bridge_bench.BacklogSubscriber._next_packet(buf, used)
        if parsed is None:
            break
        first, body_at, used = parsed
        out.append((first, bytes(buf[body_at:used])))
    del buf[:used]
    return out


def run_client(fn, conn, *args):
    """A client process's body: fn(conn, *args) returns its result; errors go to the runner."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner stops it (^C reaches it too)
    try:
        conn.send(("result", fn(conn, *args)))
    except Exception as e:  # noqa: BLE001 (handed to the runner, which fails the run)
        try:
            conn.send(("error", "%s: %s" % (type(e).__name__, e)))
        except OSError:
            pass


def publisher(conn, port, client_id, topic, rate, limit, window=1000):
    """QoS 1 messages on `topic` at `rate` msg/s from ("go",) until ("stop",), at most
    `window` unacknowledged; returns once every one is acknowledged."""
    deadline = time.monotonic() + limit
    s = persist_bench.connect(port, client_id)
    s.setblocking(False)
    conn.send(("ready",))
    name = persist_bench.string(topic)
    buf = bytearray()
    started = stopped = None
    sent = acked = 0
    last_ping = time.monotonic()
    while stopped is None or acked < sent:
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError("%s: still running at its deadline (%d sent, %d acknowledged)"
                               % (client_id, sent, acked))
        if started is not None and stopped is None:
            due = min(int((now - started) * rate) + 1, sent + window - (sent - acked))
            batch = bytearray()
            while sent < due:
                batch += persist_bench.packet(
                    0x32, name + struct.pack("!H", sent % 65535 + 1) + payload(sent))
                sent += 1
            if batch:
                s.setblocking(True)
                s.sendall(batch)
                s.setblocking(False)
        if now - last_ping > PING_EVERY:
            s.sendall(b"\xc0\x00")
            last_ping = now
        wait = 0.2 if started is None or stopped is not None else max(
            0.0, min(0.2, started + (sent + 1) / rate - time.monotonic()))
        ready, _, _ = select.select([s, conn], [], [], wait)
        if conn in ready:
            msg = conn.recv()
            if msg[0] == "go" and started is None:
                started = time.monotonic()
            elif msg[0] == "stop" and stopped is None:
                stopped = time.monotonic()
                if started is None:
                    break
        if s in ready:
            data = s.recv(1 << 16)
            if not data:
                raise RuntimeError("%s: the broker closed the connection" % client_id)
            buf += data
            for first, _ in packets(buf):
                if first == 0x40:
                    acked += 1
                elif first != 0xD0:
                    raise RuntimeError("%s: unexpected packet 0x%02x" % (client_id, first))
    s.setblocking(True)
    s.sendall(b"\xe0\x00")
    s.close()
    return {"sent": sent, "acked": acked,
            "seconds": (stopped - started) if started is not None else 0.0}


def latency_stats(values):
    """p50, p99, max, min and count of a list of latencies (ms); only the count when it is
    empty."""
    v = sorted(values)
    n = len(v)
    return {"p50": v[n // 2], "p99": v[min(n - 1, n * 99 // 100)], "max": v[-1], "min": v[0],
            "count": n} if n else {"count": 0}


def subscriber(conn, port, client_id, topic, capacity, limit, samples=False):
    """Subscribed to `topic` at QoS 1 (every message acknowledged) until ("finish", quiet):
    then `quiet` s more. Counts the messages by sequence number and keeps the latency (arrival
    - send time in the payload) of each first arrival (with samples, also each one's send
    time); says ("complete", t) when all of ("expect", n) have arrived."""
    deadline = time.monotonic() + limit
    s = persist_bench.connect(port, client_id)
    s.sendall(persist_bench.packet(0x82, struct.pack("!H", 1) +
                                   persist_bench.string(topic) + b"\x01"))
    first, body = persist_bench.read_packet(s)
    if first != 0x90 or body[2:] != b"\x01":
        raise RuntimeError("%s: SUBACK %r" % (client_id, body))
    s.setblocking(False)
    conn.send(("ready",))
    seen = bytearray(capacity)
    latency_ms, sent_at = [], []
    r = {"distinct": 0, "duplicates": 0, "unexpected": 0, "first_t": None, "last_t": None}
    buf = bytearray()
    expect = finish_at = None
    complete = False
    last_ping = time.monotonic()
    while True:
        now = time.monotonic()
        end = deadline if finish_at is None else min(deadline, finish_at)
        if now >= end:
            break
        if now - last_ping > PING_EVERY:
            s.setblocking(True)
            s.sendall(b"\xc0\x00")
            s.setblocking(False)
            last_ping = now
        ready, _, _ = select.select([s, conn], [], [], min(1.0, end - now))
        if conn in ready:
            msg = conn.recv()
            if msg[0] == "expect":
                expect = msg[1]
            elif msg[0] == "finish":
                finish_at = time.monotonic() + msg[1]
            elif msg[0] == "status":
                conn.send(("status", r["distinct"], r["first_t"], r["last_t"]))
        if s in ready:
            data = s.recv(1 << 20)
            if not data:
                raise RuntimeError("%s: the broker closed the connection" % client_id)
            now_ns = time.monotonic_ns()
            now = now_ns / 1e9
            buf += data
            acks = bytearray()
            for first, body in packets(buf):
                if first >> 4 != 3:
                    continue
                n = body[0] << 8 | body[1]
                at = 2 + n
                if (first >> 1) & 3:
                    acks += b"\x40\x02" + body[at:at + 2]
                    at += 2
                try:
                    seq, sent_ns = int(body[at:at + 8]), int(body[at + 9:at + 28])
                except ValueError:
                    seq = -1
                if bridge_bench.tally(seen, seq, r):
                    latency_ms.append((now_ns - sent_ns) / 1e6)
                    if samples:
                        sent_at.append(sent_ns / 1e9)
                    r["first_t"] = now if r["first_t"] is None else r["first_t"]
                    r["last_t"] = now
            if acks:
                s.setblocking(True)
                s.sendall(acks)
                s.setblocking(False)
        if expect is not None and not complete and r["distinct"] >= expect:
            complete = True
            conn.send(("complete", r["last_t"]))
    s.setblocking(True)
    s.sendall(b"\xe0\x00")
    s.close()
    r["missing_below"] = (expect - sum(seen[:expect])) if expect is not None else None
    r["beyond"] = sum(seen[expect:]) if expect is not None else None
    r["latency_ms"] = latency_stats(latency_ms)
    if samples:
        r["samples"] = list(zip(sent_at, latency_ms))
    return r


class Client:
    """The runner's handle on a client process."""

    def __init__(self, ctx, fn, *args):
        self.conn, child = ctx.Pipe()
        self.name = args[1]
        self.proc = ctx.Process(target=run_client, args=(fn, child) + args, daemon=True)
        self.proc.start()
        child.close()
        self.result = self.completed_at = None

    def receive(self, timeout, want=None):
        """The next message (None after timeout); a result or error is kept, not returned,
        unless it is `want`."""
        while self.conn.poll(timeout):
            msg = self.conn.recv()
            if msg[0] == "error":
                raise RuntimeError(msg[1])
            if msg[0] == "result":
                self.result = msg[1]
            elif msg[0] == "complete":
                self.completed_at = msg[1]
            if want is None or msg[0] == want:
                return msg
        return None

    def expect(self, what, timeout):
        if self.receive(timeout, what) is None and not (what == "result" and self.result):
            raise RuntimeError("%s: no %r in %.0f s" % (self.name, what, timeout))

    def send(self, *msg):
        self.conn.send(msg)

    def status(self):
        self.send("status")
        msg = self.receive(5.0, "status")
        if msg is None:
            raise RuntimeError("%s: no status in 5 s" % self.name)
        return msg[1:]

    def close(self):
        self.proc.join(5.0)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5.0)
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# Brokers, the pair and the measurement

def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def dir_bytes(path):
    total = 0
    for name in os.listdir(path):
        try:
            total += os.path.getsize(os.path.join(path, name))
        except OSError:
            pass
    return total


def latest_mtime(path):
    times = [os.path.getmtime(os.path.join(path, n)) for n in os.listdir(path)]
    return max(times) if times else 0.0


class PartitionRunner(bridge_bench.BridgeRunner):
    """Starts and stops the pairs (BridgeRunner's spawn, stop, start_broker, wait_bridge) and
    measures."""

    def __init__(self, args):
        super().__init__(args)
        self.ctx = multiprocessing.get_context("spawn")

    def start_pair(self, kind, tag):
        a = self.args
        binary = a.arbor if kind == "arbor" else a.mosquitto
        # the proxies listen first, so that no broker's port (picked, not yet bound) goes to one
        proxies = {"edge": DelayProxy(0, None, name=tag + "-to-central")}
        if kind == "arbor":
            proxies["central"] = DelayProxy(0, None, name=tag + "-to-edge")
        central = Broker(kind, "central", binary, a.out, tag + "-central")
        edge = Broker(kind, "edge", binary, a.out, tag + "-edge")
        proxies["edge"].target_port = central.port
        if "central" in proxies:
            proxies["central"].target_port = edge.port
        store = os.path.join(a.out, tag + "-edge-store")
        os.makedirs(store)
        os.chmod(store, 0o777)
        edge_lines = list(COMMON) + [x.replace("DIR", store) for x in EDGE_PERSISTENCE]
        if os.geteuid() == 0:
            edge_lines.append("user root")  # so that it can write the store it was given
        pair = {"kind": kind, "direction": "out", "central": central, "edge": edge,
                "brokers": {"central": central, "edge": edge}, "proxies": proxies,
                "store": store}
        try:
            if kind == "arbor":
                for b, lines in ((central, list(COMMON)), (edge, edge_lines)):
                    self.write_conf(b, lines + [""] + [
                        x.replace("ID", str(b.port)).replace("PROXY", str(proxies[b.name].port))
                        .replace("CAPABILITY", str(ARBOR_CAPABILITY[b.name]))
                        for x in ARBOR_PEER])
            else:
                self.write_conf(central, COMMON)
                self.write_conf(edge, edge_lines + [""] + [
                    x.replace("PROXY", str(proxies["edge"].port)) for x in BRIDGE])
            self.start_broker(central)
            self.start_broker(edge)
            self.wait_bridge(pair)
        except BaseException:
            self.stop_pair(pair)
            raise
        return pair

    def stop_pair(self, pair):
        super().stop_pair(pair)
        for p in pair["proxies"].values():
            p.close()

    def link_down(self, pair, limit=30.0):
        """Until the edge says its link to the central is down."""
        edge, central = pair["edge"], pair["central"]
        if pair["kind"] == "mosquitto":
            self.wait_state(edge.port, "0", limit)
            return
        topic = "$SYS/broker/stp/peers/%s:%d/state" % (HOST, central.port)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if retained(edge.port, topic, quiet=0.2).get(topic) != "up":
                    return
            except (OSError, RuntimeError):
                pass
            time.sleep(0.1)
        raise RuntimeError("arbor edge: its link still up %.0f s after the cut" % limit)

    def saved_size(self, pair, since, limit=60.0):
        """The size of the edge's persistence directory once a save that began after `since`
        (monotonic; SIGUSR1 sent then) has finished: a file written since, then the size
        unchanged for 1 s."""
        store = pair["store"]
        wall_since = time.time() - (time.monotonic() - since)
        deadline = time.monotonic() + limit
        last = None
        while time.monotonic() < deadline:
            size = dir_bytes(store)
            if latest_mtime(store) >= wall_since - 0.01 and size == last:
                return size
            last = size
            time.sleep(1.0)
        log("note: %s edge: no finished save in %s within %.0f s" % (pair["kind"], store, limit))
        return dir_bytes(store)

    def sys_values(self, port, pattern):
        try:
            return {k[len("$SYS/broker/"):]: v for k, v in retained(port, pattern).items()}
        except (OSError, RuntimeError):
            return {}

    def measure_kind(self, kind, rnd, results):
        a = self.args
        tag = "r%d-%s" % (rnd, kind)
        capacity = int(a.rate * a.partition_seconds * 1.5) + 10000
        live_capacity = int(LIVE_RATE * 3600)
        limit = a.partition_seconds + 1200  # every client's own deadline
        pair = self.start_pair(kind, tag)
        edge, central = pair["edge"], pair["central"]
        clients = []
        r = {"kind": kind, "round": rnd}
        try:
            sub = Client(self.ctx, subscriber, central.port, tag + "-backlog-sub", BACKLOG_TOPIC,
                         capacity, limit)
            live_sub = Client(self.ctx, subscriber, central.port, tag + "-live-sub", LIVE_TOPIC,
                              live_capacity, limit, True)
            live_pub = Client(self.ctx, publisher, edge.port, tag + "-live-pub", LIVE_TOPIC,
                              LIVE_RATE, limit)
            clients += [sub, live_sub, live_pub]
            for c in clients:
                c.expect("ready", 30)
            self.settle(pair)
            r["rss_before_kib"] = rss_kib(edge.proc.pid)

            for p in pair["proxies"].values():
                p.cut("reset")
            cut_at = time.monotonic()
            self.link_down(pair)
            r["down_after_s"] = time.monotonic() - cut_at
            pub = Client(self.ctx, publisher, edge.port, tag + "-backlog-pub", BACKLOG_TOPIC,
                         a.rate, limit)
            clients.append(pub)
            pub.expect("ready", 30)
            pub.send("go")
            log("%s: link cut (down at the edge after %.2f s); publishing %d msg/s for %.0f s"
                % (kind, r["down_after_s"], a.rate, a.partition_seconds))
            end = time.monotonic() + a.partition_seconds
            while time.monotonic() < end:
                pub.receive(min(1.0, max(0.0, end - time.monotonic())))
                if pub.result is not None or not pub.proc.is_alive():
                    raise RuntimeError("%s: the backlog publisher ended early" % kind)
            pub.send("stop")
            pub.expect("result", 60)
            n = pub.result["acked"]
            if n != pub.result["sent"]:
                raise RuntimeError("%s: %d backlog messages sent, %d acknowledged"
                                   % (kind, pub.result["sent"], n))
            r.update(messages=n, partition_s=time.monotonic() - cut_at,
                     publish_rate=n / pub.result["seconds"] if pub.result["seconds"] else None,
                     rss_end_kib=rss_kib(edge.proc.pid))
            r["log_edge"] = self.sys_values(edge.port, "$SYS/broker/stp/log/#")
            signalled = time.monotonic()
            edge.proc.send_signal(signal.SIGUSR1)
            r["disk_partition_bytes"] = self.saved_size(pair, signalled)
            r["save_s"] = time.monotonic() - signalled
            log("%s: %d messages published (%s msg/s); edge RSS %s -> %s KiB; saved %s bytes"
                % (kind, n, fmt(r["publish_rate"]), fmt(r["rss_before_kib"]),
                   fmt(r["rss_end_kib"]), fmt(r["disk_partition_bytes"])))

            sub.send("expect", n)
            cpu_before = [self.cpu_ticks([b.proc.pid]) for b in (edge, central)]
            for p in pair["proxies"].values():
                p.heal()
            healed = time.monotonic()
            live_pub.send("go")
            r.update(self.wait_drain(sub, n, healed))
            cpu = [(self.cpu_ticks([b.proc.pid]) - c0) / self.hz
                   for b, c0 in zip((edge, central), cpu_before)]
            live_pub.send("stop")
            live_pub.expect("result", 60)
            r["live_sent"] = live_pub.result["sent"]
            live_sub.send("expect", r["live_sent"])
            live_sub.receive(30.0, "complete")
            for c in (sub, live_sub):
                c.send("finish", 1.0 if a.quick else 3.0)
            for c in (sub, live_sub):
                c.expect("result", 60)
            r["backlog"], r["live"] = sub.result, live_sub.result
            r["edge_cpu_s"], r["central_cpu_s"] = cpu
            r["sys_edge"] = self.sys_values(edge.port, "$SYS/broker/stp/#")
            r["sys_central"] = self.sys_values(central.port, "$SYS/broker/stp/#")
            r["dropped"] = {b.name: self.sys_values(b.port, "$SYS/broker/publish/messages/"
                                                    "dropped").get("publish/messages/dropped")
                            for b in (edge, central)}
            self.stop(edge.proc)
            r["edge_exit"] = edge.proc.returncode
            r["disk_stop_bytes"] = dir_bytes(pair["store"])
        finally:
            for c in clients:
                c.close()
            self.stop_pair(pair)
        self.derive(r)
        results.setdefault(str(rnd), {})[kind] = r
        b, live = r["backlog"], r["live"]
        log("%s: heal -> first %s s, -> last %s s, %s msg/s; %s of %d once, %d duplicates; live "
            "p50 %s p99 %s max %s ms (%s of %s); %s MiB/M in memory, %s MiB/M on disk" % (
                kind, fmt(r["heal_to_first_s"], 2), fmt(r["heal_to_last_s"], 2),
                fmt(r["drain_rate"]), fmt(b["distinct"]), r["messages"], b["duplicates"],
                fmt((live["latency_ms"] or {}).get("p50"), 1),
                fmt((live["latency_ms"] or {}).get("p99"), 1),
                fmt((live["latency_ms"] or {}).get("max"), 1), fmt(live["distinct"]),
                fmt(r["live_sent"]), fmt(r["memory_mib_per_million"], 1),
                fmt(r["disk_partition_mib_per_million"], 1)))

    def wait_drain(self, sub, n, healed):
        """Until the subscriber has every backlog message, nothing has arrived for `stall` s
        after a first one, or nothing at all within `first_limit` s of the heal."""
        a = self.args
        first_limit, stall = (30.0, 10.0) if a.quick else (180.0, 60.0)
        while sub.completed_at is None:
            sub.receive(1.0, "complete")
            if sub.completed_at is not None:
                break
            distinct, first_t, last_t = sub.status()
            now = time.monotonic()
            if first_t is None and now - healed > first_limit:
                log("note: nothing of the backlog arrived within %.0f s of the heal" % first_limit)
                break
            if last_t is not None and now - last_t > stall:
                log("note: the drain stalled at %d of %d messages" % (distinct, n))
                break
        return {"healed_t": healed, "drain_end_t": time.monotonic()}

    @staticmethod
    def derive(r):
        """The figures, from the raw values (times relative to the heal)."""
        b, n = r["backlog"], r["messages"]
        first = b["first_t"] - r["healed_t"] if b["first_t"] is not None else None
        last = b["last_t"] - r["healed_t"] if b["last_t"] is not None and \
            b["distinct"] == n else None
        drain = (last - first) if last is not None else None
        live = r["live"]
        live["latency_drain_ms"] = latency_stats(
            [ms for t, ms in live.get("samples", []) if b["first_t"] is not None and
             t >= b["first_t"]])
        r.update(heal_to_first_s=first, heal_to_last_s=last, drain_s=drain,
                 drain_rate=(n - 1) / drain if drain else None, missing=b["missing_below"],
                 edge_cpu_us_per_msg=1e6 * r["edge_cpu_s"] / n if n else None,
                 central_cpu_us_per_msg=1e6 * r["central_cpu_s"] / n if n else None)
        grown = r["rss_end_kib"] - r["rss_before_kib"]
        r["memory_mib_per_million"] = grown / 1024.0 / n * 1e6 if n else None
        mib = 1024.0 * 1024.0
        r["disk_partition_mib_per_million"] = r["disk_partition_bytes"] / mib / n * 1e6 \
            if n else None
        r["disk_stop_mib_per_million"] = r["disk_stop_bytes"] / mib / n * 1e6 if n else None

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        env = tree_bench.environment(a)
        env.update(loads={}, partition_seconds=a.partition_seconds, rate=a.rate,
                   live_rate=LIVE_RATE)
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for kind in (KINDS if rnd % 2 else KINDS[::-1]):
                self.measure_kind(kind, rnd, results)
        for line in delivery_problems(results, a.rounds):
            log("note: " + line)
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


# ---------------------------------------------------------------------------------------------
# The markdown section

def field(name):
    return lambda res, r, k: value(res, r, k, name)


def live_latency(which, stats="latency_ms"):
    return lambda res, r, k: (value(res, r, k, "live", stats) or {}).get(which)


def once(res, r, k):
    d = value(res, r, k) or {}
    b = d.get("backlog") or {}
    text = "%s of %s" % (fmt(b.get("distinct")), fmt(d.get("messages")))
    if b.get("duplicates"):
        text += ", %d duplicates" % b["duplicates"]
    return text


# figure text, digits, value(results, round, kind)
FIGURES = (
    ("backlog: messages published during the partition", 0, field("messages")),
    ("heal to first backlog message (s)", 2, field("heal_to_first_s")),
    ("heal to last backlog message (s)", 2, field("heal_to_last_s")),
    ("drain: msg/s (first to last)", 0, field("drain_rate")),
) + tuple(("live messages from the heal to the end of the drain: latency %s (ms)" % w, 1,
           live_latency(w)) for w in ("p50", "p99", "max")) + (
    ("live messages published while the backlog arrived: how many", 0,
     live_latency("count", "latency_drain_ms")),
) + tuple(("live messages published while the backlog arrived: latency %s (ms)" % w, 1,
           live_latency(w, "latency_drain_ms")) for w in ("p50", "max")) + (
    ("A's memory per million backlog messages (MiB)", 1, field("memory_mib_per_million")),
    ("A's disk per million backlog messages, saved at the end of the partition (MiB)", 2,
     field("disk_partition_mib_per_million")),
    ("A's disk per million backlog messages after a clean stop following the drain (MiB)", 2,
     field("disk_stop_mib_per_million")),
    ("A's CPU per drained message (us)", 2, field("edge_cpu_us_per_msg")),
    ("B's CPU per drained message (us)", 2, field("central_cpu_us_per_msg")),
)


def write_section(path, results):
    env, rounds, out = tree_bench.section_head(results, "partition", SECTION)
    short = env["partition_seconds"] < 300
    out += ["A partition of %s s between two brokers A and B on loopback while a publisher on A "
            "sends %s QoS 1 msg/s, then the heal: arbor peers (MQTT-ST, the backlog sent by the "
            "resync of docs/mqtt-st-protocol.md 7.3) against Debian's mosquitto bridged A to B "
            "(`cleansession false`, the backlog queued by A's bridge). The subscribers are on "
            "B; A's memory and disk hold the backlog.%s" % (
                fmt(env["partition_seconds"]), fmt(env["rate"]),
                " **A shorter partition than the default 300 s.**" if short else ""), "",
            "| Figure | arbor | mosquitto | arbor/mosquitto |", "|---|---:|---:|---:|"]
    for figure, digits, get in FIGURES:
        vals = {k: [get(results, r, k) for r in rounds] for k in KINDS}
        ratios = [ratio(vals["arbor"][i], vals["mosquitto"][i]) for i in range(len(rounds))]
        if "after a clean stop" in figure:  # mosquitto's queue is empty then: no ratio
            ratios = [None for _ in rounds]
        out.append("| %s | %s | %s | %s |" % (figure, cells(vals["arbor"], digits),
                                              cells(vals["mosquitto"], digits), cells(ratios, 2)))
    out.append("| backlog arrived exactly once | %s | %s | |" % tuple(
        " / ".join(once(results, r, k) for r in rounds) for k in KINDS))
    out += ["", "Lower is better except for msg/s; ratios are arbor/mosquitto per round.", ""]
    problems = delivery_problems(results, env["rounds"])
    out += ["QoS 1 messages lost or doubled: " + "; ".join(problems) + "." if problems else
            "Every backlog message and every live message arrived exactly once, on both.", ""]

    out += ["### Run details", "",
            "Times in seconds after the heal; memory is A's VmRSS; disk is A's persistence "
            "directory, saved on SIGUSR1 at the end of the partition, and after SIGTERM once "
            "the drain was over.", "",
            "| Round | Broker | messages | published msg/s | link down after s | first | last "
            "| msg/s | arrived | missing | duplicates | live sent | live arrived | live "
            "p50 / p99 / max ms | RSS before / end KiB | disk saved / after stop bytes "
            "| A / B CPU s |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for kind in KINDS:
            d = value(results, r, kind)
            if not d:
                continue
            b, live = d["backlog"], d["live"]
            lat = live.get("latency_ms") or {}
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                       "%s / %s / %s | %s / %s | %s / %s | %s / %s |" % (
                           r, kind, fmt(d["messages"]), fmt(d["publish_rate"]),
                           fmt(d["down_after_s"], 2), fmt(d["heal_to_first_s"], 2),
                           fmt(d["heal_to_last_s"], 2), fmt(d["drain_rate"]),
                           fmt(b["distinct"]), fmt(d["missing"]), fmt(b["duplicates"]),
                           fmt(d["live_sent"]), fmt(live["distinct"]), fmt(lat.get("p50"), 1),
                           fmt(lat.get("p99"), 1), fmt(lat.get("max"), 1),
                           fmt(d["rss_before_kib"]), fmt(d["rss_end_kib"]),
                           fmt(d["disk_partition_bytes"]), fmt(d["disk_stop_bytes"]),
                           fmt(d["edge_cpu_s"], 2), fmt(d["central_cpu_s"], 2)))
    arbor = [value(results, r, "arbor") for r in rounds]
    counters = ["round %s: resynced by A %s, received by B %s, duplicates at B %s, lost at B %s"
                % (r, fmt(_int(d["sys_edge"].get("stp/messages/resynced"))),
                   fmt(_int(d["sys_central"].get("stp/messages/received"))),
                   fmt(_int(d["sys_central"].get("stp/messages/duplicates"))),
                   fmt(_int(d["sys_central"].get("stp/messages/lost"))))
                for r, d in zip(rounds, arbor) if d]
    if counters:
        out += ["", "arbor's counters after the drain (`$SYS/broker/stp/messages/...`): %s."
                % "; ".join(counters)]
    out += [""] + ["Note: %s." % n for n in env.get("notes", [])]
    out += ["Took %.0f s." % env["duration_s"], ""]
    out += method_text(env, results)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def delivery_problems(results, rounds):
    """A line per round and kind whose backlog or live messages did not arrive exactly once."""
    out = []
    for rnd in range(1, rounds + 1):
        for kind in KINDS:
            d = value(results, rnd, kind)
            if not d:
                continue
            b, live = d["backlog"], d["live"]
            live_missing = d["live_sent"] - live["distinct"]
            if d["missing"] or b["duplicates"] or b["unexpected"] or live_missing or \
                    live["duplicates"]:
                out.append("round %d, %s: backlog %s of %s missing, %d duplicates, %d "
                           "unexpected; live %d of %d missing, %d duplicates" % (
                               rnd, kind, fmt(d["missing"]), fmt(d["messages"]),
                               b["duplicates"], b["unexpected"], live_missing, d["live_sent"],
                               live["duplicates"]))
    return out


def _int(v):
    return int(v) if v not in (None, "") and str(v).isdigit() else None


def log_not_on_disk(results):
    """Did every arbor run save less than 8 bytes per backlog message (the log not on disk)?"""
    runs = [d for r in range(1, results["env"]["rounds"] + 1)
            for d in [value(results, r, "arbor")] if d and d["messages"]]
    return bool(runs) and all(d["disk_partition_bytes"] < 8 * d["messages"] for d in runs)


def method_text(env, results):
    return [
        "### How it was run", "", "```sh", "make bench-partition", "```", "",
        "builds arbor into `build/` (`make bench-partition BUILD=dir` for another tree) and "
        "runs everything on loopback; `BENCH_PARTITION_SECONDS` (default 300) and "
        "`BENCH_PARTITION_RATE` (default 1000 msg/s) set the partition, "
        "`BENCH_PARTITION_ROUNDS` the rounds (default 1; a second round starts with "
        "mosquitto). For each kind a fresh pair: B (the central) and A (the edge), A's link "
        "to B through a TCP proxy of the test suite (test/integration/delay_proxy.py), cut "
        "with resets (every connection reset, new ones reset at once) and healed. Every "
        "broker's configuration:", "", "```", "listener PORT 127.0.0.1"] + COMMON + [
        "```", "",
        "A adds (`user root` too when run as root, so that it can write there):", "", "```"] + \
        EDGE_PERSISTENCE + [
        "```", "",
        "arbor, A and B each (ID its own port, CAPABILITY 100 on A and 1000 on B, PROXY the "
        "proxy in front of the other: a link is a connection dialled by each side, both "
        "through a proxy, both cut):", "", "```"] + ARBOR_PEER + [
        "```", "", "mosquitto, A only (PROXY the proxy in front of B):", "", "```"] + BRIDGE + [
        "```", "",
        "Then: two subscribers on B (QoS 1, `%s` and `%s`), connected throughout; a probe "
        "published on A reaches B; the brokers go quiet; A's VmRSS is read; the link is cut; "
        "once A reports it down (`$SYS/broker/stp/peers/B/state` not `up`, or "
        "`$SYS/broker/connection/bench-edge/state` 0) a publisher on A sends QoS 1 messages "
        "on `%s` at the rate for the partition's length, at most 1000 unacknowledged, "
        "each payload (32 bytes) its sequence number and send time; when the partition ends "
        "every one has been acknowledged by A, A's VmRSS is read again and A is sent SIGUSR1 "
        "(a snapshot of its persistence; the size of its directory once the save has "
        "finished). Then the heal, and a publisher on A sends QoS 1 messages on `%s` at "
        "%d msg/s until the subscriber on B has every backlog message; then the subscribers "
        "wait 3 s more (duplicates would show), A is stopped with SIGTERM and the size of its "
        "persistence directory read again. Publishers and subscribers are processes of their "
        "own (test/bench/partition_bench.py)." % (BACKLOG_TOPIC, LIVE_TOPIC, BACKLOG_TOPIC,
                                                   LIVE_TOPIC, LIVE_RATE),
        "", "### How to read it", "",
        "- **Heal to first / last backlog message** is what an operator waits for after a "
        "link comes back: it includes A's wait for its next dial (arbor: "
        "`peer_restart_timeout 1`, a dial every 0.5 to 1 s; mosquitto: `restart_timeout 1`, "
        "which Debian's mosquitto 2.0.11 stretches, see the bridge section above), the "
        "handshake (arbor: the link's two connections, the tree's agreement that it "
        "forwards, the summaries of 7.3), then the drain. **Drain msg/s** = messages / "
        "(last - first): the drain itself. The subscriber on B acknowledges each message "
        "and B has 20 in flight to it (`max_inflight_messages`), for both kinds.",
        "- **Live messages**: published on A from the heal until B's subscriber has the "
        "whole backlog, at %d msg/s, latency from the publisher's send to the subscriber's "
        "receipt (one clock). *From the heal*: all of them, so the first wait for the link "
        "to come back too; *while the backlog arrived*: those published once the first "
        "backlog message had reached B, the drain's own effect on live traffic (few "
        "messages when the drain is short: see how many). Both kinds send them behind the "
        "backlog on the link: arbor's resync sends what the other side lacks oldest first "
        "and new messages join the walk at its end (protocol 7.3: each origin's order "
        "holds), mosquitto's bridge queue is first in, first out. What differs is where the "
        "backlog waits. arbor's link (a window of 1000 QoS 2 messages) takes the backlog to "
        "B faster than B's QoS 1 session (20 in flight) hands it to the backlog subscriber, "
        "so most of the drain happens in that subscriber's queue on B, and the live "
        "messages, for another subscriber, pass; a live message published before the link "
        "was back waits behind the backlog on the link (the max). mosquitto's bridge (20 in "
        "flight at QoS 1) is the slower step, so the backlog waits in A's bridge queue and "
        "every live message behind it." % LIVE_RATE,
        "- **Memory per million backlog messages** = (A's VmRSS at the end of the partition "
        "- before it) / messages x 10^6. arbor keeps every QoS 1/2 message in its message "
        "log whether a link is down or not (`peer_log_max_messages` 1 000 000, "
        "`peer_log_max_bytes` 256 MiB, `peer_log_max_age` 24 h by default), so this is what "
        "the log costs; mosquitto holds the messages in the bridge's queue while it cannot "
        "send them. RSS grows in steps (the allocator), so short partitions read coarse.",
        "- **Disk per million backlog messages**: the size of A's persistence directory "
        "(arbor: arbor.db and its -wal and -shm while running; mosquitto: mosquitto.db) per "
        "million messages of the backlog, saved on SIGUSR1 at the end of the partition "
        "(what a save holds while the backlog waits) and after a SIGTERM once the drain is "
        "over (mosquitto's queue is empty then; arbor's message log still holds the "
        "messages, as it should: they are what a later resync sends). arbor's first figure "
        "counts the log twice: SQLite writes a save into the -wal file first and folds it "
        "into arbor.db later (at the latest when the broker stops), so the second figure is "
        "what the log takes on disk.%s" % (
            " In this run arbor's directory held less than 8 bytes per backlog message: the "
            "build measured does not write its message log to disk (arbor.conf(5) of that "
            "version: the log \"is not kept across a restart yet\"), so arbor's figures are "
            "its sessions and retained messages alone, not the backlog."
            if log_not_on_disk(results) else ""),
        "- **CPU per drained message** = the broker's CPU (user + system) from the heal to "
        "the end of the drain / messages; it includes the live messages and, for arbor, "
        "the link's handshake and the BPDUs.",
        "- The machine has 2 CPUs shared by the two brokers, the proxy (Python), the clients "
        "and other work: the drain rate is bounded by all of them; compare the two kinds "
        "within a round.", ""]


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    ap.set_defaults(rounds=1, bench="-")
    ap.add_argument("--partition-seconds", type=float,
                    help="how long the link is cut (default 300, 3 with --quick)")
    ap.add_argument("--rate", type=float,
                    help="QoS 1 msg/s published on A during the partition (default 1000, 300 "
                    "with --quick)")
    args = ap.parse_args()
    if args.partition_seconds is None:
        args.partition_seconds = 3.0 if args.quick else 300.0
    if args.rate is None:
        args.rate = 300.0 if args.quick else 1000.0
    return tree_bench.render_or_measure(ap, args, PartitionRunner, write_section)


if __name__ == "__main__":
    sys.exit(main())
