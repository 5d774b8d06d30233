#!/usr/bin/env python3
"""bridge_bench.py: `make bench-bridge` (scripts/run-bench-bridge.sh runs it after building).

An edge broker bridged to a central broker, on loopback: the edge is arbor or Debian's
mosquitto, the central is always Debian's mosquitto, both kinds side by side in one run, the
two taking turns (arbor, mosquitto, arbor, mosquitto) so that noise on the machine hits both.
The edge has one `connection` block to the central with the topic line `topic bench/# out 1`
or `topic bench/# in 1`; every broker has `max_queued_messages 0` (no queue limit), so that
nothing is dropped by a limit and every QoS 1 message must arrive.

For each round, edge kind and direction (`out`: publishers on the edge, subscribers on the
central; `in`: publishers on the central, subscribers on the edge) arbor_bench runs, on a
freshly started pair of brokers (--placement ends, -P the edge's pid):

  lat     latency at 100 msg/s, one publisher and one subscriber, QoS 1
  steady  4 publishers at 2 500 msg/s each (10 000 msg/s), QoS 1: the edge's CPU per bridged
          message at a rate both bridges carry
  full    4 publishers as fast as a window of 10 unacknowledged messages each allows, QoS 1:
          delivered msg/s (the bridge's throughput) and CPU per message at full speed

Backlog drain (per round and edge kind): the bridge connected once, a persistent session
subscribed to the bridged topics on the central (QoS 1) and the central stopped (it has
`persistence true`, so it keeps that session); once the edge says its bridge is down
(`$SYS/broker/connection/<remote_clientid>/state` 0) 100 000 QoS 1 messages are published to
the edge and every one acknowledged; then, right after the edge has logged a failed re-dial,
the central is started again and the subscriber reconnects as soon as it listens. Measured:
the time from the central's start until the last message arrives (which includes the edge's
wait for its next re-dial), the time from the first message to the last, the edge's CPU per
drained message, and that every message arrived exactly once.

Every process it starts is stopped by pid when it ends (and listed in --pidfile so that the
calling script can stop them too if this one is killed). Writes raw results under --out and
the section "Bridges: arbor or Mosquitto at the edge" of --markdown.
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import persist_bench
import tree_bench
from tree_bench import HOST, Broker, MiniClient, fmt, log, ratio, retained

SECTION = "## Bridges: arbor or Mosquitto at the edge"
KINDS = ("arbor", "mosquitto")
DIRECTIONS = ("out", "in")
BRIDGE_NAME = "bench"
REMOTE_CLIENTID = "bench-edge"
STATE_TOPIC = "$SYS/broker/connection/%s/state" % REMOTE_CLIENTID
DRAIN_TOPIC = "bench/drain"
PAYLOAD_PAD = b"." * 24  # an 8-digit sequence number and this: 32 bytes, arbor_bench's size

# Every broker, edge and central (mosquitto.conf syntax, which arbor reads too).
COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "log_type notice", "connection_messages false", "max_inflight_messages 20",
          "max_queued_messages 0"]
# The edge's bridge, after COMMON (CENTRAL_PORT and DIRECTION filled in).
BRIDGE = ["connection " + BRIDGE_NAME, "address 127.0.0.1:CENTRAL_PORT",
          "remote_clientid " + REMOTE_CLIENTID, "restart_timeout 1", "topic bench/# DIRECTION 1"]
# The central of the backlog drain, after COMMON (DIR its own directory).
CENTRAL_PERSISTENCE = ["persistence true", "persistence_location DIR/",
                       "autosave_interval 3600"]


def load_args(quick):
    """name -> arbor_bench arguments (the brokers, --placement and -P added per run)."""
    lat_d, run_d, trim = ("0.6", "0.6", "0.1") if quick else ("6", "4", "1")
    common = ["--qos", "1", "--topic-prefix", "bench/t", "--subscribers", "1",
              "--publishers", "1"]
    return {
        "lat": common + ["--topics", "1", "--rate", "100", "-d", lat_d,
                         "--trim", "0.1" if quick else "0.5", "--drain", "5"],
        "steady": common + ["--topics", "4", "--rate", "2500", "-d", run_d, "--trim", trim,
                            "--drain", "10"],
        # a long drain bound: an edge may accept faster than its bridge carries and queue the
        # rest (no limit), which arbor_bench waits for; a run ends 0.5 s after the last arrival
        "full": common + ["--topics", "4", "-i", "0", "--inflight", "10", "-d", run_d,
                          "--trim", trim, "--drain", "60"],
    }


LOADS = ("lat", "steady", "full")


# ---------------------------------------------------------------------------------------------
# The backlog's publisher and subscriber (MQTT 3.1.1, QoS 1, raw sockets: fast enough that
# neither is what a drain waits for)

def payload_of(seq):
    return b"%08d" % seq + PAYLOAD_PAD


def publish_backlog(port, count, window=1000):
    """count QoS 1 messages on DRAIN_TOPIC, at most `window` unacknowledged; returns when every
    one has its PUBACK."""
    s = persist_bench.connect(port, "bench-backlog-publisher")
    topic = persist_bench.string(DRAIN_TOPIC)
    sent = acked = 0
    pending = b""
    try:
        while acked < count:
            batch = bytearray()
            while sent < count and sent - acked < window and len(batch) < 1 << 16:
                batch += persist_bench.packet(
                    0x32, topic + struct.pack("!H", sent % 65535 + 1) + payload_of(sent))
                sent += 1
            if batch:
                s.sendall(batch)
            data = s.recv(65536)
            if not data:
                raise RuntimeError("the edge closed the publisher's connection")
            pending += data
            whole = len(pending) // 4 * 4
            for i in range(0, whole, 4):
                if pending[i] != 0x40:
                    raise RuntimeError("publisher: unexpected packet 0x%02x" % pending[i])
            acked += whole // 4
            pending = pending[whole:]
        s.sendall(b"\xe0\x00")
    finally:
        s.close()


def tally(seen, seq, r):
    """Count sequence number seq in r's distinct, duplicates or unexpected, with seen a
    bytearray of the numbers expected (1 once seen); True when it is new."""
    if not 0 <= seq < len(seen):
        r["unexpected"] += 1
        return False
    if seen[seq]:
        r["duplicates"] += 1
        return False
    seen[seq] = 1
    r["distinct"] += 1
    return True


class BacklogSubscriber:
    """A persistent session on the central, subscribed to bench/# at QoS 1, that counts the
    backlog's messages by sequence number (each acknowledged)."""

    def __init__(self, port, count):
        self.port, self.count = port, count
        self.client_id = "bench-backlog-subscriber"

    def create(self):
        s = persist_bench.connect(self.port, self.client_id, clean=False)
        s.sendall(persist_bench.packet(0x82, struct.pack("!H", 1) +
                                       persist_bench.string("bench/#") + b"\x01"))
        first, body = persist_bench.read_packet(s)
        if first != 0x90 or body[2:] != b"\x01":
            raise RuntimeError("SUBACK %r" % body)
        s.sendall(b"\xe0\x00")
        s.close()

    def receive(self, started, limit, quiet, stall):
        """Reconnect as soon as the central listens and read until every message has arrived
        and then nothing for `quiet` s (duplicates would show), until nothing has arrived for
        `stall` s after a first message, or until `limit` s after `started`. Times are seconds
        after `started`."""
        deadline = started + limit
        while True:
            try:
                s = persist_bench.connect(self.port, self.client_id, clean=False)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the central did not accept the subscriber")
                time.sleep(0.005)
        r = {"connected_s": time.monotonic() - started, "first_s": None, "last_s": None,
             "distinct": 0, "duplicates": 0, "unexpected": 0}
        seen = bytearray(self.count)
        buf, done_at, last_data = bytearray(), None, None
        try:
            while True:
                now = time.monotonic()
                if done_at is not None:
                    end = min(deadline, done_at + quiet)
                elif r["first_s"] is not None:
                    end = min(deadline, last_data + stall)
                else:
                    end = deadline
                if now >= end:
                    break
                s.settimeout(end - now)
                try:
                    data = s.recv(1 << 20)
                except socket.timeout:
                    break
                if not data:
                    raise RuntimeError("the central closed the subscriber's connection")
                now = last_data = time.monotonic()
                buf += data
                acks, used = bytearray(), 0
                while True:
                    parsed = self._next_packet(buf, used)
                    if parsed is None:
                        break
                    first, body_at, used = parsed
                    if first >> 4 != 3:
                        continue
                    n = buf[body_at] << 8 | buf[body_at + 1]
                    at = body_at + 2 + n
                    if (first >> 1) & 3:
                        acks += b"\x40\x02" + buf[at:at + 2]
                        at += 2
                    r["first_s"] = r["first_s"] if r["first_s"] is not None else now - started
                    try:
                        seq = int(buf[at:at + 8])
                    except ValueError:
                        seq = -1
                    if tally(seen, seq, r) and r["distinct"] == self.count:
                        r["last_s"], done_at = now - started, now
                del buf[:used]
                if acks:
                    s.sendall(acks)
            s.sendall(b"\xe0\x00")
        finally:
            s.close()
        r["missing"] = self.count - r["distinct"]
        return r

    @staticmethod
    def _next_packet(buf, at):
        """(first byte, offset of the body, offset after it) of the whole packet at `at`, or
        None when it has not all arrived."""
        if len(buf) - at < 2:
            return None
        length, mult, i = 0, 1, at + 1
        while True:
            if i >= len(buf):
                return None
            b = buf[i]
            length += (b & 0x7F) * mult
            mult *= 128
            i += 1
            if not b & 0x80:
                break
        if len(buf) < i + length:
            return None
        return buf[at], i, i + length


