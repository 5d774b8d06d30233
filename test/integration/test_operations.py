"""Operating the broker: daemon mode and pid file, log file and its reopening on SIGHUP,
include_dir, client id rules (clientid_prefixes, auto_id_prefix), per-listener settings and
byte-based queue limits."""

import os
import re
import shutil
import socket
import signal
import subprocess
import sys
import time

import pytest

import mqttproto as mp
from conftest import ARBOR_BIN
from helpers import IS_MOSQUITTO, free_port, open_notify_socket
from mqttproto import MQTT5, MQTT311


def wait_for(predicate, timeout=15.0, what="condition"):
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


STOP_RELOAD_SAVE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)


def signal_mask(status, field):
    bits = int(re.search(r"^%s:\s*([0-9a-f]+)" % field, status, re.M).group(1), 16)
    return {s for s in STOP_RELOAD_SAVE if bits & (1 << (s - 1))}


@pytest.mark.skipif(IS_MOSQUITTO, reason="arbor's design: signals read from a signalfd")
def test_signals_wait_in_the_kernel_for_loop_0_in_every_thread(broker, raw):
    # arbor(8) SIGNALS: the stop, reload and save signals are blocked in every thread (each
    # event loop) and read by loop 0 from a signalfd, never caught by an asynchronous
    # handler (which a sanitizer's deferred delivery could swallow: a broker that did not stop).
    b = broker("loops 3")
    # the worker loops start just after READY
    wait_for(lambda: len(os.listdir("/proc/%d/task" % b.proc.pid)) >= 3, what="3 loops")
    tasks = os.listdir("/proc/%d/task" % b.proc.pid)
    for task in tasks:
        with open("/proc/%d/task/%s/status" % (b.proc.pid, task)) as f:
            status = f.read()
        assert signal_mask(status, "SigBlk") == set(STOP_RELOAD_SAVE), (task, status)
        assert signal_mask(status, "SigCgt") == set(), (task, status)
    fd_dir = "/proc/%d/fdinfo" % b.proc.pid
    signalfds = [fd for fd in os.listdir(fd_dir)
                 if "sigmask:" in open(os.path.join(fd_dir, fd)).read()]
    assert len(signalfds) == 1, signalfds
    # and they act: SIGHUP reloads, SIGTERM stops cleanly, each at once
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("Reloaded configuration.")
    raw(b).connect("after-reload")
    assert b.stop() == 0
    assert "terminating" in b.log_text()


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


def test_per_listener_settings_default_listener_lets_anonymous_in(broker, raw):
    # Mosquitto 2.0.11: under per_listener_settings the default listener (the deprecated
    # port line) lets anonymous clients in unless told otherwise; listener lines do not.
    default_port = free_port()
    b = broker("per_listener_settings true", "port %d" % default_port, defaults=False)
    refused = raw(b).connect("anon-listener", expect_rc=None)
    assert refused.rc == 5  # not authorised
    c = mp.RawClient("127.0.0.1", default_port)
    try:
        assert c.connect("anon-default").rc == 0
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
    got = [m.payload for m in again.drain_publishes(0.7, expect=3)]
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


# ---------------------------------------------------------------- privileges (issue 7)

