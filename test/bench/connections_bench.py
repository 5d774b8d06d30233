#!/usr/bin/env python3
"""connections_bench.py: `make bench-connections` (scripts/run-bench-connections.sh runs it).

Many MQTT connections to one broker on loopback, arbor and Debian's mosquitto side by side in
one run (arbor first, then mosquitto; with 2 rounds the second round starts with mosquitto),
each broker started fresh for every measurement:

  idle        N connections (MQTT 3.1.1, clean session, keepalive 600, unique client ids),
              connected and left alone: the broker's memory per connection, and how fast
              they connect
  subscribed  N connections, each subscribed (QoS 0) to a topic of its own, conn/<i>/temp,
              and to the shared conn/all: the memory per connection with subscriptions; then
              the fan-out: a client of its own publishes one QoS 0 message on conn/all,
              --repeats times (1 s apart), and every subscriber's receipt is timed

for N in --connections (default 1000, 5000, 10000, 18000). A process here may hold as many open
files as its hard limit allows (20 000 on the machine this was written for): the bench raises
its own soft limit to the hard one before it starts a broker (which inherits it; arbor also
raises its own at start-up), and each of the two (the bench's sockets, the broker's) needs one
descriptor per connection, so N stays below that limit. The connections come from the source
addresses 127.0.0.2, 127.0.0.3, ... (bound before the connect, at most PER_ADDRESS each: a
source address has about 28 000 ports to give), a fresh set for every measurement (none of
them has a port left in TIME_WAIT). They are opened in a pipeline, a window of CONNECTs (and
SUBSCRIBEs) in flight, their CONNACKs (SUBACKs) read with epoll. Memory is the broker's VmRSS
(/proc/<pid>/status) 2 s after the last CONNACK (SUBACK), less its VmRSS before the first
connection; a receipt's time is the kernel's (SO_TIMESTAMPNS: when the packet reached the
subscriber's socket, not when this script read it), the publish time the clock read just
before the PUBLISH was sent (both CLOCK_REALTIME).

Every process started here stops by itself: each broker by pid when its measurement ends (and
listed in --pidfile, so that the calling script can stop it if this one is killed). Writes raw
results under --out and the section "Many connections: memory and fan-out" of --markdown.
"""

import errno
import math
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

import bridge_bench  # the modules of this folder: stdlib only, run under the system python3
import tree_bench
from bridge_bench import cells, value
from partition_bench import latency_stats, packets, rss_kib
from persist_bench import packet, string
from tree_bench import HOST, Broker, fmt, log, ratio

SECTION = "## Many connections: memory and fan-out"
KINDS = ("arbor", "mosquitto")
CONNECTIONS = (1000, 5000, 10000, 18000)
QUICK_CONNECTIONS = (200, 500)
PER_ADDRESS = 10000  # connections per source address (it has ~28 000 ports)
WINDOW = 64  # connections whose CONNACK (SUBACK) is awaited at once (mosquitto listens with a
# backlog of 100: a larger window overflows it, and a dropped SYN waits 1 s for its resend)
KEEPALIVE = 600
SHARED_TOPIC = "conn/all"
SPARE_FILES = 64  # descriptors besides the connections (listeners, logs, pipes, epoll)
SO_TIMESTAMPNS = 35  # <asm-generic/socket.h>; the system python3 does not name it
TARGET = 100000  # the target, estimated from the largest N measured

# Every broker (mosquitto.conf syntax, which arbor reads too), after its listener line.
COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "connection_messages false"]


# ---------------------------------------------------------------------------------------------
# The connections: one process (this one), every socket non-blocking, read with epoll.

def source_address(k):
    """The k-th source address: 127.0.0.2, 127.0.0.3, ..., 127.0.1.0, ..."""
    k += 2
    return "127.%d.%d.%d" % (k >> 16 & 255, k >> 8 & 255, k & 255)


def connect_packet(client_id):
    return packet(0x10, string("MQTT") + bytes([4, 0x02]) + struct.pack("!H", KEEPALIVE) +
                  string(client_id))


