"""password_file (mosquitto.conf(5)) and arbor_passwd (tools/, man/arbor_passwd.1).

The refusal codes, the reload behaviour and the interoperability were checked against
Debian's mosquitto 2.0.11 and mosquitto_passwd: every test not marked arbor_only also passes
with ARBOR_BIN=/usr/sbin/mosquitto. Mosquitto 2.0.11 answers every authentication failure
(no user name with allow_anonymous false, unknown user, wrong or missing password, also with
allow_anonymous true) with "not authorised": v3 return code 5, v5 reason 0x87. On SIGHUP it
closes the connections whose credentials the new file no longer accepts, without a DISCONNECT,
logging "Client <id> disconnected.", and does not publish their wills.

arbor_passwd is $ARBOR_BUILD_DIR/tools/arbor_passwd (default: next to $ARBOR_BIN).
"""

import os
import shutil
import signal
import stat
import subprocess

import pytest

import mqttproto as mp
from helpers import ARBOR_BIN, HOST, free_port, wait_until
from mqttproto import MQTT31, MQTT311, MQTT5

MOSQ_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
PUB = shutil.which("mosquitto_pub")
SUB = shutil.which("mosquitto_sub")
BUILD_DIR = os.environ.get("ARBOR_BUILD_DIR") or (os.path.dirname(ARBOR_BIN) if ARBOR_BIN else "")
ARBOR_PASSWD = os.path.join(BUILD_DIR, "tools", "arbor_passwd") if BUILD_DIR else ""

needs_mosquitto_passwd = pytest.mark.skipif(not os.access(MOSQ_PASSWD, os.X_OK),
                                            reason="mosquitto_passwd not installed")
needs_arbor_passwd = pytest.mark.skipif(not os.access(ARBOR_PASSWD or "/nonexistent", os.X_OK),
                                        reason="arbor_passwd not built (set ARBOR_BUILD_DIR)")
needs_clients = pytest.mark.skipif(not (PUB and SUB), reason="mosquitto clients not installed")

USERS = {"alice": "secret", "bob": "b0b pass", "carol": "pw3"}


def run(argv, stdin=None):
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=20)


def mosquitto_passwd_file(path):
    """alice ($7$, default 101 iterations), bob ($7$, -I 5), carol ($6$, -H sha512)."""
    assert run([MOSQ_PASSWD, "-c", "-b", path, "alice", USERS["alice"]]).returncode == 0
    assert run([MOSQ_PASSWD, "-b", "-I", "5", path, "bob", USERS["bob"]]).returncode == 0
    assert run([MOSQ_PASSWD, "-H", "sha512", "-b", path, "carol", USERS["carol"]]).returncode == 0
    return path


def conf(*lines, anonymous):
    return ["allow_anonymous %s" % ("true" if anonymous else "false"), "log_dest stderr",
            "log_type all"] + list(lines)


@pytest.fixture
def pwfile(tmp_path):
    if not os.access(MOSQ_PASSWD, os.X_OK):
        pytest.skip("mosquitto_passwd not installed")
    return mosquitto_passwd_file(str(tmp_path / "passwd"))


def refused(c, cid, **kw):
    ack = c.connect(cid, expect_rc=None, **kw)
    assert ack.rc == (0x87 if c.version == MQTT5 else 5), ack
    c.wait_closed(5)


# ---------------------------------------------------------------- CONNECT decisions

@pytest.mark.parametrize("version", [MQTT31, MQTT311, MQTT5])
@pytest.mark.parametrize("anonymous", [False, True])
def test_users_of_a_mosquitto_passwd_file(broker, raw, pwfile, version, anonymous):
    b = broker(*conf("password_file " + pwfile, anonymous=anonymous), defaults=False)
    for user, password in USERS.items():
        c = raw(b, version)
        assert c.connect("ok-" + user, username=user, password=password.encode()).rc == 0
        assert c.is_open()
    # A wrong password, an unknown user, a missing password: refused, also when anonymous
    # clients are allowed.
    refused(raw(b, version), "wrong", username="alice", password=b"Secret")
    refused(raw(b, version), "unknown", username="mallory", password=b"secret")
    refused(raw(b, version), "prefix", username="alice", password=b"secre")
    refused(raw(b, version), "nopass", username="alice")
    c = raw(b, version)
    if anonymous:
        assert c.connect("anon").rc == 0
    else:
        refused(c, "anon")
    assert "Client <unknown> disconnected, not authorised." in b.log_text()