def proc_uid(pid):
    """The real and effective uid of a running process, from /proc/<pid>/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                real, effective = line.split()[1:3]
                return int(real), int(effective)
    raise AssertionError("no Uid line for %d" % pid)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="privilege drop needs root")


def fallback_user():
    import pwd
    for name in ("mosquitto", ) if IS_MOSQUITTO else ("arbor", "mosquitto", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.skip("no fallback user on this host")


@needs_root
def test_root_without_user_line_drops_privileges(broker):
    # arbor(8): started as root with no user line, the broker switches to "arbor", else to
    # "mosquitto", else to "nobody" (Mosquitto: "mosquitto"), and never keeps serving as uid 0.
    b = broker()
    expected = fallback_user()
    # The listeners open (and the port answers) before the switch: wait for it.
    wait_for(lambda: proc_uid(b.proc.pid) == (expected.pw_uid, expected.pw_uid),
             what="uid %d" % expected.pw_uid)
    if not IS_MOSQUITTO:
        b.wait_log("Running as user %s (uid %d)." % (expected.pw_name, expected.pw_uid))


@needs_root
def test_root_with_named_user_runs_as_it(broker):
    b = broker("user nobody")
    # The listeners open (and the port answers) before the switch: wait for it.
    wait_for(lambda: proc_uid(b.proc.pid) == (65534, 65534), what="uid 65534")


@needs_root
def test_parent_death_signal_survives_the_switch_of_user(tmp_path):
    # arbor(8): Linux clears PR_SET_PDEATHSIG at setuid; arbor asks for it again, so a broker
    # started under `setpriv --pdeathsig KILL` dies with its starter even after it dropped
    # root (what keeps the test suite from leaving orphaned brokers behind).
    port = free_port()
    conf = tmp_path / "a.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\n" % port)
    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "p = subprocess.Popen(['setpriv', '--pdeathsig', 'KILL', sys.argv[1], '-c', sys.argv[2]],"
         " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
         "print(p.pid, flush=True)\n"
         "time.sleep(600)\n", ARBOR_BIN, str(conf)],
        stdout=subprocess.PIPE, text=True)
    pid = int(starter.stdout.readline())
    try:
        user = fallback_user()
        wait_for(lambda: proc_uid(pid) == (user.pw_uid, user.pw_uid), what="the switch of user")
        starter.kill()
        starter.wait()
        wait_for(lambda: not process_alive(pid), what="the broker to die with its starter")
    finally:
        starter.kill()
        starter.wait()
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def process_alive(pid):
    """False once pid has gone or is a zombie waiting for init to reap it."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@needs_root
def test_user_root_keeps_root_only_when_explicit(broker):
    b = broker("user root")
    assert proc_uid(b.proc.pid) == (0, 0)
    b.wait_log("should not be run as root")


@needs_root
def test_missing_user_stops_start_up(run_broker):
    # A user that does not exist is an error, not a reason to stay root (Mosquitto's wording).
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % free_port(),
                                     "allow_anonymous true", "user no-such-user-7"])
    assert rc not in (0, None), out
    assert "Unable to drop privileges to 'no-such-user-7' because this user does not exist." \
        in out, out


# ---------------------------------------------------------------- log file and reload (issue 7)

@pytest.mark.arbor_only
def test_log_file_is_created_0600(broker, tmp_path):
    log_path = tmp_path / "private.log"
    b = broker("log_dest file %s" % log_path)
    wait_for(lambda: log_path.exists() and "running" in log_path.read_text(), what="log")
    assert (os.stat(log_path).st_mode & 0o777) == 0o600
    assert b.running()


@pytest.mark.arbor_only
def test_failed_reload_reason_goes_to_the_log_file(broker, raw, tmp_path):
    # The reason a SIGHUP reload failed reaches log_dest (here a file), not only stderr.
    # (user root: reopening a root-owned log file on SIGHUP needs root, see arbor(8).)
    log_path = tmp_path / "reload.log"
    b = broker("allow_anonymous true", "log_dest file %s" % log_path, "user root",
               defaults=False)
    wait_for(lambda: log_path.exists() and "running" in log_path.read_text(), what="log")
    first = len(open(b.conf_path).read().splitlines()) + 1  # the fixture may add a loops line
    with open(b.conf_path, "a") as f:
        f.write("max_qos 9\nbogus_directive 1\n")
    b.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "keeping the current configuration" in log_path.read_text(),
             what="reload failure in log file")
    log = log_path.read_text()
    assert "%s:%d: max_qos" % (b.conf_path, first) in log, log
    assert "%s:%d: bogus_directive: unknown directive" % (b.conf_path, first + 1) in log, log
    assert raw(b).connect("still-up").rc == 0


