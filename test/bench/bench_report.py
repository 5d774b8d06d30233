#!/usr/bin/env python3
"""Turn arbor_bench JSON results into docs/benchmarks.md and its gnuplot chart.

Used by scripts/run-bench.sh (`make bench`). Input: a directory of files named
<broker>__<scenario>__<repetition>.json written by `arbor_bench --json` (the scenario name
ends in .tls or .ws for runs over a broker's TLS or websockets listener), env.json (the
environment and the broker configs run-bench.sh used), missing.json (why a broker has no
figures over a transport) and tls-<broker>.txt (the TLS version and cipher it negotiated).
Output: a markdown page with one table row per (scenario, measure) holding both brokers'
figures and their ratio, a TLS and a WebSockets section the same way, and a PNG chart (TCP).
Formatting only: it never runs a benchmark and does no statistics beyond averaging repetitions.
"""

import argparse
import glob
import json
import math
import os
import subprocess
import sys

# arbor-loops: arbor with `loops N` (N from env.json "loops", the machine's CPUs)
BROKERS = ("arbor", "arbor-loops", "mosquitto")


def ratio_columns(brokers):
    """(title, numerator, denominator) of the ratio columns the brokers present allow."""
    cols = []
    if "arbor" in brokers and "mosquitto" in brokers:
        cols.append(("arbor/mosquitto", "arbor", "mosquitto"))
    if "arbor-loops" in brokers and "mosquitto" in brokers:
        cols.append(("arbor loops N/mosquitto", "arbor-loops", "mosquitto"))
    if "arbor" in brokers and "arbor-loops" in brokers:
        cols.append(("loops N/loops 1", "arbor-loops", "arbor"))
    return cols