def test_without_password_file_a_user_name_proves_nothing(broker, raw):
    b = broker(*conf(anonymous=False), defaults=False)
    refused(raw(b, MQTT5), "x", username="alice", password=b"secret")


@needs_clients
def test_mosquitto_clients_with_user_and_password(broker, pwfile):
    b = broker(*conf("password_file " + pwfile, anonymous=False), defaults=False)
    base = ["-h", HOST, "-p", str(b.port)]
    sub = subprocess.Popen([SUB] + base + ["-u", "bob", "-P", USERS["bob"], "-t", "pw/t", "-C",
                                           "1", "-W", "10"], stdout=subprocess.PIPE, text=True)
    b.wait_log("u'bob'")
    assert run([PUB] + base + ["-u", "alice", "-P", USERS["alice"], "-t", "pw/t", "-m",
                               "hello"]).returncode == 0
    assert sub.communicate(timeout=15)[0] == "hello\n"
    bad = run([PUB] + base + ["-u", "alice", "-P", "nope", "-t", "pw/t", "-m", "x"])
    assert bad.returncode != 0 and "not authori" in bad.stderr.lower(), bad.stderr


# ---------------------------------------------------------------- reload

def wait_closed_silently(c):
    """Closed by the broker with no packet before (no DISCONNECT, as Mosquitto)."""
    assert c.wait_closed(5) == []


@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_reload_adds_users_and_disconnects_removed_ones(broker, raw, pwfile, tmp_path, version):
    b = broker(*conf("password_file " + pwfile, anonymous=True), defaults=False)
    alice, bob, anon = raw(b, version), raw(b, version), raw(b, version)
    alice.connect("alice-c", username="alice", password=USERS["alice"].encode(),
                  will={"topic": "will/alice", "payload": b"gone"})
    bob.connect("bob-c", username="bob", password=USERS["bob"].encode())
    anon.connect("anon-c")
    anon.subscribe("will/#")
    refused(raw(b, version), "dave-early", username="dave", password=b"d")
    # alice removed, dave added, bob's password changed to the same one (new salt)
    assert run([MOSQ_PASSWD, "-D", pwfile, "alice"]).returncode == 0
    assert run([MOSQ_PASSWD, "-b", pwfile, "dave", "d"]).returncode == 0
    assert run([MOSQ_PASSWD, "-b", pwfile, "bob", USERS["bob"]]).returncode == 0
    b.proc.send_signal(signal.SIGHUP)
    wait_closed_silently(alice)
    b.wait_log("Client alice-c disconnected.")
    anon.expect_no_packet(1.0)  # Mosquitto 2.0.11 does not publish the will
    assert bob.is_open() and anon.is_open()
    assert raw(b, version).connect("dave-c", username="dave", password=b"d").rc == 0
    refused(raw(b, version), "alice-again", username="alice", password=b"secret")
    # bob's password changes: he is disconnected on the next reload
    assert run([MOSQ_PASSWD, "-b", pwfile, "bob", "other"]).returncode == 0
    b.proc.send_signal(signal.SIGHUP)
    wait_closed_silently(bob)
    assert anon.is_open()


def test_reload_to_allow_anonymous_false_disconnects_anonymous_clients(broker, raw, pwfile):
    b = broker(*conf("password_file " + pwfile, anonymous=True), defaults=False)
    anon, alice = raw(b, MQTT5), raw(b, MQTT5)
    anon.connect("anon-c")
    alice.connect("alice-c", username="alice", password=USERS["alice"].encode())
    with open(b.conf_path, "w") as f:
        f.write("\n".join(["listener %d %s" % (b.port, HOST)] +
                          conf("password_file " + pwfile, anonymous=False)) + "\n")
    b.proc.send_signal(signal.SIGHUP)
    wait_closed_silently(anon)
    assert alice.is_open()


@pytest.mark.arbor_only
def test_failed_reload_keeps_the_old_users(broker, raw, pwfile):
    # Mosquitto 2.0.11 drops a bad entry (with an error line) and uses the rest; arbor refuses
    # a bad file as a whole, at start-up and on reload, where it keeps what it had.
    b = broker(*conf("password_file " + pwfile, anonymous=False), defaults=False)
    alice = raw(b, MQTT5)
    alice.connect("alice-c", username="alice", password=USERS["alice"].encode())
    with open(pwfile, "a") as f:
        f.write("eve:hunter2\n")
    b.proc.send_signal(signal.SIGHUP)
    b.wait_log("config reload failed; keeping the current configuration.")
    assert 'passwd:4: user "eve": not a $6$ or $7$ password hash' in b.log_text()
    assert "hunter2" not in b.log_text()
    assert alice.is_open()
    assert raw(b, MQTT5).connect("bob-c", username="bob", password=USERS["bob"].encode()).rc == 0