def daemon_reload_gives_max_qos(tmp_path, config_arg, extra_lines, change):
    """Start arbor with -d (which changes to /) from tmp_path with `-c config_arg`, apply
    `change()` to the configuration, send SIGHUP and return the Maximum QoS a new MQTT 5
    client is told, proving the reload read the files again."""
    port = free_port()
    log_path = tmp_path / "daemon.log"
    pid_path = tmp_path / "daemon.pid"
    (tmp_path / "daemon.conf").write_text(
        "listener %d 127.0.0.1\nallow_anonymous true\nlog_dest file daemon.log\n"
        "pid_file daemon.pid\nuser root\n%s" % (port, extra_lines))
    started = subprocess.run([ARBOR_BIN, "-d", "-c", config_arg], cwd=str(tmp_path), timeout=10)
    assert started.returncode == 0
    wait_for(lambda: pid_path.exists() and pid_path.read_text().strip(), what="pid file")
    pid = int(pid_path.read_text())
    try:
        wait_for(lambda: log_path.exists() and "running" in log_path.read_text(), what="log")
        change()
        os.kill(pid, signal.SIGHUP)
        wait_for(lambda: "Reloaded configuration" in log_path.read_text()
                 or "reload failed" in log_path.read_text(), what="reload in log")
        assert "Reloaded configuration" in log_path.read_text(), log_path.read_text()
        c = mp.RawClient("127.0.0.1", port, version=MQTT5)
        try:
            return c.connect("after-reload").props.get(mp.P_MAXIMUM_QOS)
        finally:
            c.close()
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pid_alive(pid), what="daemon exit")


@pytest.mark.arbor_only
def test_daemon_with_relative_config_path_reloads(tmp_path):
    # -d changes to /; the -c path is resolved first, so SIGHUP still finds the file.
    conf = tmp_path / "daemon.conf"
    assert daemon_reload_gives_max_qos(
        tmp_path, "daemon.conf", "",
        lambda: conf.write_text(conf.read_text() + "max_qos 1\n")) == 1


@pytest.mark.arbor_only
def test_daemon_with_relative_include_dir_reloads(tmp_path):
    # A relative include_dir is read from the start directory (Mosquitto 2.0.11 reads it from
    # its working directory), also on a SIGHUP after -d changed to /.
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "a.conf").write_text("max_qos 1\n")
    assert daemon_reload_gives_max_qos(
        tmp_path, str(tmp_path / "daemon.conf"), "include_dir inc\n",
        lambda: (inc / "a.conf").write_text("max_qos 0\n")) == 0


@pytest.mark.arbor_only
def test_reload_reads_the_config_path_not_its_old_symlink_target(broker, raw, tmp_path):
    # -c names a symlink; re-pointing it and sending SIGHUP loads the new target.
    port = free_port()
    first = tmp_path / "first.conf"
    second = tmp_path / "second.conf"
    base = "listener %d 127.0.0.1\nallow_anonymous true\nlog_dest stderr\nuser root\n" % port
    first.write_text(base + "max_qos 2\n")
    second.write_text(base + "max_qos 1\n")
    link = tmp_path / "arbor.conf"
    link.symlink_to(first)
    b = broker(use_config=False, port=port, args=["-c", str(link)])
    tmp_link = tmp_path / "arbor.conf.new"
    tmp_link.symlink_to(second)
    os.rename(tmp_link, link)
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("Reloaded configuration")
    assert raw(b, MQTT5).connect("c").props.get(mp.P_MAXIMUM_QOS) == 1


@pytest.mark.arbor_only
def test_removed_listener_refuses_clients_after_reload(broker, raw, tmp_path):
    # Mosquitto does not close listeners on reload; one no longer in the config must not fall
    # back to looser (global, local-only) settings: it refuses every CONNECT, not authorised.
    other = free_port()
    b = broker("listener %d 127.0.0.1" % other)
    c = mp.RawClient(b.host, other)
    try:
        assert c.connect("before").rc == 0
    finally:
        c.close()
    with open(b.conf_path) as f:
        kept = [l for l in f.read().splitlines() if not l.startswith("listener %d" % other)]
    with open(b.conf_path, "w") as f:
        f.write("\n".join(kept) + "\n")
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("Reloaded configuration")
    b.wait_log("port %d was removed from the config" % other)
    for version, rc in ((MQTT311, 5), (MQTT5, 0x87)):
        c = mp.RawClient(b.host, other, version=version)
        try:
            assert c.connect("after", expect_rc=None).rc == rc
        finally:
            c.close()
    assert raw(b).connect("on-kept-listener").rc == 0


