#!/usr/bin/env python3
"""tls_bench.py: `make bench-tls` (scripts/run-bench-tls.sh runs it after building).

TLS handshakes per second on one broker, arbor and Debian's mosquitto side by side in one run
(arbor first, then mosquitto, for every case; with 2 rounds the second round starts with
mosquitto), each broker started fresh for every measurement with one TLS listener on loopback.
The load is arbor_bench's connect loop (`arbor_bench --connect-loop C`, test/bench/
connect_loop.c): C clients, each going round TCP connect, TLS handshake, MQTT CONNECT, CONNACK,
DISCONNECT and the broker's close, over and over for the window; arbor_bench reports connects
(CONNACKs) per second, the time from socket() to CONNACK (p50, p99), errors, and the broker's
CPU (/proc/<pid>/stat) and its own over the window.

The certificates are made per run with the openssl CLI: for each key kind (ECDSA P-256, RSA
2048) a throwaway CA and a server certificate for 127.0.0.1 of the same kind; arbor_bench checks
the chain and the address. The cases (CASES): both key kinds at TLS 1.3 and at TLS 1.2
(arbor_bench caps the version it offers) for every C of --clients; then, at the largest C (and
for the first, at the smallest too), TLS 1.3 with `set_tcp_nodelay true` on both brokers,
resumed sessions (arbor_bench offers each client's last session ticket), and plain TCP (the
MQTT connect alone). --arbor-extra-conf adds lines to arbor's configuration only (e.g. a number
of event loops once arbor has one: run the bench once per setting, same machine).

Every broker started here stops by pid when its measurement ends (and is listed in --pidfile,
so that the calling script can stop it if this one is killed). Writes raw results under --out
(the JSON of every arbor_bench run, and results.json) and the section "TLS handshakes" of
--markdown.
"""

import json
import os
import subprocess
import sys
import time

import bridge_bench  # the modules of this folder: stdlib only, run under the system python3
import tree_bench
from bridge_bench import cells, value
from tree_bench import HOST, Broker, fmt, log, ratio

SECTION = "## TLS handshakes"
KINDS = ("arbor", "mosquitto")
CLIENTS = (1, 8, 32)
QUICK_CLIENTS = (1, 8)
WINDOW_S, TRIM_S = 10.0, 1.0
QUICK_WINDOW_S, QUICK_TRIM_S = 1.0, 0.2
CYCLE_TIMEOUT_S = 10.0

# key kind -> (text, openssl req arguments for a new key)
KEYS = {
    "ecdsa": ("ECDSA P-256", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]),
    "rsa": ("RSA 2048", ["-newkey", "rsa:2048"]),
}

# Every broker (mosquitto.conf syntax, which arbor reads too), after its listener line and
# the listener's certfile and keyfile.
COMMON = ["allow_anonymous true", "log_dest stderr", "log_type error", "log_type warning",
          "connection_messages false"]
NODELAY = "set_tcp_nodelay true"


def case(name, key, version, at, resume=False, nodelay=False, quick=True):
    """One kind of measurement. key None: plain TCP. at: the client counts it runs at,
    "all" (every C), "max" (the largest) or "ends" (the smallest and the largest)."""
    return {"name": name, "key": key, "version": version, "at": at, "resume": resume,
            "nodelay": nodelay, "quick": quick}


CASES = [
    case("ecdsa-1.3", "ecdsa", "1.3", "all"),
    case("ecdsa-1.2", "ecdsa", "1.2", "all"),
    case("rsa-1.3", "rsa", "1.3", "all"),
    case("rsa-1.2", "rsa", "1.2", "all", quick=False),
    case("ecdsa-1.3-nodelay", "ecdsa", "1.3", "ends", nodelay=True),
    case("rsa-1.3-nodelay", "rsa", "1.3", "max", nodelay=True, quick=False),
    case("ecdsa-1.3-nodelay-resumed", "ecdsa", "1.3", "max", resume=True, nodelay=True),
    case("ecdsa-1.2-resumed", "ecdsa", "1.2", "max", resume=True),
    case("tcp", None, None, "max"),
]