# ---------------------------------------------------------------- per_listener_settings

def test_per_listener_password_files(broker, raw, pwfile, tmp_path):
    other = str(tmp_path / "other")
    assert run([MOSQ_PASSWD, "-c", "-b", other, "zoe", "z"]).returncode == 0
    port2, port3 = free_port(), free_port()
    b = broker("per_listener_settings true", "allow_anonymous false", "password_file " + pwfile,
               "listener %d %s" % (port2, HOST), "allow_anonymous false",
               "password_file " + other,
               "listener %d %s" % (port3, HOST), "allow_anonymous true",
               "log_dest stderr", "log_type all", defaults=False)
    second = mp.RawClient(HOST, port2, MQTT311)
    third = mp.RawClient(HOST, port3, MQTT311)
    try:
        assert raw(b).connect("a1", username="alice", password=b"secret").rc == 0
        refused(raw(b), "z1", username="zoe", password=b"z")
        assert second.connect("z2", username="zoe", password=b"z").rc == 0
        refusal = mp.RawClient(HOST, port2, MQTT311)
        refused(refusal, "a2", username="alice", password=b"secret")
        refusal.close()
        # no password_file on the third listener: any user name, anonymous allowed
        assert third.connect("x3", username="alice", password=b"wrong").rc == 0
    finally:
        second.close()
        third.close()


def test_global_password_file_applies_to_every_listener(broker, raw, pwfile):
    port2 = free_port()
    b = broker(*conf("password_file " + pwfile, "listener %d %s" % (port2, HOST),
                     anonymous=False), defaults=False)
    c = mp.RawClient(HOST, port2, MQTT5)
    try:
        assert c.connect("a2", username="alice", password=b"secret").rc == 0
        refused(raw(b, MQTT5), "x", username="alice", password=b"nope")
    finally:
        c.close()


# ---------------------------------------------------------------- start-up errors

@pytest.mark.arbor_only
@pytest.mark.parametrize("content,message", [
    ("alice:$7$101$AAAA$AAAA\n", 'passwd:1: user "alice": the hash is not the base64 of 64 '
                                  'bytes (SHA512)'),
    ("# users\nalice\n", "passwd:2: expected user:hash, found no ':'"),
    ("alice:topsecret\n", 'passwd:1: user "alice": not a $6$ or $7$ password hash'),
])
def test_bad_password_file_refuses_to_start(run_broker, tmp_path, content, message):
    path = tmp_path / "passwd"
    path.write_text(content)
    rc, out = run_broker(conf_lines=["listener %d %s" % (free_port(), HOST),
                                     "password_file " + str(path)])
    assert rc not in (0, None), out
    assert "Error: password_file " + str(tmp_path) + "/" + message in out, out
    assert "topsecret" not in out and "AAAA" not in out


@pytest.mark.arbor_only
def test_missing_password_file_refuses_to_start(run_broker, tmp_path):
    rc, out = run_broker(conf_lines=["listener %d %s" % (free_port(), HOST),
                                     "password_file nosuchfile"])
    assert rc not in (0, None), out
    assert "Error: password_file %s/nosuchfile: cannot open: No such file or directory" % (
        tmp_path) in out, out


# ---------------------------------------------------------------- arbor_passwd

@needs_arbor_passwd
@needs_clients
def test_arbor_passwd_file_works_with_real_clients(broker, tmp_path):
    # Run with ARBOR_BIN=/usr/sbin/mosquitto this is the "arbor_passwd -> Debian mosquitto"
    # direction; test_users_of_a_mosquitto_passwd_file is the other one.
    path = str(tmp_path / "passwd")
    assert run([ARBOR_PASSWD, "-c", "-b", path, "alice", "secret"]).returncode == 0
    assert run([ARBOR_PASSWD, "-b", "-I", "7", path, "bob", "b0b"]).returncode == 0
    assert run([ARBOR_PASSWD, "-H", "sha512", "-b", path, "carol", "c"]).returncode == 0
    assert run([ARBOR_PASSWD, path, "dave"], stdin="d4ve\nd4ve\n").returncode == 0
    # created 0600 by root here; a broker started as root reads it after dropping to its
    # unprivileged user (Mosquitto always, arbor on reload), so let that user read it
    os.chmod(path, 0o644)
    b = broker(*conf("password_file " + path, anonymous=False), defaults=False)
    base = ["-h", HOST, "-p", str(b.port), "-t", "t", "-m", "m"]
    for user, password in (("alice", "secret"), ("bob", "b0b"), ("carol", "c"), ("dave", "d4ve")):
        r = run([PUB] + base + ["-u", user, "-P", password])
        assert r.returncode == 0, (user, r.stderr)
        r = run([PUB] + base + ["-u", user, "-P", password + "x"])
        assert r.returncode != 0, user