@needs_root
def test_log_file_kept_when_reopen_fails_after_privilege_drop(broker, raw, tmp_path):
    # The log file is root's (0600) and the broker runs as nobody after start-up: SIGHUP cannot
    # open it again, so lines keep going to the descriptor opened as root, and the failure is
    # logged once there.
    log_path = tmp_path / "root.log"
    log_path.write_text("")        # root's file from before: the broker does not take it over
    os.chmod(log_path, 0o600)
    b = broker("allow_anonymous true", "log_dest file %s" % log_path, "log_type all",
               defaults=False)
    wait_for(lambda: log_path.exists() and "running" in log_path.read_text(), what="log")
    assert os.stat(log_path).st_uid == 0
    b.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "Reloaded configuration" in log_path.read_text(), what="reload in log")
    raw(b).connect("after-hup")
    wait_for(lambda: "after-hup" in log_path.read_text(), what="client after SIGHUP in log")
    log = log_path.read_text()
    assert log.count("unable to reopen log file") == 1, log
    assert "unable to open log file" not in log, log


@pytest.mark.arbor_only
def test_pid_and_log_files_do_not_follow_symlinks(run_broker, tmp_path):
    # Root writes them before dropping privileges, maybe in a directory the dropped user owns:
    # a symlink planted there must not make root truncate or append to another file.
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    pid_link = tmp_path / "arbor.pid"
    pid_link.symlink_to(victim)
    port = free_port()
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % port, "allow_anonymous true",
                                     "pid_file %s" % pid_link, "sys_interval 0"], timeout=3)
    assert rc is None, out           # still running: a pid file failure is only a warning
    assert "unable to write pid file %s" % pid_link in out, out
    assert victim.read_text() == "precious\n"
    log_link = tmp_path / "arbor.log"
    log_link.symlink_to(victim)
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % port, "allow_anonymous true",
                                     "log_dest file %s" % log_link])
    assert rc == 1, out
    assert "unable to open log file %s" % log_link in out, out
    assert victim.read_text() == "precious\n"


@needs_root
@pytest.mark.arbor_only
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare(1)")
def test_user_with_uid_0_warns(tmp_path):
    # `user toor` where toor is uid 0 keeps root: warned like `user root`. The alias exists
    # only in a private mount namespace (a copy of /etc/passwd bound over it).
    passwd = tmp_path / "passwd"
    with open("/etc/passwd") as f:
        passwd.write_text(f.read() + "arbortoor:x:0:0:alias:/root:/bin/sh\n")
    port = free_port()
    conf = tmp_path / "toor.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\nuser arbortoor\n" % port)
    script = 'mount --bind "$1" /etc/passwd && exec "$2" -c "$3"'
    p = subprocess.Popen(["unshare", "--mount", "sh", "-c", script, "sh", str(passwd),
                          ARBOR_BIN, str(conf)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_listening(port), what="listener")
        time.sleep(0.3)
    finally:
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=15)[0].decode()
    if "mount" in out and "denied" in out:
        pytest.skip("cannot bind-mount here: " + out)
    assert "Running as user" in out and "(uid 0)" in out, out
    assert "should not be run as root" in out, out


def port_listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- sd_notify (issue 7)

def notify_socket():
    s, address = open_notify_socket()
    s.settimeout(10)
    return s, address


def recv_notify(s, wanted):
    """Read notify datagrams until one has the line `wanted`; return that datagram."""
    while True:
        msg = s.recv(4096).decode()
        if wanted in msg.split("\n"):
            return msg