def case_text(c):
    if c["key"] is None:
        return "plain TCP, no TLS"
    parts = [KEYS[c["key"]][0], "TLS " + c["version"]]
    if c["resume"]:
        parts.append("resumed")
    if c["nodelay"]:
        parts.append("`%s`" % NODELAY)
    return ", ".join(parts)


def case_clients(c, clients):
    if c["at"] == "all":
        return list(clients)
    if c["at"] == "ends" and len(clients) > 1:
        return [min(clients), max(clients)]
    return [max(clients)]


def make_certs(directory, key):
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost, both of the key
    kind; returns {"ca": path, "cert": path, "key": path}. The brokers read the key after
    dropping privileges (mosquitto becomes user mosquitto), so it is world-readable."""
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)
    new_key = KEYS[key][1] + ["-nodes", "-sha256"]

    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True)
    openssl("req", "-x509", *new_key, "-days", "2", "-subj", "/CN=arbor bench throwaway CA",
            "-keyout", p("ca.key"), "-out", p("ca.crt"))
    openssl("req", *new_key, "-subj", "/CN=localhost", "-keyout", p("server.key"),
            "-out", p("server.csr"))
    with open(p("server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", p("server.ext"),
            "-out", p("server.crt"))
    for name in ("ca.key", "ca.srl", "server.csr", "server.ext"):
        os.remove(p(name))
    os.chmod(directory, 0o755)
    os.chmod(p("server.key"), 0o644)
    return {"ca": p("ca.crt"), "cert": p("server.crt"), "key": p("server.key")}


class TlsRunner(bridge_bench.BridgeRunner):
    """Starts and stops the brokers (BridgeRunner's spawn, stop, write_conf, start_broker) and
    runs arbor_bench's connect loop against each."""

    def __init__(self, args):
        super().__init__(args)
        self.certs = {}

    def broker_lines(self, kind, c):
        lines = []
        if c["key"]:
            certs = self.certs[c["key"]]
            lines += ["certfile %s" % certs["cert"], "keyfile %s" % certs["key"]]
        lines += COMMON
        if c["nodelay"]:
            lines.append(NODELAY)
        if kind == "arbor":
            lines += self.args.arbor_extra_conf
        return lines

    def bench_args(self, c, n, port, pid, json_path):
        a = self.args
        threads = min(a.client_threads, n)  # C clients in all, as evenly as C allows
        args = [a.bench, "--connect-loop", str(n // threads), "-T", str(threads),
                "-b", "%s:%d" % (HOST, port),
                "-d", str(a.window + 2 * a.trim), "--trim", str(a.trim),
                "--cycle-timeout", str(CYCLE_TIMEOUT_S), "-P", str(pid), "-j", json_path,
                "--label", os.path.basename(json_path)[:-5]]
        if c["key"]:
            args += ["--cafile", self.certs[c["key"]]["ca"], "--tls-version", c["version"]]
        if c["resume"]:
            args.append("--resume")
        return args

    def start_fresh(self, b, lines, notes):
        """write_conf and start_broker, and once more on another port if the broker does not
        come up (the machine is shared: a port may be taken between free_port and the
        broker's bind); a failure goes into the notes with what the broker said."""
        self.write_conf(b, lines)
        try:
            self.start_broker(b)
            return
        except RuntimeError:
            rc = b.proc.poll()
            self.stop(b.proc)
        with open(b.log, errors="replace") as f:
            said = " ".join(f.read().split())[-200:]
        notes.append("%s did not come up on port %d (exit status %s, log: %s); started again "
                     "on another port" % (os.path.basename(b.conf), b.port, rc, said or "empty"))
        log(notes[-1])
        b.port = tree_bench.free_port()
        self.write_conf(b, lines)
        self.start_broker(b)

    def measure_one(self, kind, c, n, rnd, notes):
        a = self.args
        tag = "r%d-%s-%s-%d" % (rnd, kind, c["name"], n)
        b = Broker(kind, "broker", a.arbor if kind == "arbor" else a.mosquitto, a.out, tag)
        self.start_fresh(b, self.broker_lines(kind, c), notes)
        json_path = os.path.join(a.out, tag + ".json")
        argv = self.bench_args(c, n, b.port, b.proc.pid, json_path)
        try:
            p = subprocess.run(argv, capture_output=True, text=True,
                               timeout=a.window + 2 * a.trim + CYCLE_TIMEOUT_S + 30)
        finally:
            self.stop(b.proc)
        with open(os.path.join(a.out, tag + ".txt"), "w") as f:
            f.write(" ".join(argv) + "\n" + p.stdout + p.stderr)
        if p.returncode != 0:
            raise RuntimeError("arbor_bench failed (%d) against %s: %s" % (
                p.returncode, kind, (p.stderr or p.stdout).strip()[-500:]))
        with open(json_path) as f:
            r = json.load(f)["result"]
        if r["errors"]:
            notes.append("%s, %s, C=%d: %d errors (%s)" % (
                kind, case_text(c), n, r["errors"],
                "; ".join("%s x%d" % (k["what"], k["count"]) for k in r["error_kinds"][:2])))
        if c["resume"] and r["connects"] and r["resumed"] < r["connects"]:
            notes.append("%s, %s, C=%d: %d of %d connects resumed" % (
                kind, case_text(c), n, r["resumed"], r["connects"]))
        r["client_cpu_ms_per_connect"] = r.pop("bench_cpu_ms_per_connect")
        r["client_cpu_pct"] = r.pop("bench_cpu_pct")
        log("%s %s C=%d: %s connects/s, p50 %s ms, p99 %s ms, broker %s ms CPU per connect, "
            "client %s ms, %d errors" % (
                kind, c["name"], n, fmt(r["connects_per_s"]), fmt(r["connect_ms"]["p50"], 2),
                fmt(r["connect_ms"]["p99"], 2), fmt(r["broker_cpu_ms_per_connect"], 3),
                fmt(r["client_cpu_ms_per_connect"], 3), r["errors"]))
        return r

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        results, notes, t0 = {}, [], time.monotonic()
        cases = [c for c in CASES if c["quick"] or not a.quick]
        for key in sorted({c["key"] for c in cases if c["key"]}):
            self.certs[key] = make_certs(os.path.join(a.out, "certs-" + key), key)
        env = tree_bench.environment(a)
        env.update(loads={}, clients=a.clients, client_threads=a.client_threads,
                   window_s=a.window, trim_s=a.trim,
                   cycle_timeout_s=CYCLE_TIMEOUT_S, arbor_extra_conf=a.arbor_extra_conf,
                   openssl=tree_bench.first_line(["openssl", "version"]),
                   cases=[dict(c, clients=case_clients(c, a.clients), text=case_text(c))
                          for c in cases])
        for rnd in range(1, a.rounds + 1):
            log("round %d" % rnd)
            for c in cases:
                for n in case_clients(c, a.clients):
                    for kind in (KINDS if rnd % 2 else KINDS[::-1]):
                        r = self.measure_one(kind, c, n, rnd, notes)
                        results.setdefault(str(rnd), {}).setdefault(kind, {})[
                            "%s-%d" % (c["name"], n)] = r
        self.finish(results, env, notes, t0, lambda path: write_section(path, results))


# ---------------------------------------------------------------------------------------------
# The markdown section

def field(*path):
    return lambda res, r, k, key: value(res, r, k, key, *path)


# The two summary tables: (title, [(column text, digits, value(results, round, kind, case-C
# key), with an arbor/mosquitto ratio column)]); each figure has an arbor and a mosquitto column.
TABLES = (
    ("Rate and connect time (socket() to CONNACK)", (
        ("connects/s", 0, field("connects_per_s"), True),
        ("p50 ms", 2, field("connect_ms", "p50"), False),
        ("p99 ms", 2, field("connect_ms", "p99"), False),
    )),
    ("CPU per connect (ms) and errors", (
        ("broker CPU", 3, field("broker_cpu_ms_per_connect"), True),
        ("client CPU", 3, field("client_cpu_ms_per_connect"), False),
        ("errors", 0, field("errors"), False),
    )),
)


def table(results, env, rounds, columns):
    head = ["Case", "C"]
    for text, _, _, with_ratio in columns:
        head += ["%s arbor" % text, "%s mosquitto" % text] + (["ratio"] if with_ratio else [])
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for c in env["cases"]:
        for n in c["clients"]:
            key = "%s-%d" % (c["name"], n)
            row = [c["text"], fmt(n)]
            for _, digits, get, with_ratio in columns:
                vals = {k: [get(results, r, k, key) for r in rounds] for k in KINDS}
                row += [cells(vals[k], digits) for k in KINDS]
                if with_ratio:
                    row.append(cells([ratio(vals["arbor"][i], vals["mosquitto"][i])
                                      for i in range(len(rounds))], 2))
            out.append("| " + " | ".join(row) + " |")
    return out


def write_section(path, results):
    env, rounds, out = tree_bench.section_head(results, "tls", SECTION)
    out += ["C clients, each connecting over and over to one broker's TLS listener on loopback "
            "(TCP connect, TLS handshake, MQTT CONNECT, CONNACK, DISCONNECT, the broker's "
            "close) for %s s: arbor against Debian's mosquitto, a broker started fresh for every "
            "measurement, the client (`arbor_bench --connect-loop`, %s, OpenSSL) on the same "
            "%s CPUs. Ratios are arbor/mosquitto." % (
                fmt(env["window_s"], 1), threads_text(env.get("client_threads", 1)),
                env["nproc"]), ""]
    for title, columns in TABLES:
        out += ["**%s**" % title, ""] + table(results, env, rounds, columns) + [""]
    out += ["Higher is better for connects/s, lower for the rest. Client CPU is "
            "arbor_bench's own in that broker's run (it shares the 2 CPUs with the broker).", ""]
    out += summary(results, env, rounds)
    out += ["### Run details", "",
            "What each run negotiated (the first connect's TLS version, cipher and key "
            "exchange group), the connects that resumed a session, whole cycles (to the "
            "broker's close) and the CPU use over the window (100% is one CPU).", "",
            "| Round | Broker | Case | C | negotiated | connects | resumed | cycles | broker CPU % "
            "| client CPU % | handshake p50 / p99 ms | CONNECT to CONNACK p50 / p99 ms |",
            "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        for c in env["cases"]:
            for n in c["clients"]:
                for kind in KINDS:
                    x = value(results, r, kind, "%s-%d" % (c["name"], n))
                    if not x:
                        continue
                    tls = x.get("tls") or {}
                    shake = x["handshake_ms"] if tls else {}
                    out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | "
                               "%s / %s |" % (
                                   r, kind, c["text"], fmt(n),
                                   " ".join(tls[f] for f in ("version", "cipher", "group")
                                            if tls.get(f)) or "-",
                                   fmt(x["connects"]), fmt(x["resumed"]), fmt(x["cycles"]),
                                   fmt(x["broker_cpu_pct"]), fmt(x["client_cpu_pct"]),
                                   fmt(shake.get("p50"), 2), fmt(shake.get("p99"), 2),
                                   fmt(x["connack_ms"]["p50"], 2),
                                   fmt(x["connack_ms"]["p99"], 2)))
    out += [""] + ["Note: %s." % x for x in env.get("notes", [])]
    out += ["Took %.0f s." % env["duration_s"], ""]
    out += method_text(env)
    tree_bench.replace_section(path, SECTION, "\n".join(out) + "\n")


def threads_text(n):
    return "one thread" if n == 1 else "%d threads" % n


def clients_text(n):
    return ("one thread's epoll loop" if n == 1 else
            "%d threads (C/%d each, in an epoll loop of its own)" % (n, n))


def summary(results, env, rounds):
    """A paragraph on the arbor/mosquitto ratios of the TLS rows (every case, C and round)."""
    ratios = {"broker CPU per connect": [], "connects/s": []}
    for c in env["cases"]:
        if not c["key"]:
            continue
        for n in c["clients"]:
            key = "%s-%d" % (c["name"], n)
            for r in rounds:
                for what, field_name in (("broker CPU per connect", "broker_cpu_ms_per_connect"),
                                         ("connects/s", "connects_per_s")):
                    x = ratio(value(results, r, "arbor", key, field_name),
                              value(results, r, "mosquitto", key, field_name))
                    if x is not None:
                        ratios[what].append(x)
    parts = []
    for what, xs in ratios.items():
        if xs:
            xs.sort()
            parts.append("%s %s (from %s to %s over %d rows)" % (
                what, fmt(xs[len(xs) // 2], 2), fmt(xs[0], 2), fmt(xs[-1], 2), len(xs)))
    if not parts:
        return []
    return ["Over the TLS rows, the median arbor/mosquitto ratio of %s." % "; of ".join(parts),
            ""]


def method_text(env):
    extra = env.get("arbor_extra_conf") or []
    return [
        "### How it was run", "", "```sh", "make bench-tls", "```", "",
        "builds arbor and arbor_bench into `build/` (`make bench-tls BUILD=dir` for another "
        "tree) and runs everything on loopback; `BENCH_TLS_CLIENTS` sets the list of C "
        "(default `%s`), `BENCH_TLS_ROUNDS` the rounds (default 1; a second round starts with "
        "mosquitto), `BENCH_TLS_CLIENT_THREADS` the client's threads (default 1), "
        "`BENCH_TLS_ARBOR_CONF` lines added to arbor's configuration only, "
        "separated by `;` (this run: %s). For each case, C and broker, a fresh broker with "
        "this configuration (`set_tcp_nodelay true` added in the cases that say so; no "
        "certfile or keyfile in the plain TCP case):" % (
            " ".join(str(n) for n in CLIENTS),
            "; ".join("`%s`" % x for x in extra) if extra else "none"),
        "", "```", "listener PORT 127.0.0.1", "certfile CERTS/server.crt",
        "keyfile CERTS/server.key"] + COMMON + [
        "```", "",
        "CERTS is a throwaway CA and server certificate (for 127.0.0.1) that the run makes "
        "with the openssl CLI, ECDSA P-256 or RSA 2048 for both, signed with SHA-256; both "
        "brokers and arbor_bench use the system's OpenSSL (`openssl version`: %s). The load "
        "is" % env.get("openssl", "?"), "",
        "```",
        "arbor_bench --connect-loop %s -b 127.0.0.1:PORT --cafile CERTS/ca.crt --tls-version "
        "1.3|1.2 [--resume] -d %s --trim %s --cycle-timeout %s -P BROKER_PID -j RUN.json" % (
            "C -T 1" if env.get("client_threads", 1) == 1 else
            "C/%d -T %d" % (env["client_threads"], env["client_threads"]),
            fmt(env["window_s"] + 2 * env["trim_s"], 1), fmt(env["trim_s"], 1),
            fmt(env["cycle_timeout_s"], 0)),
        "```", "",
        "C clients in %s, each in a loop: a non-blocking TCP connect, "
        "the TLS handshake (OpenSSL; the chain checked against the CA and the address "
        "against the certificate; TLS 1.2 or later, at most the version asked), an MQTT "
        "3.1.1 CONNECT (clean session, a client id per client), the CONNACK, a DISCONNECT, "
        "and a read until the broker closes the connection (after a DISCONNECT the server "
        "closes it); then the next connect at once. The first and last %s s of the run are "
        "left out: the figures cover the %s s between (a connect counts if its CONNACK came "
        "in the window). With `--resume` each client offers the session of its previous "
        "connection (a TLS 1.3 ticket, or a TLS 1.2 ticket or cached id), so only the first "
        "handshake of each client is full; a cycle that takes over %s s counts as an "
        "error. The broker is stopped (SIGTERM) after each run." % (
            clients_text(env.get("client_threads", 1)), fmt(env["trim_s"], 1),
            fmt(env["window_s"], 1), fmt(env["cycle_timeout_s"], 0)),
        "", "### How to read it", "",
        "- **connects/s** = CONNACKs in the window / its length: TLS handshakes per second "
        "in the TLS cases, each a whole MQTT connection.",
        "- **connect p50 / p99** = socket() to CONNACK, per connect in the window; the run "
        "details split it into the TLS handshake and CONNECT to CONNACK.",
        "- **Broker CPU per connect** = the broker's CPU (user + system, /proc/<pid>/stat, "
        "10 ms ticks) over the window / connects in it: the handshake's cryptography (the "
        "server signs once per full handshake: ECDSA or RSA; both sides do an X25519 key "
        "exchange), the TCP accept and close, the MQTT session made and ended. **Client CPU "
        "per connect** is arbor_bench's, measured the same way (it verifies the chain and "
        "the signature and does its own key exchange): on this 2-CPU machine the client "
        "and the broker share the CPUs, so when their sum is near 200% the client bounds "
        "the rate as much as the broker does, and the CPU per connect compares the brokers "
        "better than the rate.",
        "- **TLS 1.3 with the default `set_tcp_nodelay false`**: after a TLS 1.3 handshake the "
        "server sends its session tickets in their own write, then the CONNACK; with Nagle's "
        "algorithm on (both brokers' default, as in Mosquitto) the CONNACK waits until the "
        "tickets are acknowledged, and the client delays that acknowledgement (about 40 ms "
        "on Linux). That caps each client at about 20 connects/s, which is why the "
        "`set_tcp_nodelay true` rows exist. TLS 1.2 sends its ticket inside the handshake "
        "and is not affected.",
        "- **Resumed** rows: both brokers issue session tickets (OpenSSL's defaults: two "
        "per TLS 1.3 handshake, one per TLS 1.2 handshake), so a client that offers one "
        "skips the certificate and its signature; the key exchange remains in TLS 1.3 "
        "(psk_dhe_ke), not in TLS 1.2's abbreviated handshake. **resumed** in the run "
        "details counts the connects the broker accepted a ticket for.",
        "- **Plain TCP** is the MQTT connect alone (same loop, no TLS): what the TLS rows "
        "add is the handshake.",
        "- **Where a handshake's CPU goes** (a profile taken by hand, not by this command, "
        "with `perf record -e cpu-clock -g -p BROKER_PID` during the ECDSA P-256, TLS 1.3, "
        "`set_tcp_nodelay true` load at C = 32, about 2,000 connects/s, on 2026-11-27; both "
        "brokers alike): about 53% in libcrypto (the X25519 key exchange, the ECDSA "
        "signature, hashing and key derivation), 26% in the kernel (loopback TCP, accept, "
        "close, epoll), 14% in libc (malloc and free, and the read-write locks and string "
        "compares of OpenSSL 3.0's algorithm lookups), 5-6% in libssl and under 1% in the "
        "broker's own code (arbor 0.65%, mosquitto 0.53%). A broker gains here only by asking "
        "less of OpenSSL per connection (resumption, as the resumed rows show) or by "
        "spreading the handshakes over more cores.",
        "- arbor has one event loop today; its future number of loops goes in with "
        "`BENCH_TLS_ARBOR_CONF` (a run per setting), and on a machine with cores to spare "
        "`BENCH_TLS_CLIENT_THREADS` gives the client as many, so that it is not the bound. "
        "The machine is shared with other work, so compare the two brokers within a row; "
        "rows and runs differ in load.", ""]


def main():
    ap = tree_bench.bench_parser(__doc__.split("\n")[0])
    ap.set_defaults(rounds=1)
    ap.add_argument("--clients", type=lambda s: [int(x) for x in s.replace(",", " ").split()],
                    help="the numbers of concurrent clients, e.g. '1 8 32' (default %s; %s "
                    "with --quick)" % (" ".join(map(str, CLIENTS)),
                                       " ".join(map(str, QUICK_CLIENTS))))
    ap.add_argument("--window", type=float,
                    help="measured seconds per run (default %s, %s with --quick)" % (
                        WINDOW_S, QUICK_WINDOW_S))
    ap.add_argument("--trim", type=float,
                    help="seconds left out before and after the window (default %s, %s "
                    "with --quick)" % (TRIM_S, QUICK_TRIM_S))
    ap.add_argument("--arbor-extra-conf", action="append", default=[], metavar="LINE",
                    help="a line added to arbor's configuration only (repeatable)")
    ap.add_argument("--client-threads", type=int, default=1,
                    help="arbor_bench threads sharing the C clients (default 1; more on a "
                    "machine with cores to spare, so that the client keeps up with a broker "
                    "on several cores)")
    args = ap.parse_args()
    for name, full, quick in (("clients", list(CLIENTS), list(QUICK_CLIENTS)),
                              ("window", WINDOW_S, QUICK_WINDOW_S), ("trim", TRIM_S, QUICK_TRIM_S)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return tree_bench.render_or_measure(ap, args, TlsRunner, write_section)


if __name__ == "__main__":
    sys.exit(main())
