#!/usr/bin/env python3
"""Persistence benchmark (`make bench-persist`, scripts/run-bench-persist.sh): arbor with
`persistence true` in snapshot mode and in durable mode against Debian's mosquitto with
`persistence true`, in the same run on the same machine, and writes the section
"## Persistence" of docs/benchmarks.md (replaced if present, else appended).

1. QoS 1 throughput and latency with persistent subscribers (clean session 0, so every
   delivery is part of the state a broker keeps): arbor_bench's qos1-pairs scenario (10
   publisher/subscriber pairs) with 1 message in flight per publisher (latency-bound) and
   with 20 (throughput-bound), each broker freshly started, brokers taking turns.
2. Start-up with 100 000 retained messages and 10 000 persistent sessions (each with one
   subscription and one queued QoS 1 message) on disk: the state is made once per broker,
   the broker stopped with SIGTERM (timed: the save) and started again; start-up is the time
   from exec until a client's CONNECT is answered (the restore is done by then; arbor answers
   only after it, and so does Mosquitto).
3. The MQTT-ST message log (docs/mqtt-st-protocol.md 7.6): arbor with a peer line (to a port
   nobody listens on: the log fills as on any broker of a tree) keeps every QoS 1/2 message it
   accepts in its log, and persistence keeps the log. QoS 1 throughput with 20 in flight
   (non-persistent subscribers) for durable arbor without and with the peer line (durable
   mode writes a row per logged message ahead of its PUBACK) and for the others; then
   1 000 000 messages held for later: in arbor's log, in Mosquitto for one offline
   persistent subscriber (what a bridge with cleansession false holds at the far end), each
   broker stopped with SIGTERM (timed: the save), the file's size, start-up time and the
   resident memory after the restore.

Every broker it starts is stopped again by pid.
"""

import argparse
import json
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import time

SECTION = "## Persistence"
BASE = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
        "connection_messages false", "max_inflight_messages 20", "max_queued_messages 100000",
        "persistent_client_expiration 1d"]
KINDS = {
    "arbor-snapshot": ["persistence true", "persistence_mode snapshot"],
    "arbor-durable": ["persistence true", "persistence_mode durable"],
    "mosquitto": ["persistence true"],
}
# With a peer line (part 3): MQTT-ST runs, so every QoS 1/2 message is logged.
PEER_KINDS = {
    "arbor-snapshot-log": ["persistence true", "persistence_mode snapshot"],
    "arbor-durable-log": ["persistence true", "persistence_mode durable"],
}
LOG_SCENARIO = ("qos1-pairs-20", ["-s", "qos1-pairs", "--inflight", "20"])
LOG_MESSAGES = 1000000
SCENARIOS = {
    "qos1-persistent-1": ("QoS 1, 10 pairs, persistent subscribers, 1 in flight",
                          ["-s", "qos1-pairs", "--persistent-subscribers"]),
    "qos1-persistent-20": ("QoS 1, 10 pairs, persistent subscribers, 20 in flight",
                           ["-s", "qos1-pairs", "--persistent-subscribers", "--inflight", "20"]),
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Broker:
    def __init__(self, kind, binary, out_dir, tag, extra=()):
        self.kind, self.binary = kind, binary
        self.dir = os.path.join(out_dir, "%s-%s" % (kind, tag))
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o777)
        self.port = free_port()
        self.conf = os.path.join(self.dir, "broker.conf")
        kind_lines = KINDS.get(kind) or PEER_KINDS[kind] + [
            "peer 127.0.0.1:%d" % free_port(), "peer_allow_unauthenticated true",
            "peer_log_max_messages %d" % LOG_MESSAGES]
        lines = ["listener %d 127.0.0.1" % self.port] + BASE + kind_lines + list(extra) + [
            "persistence_location %s/" % self.dir, "user root" if os.geteuid() == 0 else ""]
        if kind == "mosquitto":
            lines = [l for l in lines if l != "user root"] + (
                ["user root"] if os.geteuid() == 0 else [])
        with open(self.conf, "w") as f:
            f.write("\n".join(l for l in lines if l) + "\n")
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.dir, "broker.log"), "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen([self.binary, "-c", self.conf], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited during start-up" % self.kind)
            try:
                c = connect(self.port, "startup-probe", clean=True, timeout=60)
                c.close()
                return time.monotonic() - t0
            except OSError:
                time.sleep(0.005)

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return None

    def stop(self):
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return time.monotonic() - t0