def test_sd_notify_ready_only_once_listeners_accept(tmp_path):
    # systemd Type=notify: READY=1 is sent once every listener accepts connections.
    ports = [free_port(), free_port()]
    conf = tmp_path / "notify.conf"
    conf.write_text("listener %d 127.0.0.1\nlistener %d 127.0.0.1\nallow_anonymous true\n"
                    % tuple(ports))
    s, address = notify_socket()
    env = dict(os.environ, NOTIFY_SOCKET=address)
    log = open(tmp_path / "notify.out", "wb")
    proc = subprocess.Popen([ARBOR_BIN, "-c", str(conf)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        recv_notify(s, "READY=1")
        for port in ports:   # at once, no retry: the listeners are open when READY arrives
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        time.sleep(0.3)  # Mosquitto loses a SIGTERM that comes before its main loop runs
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        s.close()
        log.close()


@pytest.mark.arbor_only
def test_sd_notify_reloading_and_stopping(tmp_path):
    port = free_port()
    conf = tmp_path / "notify.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\n" % port)
    s, address = notify_socket()
    env = dict(os.environ, NOTIFY_SOCKET=address)
    proc = subprocess.Popen([ARBOR_BIN, "-c", str(conf)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        ready = recv_notify(s, "READY=1")
        assert "MAINPID=%d" % proc.pid in ready and "STATUS=" in ready
        proc.send_signal(signal.SIGHUP)
        reloading = recv_notify(s, "RELOADING=1")
        # systemd's notify-reload protocol: the reload's CLOCK_MONOTONIC time in microseconds
        usec = [l for l in reloading.split("\n") if l.startswith("MONOTONIC_USEC=")]
        assert len(usec) == 1, reloading
        now = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
        assert now - 10e6 < int(usec[0].split("=")[1]) <= now, reloading
        recv_notify(s, "READY=1")
        proc.send_signal(signal.SIGTERM)
        recv_notify(s, "STOPPING=1")
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        s.close()


# ---------------------------------------------------------------- systemd unit, install (issue 7)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def man_tree(tmp_path):
    """A MANPATH with arbor's pages, so systemd-analyze can check Documentation=."""
    for section, page in (("8", "arbor.8"), ("5", "arbor.conf.5")):
        d = tmp_path / "man" / ("man" + section)
        d.mkdir(parents=True, exist_ok=True)
        (d / page).write_text(open(os.path.join(ROOT, "man", page)).read())
    return str(tmp_path / "man")


@pytest.mark.arbor_only
def test_systemd_unit_is_hardened_and_verifies(tmp_path):
    import shutil
    unit = open(os.path.join(ROOT, "config", "arbor.service")).read()
    settings = dict(line.split("=", 1) for line in unit.splitlines()
                    if "=" in line and not line.startswith("#"))
    assert settings["Type"] == "notify"
    assert settings["User"] == "arbor"
    assert settings["NoNewPrivileges"] == "yes"
    assert settings["ProtectSystem"] == "strict"
    assert settings["PrivateTmp"] == "yes"
    assert settings["CapabilityBoundingSet"] == "CAP_NET_BIND_SERVICE"
    for path in ("/run/arbor", "/var/log/arbor", "/var/lib/arbor"):
        assert path in settings["ReadWritePaths"]
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed (scripts/install-deps.sh installs it)")
    exec_start = "ExecStart=%s -c %s" % (ARBOR_BIN, os.path.join(ROOT, "config", "arbor.conf"))
    local = tmp_path / "arbor.service"
    local.write_text(re.sub(r"(?m)^ExecStart=.*$", exec_start, unit))
    env = dict(os.environ, MANPATH=man_tree(tmp_path))
    r = subprocess.run([analyze, "verify", str(local)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr


BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR")


def installed_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files)


def multiarch():
    """Debian's multiarch triplet (the folder Wireshark's global Lua plugins are under)."""
    try:
        return subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except OSError:
        return ""


WIRESHARK_PLUGIN = ("usr/lib/%s/wireshark/plugins/mqtt-st.lua" % multiarch() if multiarch()
                    else "usr/lib/wireshark/plugins/mqtt-st.lua")

INSTALLED = sorted([
             "etc/arbor/arbor.conf", "etc/logrotate.d/arbor", "usr/bin/arbor_passwd",
             "usr/bin/arbor_stp", "usr/lib/systemd/system/arbor.service", WIRESHARK_PLUGIN,
             "usr/lib/sysusers.d/arbor.conf", "usr/sbin/arbor",
             "usr/share/man/man1/arbor_passwd.1",
             "usr/share/man/man1/arbor_stp.1", "usr/share/man/man5/arbor.conf.5",
             "usr/share/man/man8/arbor.8"])


@pytest.mark.arbor_only
@pytest.mark.skipif(not BUILD_DIR, reason="ARBOR_BUILD_DIR is not set")
def test_cmake_install_into_destdir(tmp_path):
    dest = tmp_path / "dest"
    env = dict(os.environ, DESTDIR=str(dest))
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", "/usr"], env=env, check=True,
                   capture_output=True, timeout=120)
    assert installed_files(dest) == INSTALLED
    if shutil.which("tshark"):
        # the dissector lands where this host's Wireshark loads global Lua plugins from
        folders = subprocess.run(["tshark", "-G", "folders"], capture_output=True, text=True,
                                 timeout=60).stdout
        global_lua = re.search(r"^Global Lua Plugins:\s*(\S+)", folders, re.M).group(1)
        assert global_lua == "/" + os.path.dirname(WIRESHARK_PLUGIN), folders
    assert os.access(dest / "usr/sbin/arbor", os.X_OK)
    assert os.access(dest / "usr/bin/arbor_stp", os.X_OK)
    assert os.access(dest / "usr/bin/arbor_passwd", os.X_OK)
    unit = (dest / "usr/lib/systemd/system/arbor.service").read_text()
    assert "\nExecStart=/usr/sbin/arbor -c /etc/arbor/arbor.conf\n" in unit
    assert (dest / "etc/arbor/arbor.conf").read_text() == \
        open(os.path.join(ROOT, "config", "arbor.conf")).read()
    # an operator's edited config survives a second install
    (dest / "etc/arbor/arbor.conf").write_text("# mine\n")
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", "/usr"], env=env, check=True,
                   capture_output=True, timeout=120)
    assert (dest / "etc/arbor/arbor.conf").read_text() == "# mine\n"


@pytest.mark.arbor_only
@pytest.mark.skipif(not BUILD_DIR, reason="ARBOR_BUILD_DIR is not set")
def test_make_install_honours_prefix_and_destdir(tmp_path):
    dest = tmp_path / "dest"
    subprocess.run(["make", "-C", ROOT, "--no-print-directory", "install", "BUILD=" + BUILD_DIR,
                    "DESTDIR=" + str(dest), "PREFIX=/opt/arbor"],
                   check=True, capture_output=True, timeout=300)
    assert installed_files(dest) == [
        "opt/arbor/bin/arbor_passwd", "opt/arbor/bin/arbor_stp", "opt/arbor/etc/arbor/arbor.conf",
        "opt/arbor/etc/logrotate.d/arbor",
        "opt/arbor/lib/systemd/system/arbor.service", "opt/arbor/lib/sysusers.d/arbor.conf",
        "opt/arbor/lib/wireshark/plugins/mqtt-st.lua",
        "opt/arbor/sbin/arbor", "opt/arbor/share/man/man1/arbor_passwd.1",
        "opt/arbor/share/man/man1/arbor_stp.1",
        "opt/arbor/share/man/man5/arbor.conf.5", "opt/arbor/share/man/man8/arbor.8"]
    unit = (dest / "opt/arbor/lib/systemd/system/arbor.service").read_text()
    assert "\nExecStart=/opt/arbor/sbin/arbor -c /opt/arbor/etc/arbor/arbor.conf\n" in unit
