#!/usr/bin/env python3
"""overload_bench.py: `make bench-overload` (scripts/run-bench-overload.sh runs it).

The single-broker "local" scenario of the MQTT-ST paper, where the subscribers are slower than
the publishers: 10 publishers at QoS 2, each waiting for the PUBCOMP of a message before it
publishes the next, 1000 messages of 100 bytes each on bench/<i>, and 10 or 50 subscribers on
bench/# at QoS 2, all written with a common Go client library (github.com/eclipse/
paho.mqtt.golang, test/bench/overload/main.go) and run in one Go process on the broker's
machine. arbor and Debian's mosquitto side by side: for each number of subscribers and round,
a fresh broker of each kind (plain listener on a free loopback port, default settings
otherwise), the brokers taking turns to go first from one round to the next.

Per run: the mean publication throughput (msg/s per publisher, from its first publish to its
last PUBCOMP), the end-to-end latency of every delivery to every subscriber (mean, p50, p90,
p99, max), loss, duplicates and deliveries out of order, and the broker's CPU time over the
whole run (utime + stime from /proc/<pid>/stat, from before the clients connect to after
they have disconnected) and its peak RSS (VmHWM). The section shows the median over rounds of
each figure and the ratio arbor/mosquitto of the medians.

Every broker started here is stopped by pid when its run ends (and listed in --pidfile, so
that the calling script can stop it if this one is killed). Writes raw results under --out
and the section "Overload: slow subscribers (the MQTT-ST paper's local scenario)" of
--markdown.
"""

import json
import os
import statistics
import subprocess
import sys
import time

import bridge_bench  # the modules of this folder: stdlib only, run under the system python3
import tree_bench
from bridge_bench import value
from bridge_bench import cells as cells_of
from tree_bench import HOST, Broker, fmt, log, ratio

SECTION = "## Overload: slow subscribers (the MQTT-ST paper's local scenario)"
KINDS = ("arbor", "arbor-loops", "mosquitto")
# "arbor" runs one event loop (its default), "arbor-loops" one per CPU (BENCH_LOOPS overrides)
LOOPS = int(os.environ.get("BENCH_LOOPS") or os.cpu_count() or 1)


def kind_lines(kind):
    """The lines a kind adds to COMMON."""
    return {"arbor": ["loops 1"], "arbor-loops": ["loops %d" % LOOPS]}.get(kind, [])
SUBSCRIBERS = (10, 50)
PUBLISHERS = 10
MESSAGES = 1000
QUICK_MESSAGES = 100
SIZE = 100
QOS = 2
TOPIC_PREFIX = "bench"
DEADLINE_S = 120
QUIET_S = 10  # the client ends a run once publishing is done and nothing arrived for this long
DROPPED = "$SYS/broker/publish/messages/dropped"
SYS_INTERVAL_S = 10  # both brokers' default: how often $SYS is published
ENDED = {"complete": "with every message delivered",
         "quiet": "%d s after the last delivery (publishing was done)" % QUIET_S,
         "deadline": "at the deadline, %d s after the first publish" % DEADLINE_S}

# Every broker (mosquitto.conf syntax, which arbor reads too), after its listener line: the
# defaults otherwise (queue and in-flight limits included).
COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "connection_messages false"]


def client_args(port, subscribers, messages, json_path):
    """The Go program's command line after its path."""
    return ["-broker", "tcp://%s:%d" % (HOST, port), "-publishers", str(PUBLISHERS),
            "-messages", str(messages), "-size", str(SIZE), "-subscribers", str(subscribers),
            "-qos", str(QOS), "-topic-prefix", TOPIC_PREFIX, "-deadline", "%ds" % DEADLINE_S,
            "-quiet", "%ds" % QUIET_S, "-json", json_path]


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def dropped_counter(port, tag):
    """The broker's count of messages dropped (DROPPED): the last value received within one
    $SYS interval (and 2 s) of subscribing, retained or fresh (or None). Messages are dropped
    while they are published, and the client ends a run QUIET_S (>= SYS_INTERVAL_S) after its
    last delivery, so even the retained value is normally from after the last drop."""
    c = tree_bench.MiniClient(port, "overload-sys-" + tag)
    try:
        c.subscribe(DROPPED)
        values = [p for t, p in c.messages(quiet=SYS_INTERVAL_S + 2, limit=SYS_INTERVAL_S + 2)
                  if t == DROPPED]
    finally:
        c.close()
    try:
        return int(values[-1]) if values else None
    except ValueError:
        return None


