"""Helpers shared by the integration tests: paho-mqtt client wrapper and small utilities.

Import from test files as `from helpers import ...`.
"""

import os
import queue
import socket
import shutil
import signal
import subprocess
import threading
import time

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

import mqttproto

ARBOR_BIN = os.environ.get("ARBOR_BIN") or shutil.which("arbor") or ""
IS_MOSQUITTO = os.path.basename(ARBOR_BIN).startswith("mosquitto")
HOST = "127.0.0.1"


# ---------------------------------------------------------------- paho clients

PAHO_VERSIONS = {3: paho.MQTTv31, 4: paho.MQTTv311, 5: paho.MQTTv5}


# paho decodes each MQTT 5 PUBLISH into a Properties object of its own, about 6 KB even with
# no property set (it carries its own tables of every property's name and type): a Message
# without properties shares this one instead (read it, never change it), so that a test that
# keeps a few million messages does not keep gigabytes (and the garbage collector does not
# walk millions of their containers, holding every thread of the process meanwhile).
NO_PROPERTIES = Properties(PacketTypes.PUBLISH)


class Message:
    def __init__(self, msg):
        self.topic = msg.topic
        self.payload = bytes(msg.payload)
        self.qos = msg.qos
        self.retain = bool(msg.retain)
        props = getattr(msg, "properties", None)
        self.props = NO_PROPERTIES if props is not None and props.isEmpty() else props

    def __repr__(self):
        return "Message(%r, %r, qos=%d, retain=%s)" % (self.topic, self.payload, self.qos,
                                                        self.retain)


