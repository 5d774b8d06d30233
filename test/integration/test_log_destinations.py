"""Mosquitto's log destinations beyond stderr and file: log_dest topic ($SYS/broker/log/...)
and log_facility (syslog's local0..local7). Each test holds against Debian's mosquitto
2.0.11 as well."""

import os
import re
import shutil
import signal
import socket
import subprocess
import types

import pytest

from conftest import ARBOR_BIN
from helpers import IS_MOSQUITTO, PahoClient, free_port, wait_until


def test_log_dest_topic_publishes_each_line_under_its_level(broker):
    b = broker("log_dest topic")
    watcher = PahoClient(b, "watcher")
    watcher.subscribe("$SYS/broker/log/#", qos=2)
    first = watcher.get_message()       # the watcher's own SUBSCRIBE, logged as M/subscribe
    assert first.topic == "$SYS/broker/log/M/subscribe"
    assert re.fullmatch(r"\d+: watcher 2 \$SYS/broker/log/#", first.payload.decode()), first
    assert first.qos == 2 and not first.retain
    other = PahoClient(b, "other")
    other.subscribe("x/y", qos=1)
    other.unsubscribe("x/y")
    other.disconnect()
    seen = []
    wait_until(lambda: seen.append(watcher.get_message()) or
               "Client other disconnected." in seen[-1].payload.decode(),
               what="the disconnect line")
    lines = [(m.topic, m.payload.decode().split(": ", 1)[1]) for m in seen]
    assert ("$SYS/broker/log/M/subscribe", "other 1 x/y") in lines, lines
    assert ("$SYS/broker/log/M/unsubscribe", "other x/y") in lines, lines
    assert any(t == "$SYS/broker/log/N" and l.startswith("New client connected from ") and
               " as other (p2, c1, k30)." in l for t, l in lines), lines
    # debug lines (log_type all) are not published: each PUBLISH sent would log another
    assert not [t for t, _ in lines if t.endswith("/D")], lines
    watcher.disconnect()


def test_log_dest_topic_is_not_published_without_it(broker):
    b = broker()                        # log_dest stderr only
    watcher = PahoClient(b, "watcher")
    watcher.subscribe("$SYS/broker/log/#", qos=1)
    PahoClient(b, "other").disconnect()
    watcher.expect_no_message(timeout=1.0)
    watcher.disconnect()


needs_root_and_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="needs root and unshare(1) to give the broker its own /dev/log")


def syslog_priorities(tmp_path, conf_lines, port):
    """Run the broker in a mount namespace whose /dev/log is a socket of this test; return
    the syslog lines it sent ("<PRI>..."), collected until a client's connection is logged."""
    dev = tmp_path / "dev"
    dev.mkdir()
    os.chmod(dev, 0o755)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(dev / "log"))
    os.chmod(dev / "log", 0o666)        # also for the user the broker switches to
    listener.settimeout(0.2)
    conf = tmp_path / "syslog.conf"
    conf.write_text("\n".join(["listener %d 127.0.0.1" % port, "allow_anonymous true"] +
                              conf_lines) + "\n")
    script = 'mount --bind "$1" /dev && shift && exec "$@"'
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script, "sh", str(dev), ARBOR_BIN,
                             "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    lines = []

    def receive():
        try:
            lines.append(listener.recv(65536).decode("utf-8", "replace"))
        except socket.timeout:
            pass
        return any("probe" in line for line in lines)

    try:
        target = types.SimpleNamespace(host="127.0.0.1", port=port)

        def connected():
            try:
                PahoClient(target, "probe", timeout=1.0).disconnect()
                return True
            except (AssertionError, OSError):
                return False
        wait_until(lambda: proc.poll() is not None or connected(), timeout=20,
                   what="broker listening")
        assert proc.poll() is None, proc.stderr.read().decode()
        wait_until(receive, timeout=20, what="the client's line on syslog")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        listener.close()
    return lines


def facility_of(line):
    return int(re.match(r"<(\d+)>", line).group(1)) // 8


@needs_root_and_unshare
def test_log_facility_chooses_local_n(tmp_path):
    lines = syslog_priorities(tmp_path, ["log_dest syslog", "log_facility 5"], free_port())
    probe = [line for line in lines if "probe" in line]
    assert probe and all(facility_of(line) == 21 for line in probe), lines   # local5
    name = "mosquitto" if IS_MOSQUITTO else "arbor"
    assert all(re.search(r" %s\[\d+\]: " % name, line) for line in probe), lines


@needs_root_and_unshare
def test_syslog_default_facility_is_daemon(tmp_path):
    lines = syslog_priorities(tmp_path, ["log_dest syslog"], free_port())
    probe = [line for line in lines if "probe" in line]
    assert probe and all(facility_of(line) == 3 for line in probe), lines    # daemon


@pytest.mark.parametrize("value, message", [
    ("8", 'value "8" is not an integer between 0 and 7'),
    ("local5", 'value "local5" is not an integer between 0 and 7'),
])
@pytest.mark.arbor_only     # Mosquitto reads "local5" as 0 (atoi)
def test_log_facility_out_of_range_is_refused(run_broker, value, message):
    rc, out = run_broker(conf_lines=["log_facility %s" % value])
    assert rc == 1 and "run.conf:1: log_facility: %s" % message in out, out
