"""arbor on a host that ran Debian's mosquitto package (issue 17, "Drop-in on a Debian host"):
the stock /etc/mosquitto/mosquitto.conf runs as it does for mosquitto -c (the user chosen
without a user line, the directories created, the pid file removed at stop after the switch
of user), and a fatal start-up error reaches stderr when the log goes elsewhere."""

import os
import pwd
import shutil
import signal
import subprocess
import time

import pytest

import mqttproto as mp
from conftest import ARBOR_BIN
from helpers import IS_MOSQUITTO, free_port, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the switch of user needs root")


def user_without_line():
    """The user arbor(8) says a root start without a user line runs as."""
    for name in ("arbor", "mosquitto", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.skip("none of arbor, mosquitto, nobody exists")


def start(argv, cwd, stderr=subprocess.PIPE):
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr,
                            stdin=subprocess.DEVNULL, cwd=str(cwd))


def start_listening(conf, port, tmp_path):
    """Start arbor -c conf and wait until it accepts on port (or exits, which fails)."""
    proc = start([ARBOR_BIN, "-c", str(conf)], tmp_path)
    wait_until(lambda: connects(port) or proc.poll() is not None, timeout=20, what="listening")
    if proc.poll() is not None:
        raise AssertionError("exited with %s:\n%s" % (proc.returncode,
                                                        proc.stderr.read().decode()))
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "hung"


def connects(port):
    try:
        c = mp.RawClient("127.0.0.1", port)
    except OSError:
        return False
    try:
        return c.connect("probe").rc == 0
    except (OSError, AssertionError):
        return False
    finally:
        c.close()


def retained(port, topic):
    c = mp.RawClient("127.0.0.1", port)
    try:
        assert c.connect("reader").rc == 0
        c.subscribe(topic, qos=1)
        return c.recv_publish(timeout=5).payload
    finally:
        c.close()


def publish_retained(port, topic, payload):
    c = mp.RawClient("127.0.0.1", port)
    try:
        assert c.connect("writer").rc == 0
        c.publish(topic, payload, qos=1, retain=True)
        c.disconnect()
    finally:
        c.close()


def debian_layout(tmp_path, owner):
    """A copy of what Debian's mosquitto package leaves on a host, under tmp_path:
    lib/ and log/ owned by the mosquitto user, run/ without its mosquitto/ (systemd's
    ExecStartPre makes it at boot; a shell start finds none), and the stock config (no user
    line) plus a listener. Returns (config path, port)."""
    for name in ("lib", "log"):
        (tmp_path / name).mkdir()
        os.chown(tmp_path / name, owner.pw_uid, 0)
        os.chmod(tmp_path / name, 0o755)
    (tmp_path / "run").mkdir()
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("pid_file %s/run/mosquitto/mosquitto.pid\npersistence true\n"
                    "persistence_location %s/lib/\nlog_dest file %s/log/mosquitto.log\n"
                    "listener %d 127.0.0.1\nallow_anonymous true\n"
                    % (tmp_path, tmp_path, tmp_path, port))
    return conf, port


@needs_root
@pytest.mark.arbor_only   # mosquitto 2.0.11 does not make the pid file's directory
def test_stock_debian_layout_runs_without_a_user_line(tmp_path):
    owner = user_without_line()
    conf, port = debian_layout(tmp_path, owner)
    pid_path = tmp_path / "run/mosquitto/mosquitto.pid"
    proc = start_listening(conf, port, tmp_path)
    try:
        log = (tmp_path / "log/mosquitto.log").read_text()
        assert "Running as user %s (uid %d)." % (owner.pw_name, owner.pw_uid) in log
        assert "Created directory %s." % pid_path.parent in log
        # the pid file's directory is made for the user (as Debian's unit does before start)
        st = os.stat(pid_path.parent)
        assert (st.st_uid, st.st_mode & 0o777) == (owner.pw_uid, 0o750)
        assert int(pid_path.read_text()) == proc.pid
        # files the broker writes belong to it, so rotation and SIGHUP reopen work
        assert os.stat(tmp_path / "log/mosquitto.log").st_uid == owner.pw_uid
        publish_retained(port, "deb/kept", b"across restarts")
    finally:
        assert stop(proc) == 0
    assert not pid_path.exists()   # removed by the user the broker ran as
    proc = start_listening(conf, port, tmp_path)
    try:
        assert retained(port, "deb/kept") == b"across restarts"
    finally:
        assert stop(proc) == 0


@needs_root
@pytest.mark.arbor_only
def test_log_rotation_by_rename_and_sighup_after_the_switch(tmp_path):
    owner = user_without_line()
    conf, port = debian_layout(tmp_path, owner)
    log_path = tmp_path / "log/mosquitto.log"
    proc = start_listening(conf, port, tmp_path)
    try:
        os.rename(log_path, str(log_path) + ".1")          # what logrotate does
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: log_path.exists(), what="new log file")
        assert connects(port)
        wait_until(lambda: "probe" in log_path.read_text(), what="client in the new log")
        assert os.stat(log_path).st_uid == owner.pw_uid
    finally:
        assert stop(proc) == 0


