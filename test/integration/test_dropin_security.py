"""The drop-in check of the security features: one production-style mosquitto.conf (password
file from mosquitto_passwd, acl_file, a TLS listener on 8883 and a WebSockets listener on 9001
beside a plain one) runs unchanged under arbor and under Debian's mosquitto 2.0.11, and the
same clients see the same things from both:

  - anonymous clients are refused on every listener, a wrong password too;
  - mosquitto_sub over TLS (8883, --cafile) receives what paho publishes over WebSockets
    (9001), and the other way round, with user names and passwords;
  - the acl_file is applied the same way: a write to a topic the user may only read is
    dropped, a read of another user's topics never delivered.

Ports 8883 and 9001 are used as written when they are free (they are what operators use);
otherwise free ports are put in their place, the rest of the file unchanged."""

import os
import shutil
import socket
import subprocess
import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

import conftest
from helpers import ARBOR_BIN, free_port
from test_password_file import USERS, mosquitto_passwd_file
from tlscerts import make_pki

MOSQUITTO = "/usr/sbin/mosquitto"
SUB = shutil.which("mosquitto_sub")
PUB = shutil.which("mosquitto_pub")
HOST = "127.0.0.1"

pytestmark = pytest.mark.skipif(
    not (os.access(MOSQUITTO, os.X_OK) and SUB and PUB and shutil.which("mosquitto_passwd")),
    reason="Debian's mosquitto, mosquitto-clients needed (scripts/install-deps.sh)")

CONF = """# One file for both brokers: arbor and Debian's mosquitto read it unchanged.
per_listener_settings false
allow_anonymous false
password_file {dir}/passwd
acl_file {dir}/acl
log_dest stderr
log_type all

# plain MQTT, local only
listener {mqtt} 127.0.0.1

# MQTT over TLS
listener {mqtts} 127.0.0.1
cafile {ca}
certfile {cert}
keyfile {key}

# MQTT over WebSockets
listener {ws} 127.0.0.1
protocol websockets
"""

ACL = """# sensors publish, dashboards read
user alice
topic readwrite sensors/#

user bob
topic read sensors/#
topic readwrite bob/#
"""


def port_or_free(port):
    try:
        with socket.socket() as s:
            s.bind((HOST, port))
        return port
    except OSError:
        return free_port()


class NamedBroker(conftest.Broker):
    """conftest's Broker with a given binary and a config file written as is."""

    def __init__(self, tmp_dir, binary, conf_text, port, name):
        super().__init__(tmp_dir, [], port=port, name=name, use_config=False)
        self.binary = binary
        self.conf_path = os.path.join(tmp_dir, name + ".conf")
        with open(self.conf_path, "w") as f:
            f.write(conf_text)

    def argv(self):
        return [self.binary, "-c", self.conf_path]