# ---- a minimal MQTT 3.1.1 client, enough to fill a broker quickly

def varint(n):
    out = bytearray()
    while True:
        b = n % 128
        n //= 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("!H", len(b)) + b


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def read_packet(sock):
    head = sock.recv(1)
    if not head:
        raise OSError("closed")
    mult, length = 1, 0
    while True:
        b = sock.recv(1)[0]
        length += (b & 127) * mult
        mult *= 128
        if not b & 128:
            break
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            raise OSError("closed")
        body += chunk
    return head[0], body


def connect(port, cid, clean=True, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = string("MQTT") + bytes([4, 0x02 if clean else 0]) + struct.pack("!H", 60) + string(cid)
    s.sendall(packet(0x10, body))
    t, b = read_packet(s)
    if t != 0x20 or b[1] != 0:
        raise OSError("CONNACK %r" % b)
    return s


def ping(s):
    s.sendall(b"\xc0\x00")
    while read_packet(s)[0] != 0xD0:
        pass


def fill(port, retained, sessions):
    """retained messages (QoS 0, 64 bytes) and persistent sessions, each subscribed to its own
    topic at QoS 1 with one QoS 1 message queued."""
    pub = connect(port, "filler")
    batch = bytearray()
    for i in range(retained):
        batch += packet(0x31, string("retained/%d/%d" % (i // 1000, i)) + b"r" * 64)
        if len(batch) > 1 << 20:
            pub.sendall(batch)
            batch.clear()
            ping(pub)
    pub.sendall(batch)
    ping(pub)
    for n in range(sessions):
        s = connect(port, "session-%d" % n, clean=False)
        s.sendall(packet(0x82, struct.pack("!H", 1) + string("q/%d" % n) + b"\x01"))
        read_packet(s)
        s.sendall(b"\xe0\x00")
        s.close()
    batch = bytearray()
    for n in range(sessions):
        batch += packet(0x32, string("q/%d" % n) + struct.pack("!H", n % 65535 + 1) + b"m" * 64)
    pub.sendall(batch)
    acks = 0
    while acks < sessions:
        if read_packet(pub)[0] == 0x40:
            acks += 1
    pub.close()


def publish_many(port, count, chunk=10000):
    """count QoS 1 messages (32-byte payloads) on log/<n % 100>, chunk at a time, each chunk's
    PUBACKs (4 bytes each in MQTT 3.1.1) read before the next."""
    pub = connect(port, "log-filler")
    sent = 0
    while sent < count:
        n = min(chunk, count - sent)
        batch = bytearray()
        for i in range(sent, sent + n):
            batch += packet(0x32, string("log/%d" % (i % 100)) + struct.pack("!H", i % 65535 + 1)
                            + b"%08d" % i + b"." * 24)
        pub.sendall(batch)
        want, got = 4 * n, 0
        while got < want:
            data = pub.recv(want - got)
            if not data:
                raise OSError("closed while filling")
            got += len(data)
        sent += n
    pub.close()


def held_messages(kind, binary, out_dir):
    """LOG_MESSAGES messages held for later: arbor's log, or Mosquitto's queue for one
    offline persistent subscriber; the save, the file, the start-up and the memory."""
    b = Broker(kind, binary, out_dir, "held", extra=["max_queued_messages 0"])
    for name in os.listdir(b.dir):  # an empty file to start with
        if name.endswith(".db") or ".db-" in name:
            os.remove(os.path.join(b.dir, name))
    b.start()
    if kind == "mosquitto":
        s = connect(b.port, "offline-subscriber", clean=False)
        s.sendall(packet(0x82, struct.pack("!H", 1) + string("log/#") + b"\x01"))
        read_packet(s)
        s.sendall(b"\xe0\x00")
        s.close()
    rss_empty = b.rss_mb()
    t0 = time.monotonic()
    publish_many(b.port, LOG_MESSAGES)
    fill_s = time.monotonic() - t0
    rss_before = b.rss_mb()
    save_s = b.stop()
    size = db_size(b.dir)
    start_s = b.start()
    time.sleep(1.0)  # settled (arbor restores before it answers; so does Mosquitto)
    rss_after = b.rss_mb()
    b.stop()
    return {"fill_s": fill_s, "save_s": save_s, "size": size, "start_s": start_s,
            "rss_empty_mb": rss_empty, "rss_before_mb": rss_before, "rss_after_mb": rss_after}


def run_bench(bench, broker, scenario, args, out_dir, rep, duration):
    json_path = os.path.join(out_dir, "%s__%s__%d.json" % (broker.kind, scenario, rep))
    cmd = [bench] + args + ["-d", str(duration), "--trim", "1", "--drain", "1", "-b",
                            "127.0.0.1:%d" % broker.port, "-P", str(broker.proc.pid), "--label",
                            broker.kind, "--json", json_path, "--no-per-second"]
    with open(json_path[:-5] + ".txt", "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, timeout=600)
    with open(json_path) as f:
        r = json.load(f)["result"]
    return {"egress": r.get("egress"), "latency_mean": (r.get("latency_ms") or {}).get("mean"),
            "latency_p99": (r.get("latency_ms") or {}).get("p99"),
            "loss": r.get("loss_rate"), "cpu_us": r.get("broker_cpu_us_per_msg")}


def measure(a, binaries, kind, scenario, args, rep, results):
    """One arbor_bench run of scenario on a freshly started broker of kind, into results."""
    b = Broker(kind, binaries[kind], a.out, "%s-%d" % (scenario, rep))
    b.start()
    try:
        r = run_bench(a.bench, b, scenario, args, a.out, rep, a.duration)
    finally:
        b.stop()
    results.setdefault((kind, scenario), []).append(r)
    print("%s %s: %s" % (kind, scenario, r), flush=True)


def db_size(directory):
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if n.endswith(".db"))


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def fmt(v, pattern):
    return "n/a" if v is None else pattern.format(v)


def version_of(binary):
    try:
        out = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=5)
        return (out.stdout + out.stderr).splitlines()[0].strip()
    except Exception:
        return "?"


def main():
    global LOG_MESSAGES
    ap = argparse.ArgumentParser()
    ap.add_argument("--arbor", required=True)
    ap.add_argument("--mosquitto", default="/usr/sbin/mosquitto")
    ap.add_argument("--bench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--retained", type=int, default=100000)
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--held", type=int, default=LOG_MESSAGES,
                    help="messages held for later in part 3 (the log's size too)")
    a = ap.parse_args()
    LOG_MESSAGES = a.held
    os.makedirs(a.out, exist_ok=True)
    binaries = {"arbor-snapshot": a.arbor, "arbor-durable": a.arbor, "mosquitto": a.mosquitto,
                "arbor-snapshot-log": a.arbor, "arbor-durable-log": a.arbor}
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    results = {}
    order = list(KINDS)
    for rep in range(a.repeats):
        for scenario, (_, args) in SCENARIOS.items():
            for kind in (order if rep % 2 == 0 else order[::-1]):
                measure(a, binaries, kind, scenario, args, rep, results)
    startup = {}
    for kind in order:
        b = Broker(kind, binaries[kind], a.out, "startup")
        b.start()
        t0 = time.monotonic()
        fill(b.port, a.retained, a.sessions)
        fill_s = time.monotonic() - t0
        save_s = b.stop()
        size = db_size(b.dir)
        times = [b.start()]
        b.stop()
        times.append(b.start())
        b.stop()
        startup[kind] = {"fill_s": fill_s, "save_s": save_s, "start_s": min(times),
                         "size": size}
        print("%s start-up: %s" % (kind, startup[kind]), flush=True)
    log_order = ["arbor-durable", "arbor-durable-log", "arbor-snapshot-log", "mosquitto"]
    scenario, args = LOG_SCENARIO
    for rep in range(a.repeats):
        for kind in (log_order if rep % 2 == 0 else log_order[::-1]):
            measure(a, binaries, kind, scenario, args, rep, results)
    held = {}
    for kind in ["arbor-snapshot-log", "arbor-durable-log", "mosquitto"]:
        held[kind] = held_messages(kind, binaries[kind], a.out)
        print("%s held: %s" % (kind, held[kind]), flush=True)
    write_section(a, results, startup, held, started, load_before)


def write_section(a, results, startup, held, started, load_before):
    out = [SECTION, "",
           "Generated by `make bench-persist` (scripts/run-bench-persist.sh, "
           "test/bench/persist_bench.py). arbor with `persistence true` in each mode "
           "(arbor.conf(5), PERSISTENCE) against Debian's mosquitto with `persistence true` "
           "(autosave every 1800 s, its default), same run, same machine, the configuration of "
           "the tables above plus the persistence lines; each run on a freshly started broker "
           "with an empty file.", "",
           "### QoS 1 with persistent subscribers", "",
           "arbor_bench qos1-pairs (10 publisher/subscriber pairs, one topic each, 32-byte "
           "payloads, MQTT 3.1.1) with `--persistent-subscribers` (clean session 0: every "
           "delivery belongs to the state a broker keeps), %g s of publishing with 1 s trimmed "
           "at each end, %d runs per broker (mean)." % (a.duration, a.repeats), "",
           "| Scenario | Broker | throughput (msg/s) | latency mean (ms) | latency p99 (ms) | "
           "broker CPU per msg (us) | loss % |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for scenario, (title, _) in SCENARIOS.items():
        for kind in KINDS:
            runs = results.get((kind, scenario), [])
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                title, kind, fmt(mean([r["egress"] for r in runs]), "{:,.0f}"),
                fmt(mean([r["latency_mean"] for r in runs]), "{:.3f}"),
                fmt(mean([r["latency_p99"] for r in runs]), "{:.3f}"),
                fmt(mean([r["cpu_us"] for r in runs]), "{:.2f}"),
                fmt(mean([100 * r["loss"] if r["loss"] is not None else None for r in runs]),
                    "{:.2f}")))
    out += ["",
            "Snapshot mode and Mosquitto write nothing while messages flow (a crash loses what "
            "came since the last save); durable mode writes each delivery to a persistent "
            "session, and its acknowledgement, ahead of the packets that depend on it, with one "
            "fsync per loop turn: with one message in flight per publisher every message waits "
            "for an fsync (latency), with 20 in flight the turns batch many messages per fsync "
            "(group commit).", "",
            "### Start-up with %s retained messages and %s persistent sessions" % (
                "{:,}".format(a.retained), "{:,}".format(a.sessions)), "",
            "Each session has one subscription and one queued QoS 1 message (64-byte payloads). "
            "Start-up: from exec until a client's CONNECT is answered (best of two starts); "
            "save: SIGTERM until the process exited (the file written).", "",
            "| Broker | start-up (s) | save at SIGTERM (s) | file size (MB) |",
            "|---|---:|---:|---:|"]
    for kind in KINDS:
        s = startup.get(kind)
        if s:
            out.append("| %s | %.2f | %.2f | %.1f |" % (kind, s["start_s"], s["save_s"],
                                                       s["size"] / 1e6))
    scenario = LOG_SCENARIO[0]
    out += ["", "### The MQTT-ST message log", "",
            "arbor with a `peer` line (to a port nobody listens on) runs MQTT-ST, so every "
            "QoS 1/2 message it accepts goes into its message log (`peer_log_max_messages "
            "%s`), and persistence keeps the log (docs/mqtt-st-protocol.md 7.6): durable "
            "mode writes a row per logged message ahead of its PUBACK, snapshot mode writes "
            "the whole log with each save. `-log` marks the brokers with the peer line." % (
                "{:,}".format(LOG_MESSAGES)), "",
            "QoS 1 throughput: arbor_bench qos1-pairs, 20 in flight, subscribers without "
            "persistent sessions, %g s, %d runs per broker (mean)." % (a.duration, a.repeats),
            "",
            "| Broker | throughput (msg/s) | latency mean (ms) | latency p99 (ms) | "
            "broker CPU per msg (us) | loss % |",
            "|---|---:|---:|---:|---:|---:|"]
    for kind in ["arbor-durable", "arbor-durable-log", "arbor-snapshot-log", "mosquitto"]:
        runs = results.get((kind, scenario), [])
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            kind, fmt(mean([r["egress"] for r in runs]), "{:,.0f}"),
            fmt(mean([r["latency_mean"] for r in runs]), "{:.3f}"),
            fmt(mean([r["latency_p99"] for r in runs]), "{:.3f}"),
            fmt(mean([r["cpu_us"] for r in runs]), "{:.2f}"),
            fmt(mean([100 * r["loss"] if r["loss"] is not None else None for r in runs]),
                "{:.2f}")))
    out += ["",
            "%s QoS 1 messages (32-byte payloads, 100 topics) held for later: in arbor's "
            "message log, and in Mosquitto for one offline persistent subscriber (what the far "
            "end of a bridge with `cleansession false` holds). Per million messages: the file, "
            "the save at SIGTERM, the start-up (exec until a CONNECT is answered) and the "
            "resident memory the messages take (RSS with them, before the stop and after the "
            "restore, minus the RSS of the freshly started empty broker)." % (
                "{:,}".format(LOG_MESSAGES)), "",
            "| Broker | file (MB per million) | save at SIGTERM (s) | start-up (s) | "
            "memory before stop / after restore (MB) |",
            "|---|---:|---:|---:|---:|"]
    for kind in ["arbor-snapshot-log", "arbor-durable-log", "mosquitto"]:
        h = held.get(kind)
        if h:
            per = 1e6 / LOG_MESSAGES
            empty = h["rss_empty_mb"] or 0
            out.append("| %s | %.0f | %.2f | %.2f | %.0f / %.0f |" % (
                kind, h["size"] / 1e6 * per, h["save_s"] * per, h["start_s"] * per,
                ((h["rss_before_mb"] or 0) - empty) * per, ((h["rss_after_mb"] or 0) - empty) * per))
    out += ["", "| Item | Value |", "| --- | --- |",
            "| arbor | %s |" % version_of(a.arbor),
            "| Mosquitto | %s |" % version_of(a.mosquitto),
            "| Kernel | %s |" % platform.release(),
            "| CPUs | %d |" % os.cpu_count(),
            "| Date | %s |" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "| Load average before the run | %s |" % " ".join(load_before),
            "| Took | %.0f s |" % (time.time() - started), ""]
    text = "\n".join(out) + "\n"
    path = a.markdown
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find(SECTION + "\n")
    if i >= 0:
        j = old.find("\n## ", i + len(SECTION))
        old = old[:i].rstrip("\n") + ("\n" + old[j:] if j >= 0 else "")
    with open(path, "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + text)


if __name__ == "__main__":
    sys.exit(main())