class OverloadRunner(bridge_bench.BridgeRunner):
    """Starts and stops the brokers (BridgeRunner's spawn, stop, write_conf, start_broker) and
    runs the Go program against each."""

    def measure_one(self, kind, subscribers, rnd, notes):
        a = self.args
        tag = "r%d-%s-%d" % (rnd, kind, subscribers)
        b = Broker(kind, "broker", a.arbor if kind.startswith("arbor") else a.mosquitto, a.out,
                   tag)
        self.write_conf(b, COMMON + kind_lines(kind))
        self.start_broker(b)
        pid = b.proc.pid
        json_path = os.path.join(a.out, tag + ".json")
        client_log = os.path.join(a.out, tag + ".client.log")
        try:
            cpu_before = self.cpu_ticks([pid])
            started = time.monotonic()
            with open(client_log, "w") as out:
                p = subprocess.run([a.bench] + client_args(b.port, subscribers, a.messages,
                                                           json_path),
                                   stdout=out, stderr=subprocess.STDOUT, timeout=DEADLINE_S + 60)
            wall = time.monotonic() - started
            cpu_s = (self.cpu_ticks([pid]) - cpu_before) / self.hz
            rss = peak_rss_kib(pid)
            if b.proc.poll() is not None:
                raise RuntimeError("%s exited during the run; see %s" % (kind, b.log))
            if p.returncode not in (0, 1) or not os.path.exists(json_path):
                raise RuntimeError("the Go client failed (exit %d) against %s; see %s" % (
                    p.returncode, kind, client_log))
            with open(json_path) as f:
                r = json.load(f)
            # where deliveries are missing: did the broker drop them (its queue limit)?
            dropped = None if r["complete"] else dropped_counter(b.port, tag)
        finally:
            self.stop(b.proc)
        r.update(kind=kind, round=rnd, exit=p.returncode, wall_s=wall, broker_cpu_s=cpu_s,
                 broker_peak_rss_kib=rss, broker_dropped=dropped,
                 lost=r["expected"] - r["delivered"],
                 broker_cpu_us_per_delivery=1e6 * cpu_s / r["delivered"]
                 if r["delivered"] else None)
        if not r["complete"]:
            notes.append("round %d, %s, %d subscribers: %s of %s delivered (%s), %d duplicates, %d "
                         "out of order, %d connections lost; the run ended %s; the broker's %s "
                         "said %s" % (
                             rnd, kind, subscribers, fmt(r["delivered"]), fmt(r["expected"]),
                             "per subscriber: " + ", ".join(
                                 fmt(x) for x in r["per_subscriber_delivered"]),
                             r["duplicates"], r["out_of_order"], r["connections_lost"],
                             ENDED[r["ended"]], DROPPED, fmt(dropped)))
        lat = r["latency_ms"]
        log("%s, %d subscribers: %s msg/s per publisher; e2e mean %s p99 %s max %s ms; %s/%s "
            "delivered; broker CPU %s s" % (
                kind, subscribers, fmt(r["mean_publisher_throughput"]), fmt(lat.get("mean"), 1),
                fmt(lat.get("p99"), 1), fmt(lat.get("max"), 1), fmt(r["delivered"]),
                fmt(r["expected"]), fmt(cpu_s, 2)))
        return r

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        env = tree_bench.environment(a)
        env.update(loads={}, subscribers=a.subscribers, publishers=PUBLISHERS,
                   messages=a.messages, size=SIZE, qos=QOS, deadline_s=DEADLINE_S,
                   go=go_version(a.bench), loops=LOOPS)
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for n in a.subscribers:
                for kind in (KINDS if rnd % 2 else KINDS[::-1]):
                    results.setdefault(str(rnd), {}).setdefault(kind, {})[str(n)] = \
                        self.measure_one(kind, n, rnd, notes)
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


def go_version(binary):
    """The Go toolchain that built the client (`go version BINARY`), or "?"."""
    go = os.environ.get("GO", "go")
    try:
        p = subprocess.run([go, "version", binary], capture_output=True, text=True, timeout=10)
        return p.stdout.strip().rsplit(": ", 1)[-1] or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


# ---------------------------------------------------------------------------------------------
# The markdown section

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def field(*path):
    return lambda res, r, k, n: value(res, r, k, str(n), *path)