# scenario -> (title, [(measure label, result key, unit format, higher is better)])
SCENARIOS = [
    ("ildm", "ILDM limit search: 5 topics x (10 pub -> 10 sub), QoS 0, 32 B", [
        ("limit ingress (msg/s)", "ingress", "{:,.0f}", True),
        ("limit egress (msg/s)", "egress", "{:,.0f}", True),
        ("latency mean at limit (ms)", "latency_mean", "{:.3f}", False),
        ("latency p99 at limit (ms)", "latency_p99", "{:.3f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
    ("mqtt-st-benchmark", "MQTT-ST publication throughput: 10 pub QoS 2 (1 in flight) -> "
     "10 sub, one broker", [
        ("publication throughput (msg/s per publisher)", "ingress_per_publisher", "{:,.0f}",
         True),
        ("egress (msg/s)", "egress", "{:,.0f}", True),
        ("latency mean (ms)", "latency_mean", "{:.3f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
    ("qos0-1to1", "QoS 0, 1 -> 1, full speed", [
        ("egress (msg/s)", "egress", "{:,.0f}", True),
        ("loss (%)", "loss_pct", "{:.2f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
    ("qos0-1to50", "QoS 0, 1 -> 50, full speed", [
        ("egress (msg/s)", "egress", "{:,.0f}", True),
        ("loss (%)", "loss_pct", "{:.2f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
    ("qos1-pairs", "QoS 1, 10 pairs, 1 in flight", [
        ("throughput (msg/s)", "egress", "{:,.0f}", True),
        ("latency mean (ms)", "latency_mean", "{:.3f}", False),
        ("latency p99 (ms)", "latency_p99", "{:.3f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
    ("qos2-pairs", "QoS 2, 10 pairs, 1 in flight", [
        ("throughput (msg/s)", "egress", "{:,.0f}", True),
        ("latency mean (ms)", "latency_mean", "{:.3f}", False),
        ("latency p99 (ms)", "latency_p99", "{:.3f}", False),
        ("broker CPU per delivered msg (us)", "broker_cpu_us_per_msg", "{:.2f}", False),
    ]),
]

# chart labels; the chart shows egress and broker CPU per message for every scenario
CHART_LABELS = {
    "ildm": "ILDM limit egress",
    "mqtt-st-benchmark": "MQTT-ST QoS 2 egress",
    "qos0-1to1": "QoS 0 1->1",
    "qos0-1to50": "QoS 0 1->50",
    "qos1-pairs": "QoS 1 pairs",
    "qos2-pairs": "QoS 2 pairs",
}


# Transports measured besides TCP: key (scenario name suffix), section title, what it is.
TRANSPORTS = [
    ("tls", "TLS", "over each broker's TLS listener: a server certificate (ECDSA P-256) from a "
     "throwaway CA that the run makes with the openssl CLI, the same files for both brokers; "
     "arbor_bench (OpenSSL) checks the chain and the address against it (`--cafile`). Every "
     "connection makes its full handshake before the measured window, so these figures are "
     "the cost of encrypting and decrypting the traffic, not of handshakes."),
    ("ws", "WebSockets", "over each broker's websockets listener (`protocol websockets`): "
     "MQTT in binary WebSocket frames, subprotocol `mqtt`, no TLS. arbor_bench sends what it "
     "has queued in masked frames of up to 16 KiB, as RFC 6455 requires of a client; the "
     "broker unmasks them and sends unmasked frames back."),
]
TRANSPORT_SCENARIOS = ("qos0-1to1", "qos0-1to50", "qos1-pairs")


def flatten(result):
    """The figures of one run's "result" object that the tables use."""
    if not result:
        return None
    lat = result.get("latency_ms") or {}
    return {
        "ingress": result.get("ingress"),
        "egress": result.get("egress"),
        "ingress_per_publisher": result.get("ingress_per_publisher"),
        "latency_mean": lat.get("mean"),
        "latency_p99": lat.get("p99"),
        "loss_pct": 100.0 * result["loss_rate"] if result.get("loss_rate") is not None else None,
        "duplicates": result.get("duplicates"),
        "broker_cpu_us_per_msg": result.get("broker_cpu_us_per_msg"),
        "broker_cpu_pct": result.get("broker_cpu_pct"),
        "bench_cpu_pct": result.get("bench_cpu_pct"),
        "interval_ms": result.get("interval_ms"),
    }


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def load(results_dir):
    """{(broker, scenario): averaged figures} and the number of repetitions of each."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*__*__*.json"))):
        broker, scenario, _ = os.path.basename(path)[:-5].split("__")
        with open(path) as f:
            doc = json.load(f)
        figures = flatten(doc.get("result"))
        if figures:
            runs.setdefault((broker, scenario), []).append(figures)
    averaged = {}
    for key, reps in runs.items():
        averaged[key] = {k: mean([r[k] for r in reps]) for k in reps[0]}
        averaged[key]["repetitions"] = len(reps)
    return averaged


def fmt(value, pattern):
    return "n/a" if value is None else pattern.format(value)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return "{:.2f}".format(a / b)


def table(figures, brokers, transport=None):
    """The TCP table, or with transport the same rows for the transport's scenarios plus how
    each broker's egress compares with its own TCP run."""
    ratios = ratio_columns(brokers)
    lines = ["| Scenario | Measure | " + " | ".join(brokers) + " |" +
             "".join(" %s |" % title for title, _, _ in ratios),
             "|---|---|" + "---:|" * (len(brokers) + len(ratios))]
    for scenario, title, measures in SCENARIOS:
        if transport:
            if scenario not in TRANSPORT_SCENARIOS:
                continue
            measures = measures + [("egress / the same broker's TCP egress", "vs_tcp",
                                    "{:.2f}", True)]
        key_of = scenario + "." + transport if transport else scenario
        first = True
        for label, key, pattern, higher in measures:
            values = [figure(figures, b, scenario, key_of, key) for b in brokers]
            arrow = " (higher is better)" if higher else " (lower is better)"
            cells = [fmt(v, pattern) for v in values]
            row = "| {} | {}{} | {} |".format(title if first else "", label, arrow,
                                             " | ".join(cells))
            for _, num, den in ratios:
                row += " {} |".format(ratio(values[brokers.index(num)], values[brokers.index(den)]))
            lines.append(row)
            first = False
    return "\n".join(lines)


def figure(figures, broker, scenario, key_of, key):
    """One figure of a table row; vs_tcp is egress over a transport / egress over TCP."""
    if key != "vs_tcp":
        return figures.get((broker, key_of), {}).get(key)
    over = figures.get((broker, key_of), {}).get("egress")
    tcp = figures.get((broker, scenario), {}).get("egress")
    return over / tcp if over is not None and tcp else None


def detail_keys(figures):
    """Scenario names in page order: the TCP ones, then each transport's."""
    keys = [scenario for scenario, _, _ in SCENARIOS]
    for transport, _, _ in TRANSPORTS:
        keys += [s + "." + transport for s in TRANSPORT_SCENARIOS]
    return [k for k in keys if any(f == k for _, f in figures)]


def details(figures, brokers):
    """Every scenario and broker with the figures that explain the headline numbers."""
    lines = ["| Scenario | Broker | ingress msg/s | egress msg/s | latency mean / p99 ms | "
             "loss % | duplicates | broker CPU % | arbor_bench CPU % | runs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for scenario in detail_keys(figures):
        for b in brokers:
            f = figures.get((b, scenario))
            if not f:
                continue
            lines.append("| %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %d |" % (
                scenario, b, fmt(f["ingress"], "{:,.0f}"), fmt(f["egress"], "{:,.0f}"),
                fmt(f["latency_mean"], "{:.3f}"), fmt(f["latency_p99"], "{:.3f}"),
                fmt(f["loss_pct"], "{:.2f}"), fmt(f["duplicates"], "{:.0f}"),
                fmt(f["broker_cpu_pct"], "{:.0f}"), fmt(f["bench_cpu_pct"], "{:.0f}"),
                f["repetitions"]))
    return "\n".join(lines)


def chart(figures, brokers, png_path, work_dir):
    """Grouped bars: headline throughput (log scale) and broker CPU per message."""
    dat = os.path.join(work_dir, "chart.dat")
    rates = [f.get("egress") for f in figures.values() if f.get("egress")]
    floor = 10 ** (math.floor(math.log10(min(rates))) - 1) if rates else 1
    with open(dat, "w") as f:
        f.write("# label " + " ".join("%s_rate %s_cpu" % (b, b) for b in brokers) + "\n")
        for scenario, _, _ in SCENARIOS:
            row = ['"%s"' % CHART_LABELS[scenario]]
            for b in brokers:
                fig = figures.get((b, scenario), {})
                rate, cpu = fig.get("egress"), fig.get("broker_cpu_us_per_msg")
                row += ["%g" % rate if rate else "NaN", "%g" % cpu if cpu else "NaN"]
            f.write(" ".join(row) + "\n")
    colours = {"arbor": "#2e7d32", "arbor-loops": "#9ccc65", "mosquitto": "#1565c0"}
    rate_plots = ", ".join(
        "'%s' using %d:xtic(1) title '%s' lc rgb '%s'" % (dat, 2 + 2 * i, b, colours[b])
        for i, b in enumerate(brokers))
    cpu_plots = ", ".join(
        "'%s' using %d:xtic(1) title '%s' lc rgb '%s'" % (dat, 3 + 2 * i, b, colours[b])
        for i, b in enumerate(brokers))
    script = """
set terminal pngcairo size 1100,800 font 'sans,10'
set output '{png}'
set multiplot layout 2,1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key below horizontal
set xtics rotate by 0
set logscale y
set yrange [{floor}:*]
set format y '%.0s%c'
set title 'Delivered messages per second (egress; higher is better, log scale)'
set ylabel 'msg/s'
plot {rate_plots}
unset logscale y
set format y '%g'
set title 'Broker CPU microseconds per delivered message (lower is better)'
set ylabel 'us/msg'
set yrange [0:*]
plot {cpu_plots}
unset multiplot
""".format(png=png_path, rate_plots=rate_plots, cpu_plots=cpu_plots, floor=floor)
    gp = os.path.join(work_dir, "chart.gp")
    with open(gp, "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", gp], check=True)


def environment_section(env):
    rows = [("Machine", env.get("cpu", "?")), ("CPUs", env.get("nproc", "?")),
            ("Kernel", env.get("kernel", "?")), ("arbor", env.get("arbor_version", "?")),
            ("Mosquitto", env.get("mosquitto_version", "?")), ("Date", env.get("date", "?")),
            ("Load average before the run", env.get("loadavg", "?"))]
    return "\n".join("| %s | %s |" % r for r in [("Item", "Value"), ("---", "---")] + rows)


def transport_section(transport, title, what, figures, brokers, missing, negotiated):
    """### TLS / ### WebSockets: the transport's rows, and why a broker has none."""
    parts = ["### " + title, "",
             "The scenarios %s again, %s" % (", ".join("`%s`" % s for s in TRANSPORT_SCENARIOS),
                                            what), ""]
    for b in BROKERS:
        if b in missing.get(transport, {}):
            parts += ["**%s was not measured over %s**: %s" % (
                b, title, missing[transport][b].rstrip(".") + "."), ""]
    if transport == "tls":
        said = ["%s: %s" % (b, negotiated[b]) for b in BROKERS if negotiated.get(b)]
        if said:
            parts += ["Negotiated with `openssl s_client` before the runs: " +
                      "; ".join(said) + ".", ""]
    parts += [table(figures, brokers, transport), "",
              "The last row of each scenario divides the broker's egress over %s by its own "
              "egress over TCP in this run (1.00: the transport costs nothing). The QoS 0 "
              "rows are open loop (see the caveats below): a transport that slows the "
              "publisher down can leave a broker less backlog to work through, so a ratio "
              "above 1 there is not a gain from the transport." % title, ""]
    return parts


def markdown(figures, brokers, env, png_name, transport_missing=None, negotiated=None):
    missing = [b for b in BROKERS if b not in brokers]
    reps = sorted({f["repetitions"] for f in figures.values()})
    parts = ["# Benchmarks: arbor and Mosquitto", "",
             "Generated by `make bench` (scripts/run-bench.sh) with "
             "[arbor_bench](bench-tool.md). Do not edit by hand: rerun the command.", ""]
    if missing:
        parts += ["**Note:** %s was not measured in this run (%s). Its columns are absent." %
                  (", ".join(missing), env.get("missing_reason", "binary not available")), ""]
    parts += ["## Results", "", table(figures, brokers), "",
              "Each figure is over the trimmed window of its run (`-d` is the publishing "
              "time, `--trim` what is left out at each end; see the commands below). "
              "Scenarios other than the limit search ran %s time(s) per broker, the brokers "
              "taking turns to go first, and the table shows the mean. The ILDM rows are the "
              "run at the largest publishing rate at which egress / (ingress x sp-ratio) >= "
              "0.99 and at least 97%% of the asked rate was achieved, found by doubling the "
              "publishing interval from 1 ms (or halving it if 1 ms already passes) and then "
              "splitting the last step into 20 (ILDM paper, section 5.3). Latency at the limit is "
              "taken at each broker's own limit rate, so it is not a like-for-like latency "
              "comparison; the QoS 1 and QoS 2 pair rows are." % (
                  "/".join(str(r) for r in reps if r > 1) or "1"),
              "", "![throughput and CPU per message](%s)" % png_name, ""]
    if "arbor-loops" in brokers:
        parts += ["`arbor-loops` is the same arbor binary with `loops %s` (one event loop per "
                  "CPU of this machine, what `loops auto` chooses); `arbor` runs with `loops 1`, "
                  "the default; `loops N/loops 1` divides the first by the second. On this "
                  "%s-CPU machine the load generator competes with the loops for the same "
                  "CPUs. A publisher is paced by the loops its messages go to (it waits while "
                  "one is more than 1024 posts behind, arbor.conf(5) `loops`), but handing a "
                  "message to another loop costs more than delivering it on the same one "
                  "(an allocation freed by the other thread, a wake-up), and a QoS 1/2 round "
                  "trip between loops waits for a thread wake-up (docs/multiloop-design.md, "
                  "\"Built: back-pressure across loops\" and the steps after it). A machine "
                  "with more cores than the load needs should show fan-out and many-pair rows "
                  "gain from several loops; this one, where the load generator takes a CPU of "
                  "the two, cannot." % (
                      env.get("loops", "N"), env.get("nproc", "?")), ""]
    for transport, title, what in TRANSPORTS:
        if transport in env.get("transports", []):
            parts += transport_section(transport, title, what, figures, brokers,
                                       transport_missing or {}, negotiated or {})
    parts += ["### Run details", "", details(figures, brokers), "",
              "## How to reproduce", "", "```sh", env.get("command", "make bench"), "```", "",
              "The script builds arbor and arbor_bench, installs Debian's `mosquitto` and "
              "`gnuplot-nox` if they are missing, starts each broker on a free loopback port "
              "with the same configuration, runs the scenarios below against each broker in "
              "alternation, and writes this page. The raw JSON and text output of every run "
              "are kept in `<build dir>/bench-results/` (`build/` by default).", "",
              "Scenario commands (the broker address and `-P <pid>` are added by the "
              "script):", "", "```"]
    parts += env.get("scenario_commands", [])
    parts += env.get("transport_commands", [])
    parts += ["```", "", "Both brokers ran with this configuration (only the port differs; arbor "
              "with `loops 1` added, arbor-loops with `loops N`):", "",
              "```", env.get("config", "").rstrip(), "```", ""]
    for transport, title, _ in TRANSPORTS:
        config = env.get("transport_configs", {}).get(transport)
        if config:
            certs = (" (CERTS is the run's throwaway certificate directory, "
                     "`<build dir>/bench-results/tls/`)" if "CERTS/" in config else "")
            parts += ["and for the %s rows with this one%s:" % (title, certs), "",
                      "```", config.rstrip(), "```", ""]
    parts += ["## Environment", "", environment_section(env), "",
              "## Fairness and caveats", "",
              "- Both brokers are started the same way (same configuration file apart from the "
              "port, logging off, `max_inflight_messages` and `max_queued_messages` equal; "
              "`max_queued_messages 100000` so that neither drops queued QoS 1/2 messages "
              "under load), each scenario on a freshly started broker, alternating which "
              "broker goes first. Nothing is pinned to a CPU.",
              "- The load generator runs on the same %s-CPU machine as the broker and competes "
              "with it for the CPUs, as does anything else running there; arbor_bench's own "
              "CPU use is shown in the run details. The load average above tells how busy the "
              "machine was; figures are comparable between the two brokers of one run, and "
              "vary between runs on a shared machine." % env.get("nproc",
                                                                                    "?"),
              "- Broker CPU is utime + stime from `/proc/<pid>/stat` over the measured window, "
              "divided by the messages delivered to subscribers in that window.",
              "- Full-speed QoS 0 runs are open loop: the publisher writes as fast as TCP lets "
              "it, so a broker that accepts faster than it delivers builds a queue; its "
              "egress is the delivery capacity, and latency in those runs is queueing time "
              "(see the JSON), which is why the table leaves it out. Loss there is what was "
              "still queued when the run ended.",
              "- Latency is measured inside one process (send time in the payload, "
              "CLOCK_MONOTONIC), so no clock synchronisation is involved."]
    if env.get("transports"):
        parts += ["- Over TLS and WebSockets arbor_bench does its own side of the transport "
                  "(encrypting and decrypting, masking and framing) on the same CPUs as the "
                  "broker, so those rows carry more load-generator work than the TCP ones "
                  "(its CPU use is in the run details). Both brokers link the same OpenSSL."]
    parts += [""]
    return "\n".join(parts)


# Written into the same page by `make bench-tree` (tree_bench.py), `make bench-interest`
# (interest_bench.py), `make bench-persist`
# (persist_bench.py), `make bench-bridge` (bridge_bench.py), `make bench-partition`
# (partition_bench.py), `make bench-connections` (connections_bench.py), `make bench-overload`
# (overload_bench.py) and `make bench-tls` (tls_bench.py); kept when this page is redone.
KEPT_SECTIONS = ("## MQTT-ST trees against bridged Mosquitto",
                 "## MQTT-ST trees with `loops 2` (issue 19, step 10)",
                 "## Interest routing: full replication, by interest, static bridges",
                 "## Persistence",
                 "## Bridges: arbor or Mosquitto at the edge",
                 "## Partitions: MQTT-ST resync or a Mosquitto bridge",
                 "## Many connections: memory and fan-out",
                 "## Many connections with `loops 2` (issue 19)",
                 "## TLS handshakes", "## TLS handshakes with `loops 2` (issue 19)",
                 "## Overload: slow subscribers (the MQTT-ST paper's local scenario)")


def kept_sections(path):
    """The sections of the existing page that other commands write (each to the next "## "
    heading), in the order of KEPT_SECTIONS, or ""."""
    try:
        with open(path) as f:
            old = f.read()
    except OSError:
        return ""
    kept = []
    for title in KEPT_SECTIONS:
        i = old.find(title + "\n")
        if i < 0:
            continue
        j = old.find("\n## ", i + len(title))
        kept.append(old[i:j + 1 if j >= 0 else len(old)].rstrip("\n") + "\n")
    return "\n".join(kept)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", required=True, help="directory with the JSON results")
    ap.add_argument("--markdown", required=True, help="markdown file to write")
    ap.add_argument("--chart", required=True, help="PNG file to write")
    args = ap.parse_args()
    with open(os.path.join(args.results, "env.json")) as f:
        env = json.load(f)
    figures = load(args.results)
    brokers = [b for b in BROKERS if any(k[0] == b for k in figures)]
    if not brokers:
        sys.exit("bench_report: no results in %s" % args.results)
    chart(figures, brokers, args.chart, args.results)
    png_name = os.path.relpath(args.chart, os.path.dirname(os.path.abspath(args.markdown)))
    kept = kept_sections(args.markdown)
    missing = {}
    if os.path.exists(os.path.join(args.results, "missing.json")):
        with open(os.path.join(args.results, "missing.json")) as f:
            missing = json.load(f)
    negotiated = {}
    for b in BROKERS:
        path = os.path.join(args.results, "tls-%s.txt" % b)
        if os.path.exists(path):
            with open(path) as f:
                negotiated[b] = f.read().strip()
    with open(args.markdown, "w") as f:
        f.write(markdown(figures, brokers, env, png_name, missing, negotiated))
        if kept:
            f.write("\n" + kept)
    print("wrote %s and %s" % (args.markdown, args.chart))


if __name__ == "__main__":
    main()
