"""Fixtures for arbor's integration tests.

Every test gets its own broker process on a free loopback port (see `broker`), so tests are
independent and can run in any order. The binary under test is $ARBOR_BIN; the suite is
validated against Debian's Mosquitto 2.0 with ARBOR_BIN=/usr/sbin/mosquitto.

Fixtures:
  broker        factory: broker(*config_lines, ...) -> Broker (started, port accepting)
  raw           factory: raw(b, version=4) -> mqttproto.RawClient connected by TCP only
  mqtt          factory: mqtt(b, client_id=..., version=4, ...) -> PahoClient, connected
  run_broker    run the binary with arguments to completion -> (returncode, output)
Markers:
  arbor_only             arbor-specific behaviour (skipped when ARBOR_BIN is mosquitto)
  mosquitto_deviates     spec behaviour Mosquitto gets wrong (skipped for mosquitto); the
                         reason string documents the deviation
Environment:
  ARBOR_BIN                   the broker binary (required)
  ARBOR_NO_MOSQUITTO_SKIPS=1  run the two kinds of marked tests against Mosquitto anyway
                              (they are expected to fail there: a check that they can)
  ARBOR_START_TIMEOUT / ARBOR_STOP_TIMEOUT   seconds (default 15) for start-up / SIGTERM
  ARBOR_LOOPS=N               add `loops N` to every config the broker fixture writes, unless
                              it has its own or asks for what several loops refuse yet
                              (durable persistence, peer, connection, websockets listeners)
"""

import fcntl
import glob
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import mqttproto
from mqttproto import RawClient

from helpers import (ARBOR_BIN, DIE_WITH_PARENT, HOST, IS_MOSQUITTO, PahoClient,
                     binary_notifies_systemd,
                     free_port, open_notify_socket)
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", "ThreadSanitizer")
START_TIMEOUT = float(os.environ.get("ARBOR_START_TIMEOUT", "15"))
STOP_TIMEOUT = float(os.environ.get("ARBOR_STOP_TIMEOUT", "15"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "arbor_only: arbor-specific behaviour; skipped when ARBOR_BIN is mosquitto")
    config.addinivalue_line(
        "markers", "mosquitto_deviates(reason): the spec requires behaviour Mosquitto 2.0 "
        "does not have; arbor follows the spec; skipped when ARBOR_BIN is mosquitto")


def pytest_collection_modifyitems(config, items):
    if not ARBOR_BIN or not os.access(ARBOR_BIN, os.X_OK):
        skip = pytest.mark.skip(reason="ARBOR_BIN is not set to an executable broker")
        for item in items:
            item.add_marker(skip)
        return
    if not IS_MOSQUITTO or os.environ.get("ARBOR_NO_MOSQUITTO_SKIPS") == "1":
        return
    for item in items:
        if item.get_closest_marker("arbor_only"):
            item.add_marker(pytest.mark.skip(reason="arbor-specific behaviour"))
        m = item.get_closest_marker("mosquitto_deviates")
        if m:
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason="Mosquitto deviates from spec: " + why))


# ---------------------------------------------------------------- ports and processes

def port_listening(host, port):
    """True if a TCP socket is listening on host:port (or on the wildcard address), read
    from /proc/net/tcp{,6} so that the check itself opens no connection (a probe connection
    would show up in the broker's logs, $SYS counters and max_connections accounting).
    None if /proc is unavailable."""
    v4 = "".join("%02X" % int(x) for x in reversed(host.split(".")))
    wanted = {"%s:%04X" % (v4, port), "00000000:%04X" % port,
              "%s:%04X" % ("0" * 32, port)}                 # IPv6 "::" (dual stack)
    found_table = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                found_table = True
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[1] in wanted and fields[3] == "0A":
                        return True
        except OSError:
            continue
    return False if found_table else None