def sub_tls(b, ports, pki, user, topic, count, timeout=6):
    """mosquitto_sub over TLS in the background; returns (process, ready event)."""
    return subprocess.Popen([SUB, "-h", HOST, "-p", str(ports["mqtts"]), "--cafile", pki["ca"],
                             "-u", user, "-P", USERS[user], "-t", topic, "-C", str(count),
                             "-W", str(timeout), "-v", "-q", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def ws_client(ports, user, password=None):
    c = paho.Client(CallbackAPIVersion.VERSION2, client_id="ws-" + user, transport="websockets")
    c.username_pw_set(user, USERS[user] if password is None else password)
    result = {}
    done = threading.Event()

    def on_connect(client, userdata, flags, rc, props=None):
        result["rc"] = rc.value if hasattr(rc, "value") else rc
        done.set()
    c.on_connect = on_connect
    c.connect(HOST, ports["ws"], keepalive=30)
    c.loop_start()
    assert done.wait(5), "no CONNACK over WebSockets"
    return c, result["rc"]


def tls_publish(ports, pki, user, topic, payload, password=None):
    return subprocess.run([PUB, "-h", HOST, "-p", str(ports["mqtts"]), "--cafile", pki["ca"],
                           "-u", user, "-P", USERS[user] if password is None else password,
                           "-t", topic, "-m", payload, "-q", "1"],
                          capture_output=True, timeout=10).returncode


def plain_anonymous(ports):
    return subprocess.run([PUB, "-h", HOST, "-p", str(ports["mqtt"]), "-t", "sensors/x",
                           "-m", "x"], capture_output=True, timeout=10).returncode


def observe(b, ports, pki):
    """What the clients see from one broker, as a dict comparable across brokers."""
    seen = {"plain anonymous publish exit": plain_anonymous(ports),
            "tls wrong password exit": tls_publish(ports, pki, "alice", "sensors/t", "x",
                                                   password="wrong")}
    c, rc = ws_client(ports, "alice", password="wrong")
    seen["ws wrong password connack"] = rc
    c.loop_stop()

    # WebSockets -> TLS: alice publishes, bob listens over TLS
    sub = sub_tls(b, ports, pki, "bob", "sensors/#", 1)
    b.wait_log("Received SUBSCRIBE from", timeout=5)
    alice, rc = ws_client(ports, "alice")
    seen["ws alice connack"] = rc
    alice.publish("bob/private", b"denied write", qos=1)      # alice may not write bob/#
    alice.publish("sensors/t1", b"21.5", qos=1).wait_for_publish(5)
    out, _ = sub.communicate(timeout=10)
    seen["tls bob received"] = out.decode().split("\n")[0]

    # TLS -> WebSockets: bob may only read sensors/#, so his write there is dropped;
    # his own topic goes through, and alice does not get it (she may not read bob/#)
    got = []
    alice.on_message = lambda client, userdata, m: got.append((m.topic, m.payload.decode()))
    alice.subscribe([("sensors/#", 1), ("bob/#", 1)])
    time.sleep(0.3)
    seen["tls bob write to read-only exit"] = tls_publish(ports, pki, "bob", "sensors/t2", "x")
    seen["tls bob own topic exit"] = tls_publish(ports, pki, "bob", "bob/x", "y")
    tls_publish(ports, pki, "alice", "sensors/t3", "22.0")
    deadline = time.monotonic() + 5
    while ("sensors/t3", "22.0") not in got and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    seen["ws alice received"] = sorted(got)
    alice.disconnect()
    alice.loop_stop()
    return seen


def test_one_security_config_under_both_brokers(fixed_ports, tmp_path):
    directory = str(tmp_path)
    pki = make_pki(os.path.join(directory, "pki"))
    mosquitto_passwd_file(os.path.join(directory, "passwd"))
    (tmp_path / "acl").write_text(ACL)
    for name in ("passwd", "acl"):   # read by a broker that dropped privileges
        os.chmod(os.path.join(directory, name), 0o644)
    results = {}
    for name, binary in (("arbor", ARBOR_BIN), ("mosquitto", MOSQUITTO)):
        ports = {"mqtt": free_port(), "mqtts": port_or_free(8883), "ws": port_or_free(9001)}
        text = CONF.format(dir=directory, ca=pki["ca"], cert=pki["server"],
                           key=pki["server_key"], **ports)
        b = NamedBroker(directory, binary, text, ports["mqtt"], name)
        b.start()
        try:
            results[name] = observe(b, ports, pki)
        finally:
            assert b.stop() == 0, b.log_text()
    expected = {
        "plain anonymous publish exit": results["mosquitto"]["plain anonymous publish exit"],
        "tls wrong password exit": results["mosquitto"]["tls wrong password exit"],
        "ws wrong password connack": 135,    # paho 2 reports CONNACK 5 as "Not authorized"
        "ws alice connack": 0,
        "tls bob received": "sensors/t1 21.5",
        "tls bob write to read-only exit": 0,    # acknowledged, then dropped (v3.1.1)
        "tls bob own topic exit": 0,
        "ws alice received": [("sensors/t3", "22.0")],
    }
    assert results["mosquitto"] == expected, results["mosquitto"]
    assert results["arbor"] == results["mosquitto"]
    assert expected["plain anonymous publish exit"] != 0
    assert expected["tls wrong password exit"] != 0