class PahoClient:
    """A paho-mqtt client running its network loop in a thread; every wait has a timeout.

    messages   queue.Queue of Message (decoded copies), unless a sink takes them
    connack    (reason_code, flags, properties) of the last CONNACK
    """

    def __init__(self, b, client_id="", version=4, clean=True, keepalive=30,
                 will=None, username=None, password=None, properties=None,
                 connect=True, timeout=5.0, transport="tcp", port=None, tls_context=None,
                 sink=None):
        """transport "websockets" for MQTT over WebSockets, to port (default b.port);
        tls_context an ssl.SSLContext for TLS (wss with websockets); sink a callable given
        each Message in the network thread instead of `messages`."""
        self.broker = b
        self.sink = sink
        self.port = port or b.port
        self.version = version
        self.timeout = timeout
        kwargs = dict(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                      protocol=PAHO_VERSIONS[version], transport=transport)
        if version != 5:
            kwargs["clean_session"] = clean
        self.client = paho.Client(**kwargs)
        self.clean = clean
        self.keepalive = keepalive
        self.connect_properties = properties
        self.messages = queue.Queue()
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.disconnect_reason = None
        self.connack = None
        self._acks = {}
        self._lock = threading.Lock()
        c = self.client
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.on_unsubscribe = self._on_unsubscribe
        if will is not None:
            c.will_set(will["topic"], will.get("payload"), will.get("qos", 0),
                       will.get("retain", False), properties=will.get("props"))
        if username is not None:
            c.username_pw_set(username, password)
        if tls_context is not None:
            c.tls_set_context(tls_context)
        if connect:
            self.connect()

    # callbacks (network thread)
    def _on_connect(self, client, userdata, flags, reason_code, properties):
        self.connack = (reason_code, flags, properties)
        self.connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        self.disconnect_reason = reason_code
        self.disconnected.set()

    def _on_message(self, client, userdata, msg):
        (self.sink or self.messages.put)(Message(msg))

    def _ack_event(self, mid):
        with self._lock:
            return self._acks.setdefault(mid, [threading.Event(), None])

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        e = self._ack_event(mid)
        e[1] = reason_codes
        e[0].set()

    def _on_unsubscribe(self, client, userdata, mid, reason_codes, properties):
        e = self._ack_event(mid)
        e[1] = reason_codes
        e[0].set()

    def _wait_ack(self, mid, what):
        """The SUBACK or UNSUBACK of mid (the entry goes: paho hands out mids again)."""
        e = self._ack_event(mid)
        try:
            assert e[0].wait(self.timeout), "no %s for mid %d within %.1fs" % (
                what, mid, self.timeout)
        finally:
            with self._lock:
                self._acks.pop(mid, None)
        return e[1]

    # API
    def connect(self, expect_success=True):
        self.connected.clear()
        self.disconnected.clear()
        kw = {}
        if self.version == 5:
            kw["clean_start"] = self.clean
            kw["properties"] = self.connect_properties
        self.client.connect(self.broker.host, self.port, self.keepalive, **kw)
        self.client.loop_start()
        assert self.connected.wait(self.timeout), "no CONNACK within %.1fs" % self.timeout
        if expect_success:
            rc = self.connack[0]
            assert not rc.is_failure, "connect refused: %s" % rc
        return self.connack

    @property
    def session_present(self):
        return bool(self.connack[1].session_present)

    def subscribe(self, topic, qos=0, options=None, properties=None):
        """Subscribe and wait for SUBACK; returns the list of reason codes (ints)."""
        if options is not None:
            result, mid = self.client.subscribe(topic, options=options, properties=properties)
        else:
            result, mid = self.client.subscribe(topic, qos, properties=properties)
        assert result == paho.MQTT_ERR_SUCCESS, result
        codes = self._wait_ack(mid, "SUBACK")
        return [c.value if hasattr(c, "value") else int(c) for c in codes]

    def unsubscribe(self, topic):
        result, mid = self.client.unsubscribe(topic)
        assert result == paho.MQTT_ERR_SUCCESS, result
        return self._wait_ack(mid, "UNSUBACK")

    def publish(self, topic, payload=b"", qos=0, retain=False, properties=None, wait=True):
        """Publish; for QoS>0 waits for the handshake to finish (PUBACK / PUBCOMP).

        paho's own MQTTMessageInfo tells when: it lives as long as the message does (a
        long-lived publisher must not keep something per message), and it belongs to this
        message, while a mid is handed out again after 65535 publishes."""
        info = self.client.publish(topic, payload, qos, retain, properties=properties)
        assert info.rc == paho.MQTT_ERR_SUCCESS, info.rc
        if wait and qos > 0:
            info.wait_for_publish(self.timeout)
            assert info.is_published(), "no PUBACK/PUBCOMP for mid %d within %.1fs" % (
                info.mid, self.timeout)
        return info

    def get_message(self, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no message within %.1fs" % timeout) from None

    def get_messages(self, n, timeout=None):
        got = []
        for _ in range(n):
            try:
                got.append(self.get_message(timeout))
            except AssertionError as e:
                raise AssertionError("%s (after %d of %d messages, the last on %s)" % (
                    e, len(got), n, got[-1].topic if got else "none")) from None
        return got

    def expect_no_message(self, timeout=0.5):
        try:
            m = self.messages.get(timeout=timeout)
        except queue.Empty:
            return
        raise AssertionError("unexpected message %r" % (m,))

    def wait_disconnected(self, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        assert self.disconnected.wait(timeout), "still connected after %.1fs" % timeout
        return self.disconnect_reason

    def disconnect(self, properties=None, reasoncode=None):
        if self.client.is_connected():
            if self.version == 5:
                self.client.disconnect(reasoncode=reasoncode, properties=properties)
            else:
                self.client.disconnect()
            self.disconnected.wait(self.timeout)
        self.client.loop_stop()

    def close(self):
        try:
            self.disconnect()
        except Exception:
            pass


def props(packet_type, **values):
    """Build paho Properties: props(PacketTypes.PUBLISH, MessageExpiryInterval=5)."""
    p = Properties(packet_type)
    for k, v in values.items():
        setattr(p, k, v)
    return p


def wait_until(predicate, timeout=15.0, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    raise AssertionError("%s not met within %.1fs" % (what, timeout))


def _run_delay_ns(pid):
    """Nanoseconds the threads of process `pid` have spent runnable but waiting for a CPU
    (the second field of /proc/<pid>/task/<tid>/schedstat), 0 if it is gone."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return total


class StolenTime:
    """How long the kernel kept the test process and the given processes (brokers, tools)
    waiting for a CPU since this object was made: its own accounting (schedstat run delay),
    summed over their threads.

    A deadline check of the form "the event came at most X s after its cause" fails on a
    loaded machine when the broker or the test was kept off the CPU; checks of that kind
    allow X + stolen.seconds(), so they hold their full precision on an idle machine and
    stay valid on a busy one (a broker rounding its timers to a one-second tick is still
    caught: being off the CPU is not counted as lateness, being late while running is).
    Threads that exit and processes that die take their share with them (less allowance,
    never more)."""

    def __init__(self, *procs):
        pids = [os.getpid()]
        for p in procs:
            pid = getattr(p, "pid", None) or getattr(getattr(p, "proc", None), "pid", None) or p
            if isinstance(pid, int) and pid not in pids:
                pids.append(pid)
        self.pids = pids
        self.start = {pid: _run_delay_ns(pid) for pid in pids}

    def seconds(self):
        return sum(max(0, _run_delay_ns(pid) - self.start[pid]) for pid in self.pids) / 1e9


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (/proc/<pid>/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_cpu_goes_quiet(pid, limit, window=1.0, timeout=20.0, what="while idle"):
    """A "does not spin" check: some `window` within `timeout` in which process `pid` used
    less than `limit` s of CPU. A broker that spins never has such a window; one that is
    merely slow (a loaded machine, a sanitizer build) to finish the work the test gave it
    has one once it is done, instead of failing a single window measured too early.
    Returns the CPU time of the quiet window."""
    used_per_window = []
    deadline = time.monotonic() + timeout
    while True:
        before = cpu_seconds(pid)
        time.sleep(window)
        used = cpu_seconds(pid) - before
        used_per_window.append(round(used, 2))
        if used < limit:
            return used
        if time.monotonic() >= deadline:
            raise AssertionError("process %d used %r s of CPU in successive %.1f s windows %s "
                                 "(limit %.2f s)" % (pid, used_per_window, window, what, limit))


def measure(attempt, tries=3):
    """Run attempt(n) (n = 0, 1, ...) until it returns None (its bounds held) or `tries`
    attempts returned a description of what was out of bounds; then fail with all of them.

    For verdicts about time that a loaded machine can spoil without the broker being wrong
    (the test was kept from sending in time, the broker from running): the attempt asserts
    what no load can explain and returns a description for what load can. A broker that is
    really wrong fails every attempt; a machine busy for a moment does not fail the test."""
    failures = []
    for n in range(tries):
        why = attempt(n)
        if why is None:
            return
        failures.append("attempt %d: %s" % (n + 1, why))
    raise AssertionError("\n".join(failures))


# Prefix for the command line of every broker a test starts: the kernel kills the broker
# when the test process that started it dies (a killed pytest worker, a timeout), so that no
# orphaned broker lives on to answer, or join the tree of, a later test's brokers on a
# reused port. (setpriv is util-linux, present on every Debian.)
if shutil.which("setpriv"):
    DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL"]
else:
    DIE_WITH_PARENT = []


_PORTS_GIVEN = set()


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago and that this test process has not
    handed out before: two calls in a row may otherwise get the same port back from the
    kernel (a broker with two listeners then fails to start, as CI saw once)."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no free port that was not handed out already")


def v5_client(b, raw, cid, **kw):
    """A raw MQTT 5 client connected to broker `b` as `cid` (CONNECT keywords in kw)."""
    c = raw(b, mqttproto.MQTT5)
    c.connect(cid, **kw)
    return c


_NOTIFIES = {}


def binary_notifies_systemd():
    """True if the broker binary calls sd_notify (built with libsystemd), so that start-up
    can wait for its READY=1 as systemd does."""
    if ARBOR_BIN not in _NOTIFIES:
        try:
            with open(ARBOR_BIN, "rb") as f:
                _NOTIFIES[ARBOR_BIN] = b"sd_notify" in f.read()
        except OSError:
            _NOTIFIES[ARBOR_BIN] = False
    return _NOTIFIES[ARBOR_BIN]


def open_notify_socket():
    """A unix datagram socket in the abstract namespace (reachable after the broker drops
    privileges) and the NOTIFY_SOCKET value that names it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for _ in range(100):
        name = "arbor-test-ready-%d-%d" % (os.getpid(), int.from_bytes(os.urandom(4), "big"))
        try:
            s.bind("\0" + name)
            return s, "@" + name
        except OSError:
            continue
    s.close()
    raise OSError("no free abstract socket name for NOTIFY_SOCKET")


MOSQUITTO_BIN = "/usr/sbin/mosquitto"


def start_mosquitto(conf_path, log_path, port, cwd=None):
    """Start Debian's mosquitto on conf_path, its output appended to log_path, and wait until
    it accepts on port. Returns (process, log file); stop_mosquitto ends both."""
    log = open(log_path, "ab")
    proc = subprocess.Popen(DIE_WITH_PARENT + [MOSQUITTO_BIN, "-c", conf_path], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.close()
            with open(log_path, "rb") as f:
                raise AssertionError("mosquitto exited:\n" + f.read().decode("utf-8", "replace"))
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
            return proc, log
        except OSError:
            time.sleep(0.02)
    stop_mosquitto(proc, log)
    raise AssertionError("mosquitto did not listen on port %d" % port)


def stop_mosquitto(proc, log):
    """SIGTERM (SIGKILL after 5 s) by PID, then close its log."""
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    if log is not None:
        log.close()