def port_accepts(host, port, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def sanitizer_findings(text):
    return [m for m in SANITIZER_MARKERS if m in text]


def thread_stacks(pid, timeout=60):
    """Every thread's signal masks (pending, blocked) and stack (gdb attached in batch mode;
    masks only without gdb) of a running process, for the report of a broker that hung: a
    hang seen once in CI can then be read."""
    masks = []
    for task in sorted(glob.glob("/proc/%d/task/*" % pid)):
        try:
            with open(os.path.join(task, "status")) as f:
                sig = [l.strip() for l in f if l.startswith(("SigPnd", "ShdPnd", "SigBlk"))]
            masks.append("task %s: %s" % (os.path.basename(task), ", ".join(sig)))
        except OSError:
            pass
    gdb = shutil.which("gdb")
    if not gdb:
        return "\n".join(masks)
    try:
        out = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                              "-ex", "thread apply all bt 30"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "(gdb failed: %s)" % e
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    stacks = "\n".join(l for l in lines if l.startswith(("Thread ", "#")))[-12000:]
    return "\n".join(masks + [stacks])


LOOPS = os.environ.get("ARBOR_LOOPS")
# a test's own loops line
SINGLE_LOOP_LINE = re.compile(r"\s*loops\s")


def with_loops(lines):
    """The config lines with `loops $ARBOR_LOOPS` added (see the module's docstring)."""
    split = [part for line in lines for part in str(line).split("\n")]
    if not LOOPS or IS_MOSQUITTO or any(SINGLE_LOOP_LINE.match(l) for l in split):
        return lines
    return lines + ["loops %s" % LOOPS]


class BrokerError(Exception):
    pass


class Broker:
    """One broker process. Created by the `broker` fixture; use its attributes:

    host, port     where the first listener is
    conf_path      the config file written for it
    proc           the subprocess.Popen
    log_text()     everything the process wrote to stdout/stderr so far (all runs)
    stop(sig)      send `sig` (default SIGTERM), wait, return the exit code
    restart()      stop with SIGTERM (must exit 0) and start again with the same config
    wait_log(s)    wait until `s` appears in the log
    """

    def __init__(self, tmp_dir, lines, port=None, defaults=True, args=None, name="broker",
                 use_config=True):
        self.host = HOST
        self.port = port or free_port()
        self.tmp_dir = tmp_dir
        self.name = name
        self.extra_args = list(args or [])
        self.conf_path = os.path.join(tmp_dir, name + ".conf") if use_config else None
        self.log_path = os.path.join(tmp_dir, name + ".log")
        self.proc = None
        self.exit_codes = []
        if use_config:
            self._write_conf(lines, defaults)

    def argv(self):
        conf = ["-c", self.conf_path] if self.conf_path else []
        return DIE_WITH_PARENT + [ARBOR_BIN] + conf + self.extra_args

    def _write_conf(self, lines, defaults):
        conf = ["listener %d %s" % (self.port, HOST)]
        if defaults:
            conf += ["allow_anonymous true", "log_dest stderr", "log_type all"]
        conf += with_loops(list(lines))
        with open(self.conf_path, "w") as f:
            f.write("\n".join(conf) + "\n")

    def start(self):
        self._reaped = False
        self._log = open(self.log_path, "ab")
        notify, env = None, None
        if binary_notifies_systemd():
            notify, address = open_notify_socket()
            env = dict(os.environ, NOTIFY_SOCKET=address)
        try:
            self.proc = subprocess.Popen(self.argv(), env=env,
                                         stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.tmp_dir)
            deadline = time.monotonic() + START_TIMEOUT
            if notify is not None:
                self._wait_ready(notify, deadline)
        finally:
            if notify is not None:
                notify.close()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError("broker exited with %s during start-up:\n%s"
                                  % (self.proc.returncode, self.log_text()))
            listening = port_listening(self.host, self.port)
            if listening is None:
                listening = port_accepts(self.host, self.port)
            if listening:
                return self
            time.sleep(0.01)
        raise BrokerError("broker did not accept connections on %d within %.0fs:\n%s"
                          % (self.port, START_TIMEOUT, self.log_text()))

    def _wait_ready(self, notify, deadline):
        """Wait for the READY=1 that the broker sends (sd_notify) once every listener is
        open, privileges are dropped and persistence is loaded: the first listener accepting
        is not enough, the others open after it (a test connecting to its second listener at
        once was refused on a loaded machine)."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError("broker exited with %s during start-up:\n%s"
                                  % (self.proc.returncode, self.log_text()))
            notify.settimeout(0.05)
            try:
                msg = notify.recv(4096).decode("utf-8", "replace")
            except socket.timeout:
                continue
            if "READY=1" in msg.split("\n"):
                return
        raise BrokerError("broker did not report READY=1 within %.0fs:\n%s"
                          % (START_TIMEOUT, self.log_text()))

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, text, timeout=15.0):
        """Wait until `text` is in the log (anywhere, also before this call). The log is
        read on from where the last look stopped, so that waiting on a broker that logs
        megabytes (log_type all under a flood) stays cheap."""
        deadline = time.monotonic() + timeout
        pattern = text.encode("utf-8")
        seen, keep = 0, b""
        while True:
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(seen)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            seen += len(data)
            if pattern in keep + data:
                return True
            keep = (keep + data)[-len(pattern):]
            if time.monotonic() >= deadline:
                raise AssertionError("%r not in broker log within %.1fs" % (text, timeout))
            time.sleep(0.02)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT, check=True):
        """Signal the process and wait for it; returns the exit code (negative: signal).
        With check=False (e.g. a deliberate SIGKILL) the exit code is not held against the
        broker at teardown; sanitizer reports still are."""
        if self.proc is None:
            return None
        if self._reaped:
            return self.proc.returncode
        self._reaped = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.hang_stacks = thread_stacks(self.proc.pid)
                self.proc.kill()
                self.proc.wait()
                self.exit_codes.append("hung")
                self._log.close()
                return "hung"
        self._log.close()
        self.exit_codes.append(self.proc.returncode if check else 0)
        return self.proc.returncode

    def restart(self):
        rc = self.stop()
        if rc != 0:
            raise BrokerError("broker exited with %s on SIGTERM:\n%s" % (rc, self.log_text()))
        return self.start()

    def problems(self):
        """Reasons this broker's run counts as a failure (checked at teardown)."""
        out = []
        for rc in self.exit_codes:
            if rc != 0:
                out.append("exit status %s" % rc)
        found = sanitizer_findings(self.log_text())
        if found:
            out.append("sanitizer reports %s" % ", ".join(found))
        if getattr(self, "hang_stacks", None):
            out.append("where its threads were when it hung:\n%s" % self.hang_stacks)
        return out


@pytest.fixture
def tmp_path(request):
    """pytest's tmp_path, except when the suite runs as root: a broker started as root
    switches to an unprivileged user (arbor, like Mosquitto, falls back to `nobody`), which
    must still read its config on SIGHUP, create a rotated log file and remove its pid file.
    pytest's own directories are private to root, so use a fresh world-writable one in /tmp,
    removed after the test."""
    if os.geteuid() != 0:
        yield request.getfixturevalue("tmp_path_factory").mktemp("t")
        return
    path = tempfile.mkdtemp(prefix="arbor-test-")
    os.chmod(path, 0o777)
    yield pathlib.Path(path)
    if not os.environ.get("ARBOR_KEEP_TMP"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails shows the end of each of its brokers' logs (they log every packet
    with log_type all): a failure seen once in CI can then be read, not guessed."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for b in getattr(item, "arbor_brokers", ()):
        text = b.log_text()
        if text:
            report.sections.append(("%s (port %d) log, last 60 lines" % (b.name, b.port),
                                    "\n".join(text.splitlines()[-60:])))


@pytest.fixture
def broker(tmp_path, request):
    """Factory: broker(*lines, defaults=True, port=None, args=None, start=True,
    use_config=True) -> Broker.

    Writes `listener <free port> 127.0.0.1`, then (unless defaults=False) `allow_anonymous
    true`, `log_dest stderr`, `log_type all`, then `lines`, and starts $ARBOR_BIN -c on it
    plus `args`. With use_config=False no file is written and only `args` are passed (give
    `port` so readiness can be detected).
    At teardown each broker gets SIGTERM; the test fails if any run of it exited non-zero,
    died by a signal, hung, or printed a sanitizer report.
    """
    started = []
    request.node.arbor_brokers = started

    def make(*lines, defaults=True, port=None, args=None, start=True, use_config=True):
        name = "broker%d" % len(started)
        for attempt in range(3):
            b = Broker(str(tmp_path), lines, port=port, defaults=defaults, args=args,
                       name=name if attempt == 0 else "%s-%d" % (name, attempt),
                       use_config=use_config)
            started.append(b)
            if not start:
                return b
            try:
                return b.start()
            except BrokerError:
                # A failed start is reported by the exception itself, not again at teardown.
                b.stop()
                started.remove(b)
                if port is None and "in use" in b.log_text() and attempt < 2:
                    continue
                raise
        raise AssertionError("unreachable")

    yield make

    failures = []
    for b in started:
        if b.proc is None:
            continue
        b.stop()       # records the exit status, also of a process that died on its own
        problems = b.problems()
        if problems:
            failures.append("%s (port %d): %s\n--- log tail ---\n%s" % (
                b.name, b.port, "; ".join(problems), b.log_text()[-4000:]))
    if failures:
        pytest.fail("broker teardown check failed:\n" + "\n".join(failures), pytrace=False)


@pytest.fixture
def run_broker(tmp_path):
    """run_broker(args, conf_lines=None, timeout=5) -> (returncode, output).

    Runs the binary to completion (for config errors, -h ...). When conf_lines is given it
    is written to tmp_path/run.conf and `-c <that file>` is prepended to args; the path is
    available as run_broker.conf_path. A process still running at the timeout is killed
    and reported as returncode None."""

    class Runner:
        conf_path = str(tmp_path / "run.conf")

        def __call__(self, args=(), conf_lines=None, timeout=5.0):
            argv = [ARBOR_BIN]
            if conf_lines is not None:
                with open(self.conf_path, "w") as f:
                    f.write("\n".join(conf_lines) + "\n")
                argv += ["-c", self.conf_path]
            argv += list(args)
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=str(tmp_path))
            try:
                out, _ = p.communicate(timeout=timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)
                try:
                    out, _ = p.communicate(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                rc = None
            text = out.decode("utf-8", "replace")
            found = sanitizer_findings(text)
            assert not found, "sanitizer report: %s\n%s" % (found, text)
            return rc, text

    return Runner()


# ---------------------------------------------------------------- well-known ports

FIXED_PORTS_LOCK = os.path.join(tempfile.gettempdir(), "arbor-tests-fixed-ports.lock")


@pytest.fixture
def fixed_ports():
    """For the few tests that must listen on well-known ports (1883 with no config, 8883 and
    9001 of the drop-in test, the deployment guide's 1884x): held for the whole test, an
    flock on a file in /tmp, so that the other pytest-xdist worker, and a second test run
    on the same machine, wait for it instead of colliding on the port."""
    try:
        fd = os.open(FIXED_PORTS_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        fd = os.open(FIXED_PORTS_LOCK, os.O_RDONLY)   # another user's file: flock works too
    try:
        deadline = time.monotonic() + 900
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail("%s held by another test for 900 s" % FIXED_PORTS_LOCK)
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)   # releases the lock


# ---------------------------------------------------------------- raw sockets

@pytest.fixture
def raw():
    """Factory: raw(broker, version=4, timeout=5) -> RawClient (TCP connected, nothing sent)."""
    clients = []

    def make(b, version=mqttproto.MQTT311, timeout=5.0):
        c = RawClient(b.host, b.port, version=version, timeout=timeout)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def mqtt():
    """Factory: mqtt(broker, client_id="", version=4, clean=True, keepalive=30, will=None,
    username=None, password=None, properties=None, connect=True) -> PahoClient."""
    clients = []

    def make(b, **kw):
        c = PahoClient(b, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