# ---------------------------------------------------------------------------------------------
# Brokers, pairs and measurements

class BridgeRunner(tree_bench.Runner):
    """Starts and stops the pairs (tree_bench.Runner's spawn, stop, settle) and measures."""

    def __init__(self, args):
        super().__init__(args)
        self.loads = load_args(args.quick)
        self.hz = os.sysconf("SC_CLK_TCK")

    def settle(self, net, limit=20.0):
        """Wait until the brokers are quiet (not in a quick run: its figures do not count)."""
        return 0.0 if self.args.quick else super().settle(net, limit)

    def write_conf(self, b, lines):
        with open(b.conf, "w") as f:
            f.write("\n".join(["listener %d %s" % (b.port, HOST)] + lines) + "\n")

    def start_pair(self, kind, direction, tag, persistent_central=False):
        a = self.args
        central = Broker("mosquitto", "central", a.mosquitto, a.out, tag + "-central")
        edge = Broker(kind, "edge", a.arbor if kind == "arbor" else a.mosquitto, a.out,
                      tag + "-edge")
        lines = list(COMMON)
        if persistent_central:
            store = os.path.join(a.out, tag + "-central-store")
            os.makedirs(store, exist_ok=True)
            os.chmod(store, 0o777)
            lines += [x.replace("DIR", store) for x in CENTRAL_PERSISTENCE]
            if os.geteuid() == 0:
                lines.append("user root")  # so that it can write the store it was given
        self.write_conf(central, lines)
        self.write_conf(edge, COMMON + [""] + [
            x.replace("CENTRAL_PORT", str(central.port)).replace("DIRECTION", direction)
            for x in BRIDGE])
        pair = {"kind": kind, "direction": direction, "central": central, "edge": edge,
                "brokers": {"central": central, "edge": edge}}
        self.start_broker(central)
        self.start_broker(edge)
        self.wait_bridge(pair)
        return pair

    def wait_bridge(self, pair, limit=60.0):
        """Until a message published on the publishers' side reaches the subscribers' side."""
        pub, sub = self.sides(pair)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            topic = "bench/probe/%d" % time.monotonic_ns()
            c = p = None
            try:
                c = MiniClient(sub.port, "bench-probe-sub")
                c.subscribe(topic)
                time.sleep(0.1)
                p = MiniClient(pub.port, "bench-probe-pub")
                p.publish(topic, b"probe")
                if c.wait_for(topic, 2):
                    return
            except (OSError, RuntimeError):
                time.sleep(0.2)
            finally:
                for x in (p, c):
                    if x:
                        x.close()
        raise RuntimeError("%s edge, %s: the bridge carried no probe in %.0f s"
                           % (pair["kind"], pair["direction"], limit))

    @staticmethod
    def sides(pair):
        """(publishers' broker, subscribers' broker)."""
        if pair["direction"] == "out":
            return pair["edge"], pair["central"]
        return pair["central"], pair["edge"]

    def stop_pair(self, pair):
        for b in (pair["edge"], pair["central"]):
            if b.proc is not None:
                self.stop(b.proc)
                if b.proc.returncode not in (0, -signal.SIGTERM):
                    log("note: %s %s exited with status %s (see %s)"
                        % (b.kind, b.name, b.proc.returncode, b.log))

    def run_load(self, pair, load, rnd):
        pub, sub = self.sides(pair)
        key = "r%d__%s__%s__%s" % (rnd, pair["kind"], pair["direction"], load)
        json_path = os.path.join(self.args.out, key + ".json")
        cmd = [self.args.bench] + self.loads[load] + [
            "--placement", "ends", "-b", "%s:%d" % (HOST, pub.port),
            "-b", "%s:%d" % (HOST, sub.port), "-P", str(pair["edge"].proc.pid),
            "--label", key, "--json", json_path, "--no-per-second"]
        with open(os.path.join(self.args.out, key + ".txt"), "w") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=300)
        if p.returncode != 0:
            raise RuntimeError("arbor_bench failed for %s (see %s.txt)" % (key, key))
        with open(json_path) as f:
            r = json.load(f)["result"]
        r["settle_s"] = self.settle(pair)
        lat = r.get("latency_ms") or {}
        log("  %-9s %-3s %-6s egress %9.0f msg/s  p50 %8.3f  p99 %8.3f ms  loss %5.2f%%  "
            "dup %d  edge cpu %s us/msg" % (
                pair["kind"], pair["direction"], load, r["egress"], lat.get("p50") or 0,
                lat.get("p99") or 0, 100 * r["loss_rate"], r["duplicates"],
                "%.2f" % r["broker_cpu_us_per_msg"]
                if r.get("broker_cpu_us_per_msg") is not None else "n/a"))
        return r

    def measure_direction(self, kind, direction, rnd, results, notes):
        pair = self.start_pair(kind, direction, "r%d-%s-%s" % (rnd, kind, direction))
        try:
            self.settle(pair)
            for load in LOADS:
                r = self.run_load(pair, load, rnd)
                results.setdefault(str(rnd), {}).setdefault(kind, {}).setdefault(
                    direction, {})[load] = r
                if r["settle_s"] is None:
                    notes.append("round %d, %s edge, %s: brokers still busy 20 s after %s"
                                 % (rnd, kind, direction, load))
        finally:
            self.stop_pair(pair)

    def wait_state(self, port, value, limit=30.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if retained(port, STATE_TOPIC, quiet=0.2).get(STATE_TOPIC) == value:
                    return
            except (OSError, RuntimeError):
                pass
            time.sleep(0.1)
        raise RuntimeError("the edge did not report its bridge state %s in %.0f s"
                           % (value, limit))

    @staticmethod
    def wait_redial_failed(edge, log_at, limit=30.0):
        """Until the edge's log has said, after offset log_at, that a re-dial failed."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            with open(edge.log, "rb") as f:
                f.seek(log_at)
                if b"Error creating bridge" in f.read():
                    return
            time.sleep(0.05)
        raise RuntimeError("%s edge: no failed re-dial logged in %.0f s (see %s)"
                           % (edge.kind, limit, edge.log))

    def measure_drain(self, kind, rnd, results):
        a = self.args
        pair = self.start_pair(kind, "out", "r%d-%s-drain" % (rnd, kind), persistent_central=True)
        central, edge = pair["central"], pair["edge"]
        sub = BacklogSubscriber(central.port, a.backlog)
        try:
            sub.create()
            self.stop(central.proc)
            log_at = os.path.getsize(edge.log)
            self.wait_state(edge.port, "0")
            t0 = time.monotonic()
            publish_backlog(edge.port, a.backlog)
            published_s = time.monotonic() - t0
            self.settle(pair)
            # the central returns after an outage, while the edge re-dials every
            # restart_timeout: Mosquitto's first re-dial after losing a connection comes
            # seconds later than that, so a quick return would measure that wait instead
            self.wait_redial_failed(edge, log_at)
            cpu_before = self.cpu_ticks([edge.proc.pid])
            started = time.monotonic()
            central.proc = self.spawn([central.binary, "-c", central.conf], central.log)
            r = sub.receive(started, limit=60 if a.quick else 600, quiet=1 if a.quick else 3,
                            stall=5 if a.quick else 30)
            cpu = (self.cpu_ticks([edge.proc.pid]) - cpu_before) / self.hz
        finally:
            self.stop_pair(pair)
        r.update(messages=a.backlog, published_s=published_s, edge_cpu_s=cpu,
                 drain_s=(r["last_s"] - r["first_s"]) if r["last_s"] is not None else None)
        # the CPU is read after the quiet period, in which the edge has nothing left to do
        r["rate"] = a.backlog / r["drain_s"] if r["drain_s"] else None
        r["edge_cpu_us_per_msg"] = 1e6 * cpu / a.backlog
        results.setdefault(str(rnd), {}).setdefault(kind, {})["drain"] = r
        log("  %-9s drain: %d published in %.1f s; central start -> last %s s, first -> last "
            "%s s, %s msg/s, edge cpu %.2f us/msg, missing %d, duplicates %d" % (
                kind, a.backlog, published_s, fmt(r["last_s"], 2), fmt(r["drain_s"], 2),
                fmt(r["rate"]), r["edge_cpu_us_per_msg"], r["missing"], r["duplicates"]))

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        env = environment(a, self.loads)
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for direction in DIRECTIONS:
                for kind in KINDS:
                    self.measure_direction(kind, direction, rnd, results, notes)
            for kind in KINDS:
                self.measure_drain(kind, rnd, results)
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


def environment(a, loads):
    env = tree_bench.environment(a)
    env.update(loads=loads, backlog=a.backlog)
    return env


# ---------------------------------------------------------------------------------------------
# The markdown section

def value(results, rnd, kind, *path):
    r = results.get(str(rnd), {}).get(kind)
    for p in path:
        if r is None:
            return None
        r = r.get(p)
    return r


def scaled(factor, x):
    return None if x is None else factor * x


# figure text, digits, lower is better, value(results, round, kind, direction)
FIGURES = (
    ("latency p50 at 100 msg/s (ms)", 3,
     lambda res, r, k, d: value(res, r, k, d, "lat", "latency_ms", "p50")),
    ("latency p99 at 100 msg/s (ms)", 3,
     lambda res, r, k, d: value(res, r, k, d, "lat", "latency_ms", "p99")),
    ("edge CPU per bridged message at 10,000 msg/s (us)", 2,
     lambda res, r, k, d: value(res, r, k, d, "steady", "broker_cpu_us_per_msg")),
    ("throughput: delivered msg/s at full speed", 0,
     lambda res, r, k, d: value(res, r, k, d, "full", "egress")),
    ("edge CPU per bridged message at full speed (us)", 2,
     lambda res, r, k, d: value(res, r, k, d, "full", "broker_cpu_us_per_msg")),
)
DRAIN_FIGURES = (
    ("backlog drain: central start to last message (s)", 2, "last_s"),
    ("backlog drain: first to last message (s)", 2, "drain_s"),
    ("backlog drain: msg/s (first to last)", 0, "rate"),
    ("backlog drain: edge CPU per message (us)", 2, "edge_cpu_us_per_msg"),
)


def cells(vals, digits):
    return " / ".join(fmt(v, digits) for v in vals)


def write_section(path, results):
    env, rounds, out = tree_bench.section_head(results, "bridge", SECTION)
    backlog = env["backlog"]
    out += ["An edge broker (arbor or Debian's mosquitto) bridged to a central broker (always "
            "Debian's mosquitto) over loopback, QoS 1. `out`: publishers on the edge, "
            "subscribers on the central; `in`: publishers on the central, subscribers on the "
            "edge. CPU is the edge broker's.", "",
            "| Figure | Direction | arbor edge | mosquitto edge | arbor/mosquitto |",
            "|---|---|---:|---:|---:|"]
    for figure, digits, get in FIGURES:
        for d in DIRECTIONS:
            vals = {k: [get(results, r, k, d) for r in rounds] for k in KINDS}
            ratios = [ratio(vals["arbor"][i], vals["mosquitto"][i]) for i in range(len(rounds))]
            out.append("| %s | %s | %s | %s | %s |" % (
                figure, d, cells(vals["arbor"], digits), cells(vals["mosquitto"], digits),
                cells(ratios, 2)))
    for figure, digits, field in DRAIN_FIGURES:
        vals = {k: [value(results, r, k, "drain", field) for r in rounds] for k in KINDS}
        ratios = [ratio(vals["arbor"][i], vals["mosquitto"][i]) for i in range(len(rounds))]
        out.append("| %s | out | %s | %s | %s |" % (
            figure.replace("backlog", "%s-message backlog" % fmt(backlog)), cells(vals["arbor"],
            digits), cells(vals["mosquitto"], digits), cells(ratios, 2)))
    once = {k: [value(results, r, k, "drain") or {} for r in rounds] for k in KINDS}
    out.append("| backlog drain: arrived exactly once | out | %s | %s | |" % tuple(
        " / ".join("%s of %s" % (fmt(d.get("distinct")), fmt(backlog)) +
                   ("" if not d.get("duplicates") else ", %d duplicates" % d["duplicates"])
                   for d in once[k]) for k in KINDS))
    out += ["", "Lower is better except for msg/s; ratios are arbor/mosquitto per round.", ""]
    out += lost_lines(results, rounds)

    out += ["### Run details", "",
            "Every arbor_bench run (latency in ms over the trimmed window; loss and duplicates "
            "over the whole run, after a drain that ends 0.5 s after the last arrival; CPU is "
            "the edge broker's).", "",
            "| Round | Edge | Direction | Load | ingress msg/s | delivered msg/s | p50 / p99 ms "
            "| loss % | dup | edge CPU % | us/msg |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for d in DIRECTIONS:
            for kind in KINDS:
                for load in LOADS:
                    s = value(results, r, kind, d, load)
                    if not s:
                        continue
                    lat = s.get("latency_ms") or {}
                    out.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %d | %s | %s |" % (
                        r, kind, d, load, fmt(s["ingress"]), fmt(s["egress"]),
                        fmt(lat.get("p50"), 3), fmt(lat.get("p99"), 3),
                        fmt(100 * s["loss_rate"], 2), s["duplicates"],
                        fmt(s.get("broker_cpu_pct")), fmt(s.get("broker_cpu_us_per_msg"), 2)))
    out += ["", "Backlog drains (seconds after the central's start; the backlog was "
            "published to the edge, every message acknowledged, in the time shown):", "",
            "| Round | Edge | messages | published in s | subscriber back | first | last "
            "| msg/s | edge CPU s | arrived | missing | duplicates |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for kind in KINDS:
            d = value(results, r, kind, "drain")
            if not d:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r, kind, fmt(d["messages"]), fmt(d["published_s"], 2), fmt(d["connected_s"], 2),
                fmt(d["first_s"], 2), fmt(d["last_s"], 2), fmt(d["rate"]),
                fmt(d["edge_cpu_s"], 2), fmt(d["distinct"]), fmt(d["missing"]),
                fmt(d["duplicates"])))
    out += [""] + ["Note: %s." % n for n in env.get("notes", [])]
    out += ["Took %.0f s." % env["duration_s"], ""]
    out += method_text(env)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def lost_lines(results, rounds):
    """A line on what arbor_bench found missing or doubled at QoS 1 (there should be none)."""
    bad = []
    for r in rounds:
        for kind in KINDS:
            for d in DIRECTIONS:
                for load in LOADS:
                    s = value(results, r, kind, d, load)
                    if s and (s["loss_rate"] > 0 or s["duplicates"] > 0):
                        bad.append("round %s, %s edge, %s, %s: %.2f%% lost, %d duplicates" % (
                            r, kind, d, load, 100 * s["loss_rate"], s["duplicates"]))
    if not bad:
        return ["Every arbor_bench run delivered every QoS 1 message exactly once.", ""]
    return ["QoS 1 messages lost or doubled: " + "; ".join(bad) + ".", ""]


def method_text(env):
    lines = ["### How it was run", "", "```sh", "make bench-bridge", "```", "",
             "builds arbor and arbor_bench into `build/` (`make bench-bridge BUILD=dir` for "
             "another tree) and runs everything on loopback; `BENCH_BRIDGE_ROUNDS` sets the "
             "rounds (default 2). Each round measures `out` and then `in`, each on a freshly "
             "started pair of brokers, the arbor edge and the mosquitto edge in turn, then the "
             "backlog drain of each. On each pair, once the bridge carries a probe, these loads "
             "run one after the other (waiting for the brokers to go quiet between them), with "
             "`-b` the publishers' broker and then the subscribers' and `-P` the edge's pid:",
             "", "```"]
    for name, args in env["loads"].items():
        lines.append("%-7s arbor_bench %s --placement ends" % (name, " ".join(args)))
    lines += ["```", "", "Every broker's configuration (edge and central):", "", "```",
              "listener PORT 127.0.0.1"] + COMMON + [
              "```", "", "and the edge's bridge (`in` or `out`):", "", "```"] + BRIDGE + [
              "```", "",
              "The central of the backlog drain adds `%s` (and `user root` when run as root, "
              "so that it can write there)." % "`, `".join(CENTRAL_PERSISTENCE), "",
              "### How to read it", "",
              "- **Latency** is publisher to subscriber through both brokers and the bridge, "
              "at 100 msg/s (QoS 1 on every leg: the publisher's PUBLISH and PUBACK, the "
              "bridge's, the subscriber's).",
              "- **Edge CPU per bridged message** = the edge broker's CPU (user + system) over "
              "the measured window / messages delivered in it. At 10,000 msg/s both edges "
              "carry everything, so this is the cost of bridging one message. At full speed "
              "the publishers' window is acknowledged by the first broker, not by the "
              "subscriber: an edge that accepts messages faster than its bridge carries them "
              "queues the rest (no limit here), and that accepting counts in its CPU too.",
              "- **Throughput** is arbor_bench's delivered rate over the window at full speed: "
              "what the bridge carried while the publishers pushed. `in`: the central (always "
              "mosquitto) accepts the messages and sends them over the bridge at its own "
              "`max_inflight_messages` 20; `out`: the edge does, with at most 20 in flight on "
              "the bridge (both edges).",
              "- **Backlog drain**: %s QoS 1 messages published to the edge while the central "
              "was down (once the edge reported its bridge state 0), all acknowledged and "
              "queued in the bridge. The central is started again (time 0) right after the "
              "edge has logged a failed re-dial (`Error creating bridge`), so that both edges "
              "are in their re-dial cycle, and a subscriber whose persistent session the "
              "central kept reconnects as soon as it listens (*subscriber back*). *First* and "
              "*last* are when the first and the last message reached it. Central start to "
              "last message is what an operator waits for; it includes the edge's wait for "
              "its next re-dial: arbor re-dials every `restart_timeout` (1 s here), while "
              "Debian's mosquitto 2.0.11 with the same line re-dialled 5 to 15 s apart, "
              "growing, in our runs (its log has the attempts; the *first* column shows the "
              "wait). First to last is the drain itself. The "
              "edge's CPU is counted from the central's start until the subscriber has had "
              "nothing for a quiet period after the last message (the edge is idle then); "
              "*arrived* counts distinct sequence numbers, *duplicates* any seen twice." % fmt(
                  env["backlog"]),
              "- The machine has 2 CPUs: the two brokers and the load generator compete for "
              "them, and it was shared with other work. Compare the two edges within a round; "
              "between rounds the figures move by tens of percent.", ""]
    return lines


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    ap.add_argument("--backlog", type=int, help="messages of the backlog drain (default "
                    "100000, 5000 with --quick)")
    args = ap.parse_args()
    if args.backlog is None:
        args.backlog = 5000 if args.quick else 100000
    return tree_bench.render_or_measure(ap, args, BridgeRunner, write_section)


if __name__ == "__main__":
    sys.exit(main())