# figure text, digits, value(results, round, kind, subscribers); the cells show the median over
# the rounds, except for ROUND_BY_ROUND's, which show every round's value (a loss in one round
# would vanish in a median)
FIGURES = (
    ("publication throughput, mean per publisher (msg/s; higher is better)", 0,
     field("mean_publisher_throughput")),
) + tuple(("end-to-end latency %s (ms)" % w, 1, field("latency_ms", w))
          for w in ("mean", "p50", "p99", "max")) + (
    ("broker CPU time over the run (s)", 2, field("broker_cpu_s")),
    ("broker CPU per delivery (us)", 1, field("broker_cpu_us_per_delivery")),
    ("broker peak RSS (MiB)", 1,
     lambda res, r, k, n: scaled(value(res, r, k, str(n), "broker_peak_rss_kib"), 1 / 1024)),
    ("messages lost (of %s), each round", 0, field("lost")),
    ("duplicates + deliveries out of order, each round", 0,
     lambda res, r, k, n: sum_or_none(value(res, r, k, str(n), "duplicates"),
                                      value(res, r, k, str(n), "out_of_order"))),
)
ROUND_BY_ROUND = ("each round",)


def sum_or_none(*xs):
    return None if any(x is None for x in xs) else sum(xs)


def scaled(x, factor):
    return None if x is None else x * factor