@needs_arbor_passwd
def test_arbor_passwd_writes_mosquitto_layout(tmp_path):
    path = str(tmp_path / "passwd")
    assert run([ARBOR_PASSWD, "-c", "-b", path, "alice", "secret"]).returncode == 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert run([ARBOR_PASSWD, "-b", "-I", "7", path, "bob", "b"]).returncode == 0
    assert run([ARBOR_PASSWD, "-H", "sha512", "-b", path, "carol", "c"]).returncode == 0
    lines = open(path).read().splitlines()
    fields = [line.split("$") for line in lines]
    assert [f[0] for f in fields] == ["alice:", "bob:", "carol:"]
    assert fields[0][1:3] == ["7", "101"] and fields[1][1:3] == ["7", "7"]
    assert fields[2][1] == "6" and len(fields[2]) == 4
    for f in fields:
        salt, digest = f[-2], f[-1]
        assert len(salt) == 16 and len(digest) == 88  # 12 and 64 bytes of base64
    # a changed user keeps its place, gets a new salt
    assert run([ARBOR_PASSWD, "-b", path, "alice", "secret"]).returncode == 0
    again = open(path).read().splitlines()
    assert again[0].startswith("alice:$7$101$") and again[0] != lines[0] and again[1:] == lines[1:]


@needs_arbor_passwd
@needs_mosquitto_passwd
def test_arbor_passwd_options_match_mosquitto_passwd(tmp_path):
    """Exit codes of the same operations with both tools."""
    def both(args, stdin=None, prepare=None):
        results = []
        for tool in (ARBOR_PASSWD, MOSQ_PASSWD):
            path = str(tmp_path / ("f-" + os.path.basename(tool)))
            if os.path.exists(path):
                os.unlink(path)
            if prepare:
                prepare(path)
            argv = [tool] + [path if a == "FILE" else a for a in args]
            results.append((run(argv, stdin).returncode, path))
        assert results[0][0] == results[1][0], (args, results)
        return results

    def existing(path):
        assert run([MOSQ_PASSWD, "-c", "-b", path, "alice", "secret"]).returncode == 0

    both(["-b", "FILE", "u", "p"])                            # no file without -c
    both(["-c", "-b", "FILE", "u:x", "p"])                    # ':' in the user name
    both(["-c", "FILE"])                                      # user name missing
    both(["-b", "-I", "0", "FILE", "u", "p"], prepare=existing)
    both(["FILE", "u"], stdin="one\ntwo\n", prepare=existing)  # passwords differ
    both(["-D", "FILE", "nobody"], prepare=existing)
    for (rc, path) in both(["-D", "FILE", "alice"], prepare=existing):
        assert rc == 0 and "alice" not in open(path).read()
    for (rc, path) in both(["FILE", "bob"], stdin="pw\npw\n", prepare=existing):
        assert rc == 0 and open(path).read().count("\n") == 2

    def plain(path):
        with open(path, "w") as f:
            f.write("a:pa\nb:pb\n")
    for (rc, path) in both(["-U", "FILE"], prepare=plain):
        assert rc == 0
        text = open(path).read()
        assert text.startswith("a:$7$101$") and "\nb:$7$101$" in text and ":pa\n" not in text


@needs_arbor_passwd
def test_arbor_passwd_upgrade_leaves_hashed_lines(tmp_path):
    # mosquitto_passwd -U would hash the hash (its man page warns about it); arbor_passwd
    # leaves such a line alone.
    path = str(tmp_path / "passwd")
    assert run([ARBOR_PASSWD, "-c", "-b", path, "alice", "secret"]).returncode == 0
    before = open(path).read()
    with open(path, "a") as f:
        f.write("bob:plain\n")
    r = run([ARBOR_PASSWD, "-U", path])
    assert r.returncode == 0 and "alice already has a hashed password" in r.stderr
    lines = open(path).read().splitlines()
    assert lines[0] + "\n" == before and lines[1].startswith("bob:$7$101$")