def subscribe_packet(i):
    return packet(0x82, struct.pack("!H", 1) + string("conn/%d/temp" % i) + b"\x00" +
                  string(SHARED_TOPIC) + b"\x00")


class Swarm:
    """N client connections to a broker, connected (and subscribed) by open()."""

    def __init__(self, port, n, tag, first_address, subscribe):
        self.port, self.n, self.tag, self.subscribe = port, n, tag, subscribe
        self.first_address = first_address
        self.addresses = math.ceil(n / PER_ADDRESS)
        self.socks = [None] * n
        self.sel = selectors.DefaultSelector()
        self.failures = []  # (index, what) of every connection that did not come up

    def _start(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.bind((source_address(self.first_address + i // PER_ADDRESS), 0))
        err = s.connect_ex((HOST, self.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.failures.append((i, "connect: %s" % os.strerror(err)))
            return
        self.socks[i] = s
        self.sel.register(s, selectors.EVENT_WRITE, [i, bytearray(), False])

    def _fail(self, s, state, what):
        self.sel.unregister(s)
        s.close()
        self.socks[state[0]] = None
        self.failures.append((state[0], what))
        return False

    def _writable(self, s, state):
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._fail(s, state, "connect: %s" % os.strerror(err))
            return
        data = connect_packet("%s-%d" % (self.tag, state[0]))
        if self.subscribe:
            data += subscribe_packet(state[0])
        s.send(data)  # a few dozen bytes into an empty send buffer
        self.sel.modify(s, selectors.EVENT_READ, state)

    def _readable(self, s, state):
        """True once the connection is up: CONNACK accepted (and SUBACK, both QoS 0)."""
        try:
            data = s.recv(4096)
        except OSError as e:
            return self._fail(s, state, "recv: %s" % e)
        if not data:
            return self._fail(s, state, "closed by the broker")
        state[1] += data
        for first, body in packets(state[1]):
            if first == 0x20 and body[1:2] == b"\x00":
                state[2] = True
            elif first == 0x90 and body[2:] == b"\x00\x00":
                return state[2]
            else:
                return self._fail(s, state, "packet 0x%02x %r" % (first, body[:8]))
        return state[2] and not self.subscribe

    def open(self, limit):
        """Connect every one (at most WINDOW awaited at once); returns the seconds it took.
        A connection that fails is counted in failures, not retried."""
        started = time.monotonic()
        deadline = started + limit
        nxt = up = 0
        while up + len(self.failures) < self.n:
            while nxt < self.n and nxt - up - len(self.failures) < WINDOW:
                self._start(nxt)
                nxt += 1
            if time.monotonic() > deadline:
                raise RuntimeError("%s: %d of %d connections up after %.0f s"
                                   % (self.tag, up, self.n, limit))
            for key, events in self.sel.select(1.0):
                s, state = key.fileobj, key.data
                if events & selectors.EVENT_WRITE:
                    self._writable(s, state)
                elif self._readable(s, state):
                    self.sel.unregister(s)
                    up += 1
        return time.monotonic() - started

    def up(self):
        return [i for i, s in enumerate(self.socks) if s is not None]

    def close(self):
        for s in self.socks:
            if s is not None:
                s.close()
        self.socks = [None] * self.n
        self.sel.close()


def receipt_ns(ancdata):
    """The kernel's receive time (CLOCK_REALTIME ns) in recvmsg's ancillary data, or None."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec * 1000000000 + nsec
    return None


def wait_quiet(cpu, deadline, still=0.3):
    """Until cpu() (the broker's CPU seconds) has not grown for `still` s, or the deadline
    (monotonic)."""
    last, since = cpu(), time.monotonic()
    while time.monotonic() - since < still and time.monotonic() < deadline:
        time.sleep(0.02)
        now = cpu()
        if now != last:
            last, since = now, time.monotonic()


def fan_out(swarm, publisher, repeats, gap, limit, cpu):
    """Publish one QoS 0 message on SHARED_TOPIC `repeats` times, `gap` s apart; for each, wait
    until every subscriber of the swarm has it (or `limit` s). The sockets are read once the
    broker has gone quiet (cpu(): its CPU seconds so far); a receipt's time is the kernel's.
    Returns one dict per repeat: delivery times (ms), how many received it, how many
    connections closed, the broker's CPU from the publish until it went quiet."""
    up = swarm.up()
    sel = selectors.DefaultSelector()
    for i in up:
        sel.register(swarm.socks[i], selectors.EVENT_READ, [i, bytearray()])
    out = []
    try:
        for k in range(repeats):
            got, closed, delays, late_reads = set(), 0, [], 0
            cpu_before = cpu()
            sent_ns = time.time_ns()
            publisher.sendall(packet(0x30, string(SHARED_TOPIC) + b"%d %d" % (k, sent_ns)))
            deadline = time.monotonic() + limit
            wait_quiet(cpu, deadline)  # the reading below would take a CPU from the broker
            cpu_after = cpu()
            while len(got) + closed < len(up) and time.monotonic() < deadline:
                for key, _ in sel.select(0.2):
                    s, (i, buf) = key.fileobj, key.data
                    try:
                        data, anc, _, _ = s.recvmsg(4096, 64)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(s)
                        closed += 1
                        continue
                    at = receipt_ns(anc)
                    if at is None:
                        at, late_reads = time.time_ns(), late_reads + 1
                    buf += data
                    for first, body in packets(buf):
                        n = body[0] << 8 | body[1]
                        if first >> 4 == 3 and body[2 + n:].split(b" ")[0] == b"%d" % k:
                            if i not in got:
                                got.add(i)
                                delays.append((at - sent_ns) / 1e6)
            out.append({"received": len(got), "closed": closed, "no_timestamp": late_reads,
                        "cpu_s": cpu_after - cpu_before, "delivery_ms": latency_stats(delays),
                        "delays": delays})
            rest = sent_ns / 1e9 + gap - time.time()
            if rest > 0 and k + 1 < repeats:
                time.sleep(rest)
    finally:
        sel.close()
    return out


# ---------------------------------------------------------------------------------------------
# The measurement

def open_files_limit(pid):
    """(soft, hard) "Max open files" of a process, from /proc/<pid>/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return [None if v == "unlimited" else int(v) for v in (soft, hard)]
    return [None, None]


def open_files(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


class ConnectionsRunner(bridge_bench.BridgeRunner):
    """Starts and stops the brokers (BridgeRunner's spawn, stop, write_conf, start_broker) and
    measures."""

    def __init__(self, args):
        super().__init__(args)
        self.next_address = 0  # source addresses handed out so far

    def cpu_s(self, pid):
        return self.cpu_ticks([pid]) / self.hz

    def measure_one(self, kind, n, subscribe, rnd, notes):
        a = self.args
        what = "subscribed" if subscribe else "idle"
        tag = "r%d-%s-%d-%s" % (rnd, kind, n, what)
        b = Broker(kind, "broker", a.arbor if kind == "arbor" else a.mosquitto, a.out, tag)
        loops = ["loops %d" % a.arbor_loops] if kind == "arbor" and a.arbor_loops else []
        self.write_conf(b, COMMON + loops)
        self.start_broker(b)
        pid = b.proc.pid
        swarm = publisher = None
        r = {"kind": kind, "connections": n, "subscribed": subscribe}
        try:
            time.sleep(a.settle / 4)
            r["open_files_limit"] = open_files_limit(pid)
            soft = r["open_files_limit"][0]
            if soft is not None and soft < n + SPARE_FILES:
                notes.append("%s's open files limit is %d, below %d connections" % (kind, soft, n))
            r["rss_before_kib"] = rss_kib(pid)
            swarm = Swarm(b.port, n, tag, self.next_address, subscribe)
            self.next_address += swarm.addresses
            r["source_addresses"] = [source_address(swarm.first_address + j)
                                     for j in range(swarm.addresses)]
            r["connect_s"] = swarm.open(60 + n / 100)
            r["up"] = n - len(swarm.failures)
            r["failures"] = len(swarm.failures)
            r["first_failures"] = swarm.failures[:5]
            if swarm.failures:
                notes.append("%s, %d %s connections: %d did not come up (first: %s)"
                             % (kind, n, what, len(swarm.failures), swarm.failures[0][1]))
            time.sleep(a.settle)
            r["rss_kib"] = rss_kib(pid)
            r["broker_open_files"] = open_files(pid)
            up = r["up"] or 1
            r["bytes_per_connection"] = (r["rss_kib"] - r["rss_before_kib"]) * 1024.0 / up
            r["connections_per_s"] = r["up"] / r["connect_s"] if r["connect_s"] else None
            if subscribe:
                publisher = tree_bench.MiniClient(b.port, tag + "-publisher")
                rounds = fan_out(swarm, publisher.sock, a.repeats, a.gap, a.fan_out_limit,
                                 lambda: self.cpu_s(pid))
                r["fan_out"] = [{k: v for k, v in x.items() if k != "delays"} for x in rounds]
                delays = [d for x in rounds for d in x["delays"]]
                r["delivery_ms"] = latency_stats(delays)
                r["received"] = sum(x["received"] for x in rounds)
                r["expected"] = n * a.repeats
                r["lost"] = r["expected"] - r["received"]
                r["cpu_ms_per_fan_out"] = 1e3 * sum(x["cpu_s"] for x in rounds) / a.repeats
                r["rss_after_fan_out_kib"] = rss_kib(pid)
                if r["lost"]:
                    notes.append("%s, %d subscribers: %d of %d deliveries missing"
                                 % (kind, n, r["lost"], r["expected"]))
        finally:
            self.stop(b.proc)  # before the clients close: no TIME_WAIT on this side
            r["exit"] = b.proc.returncode
            if b.proc.returncode not in (0, -signal.SIGTERM):
                notes.append("%s exited with status %s (see %s)"
                             % (kind, b.proc.returncode, b.log))
            for x in (publisher, swarm):
                if x is not None:
                    x.close()
        lat = r.get("delivery_ms") or {}
        log("%s %s N=%d: %s B/connection (RSS %s -> %s KiB), %s connections/s%s" % (
            kind, what, n, fmt(r["bytes_per_connection"]), fmt(r["rss_before_kib"]),
            fmt(r["rss_kib"]), fmt(r["connections_per_s"]),
            "; fan-out p50 %s p99 %s max %s ms, %s of %s received, %s ms CPU each" % (
                fmt(lat.get("p50"), 1), fmt(lat.get("p99"), 1), fmt(lat.get("max"), 1),
                fmt(r["received"]), fmt(r["expected"]), fmt(r["cpu_ms_per_fan_out"], 1))
            if subscribe else ""))
        return r

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the brokers inherit it
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        counts = []
        for n in a.connections:
            if soft != resource.RLIM_INFINITY and n + SPARE_FILES > soft:
                notes.append("%d connections skipped: this process may open %d files" % (n, soft))
            else:
                counts.append(n)
        env = tree_bench.environment(a)
        env.update(loads={}, connections=counts, repeats=a.repeats, gap_s=a.gap,
                   settle_s=a.settle, fan_out_limit_s=a.fan_out_limit,
                   open_files_limit=[soft, hard], per_address=PER_ADDRESS,
                   window=WINDOW, keepalive=KEEPALIVE)
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for kind in (KINDS if rnd % 2 else KINDS[::-1]):
                for n in counts:
                    for subscribe in (False, True):
                        r = self.measure_one(kind, n, subscribe, rnd, notes)
                        results.setdefault(str(rnd), {}).setdefault(kind, {})[
                            "%d-%s" % (n, "subscribed" if subscribe else "idle")] = r
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


# ---------------------------------------------------------------------------------------------
# The markdown section

def field(what, *path):
    return lambda res, r, k, n: value(res, r, k, "%d-%s" % (n, what), *path)


# figure text, digits, value(results, round, kind, connections)
FIGURES = (
    ("idle: broker memory per connection (bytes)", 0, field("idle", "bytes_per_connection")),
    ("subscribed: broker memory per connection (bytes)", 0,
     field("subscribed", "bytes_per_connection")),
    ("idle: connections/s (CONNECT to CONNACK, %d at a time)" % WINDOW, 0,
     field("idle", "connections_per_s")),
    ("subscribed: connections/s (CONNECT, SUBSCRIBE to SUBACK)", 0,
     field("subscribed", "connections_per_s")),
) + tuple(("fan-out of one QoS 0 message: delivery time %s (ms)" % t, 2,
           field("subscribed", "delivery_ms", w))
          for t, w in (("first", "min"), ("p50", "p50"), ("p99", "p99"), ("last", "max"))) + (
    ("fan-out: broker CPU per message fanned out (ms)", 1,
     field("subscribed", "cpu_ms_per_fan_out")),
)


def received(res, r, k, n):
    d = value(res, r, k, "%d-subscribed" % n) or {}
    return "%s of %s" % (fmt(d.get("received")), fmt(d.get("expected")))


def projection(results, env):
    """The paragraph on TARGET connections, from the largest N of round 1's figures."""
    n = max(env["connections"]) if env["connections"] else None
    parts = []
    for kind in KINDS:
        idle = value(results, 1, kind, "%d-idle" % n) if n else None
        sub = value(results, 1, kind, "%d-subscribed" % n) if n else None
        if not (idle and sub):
            continue
        base = idle["rss_before_kib"] * 1024.0
        parts.append("%s about %s MiB idle and %s MiB with two subscriptions each (%s and %s "
                     "bytes per connection, and %s MiB for the broker itself)" % (
                         kind, fmt((base + TARGET * idle["bytes_per_connection"]) / 2 ** 20),
                         fmt((base + TARGET * sub["bytes_per_connection"]) / 2 ** 20),
                         fmt(idle["bytes_per_connection"]), fmt(sub["bytes_per_connection"]),
                         fmt(base / 2 ** 20, 1)))
    if not parts:
        return []
    return [
        "**%s connections**, from the figures at %s, would take in the broker's own memory: %s. "
        "The "
        "kernel's side of each TCP connection (its socket and buffers) comes on top and is not "
        "in these figures. The broker needs an open files limit above %s (one descriptor per "
        "connection, a few more for listeners and logs, e.g. 131072): arbor raises its soft "
        "limit to the hard one at start-up, so the hard limit is what counts; the systemd unit "
        "config/arbor.service sets `LimitNOFILE=%s`. Here a process may open %s files at most "
        "(its hard limit), so every N measured stays below that. The clients need as many "
        "descriptors on their side, and ports: a client address has about 28 000 ports for "
        "one broker address and port, so %s connections need at least 4 source addresses "
        "(or machines)." % (fmt(TARGET), fmt(n), "; ".join(parts), fmt(TARGET),
                            unit_open_files_limit(), fmt(env["open_files_limit"][1]),
                            fmt(TARGET)), ""]


def unit_open_files_limit():
    """LimitNOFILE= of the systemd unit config/arbor.service, as written there."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config",
                        "arbor.service")
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("LimitNOFILE="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return "?"


def per_repeat(counts):
    """"5 x 18,000" when every repeat had the same count, else each one."""
    if counts and len(set(counts)) == 1:
        return "%d x %s" % (len(counts), fmt(counts[0]))
    return ", ".join(fmt(c) for c in counts)


def write_section(path, results):
    env, rounds, out = tree_bench.section_head(results, "connections", SECTION)
    out += ["N MQTT connections to one broker on loopback (from 127.0.0.2, 127.0.0.3, ..., at "
            "most %s per source address), idle, then each subscribed to a topic of its own and "
            "to `%s`, which gets one QoS 0 message %d times: arbor against Debian's mosquitto, "
            "a broker started fresh for every measurement." % (
                fmt(PER_ADDRESS), SHARED_TOPIC, env["repeats"]), "",
            "| Figure | Connections | arbor | mosquitto | arbor/mosquitto |",
            "|---|---:|---:|---:|---:|"]
    for figure, digits, get in FIGURES:
        for n in env["connections"]:
            vals = {k: [get(results, r, k, n) for r in rounds] for k in KINDS}
            ratios = [ratio(vals["arbor"][i], vals["mosquitto"][i]) for i in range(len(rounds))]
            out.append("| %s | %s | %s | %s | %s |" % (
                figure, fmt(n), cells(vals["arbor"], digits), cells(vals["mosquitto"], digits),
                cells(ratios, 2)))
    for n in env["connections"]:
        out.append("| fan-out: deliveries received | %s | %s | %s | |" % tuple(
            [fmt(n)] + [" / ".join(received(results, r, k, n) for r in rounds) for k in KINDS]))
    out += ["", "Lower is better except for connections/s; ratios are arbor/mosquitto per "
            "round.", ""]
    out += projection(results, env)
    out += ["### Run details", "",
            "VmRSS of the broker before the first connection and %s s after the last; the "
            "broker's open descriptors then; the fan-out's deliveries per repeat."
            % fmt(env["settle_s"], 1), "",
            "| Round | Broker | Connections | idle RSS before / after KiB | subscribed RSS "
            "before / after KiB | broker descriptors | connect s idle / subscribed | received "
            "per repeat | failed connections |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for kind in KINDS:
            for n in env["connections"]:
                idle = value(results, r, kind, "%d-idle" % n)
                sub = value(results, r, kind, "%d-subscribed" % n)
                if not (idle and sub):
                    continue
                out.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s | %s |" % (
                    r, kind, fmt(n), fmt(idle["rss_before_kib"]), fmt(idle["rss_kib"]),
                    fmt(sub["rss_before_kib"]), fmt(sub["rss_kib"]),
                    fmt(sub["broker_open_files"]), fmt(idle["connect_s"], 2),
                    fmt(sub["connect_s"], 2),
                    per_repeat([x["received"] for x in sub.get("fan_out", [])]),
                    fmt(idle["failures"] + sub["failures"])))
    out += [""] + ["Note: %s." % x for x in env.get("notes", [])]
    out += ["Took %.0f s." % env["duration_s"], ""]
    out += method_text(env)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def method_text(env):
    return [
        "### How it was run", "", "```sh", "make bench-connections", "```", "",
        "builds arbor into `build/` (`make bench-connections BUILD=dir` for another tree) and "
        "runs everything on loopback; `BENCH_CONNECTIONS` sets the list of N (default `%s`), "
        "`BENCH_CONNECTIONS_ROUNDS` the rounds (default 1; a second round starts with "
        "mosquitto). For each kind and N, two fresh brokers one after the other (idle, then "
        "subscribed), each with this configuration:" % " ".join(str(n) for n in CONNECTIONS),
        "", "```", "listener PORT 127.0.0.1"] + COMMON + [
        "```", "",
        "The bench (test/bench/connections_bench.py, one process) raises its open files soft "
        "limit to the hard one (%s here), which the broker inherits, and reads the broker's "
        "VmRSS from /proc/<pid>/status before the first connection. It opens N TCP "
        "connections from 127.0.0.2, 127.0.0.3, ... (%s per source address, a fresh set for "
        "every broker), each sending an MQTT 3.1.1 CONNECT (clean session, keepalive %d, a "
        "client id of its own) and, when subscribed, a SUBSCRIBE to `conn/<i>/temp` and `%s` "
        "(QoS 0) at once, %d connections awaiting their CONNACK (SUBACK) at a time, read with "
        "epoll. %s s after the last one it reads the broker's VmRSS again. Subscribed, a "
        "publisher of its own then sends one QoS 0 PUBLISH on `%s` (payload: its repeat and "
        "the time), %d times, %s s apart; each time the bench waits until the broker's CPU "
        "time has not grown for 0.3 s, then reads every subscriber until each has the "
        "message. The broker is stopped (SIGTERM) before the clients close." % (
            fmt(env["open_files_limit"][0]), fmt(PER_ADDRESS), KEEPALIVE, SHARED_TOPIC, WINDOW,
            fmt(env["settle_s"], 1), SHARED_TOPIC, env["repeats"], fmt(env["gap_s"], 1)),
        "", "### How to read it", "",
        "- **Memory per connection** = (VmRSS 2 s after the last connection - VmRSS of the "
        "fresh broker) / N: the broker's own memory for a connection, its session and (when "
        "subscribed) two subscriptions, one of which (`conn/<i>/temp`) is a filter of its "
        "own. It does not hold what the kernel keeps per socket. RSS grows by pages and by "
        "the allocator's arenas, so small N read coarse.",
        "- **Connections/s** = N / (first connect to last CONNACK or SUBACK), with the bench "
        "(Python) on the other CPU: it bounds the rate as much as the broker does. At most "
        "%d connections await their answer at a time: mosquitto listens with a backlog of "
        "100 (arbor 1024), and a SYN the backlog has no room for is resent after 1 s, so a "
        "larger window measures the retries." % WINDOW,
        "- **Delivery time** = the kernel's receive time on the subscriber's socket "
        "(SO_TIMESTAMPNS) - the publisher's clock just before it sent the PUBLISH, over every "
        "subscriber and repeat: *first* is when the first subscriber had the message, p50 "
        "when half of them had it, *last* when the last one had it (first: the earliest, "
        "last: the latest of the repeats), i.e. how long the broker takes to write one message to N sockets. The "
        "bench reads the sockets only once the broker has gone quiet, so that its reading "
        "(Python) takes no CPU from the broker, and the reading does not count. arbor adds the "
        "message to every subscriber's output queue first and writes the sockets at the end "
        "of that turn of its event loop (src/transport/connection.c, the flush list), so its "
        "first delivery waits for the whole fan-out to be queued; mosquitto writes each "
        "subscriber's socket as it goes, so its first delivery is at once. **Deliveries "
        "received** = subscribers that got each repeat within %s s, summed; the rest were "
        "lost." % fmt(env.get("fan_out_limit_s", 10)),
        "- **Broker CPU per message fanned out** = the broker's CPU (user + system, "
        "/proc/<pid>/stat, 10 ms ticks) from the publish until it went quiet, per repeat. On "
        "loopback most of it is the kernel's: a write to a socket also runs the receiving "
        "side's TCP in the writer's time (system CPU), once per subscriber.",
        "- The machine has 2 CPUs shared by the broker, the bench and other work; compare the "
        "two kinds within a round.", ""]


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    ap.set_defaults(rounds=1, bench="-")
    ap.add_argument("--connections", type=lambda s: [int(x) for x in s.replace(",", " ").split()],
                    help="the numbers of connections, e.g. '1000 5000' (default %s; %s with "
                    "--quick)" % (" ".join(map(str, CONNECTIONS)),
                                  " ".join(map(str, QUICK_CONNECTIONS))))
    tree_bench.add_arbor_loops(ap)
    ap.add_argument("--repeats", type=int, help="fan-outs per N (default 5, 3 with --quick)")
    ap.add_argument("--gap", type=float, help="s between fan-outs (default 1, 0.3 with --quick)")
    ap.add_argument("--settle", type=float,
                    help="s from the last connection to the memory reading (default 2, 0.5 "
                    "with --quick)")
    ap.add_argument("--fan-out-limit", type=float, default=10.0,
                    help="s a fan-out may take before the missing deliveries count as lost")
    args = ap.parse_args()
    for name, full, quick in (("connections", list(CONNECTIONS), list(QUICK_CONNECTIONS)),
                              ("repeats", 5, 3), ("gap", 1.0, 0.3), ("settle", 2.0, 0.5)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return tree_bench.render_or_measure(ap, args, ConnectionsRunner, write_section)


if __name__ == "__main__":
    sys.exit(main())