def write_section(path, results):
    env = results["env"]
    rounds = [str(r) for r in range(1, env["rounds"] + 1)]
    expected = PUBLISHERS * env["messages"]
    out = [SECTION, "", generated_line(env), "",
           "%d publishers at QoS %d, each waiting for the PUBCOMP of a message before it "
           "publishes the next, %s messages of %d bytes each on `%s/<i>`; %s subscribers on "
           "`%s/#` at QoS %d; all of them clients of the Go library "
           "github.com/eclipse/paho.mqtt.golang v1.5.1 in one Go process "
           "(test/bench/overload/), on the broker's machine. A fresh broker for every run, "
           "default settings. Each cell is the median over the rounds and the ratio is of "
           "the medians (below 1: arbor's figure is lower), except for loss, duplicates and "
           "disorder, given for each round. \"arbor\" runs `loops 1` (its default), "
           "\"arbor-loops\" `loops %d` (one per CPU), their ratio is the last column." % (
               PUBLISHERS, env["qos"], fmt(env["messages"]), env["size"], TOPIC_PREFIX,
               " or ".join(str(n) for n in env["subscribers"]), TOPIC_PREFIX, env["qos"],
               env.get("loops", LOOPS)), "",
           "| Figure | Subscribers | arbor | arbor-loops | mosquitto | arbor/mosquitto | "
           "arbor-loops/arbor |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for figure, digits, get in FIGURES:
        for n in env["subscribers"]:
            vals = {k: [get(results, r, k, n) for r in rounds] for k in KINDS}
            label = figure % fmt(expected * n) if "%s" in figure else figure
            if figure.endswith(ROUND_BY_ROUND):
                cells = [cells_of(vals[k], digits) for k in KINDS] + ["", ""]
            else:
                meds = {k: median(vals[k]) for k in KINDS}
                cells = [fmt(meds[k], digits) for k in KINDS] + [
                    fmt(ratio(meds["arbor"], meds["mosquitto"]), 2),
                    fmt(ratio(meds["arbor-loops"], meds["arbor"]), 2)]
            out.append("| %s | %d | %s |" % (label, n, " | ".join(cells)))
    out += ["", "Lower is better except for the publication throughput.", "",
            "### Run details", "",
            "| Round | Subscribers | Broker | msg/s per publisher | publishing s | latency mean "
            "/ p50 / p90 / p99 / max ms | delivered | duplicates | out of order | broker CPU s "
            "| peak RSS MiB |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for n in env["subscribers"]:
            for kind in KINDS:
                d = value(results, r, kind, str(n))
                if not d:
                    continue
                lat = d["latency_ms"]
                out.append("| %s | %d | %s | %s | %s | %s | %s of %s | %d | %d | %s | %s |" % (
                    r, n, kind, fmt(d["mean_publisher_throughput"]),
                    fmt(d["publish_seconds"], 2),
                    " / ".join(fmt(lat.get(w), 1) for w in ("mean", "p50", "p90", "p99", "max")),
                    fmt(d["delivered"]), fmt(d["expected"]), d["duplicates"], d["out_of_order"],
                    fmt(d["broker_cpu_s"], 2), fmt(scaled(d["broker_peak_rss_kib"], 1 / 1024), 1)))
    out += [""] + ["Note: %s." % x for x in env.get("notes", [])]
    out += ["Took %.0f s." % env["duration_s"], ""]
    out += method_text(env)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def generated_line(env):
    rounds = env["rounds"]
    return ("Generated by `make bench-overload` (scripts/run-bench-overload.sh, "
            "test/bench/overload_bench.py) on %s: %s, %d CPUs, shared with other work while it "
            "ran (load average %s before, %s after), so the figures are noisy and only the "
            "ratios of one run compare; %s; Go client built with %s.%s" % (
                env["date"], env["cpu"], env["nproc"], " ".join(env["loadavg_before"]),
                " ".join(env["loadavg_after"]),
                "%d rounds" % rounds if rounds > 1 else "one round", env.get("go", "?"),
                " **Quick run (BENCH_OVERLOAD_QUICK=1): figures not meaningful.**"
                if env["quick"] else ""))


def method_text(env):
    return [
        "### How it was run", "", "```sh", "make bench-overload", "```", "",
        "builds arbor into `build/` (`make bench-overload BUILD=dir` for another tree) and the "
        "Go client into `build/bench-overload/overload` (`go build`; it needs Go 1.24 or later, "
        "`GO=/path/to/go` picks one), then for each round (`BENCH_OVERLOAD_ROUNDS`, default 3) "
        "and number of subscribers starts a fresh broker of each kind, the kinds taking "
        "turns to go first from one round to the next, each with this configuration:", "",
        "```", "listener PORT 127.0.0.1"] + COMMON + [
        "```", "",
        "plus `loops 1` for arbor and `loops N` for arbor-loops (N: the CPUs, or "
        "`BENCH_LOOPS`).", "",
        "and runs the client against it (raw JSON and logs in `build/bench-overload/`):", "",
        "```", " ".join(["build/bench-overload/overload"] + client_args(
            0, env["subscribers"][0], env["messages"], "OUT.json")).replace(
                ":0 ", ":PORT "), "```", "",
        "`BENCH_OVERLOAD_QUICK=1` is a smoke test of the pipeline (%d messages per publisher, "
        "one round)." % QUICK_MESSAGES, "",
        "### How to read it", "",
        "- The client uses the library's default options apart from the broker address, a "
        "client id per client, clean session and AutoReconnect off (a dropped connection is "
        "counted, not hidden). Every subscriber has its SUBACK (QoS 2 granted) before any "
        "publisher starts. Each publisher calls `Publish` and then `token.Wait()`, which at "
        "QoS 2 returns on the PUBCOMP: a broker that completes the handshake before the "
        "message reaches the subscribers lets the publishers run ahead of them.",
        "- **Publication throughput** = messages / (first publish to last PUBCOMP), per "
        "publisher, averaged over the %d publishers: how fast the broker acknowledges them." %
        PUBLISHERS,
        "- **End-to-end latency** = the time the subscriber's message handler was called - "
        "the time read just before `Publish` (carried in the payload; one monotonic clock, "
        "the clients being in one process), over every delivery to every subscriber. When "
        "the broker takes messages in faster than it hands them out, the difference waits in "
        "its queues and shows here (the JSON also has the time from the last PUBCOMP to the "
        "last delivery, `drain_after_publish_seconds`).",
        "- **Messages lost** = publishers x messages x subscribers - distinct deliveries. A "
        "run ends when every subscriber has every message, or %d s after the last delivery "
        "once the publishers are done, or %d s after the first publish. Both brokers queue "
        "at most 1000 QoS 1 and 2 messages per client by default (`max_queued_messages`) "
        "beyond those in flight and drop the rest: when a run misses deliveries, the bench "
        "reads the broker's `%s` (the last value its `$SYS` gives within %d s) and the note "
        "under the details gives it. Duplicates are a (publisher, sequence) a subscriber "
        "already had; out of order, a sequence number below the highest it already had "
        "from that publisher." % (
            QUIET_S, DEADLINE_S, DROPPED, SYS_INTERVAL_S + 2),
        "- **Broker CPU** = utime + stime of the broker process (/proc/<pid>/stat, 10 ms "
        "ticks) from before the clients connect to after they disconnect; per delivery, "
        "divided by the distinct deliveries. **Peak RSS** is the broker's VmHWM at the end.",
        "- The machine has 2 CPUs shared by the broker, the Go clients (which need a CPU of "
        "their own to keep up) and whatever else runs there; compare the kinds within "
        "one run.", ""]


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    ap.set_defaults(rounds=3)
    ap.add_argument("--subscribers", type=lambda s: [int(x) for x in s.replace(",", " ").split()],
                    default=list(SUBSCRIBERS),
                    help="the numbers of subscribers (default %s)" %
                    " ".join(map(str, SUBSCRIBERS)))
    ap.add_argument("--messages", type=int,
                    help="messages per publisher (default %d, %d with --quick)" % (
                        MESSAGES, QUICK_MESSAGES))
    args = ap.parse_args()
    if args.messages is None:
        args.messages = QUICK_MESSAGES if args.quick else MESSAGES
    return tree_bench.render_or_measure(ap, args, OverloadRunner, write_section)


if __name__ == "__main__":
    sys.exit(main())