@needs_root
@pytest.mark.arbor_only
def test_pid_file_the_user_cannot_remove_is_emptied(tmp_path):
    # pid_file in a directory only root may write (as /run itself): the user the broker runs
    # as cannot unlink it; it empties it through the descriptor it kept, so no stale pid is
    # left for a script to signal.
    owner = user_without_line()
    root_dir = tmp_path / "rootonly"
    root_dir.mkdir()
    os.chmod(root_dir, 0o755)
    port = free_port()
    conf = tmp_path / "p.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\npid_file %s/arbor.pid\n"
                    % (port, root_dir))
    proc = start_listening(conf, port, tmp_path)
    try:
        assert int((root_dir / "arbor.pid").read_text()) == proc.pid
        assert os.stat(root_dir / "arbor.pid").st_uid == owner.pw_uid
    finally:
        assert stop(proc) == 0
    err = proc.stderr.read().decode()
    assert (root_dir / "arbor.pid").read_text() == ""
    assert "unable to remove pid file %s/arbor.pid: Permission denied; emptied it instead" \
        % root_dir in err, err


@pytest.mark.arbor_only
def test_fatal_start_error_reaches_stderr_when_the_log_is_a_file(tmp_path):
    # Mosquitto prints it on stderr too; before, arbor wrote it only to the log file and the
    # operator saw a bare exit status 1.
    log_path = tmp_path / "broker.log"
    conf = tmp_path / "f.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\nuser root\npersistence true\n"
                    "persistence_location %s/no/such/dir/\nlog_dest file %s\n"
                    % (free_port(), tmp_path, log_path))
    proc = start([ARBOR_BIN, "-c", str(conf)], tmp_path)
    assert proc.wait(15) == 1
    err = proc.stderr.read().decode()
    assert "Error: persistence" in err, err
    assert "Error: persistence" in log_path.read_text()
    # stderr that is the log file itself gets the line once
    log_path.unlink()
    with open(log_path, "ab") as log:
        proc = start([ARBOR_BIN, "-c", str(conf)], tmp_path, stderr=log)
        assert proc.wait(15) == 1
    assert log_path.read_text().count("Error: persistence") == 1, log_path.read_text()


@needs_root
@pytest.mark.arbor_only   # mosquitto 2.0.11 fails without /run/mosquitto (made by its unit)
@pytest.mark.skipif(not os.path.exists("/etc/mosquitto/mosquitto.conf"),
                    reason="Debian's mosquitto package is not installed")
def test_etc_mosquitto_conf_itself(tmp_path, fixed_ports):
    # The issue's own command: arbor -c /etc/mosquitto/mosquitto.conf -p PORT (as mosquitto
    # -c runs it under mosquitto.service). It writes what mosquitto would (the pid file in
    # /run/mosquitto, the log in /var/log/mosquitto, arbor.db in /var/lib/mosquitto), so it
    # holds the fixed-ports lock: no other run of this test is started beside it.
    port = free_port()
    proc = start([ARBOR_BIN, "-c", "/etc/mosquitto/mosquitto.conf", "-p", str(port)], tmp_path)
    try:
        wait_until(lambda: connects(port) or proc.poll() is not None, timeout=20,
                   what="listening")
        assert proc.poll() is None, proc.stderr.read().decode()
        assert int(open("/run/mosquitto/mosquitto.pid").read()) == proc.pid
    finally:
        rc = stop(proc)
    assert rc == 0, proc.stderr.read().decode()
    assert not os.path.exists("/run/mosquitto/mosquitto.pid")


@pytest.mark.arbor_only
@pytest.mark.skipif(not shutil.which("logrotate"), reason="needs logrotate(8)")
def test_installed_logrotate_snippet_rotates_a_running_broker(tmp_path):
    # config/arbor.logrotate (installed as /etc/logrotate.d/arbor), its paths moved into
    # tmp_path, run by logrotate itself: the file is renamed, arbor (found by its pid file, as
    # no arbor.service runs here) reopens a new one on SIGHUP, the old one is compressed.
    snippet = open(os.path.join(REPO, "config", "arbor.logrotate")).read()
    log_path, pid_path = tmp_path / "arbor.log", tmp_path / "arbor.pid"
    assert "/var/log/arbor/arbor.log {" in snippet and "/run/arbor/arbor.pid" in snippet
    snippet = snippet.replace("/var/log/arbor/arbor.log", str(log_path)) \
                     .replace("/run/arbor/arbor.pid", str(pid_path))
    (tmp_path / "logrotate.conf").write_text(snippet)
    port = free_port()
    conf = tmp_path / "r.conf"
    conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\nuser root\n"
                    "log_dest file %s\npid_file %s\n" % (port, log_path, pid_path))
    proc = start_listening(conf, port, tmp_path)
    try:
        os.chmod(tmp_path, 0o755)     # logrotate refuses a world-writable parent directory
        r = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "state"),
                            str(tmp_path / "logrotate.conf")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert (tmp_path / "arbor.log.1.gz").exists()
        wait_until(lambda: log_path.exists(), what="log file made again after SIGHUP")
        assert connects(port)
        wait_until(lambda: "probe" in log_path.read_text(), what="client in the new log")
    finally:
        assert stop(proc) == 0


def test_lines_mosquitto_accepts_start_the_broker(broker, tmp_path):
    # The lines of issue 17 that arbor refused and Mosquitto 2.0.11 runs, in one file.
    b = broker("max_queued_messages 100 # per client", "memory_limit 0 # no limit",
               "log_dest topic", "log_facility 5", "sys_interval 10 # seconds",
               "listener 0 %s/dropin.sock" % tmp_path, "max_connections 10 # on the socket")
    assert connects(b.port)
    assert os.path.exists("%s/dropin.sock" % tmp_path)
