"""Unix socket listeners, as Mosquitto 2.0 has them: `listener 0 <path>`. The socket file is
created at start (mode 0770, given to the user the broker switches to) and removed at stop;
clients connect with mosquitto_pub/sub --unix; the listener's own settings (mount_point,
max_connections, per-listener security) apply to it as to any listener."""

import os
import socket
import stat
import subprocess

import pytest

from helpers import IS_MOSQUITTO, PahoClient, free_port, wait_until

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/mosquitto_sub"),
                                reason="needs mosquitto_pub/mosquitto_sub (--unix)")


def unix_sub(path, topic, count=1, extra=()):
    return subprocess.Popen(["mosquitto_sub", "--unix", str(path), "-t", topic, "-C", str(count),
                             "-W", "20", "-q", "1"] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def unix_pub(path, topic, message, extra=()):
    return subprocess.run(["mosquitto_pub", "--unix", str(path), "-t", topic, "-m", message,
                           "-q", "1"] + list(extra), capture_output=True, text=True, timeout=20)


def test_clients_meet_across_unix_socket_and_tcp(broker, tmp_path):
    path = tmp_path / "broker.sock"
    b = broker("listener 0 %s" % path)
    b.wait_log("Opening unix listen socket on path %s." % path)
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o770
    # unix -> tcp
    tcp = PahoClient(b, "tcp-sub")
    tcp.subscribe("u/#", qos=1)
    r = unix_pub(path, "u/one", "from the socket")
    assert r.returncode == 0, r.stderr
    m = tcp.get_message()
    assert (m.topic, m.payload) == ("u/one", b"from the socket")
    # tcp -> unix
    sub = unix_sub(path, "t/#", extra=["-i", "unix-sub"])
    b.wait_log("New client connected from %s:0 as unix-sub" % path)
    tcp.publish("t/two", b"from tcp", qos=1)
    out, err = sub.communicate(timeout=30)
    assert sub.returncode == 0 and out == "from tcp\n", (out, err)
    b.wait_log("New connection from %s:0 on port 0." % path)
    tcp.disconnect()
    assert b.stop() == 0
    assert not path.exists()             # removed at stop


def test_per_listener_settings_apply_to_the_unix_listener(broker, tmp_path):
    path = tmp_path / "tenant.sock"
    b = broker("listener 0 %s" % path, "mount_point tenant/", "max_connections 1")
    tcp = PahoClient(b, "tcp-sub")
    tcp.subscribe("#", qos=1)
    r = unix_pub(path, "reading", "42")
    assert r.returncode == 0, r.stderr
    m = tcp.get_message()
    assert (m.topic, m.payload) == ("tenant/reading", b"42")
    tcp.disconnect()


@pytest.mark.mosquitto_deviates("Mosquitto 2.0.11 does not apply max_connections to a unix "
                                "socket listener")
def test_max_connections_applies_to_the_unix_listener(broker, tmp_path):
    path = tmp_path / "one.sock"
    b = broker("listener 0 %s" % path, "max_connections 1")
    # a second client on the socket is refused while the first is there
    first = unix_sub(path, "x", extra=["-i", "first"])
    b.wait_log("New client connected from %s:0 as first" % path)
    r = unix_pub(path, "x", "second")
    assert r.returncode != 0
    b.wait_log("Client connection from %s denied: max_connections exceeded." % path)
    first.kill()
    first.wait()


def test_per_listener_security_on_the_unix_listener(broker, tmp_path):
    path = tmp_path / "private.sock"
    b = broker("per_listener_settings true", "allow_anonymous true",
               "listener 0 %s" % path, "allow_anonymous false", defaults=False)
    r = unix_pub(path, "t", "anonymous")
    assert r.returncode != 0 and "not authorised" in (r.stdout + r.stderr).lower(), r
    PahoClient(b, "tcp").disconnect()        # the TCP listener keeps its own settings


@pytest.mark.arbor_only     # Mosquitto 2.0.11: "Error binding unix socket: Address in use"
def test_stale_socket_file_is_replaced(broker, tmp_path):
    path = tmp_path / "stale.sock"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(path))                 # a socket file nobody listens on (after kill -9)
    left.close()
    broker("listener 0 %s" % path)
    r = unix_pub(path, "t", "works")
    assert r.returncode == 0, r.stderr


@pytest.mark.arbor_only
def test_socket_in_use_or_not_a_socket_stops_start_up(broker, run_broker, tmp_path):
    path = tmp_path / "busy.sock"
    broker("listener 0 %s" % path)
    rc, out = run_broker(conf_lines=["listener 0 %s" % path, "allow_anonymous true"])
    assert rc == 1, out
    assert "Error: unable to open unix socket listener %s: Address already in use" % path \
        in out, out
    assert stat.S_ISSOCK(os.stat(path).st_mode)      # the running broker's socket is kept
    plain = tmp_path / "plain-file"
    plain.write_text("mine\n")
    rc, out = run_broker(conf_lines=["listener 0 %s" % plain, "allow_anonymous true"])
    assert rc == 1 and "the file exists and is not a socket" in out, out
    assert plain.read_text() == "mine\n"


@pytest.mark.arbor_only
@pytest.mark.parametrize("lines, message", [
    (["listener 0"], "listener: port 0 is for a unix socket and needs its path"),
    (["listener 0 /run/%s.sock" % ("x" * 120)], "is longer than 107 bytes"),
    (["listener 0 /tmp/a.sock", "socket_domain ipv4"],
     "listener: socket_domain does not apply to a unix socket listener"),
    (["listener 0 /tmp/a.sock", "protocol websockets"],
     "listener: protocol websockets does not apply to a unix socket listener"),
])
def test_unix_listener_config_errors(run_broker, lines, message):
    rc, out = run_broker(conf_lines=lines)
    assert rc == 1 and message in out, out


@pytest.mark.skipif(os.geteuid() != 0, reason="the switch of user needs root")
@pytest.mark.arbor_only
def test_socket_belongs_to_the_user_the_broker_runs_as(broker, tmp_path):
    import pwd
    path = tmp_path / "owned.sock"
    b = broker("listener 0 %s" % path, "user nobody")
    wait_until(lambda: os.stat(path).st_uid == pwd.getpwnam("nobody").pw_uid,
               what="socket owned by nobody")
    assert b.stop() == 0
    assert not path.exists()     # removed by nobody: tmp_path is writable by it


@pytest.mark.arbor_only
def test_mqtt_st_identity_never_takes_the_unix_listener(run_broker, tmp_path):
    """A unix socket listener first in the file: the MQTT-ST identity still names the TCP
    listener's port (peers dial TCP), not the unix listener's port 0."""
    port = free_port()
    rc, out = run_broker(conf_lines=["listener 0 %s" % (tmp_path / "first.sock"),
                                     "listener %d 127.0.0.1" % port,
                                     "allow_anonymous true",
                                     "peer_allow_unauthenticated true",
                                     "log_dest stdout"], timeout=3)
    assert "MQTT-ST: identity 127.0.0.1:%d" % port in out, out
