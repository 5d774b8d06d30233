"""Operating the broker: daemon mode and pid file, log file and its reopening on SIGHUP,
include_dir, client id rules (clientid_prefixes, auto_id_prefix), per-listener settings and
byte-based queue limits."""

import os
import socket
import signal
import subprocess
import time

import pytest

import mqttproto as mp
from conftest import ARBOR_BIN
from helpers import free_port
from mqttproto import MQTT5, MQTT311


def wait_for(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); look at its state.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.arbor_only
def test_daemon_mode_writes_and_removes_pid_file(tmp_path):
    # arbor(8) -d: detach; pid_file holds the daemon's pid and is removed on SIGTERM.
    port = free_port()
    pid_path = tmp_path / "arbor.pid"
    log_path = tmp_path / "arbor.log"
    conf = tmp_path / "d.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\npid_file %s\n"
                    "log_dest file %s\n" % (port, pid_path, log_path))
    started = subprocess.run([ARBOR_BIN, "-d", "-c", str(conf)], timeout=10)
    assert started.returncode == 0
    wait_for(lambda: pid_path.exists() and pid_path.read_text().strip(), what="pid file")
    pid = int(pid_path.read_text())
    try:
        c = mp.RawClient("127.0.0.1", port)
        wait_for(lambda: "running" in log_path.read_text(), what="start-up log")
        assert c.connect("daemon-client").rc == 0
        c.close()
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not pid_alive(pid), what="daemon exit")
    assert not pid_path.exists()
    log = log_path.read_text()
    assert "daemon-client" in log and "terminating" in log
    assert "AddressSanitizer" not in log and "runtime error" not in log


@pytest.mark.arbor_only  # Mosquitto run as root switches user and cannot write tmp_path
def test_log_file_is_reopened_on_sighup(broker, raw, tmp_path):
    # mosquitto.conf(5) log_dest file; SIGHUP reopens it, so logrotate can move it away.
    log_path = tmp_path / "broker.log"
    b = broker("allow_anonymous true", "log_dest file %s" % log_path, "log_type all",
               defaults=False)
    raw(b).connect("first-client")
    wait_for(lambda: log_path.exists() and "first-client" in log_path.read_text(),
             what="first client in log")
    rotated = tmp_path / "broker.log.1"
    log_path.rename(rotated)
    b.proc.send_signal(signal.SIGHUP)
    wait_for(log_path.exists, what="log file reopened")
    raw(b).connect("second-client")
    wait_for(lambda: "second-client" in log_path.read_text(), what="second client in new log")
    assert "second-client" not in rotated.read_text()


def test_include_dir(broker, raw, tmp_path):
    # mosquitto.conf(5) include_dir: every *.conf file in the directory is read.
    inc = tmp_path / "conf.d"
    inc.mkdir()
    (inc / "10-limits.conf").write_text("max_keepalive 10\n")
    (inc / "ignored.txt").write_text("this is not a directive\n")
    b = broker("include_dir %s" % inc)
    ack = raw(b, MQTT5).connect("inc", keepalive=60)
    assert ack.props.get(mp.P_SERVER_KEEP_ALIVE) == 10


def test_clientid_prefixes(broker, raw):
    # mosquitto.conf(5) clientid_prefixes: other client ids are refused.
    b = broker("clientid_prefixes sensor-")
    assert raw(b).connect("sensor-1").rc == 0
    refused = raw(b).connect("intruder", expect_rc=None)
    assert refused.rc != 0


def test_auto_id_prefix(broker, raw):
    # mosquitto.conf(5) auto_id_prefix: assigned identifiers start with it.
    b = broker("auto_id_prefix edge-")
    ack = raw(b, MQTT5).connect("")
    assert ack.props.get(mp.P_ASSIGNED_CLIENT_ID).startswith("edge-")


def test_per_listener_settings(broker, raw):
    # mosquitto.conf(5) per_listener_settings: allow_anonymous applies to its own listener.
    open_port = free_port()
    b = broker("per_listener_settings true", "allow_anonymous false",
               "listener %d 127.0.0.1" % open_port, "allow_anonymous true",
               defaults=False)
    closed = raw(b).connect("anon-closed", expect_rc=None)
    assert closed.rc == 5  # not authorised
    c = mp.RawClient("127.0.0.1", open_port)
    try:
        assert c.connect("anon-open").rc == 0
    finally:
        c.close()


def test_max_queued_bytes_limits_offline_queue(broker, raw):
    # mosquitto.conf(5) max_queued_bytes: queued QoS 1/2 payload bytes per client.
    b = broker("max_queued_bytes 25", "max_queued_messages 0")
    sub = raw(b)
    sub.connect("bytes-sub", clean=False)
    sub.subscribe("qb", 1)
    sub.disconnect()
    pub = raw(b)
    pub.connect("bytes-pub")
    for i in range(5):
        pub.publish("qb", b"%010d" % i, qos=1)  # 10 bytes each
    again = raw(b)
    assert again.connect("bytes-sub", clean=False).session_present
    got = []
    try:
        while True:
            got.append(again.recv_publish(timeout=0.7).payload)
    except mp.PacketTimeout:
        pass
    # As Mosquitto: messages are queued until the byte count has gone past the limit
    # (0 -> 10 -> 20 -> 30 bytes), then dropped.
    assert got == [b"%010d" % i for i in range(3)], got


@pytest.mark.mosquitto_deviates
def test_mount_point_isolates_listener_clients(broker, raw):
    # mosquitto.conf(5) mount_point: topics of this listener's clients get the prefix on the
    # way in and lose it on the way out; clients elsewhere see the full topic. (Debian's
    # Mosquitto 2.0.11 sends the prefixed topic to the listener's own clients.)
    site_port = free_port()
    b = broker("listener %d 127.0.0.1" % site_port, "mount_point site1/")
    site = mp.RawClient("127.0.0.1", site_port)
    site_pub = mp.RawClient("127.0.0.1", site_port)
    try:
        site.connect("site-sub")
        site.subscribe("#", 1)
        central = raw(b)
        central.connect("central")
        central.subscribe("site1/#", 1)
        site_pub.connect("site-pub", will={"topic": "status", "payload": b"gone"})
        site_pub.publish("temp", b"21", qos=1)
        m = central.recv_publish()
        assert (m.topic, m.payload) == ("site1/temp", b"21")
        m = site.recv_publish()
        assert (m.topic, m.payload) == ("temp", b"21")
        control = raw(b)
        control.connect("control")
        control.publish("elsewhere", b"x", qos=1)
        control.publish("site1/cmd", b"on", qos=1)
        m = site.recv_publish()
        assert (m.topic, m.payload) == ("cmd", b"on")  # "elsewhere" is not under the mount
        assert central.recv_publish().topic == "site1/cmd"
        site_pub.sock.close()  # abrupt: the will goes out under the mount point too
        m = central.recv_publish(timeout=5)
        assert (m.topic, m.payload) == ("site1/status", b"gone")
    finally:
        site.close()
        site_pub.close()


def test_socket_domain_ipv4_only(broker):
    # mosquitto.conf(5) socket_domain: ipv4 listens on IPv4 addresses only.
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    port = free_port()
    broker("listener %d" % port, "socket_domain ipv4")
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(OSError):
        socket.create_connection(("::1", port), timeout=2).close()


def test_bind_interface(broker, run_broker):
    # mosquitto.conf(5) bind_interface: listen only on that network interface.
    port = free_port()
    broker("listener %d" % port, "bind_interface lo")
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    rc, out = run_broker(conf_lines=["listener %d" % free_port(), "bind_interface nosuchif0"])
    assert rc not in (0, None), out
