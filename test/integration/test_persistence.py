"""Persistence (`persistence true`): what survives a clean stop (SIGTERM) and a crash (kill -9)
in each mode, in each protocol version: retained messages with their properties and remaining
expiry; persistent sessions with subscriptions (options, identifiers), queued and in-flight
QoS 1/2 messages (packet ids, state), QoS 2 receive state, wills with delay, session expiry
measured across the downtime; autosave; the file (0600, damaged files). The crash test under
load is test_persistence_crash.py."""

import os
import random
import signal
import sqlite3
import stat
import time

import pytest

import mqttproto as mp
from helpers import free_port, wait_until
from test_acl import retained_from_an_acl_listener
from mqttproto import MQTT31, MQTT311, MQTT5

pytestmark = pytest.mark.arbor_only

VERSIONS = [MQTT31, MQTT311, MQTT5]


def start(broker, mode="snapshot", *lines):
    return broker("persistence true", "persistence_mode %s" % mode, *lines)


def stop_and_start(b, how):
    """Clean stop (SIGTERM) or crash (SIGKILL), then start again on the same file."""
    if how == "term":
        b.restart()
    else:
        b.stop(signal.SIGKILL, check=False)
        b.start()


def db_path(b):
    return os.path.join(b.tmp_dir, "arbor.db")


def connect(b, raw, cid, version=MQTT311, clean=False, expiry=None, **kw):
    c = raw(b, version)
    props = None
    if version == MQTT5 and expiry is not None:
        props = {mp.P_SESSION_EXPIRY: expiry}
    if version == MQTT5 and expiry is None and not clean:
        props = {mp.P_SESSION_EXPIRY: 3600}
    ack = c.connect(cid, clean=clean, props=props, **kw) if props else c.connect(
        cid, clean=clean, **kw)
    c.session_present = ack.session_present
    return c


# Each item in each mode: (mode, how the broker goes down). Snapshot mode keeps what a clean
# stop saved; durable mode also what a crash interrupted.
STOPS = [("snapshot", "term"), ("durable", "term"), ("durable", "kill")]
STOP_IDS = ["snapshot-term", "durable-term", "durable-kill"]


# ---------------------------------------------------------------- retained messages

@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_retained_messages_survive(broker, raw, version, mode, how):
    b = start(broker, mode)
    pub = connect(b, raw, "pub", version, clean=True)
    pub.publish("r/a", b"one", qos=1, retain=True)
    pub.publish("r/b", b"two", qos=2, retain=True)
    pub.publish("r/c", b"gone", qos=1, retain=True)
    pub.publish("r/c", b"", qos=1, retain=True)  # cleared
    pub.publish("r/d", b"q0", qos=0, retain=True)
    pub.publish("r/d", b"q0 newer", qos=1, retain=True)
    stop_and_start(b, how)
    sub = connect(b, raw, "sub", version, clean=True)
    sub.subscribe("r/#", 2)
    got = sorted((m.topic, m.payload, m.qos, m.retain) for m in sub.drain_publishes(expect=3))
    assert got == [("r/a", b"one", 1, True), ("r/b", b"two", 2, True),
                   ("r/d", b"q0 newer", 1, True)]
    assert "Restored 3 retained messages" in b.log_text()


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
def test_retained_properties_and_remaining_expiry_survive(broker, raw, mode, how):
    b = start(broker, mode)
    pub = connect(b, raw, "pub", MQTT5, clean=True)
    props = {mp.P_CONTENT_TYPE: "text/plain", mp.P_PAYLOAD_FORMAT: 1,
             mp.P_MESSAGE_EXPIRY: 30, mp.P_USER_PROPERTY: ("k", "v"),
             mp.P_RESPONSE_TOPIC: "reply/here", mp.P_CORRELATION_DATA: b"\x00\x01"}
    pub.publish("r/p", b"props", qos=1, retain=True, props=props)
    pub.publish("r/short", b"expires", qos=1, retain=True, props={mp.P_MESSAGE_EXPIRY: 1})
    time.sleep(1.2)
    stop_and_start(b, how)
    time.sleep(0.3)
    sub = connect(b, raw, "sub", MQTT5, clean=True)
    sub.subscribe("r/#", 1)
    got = sub.drain_publishes(expect=1)
    assert [m.topic for m in got] == ["r/p"]  # r/short expired meanwhile
    m = got[0]
    assert m.props.get(mp.P_CONTENT_TYPE) == "text/plain"
    assert m.props.get(mp.P_PAYLOAD_FORMAT) == 1
    assert m.props.get(mp.P_RESPONSE_TOPIC) == "reply/here"
    assert m.props.get(mp.P_CORRELATION_DATA) == b"\x00\x01"
    assert [tuple(v) for v in m.props.all(mp.P_USER_PROPERTY)] == [("k", "v")]
    # counted down across the downtime (the lower bound leaves room for a slow, loaded machine)
    assert 15 <= m.props.get(mp.P_MESSAGE_EXPIRY) <= 29


def test_retained_expiry_runs_while_the_broker_is_down(broker, raw):
    b = start(broker)
    pub = connect(b, raw, "pub", MQTT5, clean=True)
    pub.publish("r/e", b"x", qos=1, retain=True, props={mp.P_MESSAGE_EXPIRY: 2})
    b.stop()
    time.sleep(2.2)
    b.start()
    sub = connect(b, raw, "sub", MQTT5, clean=True)
    sub.subscribe("r/#", 1)
    sub.expect_no_packet(0.4)
    assert "1 retained messages expired while the broker was down" in b.log_text()


def test_sys_topics_are_not_kept(broker, raw):
    b = start(broker)
    b.restart()
    con = sqlite3.connect(db_path(b))
    topics = [bytes(k).decode() for (k,) in
              con.execute("SELECT key FROM records WHERE kind = 1").fetchall()]
    con.close()
    assert not [t for t in topics if t.startswith("$SYS")]


# ---------------------------------------------------------------- sessions

@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_subscriptions_survive(broker, raw, version, mode, how):
    b = start(broker, mode)
    c = connect(b, raw, "s1", version)
    c.subscribe([("a/+", 1), ("b/#", 2)])
    c.subscribe("gone", 1)
    c.unsubscribe(["gone"])
    c.disconnect()
    stop_and_start(b, how)
    c = connect(b, raw, "s1", version)
    if version >= MQTT311:
        assert c.session_present
    pub = connect(b, raw, "pub", version, clean=True)
    pub.publish("a/x", b"1", qos=1)
    pub.publish("b/y/z", b"2", qos=2)
    pub.publish("gone", b"3", qos=1)
    got = [(m.topic, m.payload, m.qos) for m in c.drain_publishes(expect=2)]
    assert got == [("a/x", b"1", 1), ("b/y/z", b"2", 2)]


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
def test_subscription_options_and_identifiers_survive(broker, raw, mode, how):
    b = start(broker, mode)
    c = connect(b, raw, "s5", MQTT5)
    c.subscribe([("o/nl", mp.sub_options(1, no_local=True))], props={mp.P_SUBSCRIPTION_ID: 7})
    c.subscribe([("o/rap", mp.sub_options(1, retain_as_published=True))],
                props={mp.P_SUBSCRIPTION_ID: 9})
    c.disconnect()
    stop_and_start(b, how)
    c = connect(b, raw, "s5", MQTT5)
    assert c.session_present
    c.publish("o/nl", b"mine", qos=1)  # no local: not back to its publisher
    other = connect(b, raw, "other", MQTT5, clean=True)
    other.publish("o/nl", b"theirs", qos=1)
    other.publish("o/rap", b"kept", qos=1, retain=True)
    got = c.drain_publishes(expect=2)
    assert [(m.topic, m.payload, m.retain, m.props.all(mp.P_SUBSCRIPTION_ID)) for m in got] == [
        ("o/nl", b"theirs", False, [7]), ("o/rap", b"kept", True, [9])]


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos", [1, 2])
def test_queued_messages_survive_in_order(broker, raw, version, qos, mode, how):
    b = start(broker, mode)
    c = connect(b, raw, "q1", version)
    c.subscribe("q/#", qos)
    c.disconnect()
    pub = connect(b, raw, "pub", version, clean=True)
    for i in range(20):
        pub.publish("q/%d" % (i % 3), b"m%d" % i, qos=qos)
    stop_and_start(b, how)
    c = connect(b, raw, "q1", version)
    got = c.drain_publishes(expect=20)
    assert [m.payload for m in got] == [b"m%d" % i for i in range(20)]
    assert all(m.qos == qos for m in got)
    c.disconnect()
    # delivered and acknowledged: not again after another restart
    stop_and_start(b, how)
    c = connect(b, raw, "q1", version)
    c.expect_no_packet(0.4)


def row_counts(b):
    """(message rows, delivery rows) in the file as committed now."""
    con = sqlite3.connect(db_path(b))
    try:
        return tuple(con.execute("SELECT COUNT(*) FROM records WHERE kind = ?", (kind,))
                     .fetchone()[0] for kind in (5, 6))
    finally:
        con.close()


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("qos", [1, 2])
def test_message_queued_for_two_sessions_is_one_row_kept_until_both_have_it(
        broker, raw, qos, mode, how):
    """A message queued for several sessions is stored once: one session taking it leaves it
    for the other, across a restart; when both have it, nothing is left of it."""
    b = start(broker, mode)
    for cid in ("s1", "s2"):
        c = connect(b, raw, cid)
        c.subscribe("s/#", qos)
        c.disconnect()
    pub = connect(b, raw, "pub", clean=True)
    pub.publish("s/a", b"first", qos=qos)
    pub.publish("s/b", b"second", qos=qos)
    if mode == "durable":  # acknowledged to the publisher: on disk
        assert row_counts(b) == (2, 4)
    s1 = connect(b, raw, "s1")
    assert [m.payload for m in s1.drain_publishes(expect=2)] == [b"first", b"second"]
    s1.disconnect()
    if mode == "durable":  # s1's deliveries are gone, the messages stay for s2
        wait_until(lambda: row_counts(b) == (2, 2), timeout=5, what="s1's rows deleted")
    stop_and_start(b, how)
    s1 = connect(b, raw, "s1")
    s1.expect_no_packet(0.4)
    s1.disconnect()
    s2 = connect(b, raw, "s2")
    assert [m.payload for m in s2.drain_publishes(expect=2)] == [b"first", b"second"]
    s2.disconnect()
    if mode == "durable":
        wait_until(lambda: row_counts(b) == (0, 0), timeout=5, what="every row deleted")
    stop_and_start(b, how)
    s2 = connect(b, raw, "s2")
    s2.expect_no_packet(0.4)
    assert row_counts(b) == (0, 0)


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_inflight_qos1_resent_with_its_packet_id(broker, raw, version, mode, how):
    b = start(broker, mode)
    c = connect(b, raw, "f1", version)
    c.subscribe("f", 1)
    pub = connect(b, raw, "pub", version, clean=True)
    pub.publish("f", b"unacked", qos=1)
    first = c.recv_publish(ack=False)
    c.close()
    stop_and_start(b, how)
    c = connect(b, raw, "f1", version)
    again = c.recv_publish()
    assert (again.payload, again.pid, again.dup) == (b"unacked", first.pid, True)
    c.expect_no_packet(0.3)


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_outgoing_qos2_state_survives(broker, raw, version, mode, how):
    """A QoS 2 PUBLISH not yet PUBREC'd is resent (same id, DUP); one PUBREC'd gets its
    PUBREL again, never the message a second time."""
    b = start(broker, mode)
    c = connect(b, raw, "f2", version)
    c.subscribe("f2/#", 2)
    pub = connect(b, raw, "pub", version, clean=True)
    pub.publish("f2/a", b"released", qos=2)
    pub.publish("f2/b", b"unreceived", qos=2)
    a = c.recv_publish(ack=False)
    bb = c.recv_publish(ack=False)
    c.send(mp.pubrec(a.pid))
    rel = mp.Ack(c.recv_type(mp.PUBREL), version)
    assert rel.pid == a.pid
    c.close()  # PUBCOMP never sent
    stop_and_start(b, how)
    c = raw(b, version)
    c.connect("f2", clean=False, props={mp.P_SESSION_EXPIRY: 3600} if version == MQTT5 else None)
    rel = mp.Ack(c.recv_type(mp.PUBREL), version)
    assert rel.pid == a.pid
    again = mp.Publish(c.recv_type(mp.PUBLISH), version)
    assert (again.payload, again.pid, again.dup) == (b"unreceived", bb.pid, True)
    c.send(mp.pubcomp(a.pid))
    c.ack_publish(again)
    c.expect_no_packet(0.4)


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_incoming_qos2_state_survives(broker, raw, version, mode, how):
    """A QoS 2 PUBLISH acknowledged with PUBREC but not yet released: the publisher's resend
    after the restart is recognised and not delivered twice."""
    b = start(broker, mode)
    sub = connect(b, raw, "q2sub", version)
    sub.subscribe("in/#", 2)
    sub.disconnect()
    p = connect(b, raw, "q2pub", version)
    p.send(mp.publish("in/x", b"once", qos=2, pid=77, version=version))
    assert mp.Ack(p.recv_type(mp.PUBREC), version).pid == 77
    p.close()
    stop_and_start(b, how)
    p = connect(b, raw, "q2pub", version)
    p.send(mp.publish("in/x", b"once", qos=2, pid=77, dup=True, version=version))
    assert mp.Ack(p.recv_type(mp.PUBREC), version).pid == 77
    p.send(mp.pubrel(77))
    assert mp.Ack(p.recv_type(mp.PUBCOMP), version).pid == 77
    sub = connect(b, raw, "q2sub", version)
    got = sub.drain_publishes(expect=1)
    assert [m.payload for m in got] == [b"once"]


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_session_expiry_counts_the_downtime(broker, raw, mode):
    b = start(broker, mode)
    short = connect(b, raw, "short", MQTT5, expiry=2)
    short.subscribe("x", 1)
    short.disconnect()
    long = connect(b, raw, "long", MQTT5, expiry=600)
    long.subscribe("x", 1)
    long.disconnect()
    b.stop()
    time.sleep(2.3)
    b.start()
    assert not connect(b, raw, "short", MQTT5, expiry=60).session_present
    assert connect(b, raw, "long", MQTT5, expiry=60).session_present
    assert "Expiring client short" in b.log_text()


def test_clean_sessions_are_not_kept(broker, raw):
    b = start(broker)
    c = connect(b, raw, "clean", MQTT311, clean=True)
    c.subscribe("x", 1)
    v5 = connect(b, raw, "v5zero", MQTT5, clean=False, expiry=0)
    v5.subscribe("x", 1)
    b.restart()
    assert not connect(b, raw, "clean", MQTT311, clean=False).session_present
    assert not connect(b, raw, "v5zero", MQTT5, clean=False).session_present


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_queued_message_expiry_counts_the_downtime(broker, raw, mode):
    b = start(broker, mode)
    c = connect(b, raw, "qe", MQTT5)
    c.subscribe("qe/#", 1)
    c.disconnect()
    pub = connect(b, raw, "pub", MQTT5, clean=True)
    pub.publish("qe/short", b"s", qos=1, props={mp.P_MESSAGE_EXPIRY: 1})
    pub.publish("qe/long", b"l", qos=1, props={mp.P_MESSAGE_EXPIRY: 60})
    b.stop()
    time.sleep(1.3)
    b.start()
    c = connect(b, raw, "qe", MQTT5)
    got = c.drain_publishes(expect=1)
    assert [m.topic for m in got] == ["qe/long"]
    assert 45 <= got[0].props.get(mp.P_MESSAGE_EXPIRY) <= 59


# ---------------------------------------------------------------- wills

def will_client(b, raw, cid, delay, expiry=600):
    c = raw(b, MQTT5)
    c.connect(cid, clean=False, props={mp.P_SESSION_EXPIRY: expiry},
              will={"topic": "will/" + cid, "payload": b"gone " + cid.encode(), "qos": 1,
                    "props": {mp.P_WILL_DELAY: delay}})
    return c


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_delayed_will_of_a_connected_client_waits_across_a_restart(broker, raw, mode):
    """At a clean stop a connected client with a will delay and a lasting session keeps its
    will pending: published after the restart once the delay has run, not at the stop."""
    b = start(broker, mode)
    watcher = connect(b, raw, "watcher", MQTT5)
    watcher.subscribe("will/#", 1)
    watcher.disconnect()
    will_client(b, raw, "w1", delay=3)
    # Stamped before the stop: the delay runs from the stop (downtime included), and a
    # restart slowed down by a loaded machine must not eat into the "not at the stop" margin.
    stopped = time.monotonic()
    b.restart()
    w = connect(b, raw, "watcher", MQTT5)
    m = w.recv_publish(timeout=15)   # one published at the stop would be queued: at once
    assert m.payload == b"gone w1"
    assert time.monotonic() - stopped >= 2.5


def test_delayed_will_cancelled_by_reconnecting_after_the_restart(broker, raw):
    b = start(broker)
    watcher = connect(b, raw, "watcher", MQTT5)
    watcher.subscribe("will/#", 1)
    watcher.disconnect()
    will_client(b, raw, "w2", delay=4)
    stopped = time.monotonic()   # the delay runs from the stop
    b.restart()
    back = will_client(b, raw, "w2", delay=4)
    # back within the delay, with 4 s of room for a restart slowed down by a loaded machine
    assert time.monotonic() - stopped < 4.0, "reconnected %.2f s after the stop" % (
        time.monotonic() - stopped)
    back.disconnect()  # normal disconnection: no will
    w = connect(b, raw, "watcher", MQTT5)
    w.expect_no_packet(max(0.5, 4.5 - (time.monotonic() - stopped)))


def test_pending_will_of_an_offline_session_is_due_across_the_downtime(broker, raw):
    b = start(broker)
    watcher = connect(b, raw, "watcher", MQTT5)
    watcher.subscribe("will/#", 1)
    watcher.disconnect()
    c = will_client(b, raw, "w3", delay=2)
    c.close()  # no DISCONNECT: the will is pending for 2 s
    b.stop()
    time.sleep(2.2)
    b.start()
    w = connect(b, raw, "watcher", MQTT5)
    assert w.recv_publish(timeout=10).payload == b"gone w3"


def test_will_without_delay_is_published_at_the_stop(broker, raw):
    b = start(broker)
    watcher = connect(b, raw, "watcher", MQTT5)
    watcher.subscribe("will/#", 1)
    watcher.disconnect()
    will_client(b, raw, "w4", delay=0)
    b.restart()
    w = connect(b, raw, "watcher", MQTT5)
    assert [m.payload for m in w.drain_publishes(expect=1)] == [b"gone w4"]


def test_will_of_a_client_connected_at_a_crash_is_published_after_the_restart(broker, raw):
    """Durable mode keeps a connected client's will: the crash took its connection away."""
    b = start(broker, "durable")
    watcher = connect(b, raw, "watcher", MQTT5)
    watcher.subscribe("will/#", 1)
    watcher.disconnect()
    will_client(b, raw, "w5", delay=1)
    stop_and_start(b, "kill")
    w = connect(b, raw, "watcher", MQTT5)
    assert w.recv_publish(timeout=10).payload == b"gone w5"


# ---------------------------------------------------------------- autosave, crash in snapshot mode

def test_snapshot_mode_crash_keeps_what_the_last_autosave_wrote(broker, raw):
    b = start(broker, "snapshot", "autosave_interval 1")
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    pub.publish("r/saved", b"1", qos=1, retain=True)
    time.sleep(1.5)
    b.wait_log("Saved 1 retained messages")
    b.stop(signal.SIGKILL, check=False)
    b.start()
    sub = connect(b, raw, "sub", MQTT311, clean=True)
    sub.subscribe("r/#", 1)
    assert [m.payload for m in sub.drain_publishes(expect=1)] == [b"1"]


def test_snapshot_mode_crash_loses_what_came_after_the_last_save(broker, raw):
    """Mosquitto's semantics, documented in arbor.conf(5)."""
    b = start(broker, "snapshot", "autosave_interval 3600")
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    pub.publish("r/unsaved", b"1", qos=1, retain=True)
    b.stop(signal.SIGKILL, check=False)
    b.start()
    sub = connect(b, raw, "sub", MQTT311, clean=True)
    sub.subscribe("r/#", 1)
    sub.expect_no_packet(0.4)


def test_sigusr1_saves_now(broker, raw):
    b = start(broker, "snapshot", "autosave_interval 0")
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    pub.publish("r/usr1", b"1", qos=1, retain=True)
    b.proc.send_signal(signal.SIGUSR1)
    b.wait_log("Saved the persistence file %s." % db_path(b))
    b.stop(signal.SIGKILL, check=False)
    b.start()
    sub = connect(b, raw, "sub", MQTT311, clean=True)
    sub.subscribe("r/#", 1)
    assert [m.payload for m in sub.drain_publishes(expect=1)] == [b"1"]


def test_sigusr1_without_persistence_does_nothing(broker, raw):
    b = broker()
    b.proc.send_signal(signal.SIGUSR1)
    time.sleep(0.2)
    assert b.running()
    connect(b, raw, "c", MQTT311, clean=True).disconnect()


def test_autosave_on_changes(broker, raw):
    b = start(broker, "snapshot", "autosave_on_changes true", "autosave_interval 3")
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    pub.publish("r/1", b"1", qos=1, retain=True)
    pub.publish("r/2", b"2", qos=1, retain=True)
    time.sleep(0.5)
    assert "Saved 2 retained" not in b.log_text()
    pub.publish("r/3", b"3", qos=1, retain=True)
    b.wait_log("Saved 3 retained messages")
    b.stop(signal.SIGKILL, check=False)
    b.start()
    sub = connect(b, raw, "sub", MQTT311, clean=True)
    sub.subscribe("r/#", 1)
    assert len(sub.drain_publishes(expect=3)) == 3


# ---------------------------------------------------------------- durable mode: acknowledged means on disk

@pytest.mark.parametrize("version", VERSIONS)
def test_durable_acknowledged_changes_survive_kill(broker, raw, version):
    b = start(broker, "durable")
    sub = connect(b, raw, "dsub", version)
    sub.subscribe("d/#", 1)  # SUBACK: the subscription is on disk
    sub.disconnect()
    pub = connect(b, raw, "dpub", version, clean=True)
    pub.publish("d/1", b"acked q1", qos=1)  # PUBACK: queued for dsub, on disk
    pub.publish("d/2", b"acked q2", qos=2)  # PUBREC: likewise
    pub.publish("d/r", b"retained", qos=1, retain=True)
    b.stop(signal.SIGKILL, check=False)
    b.start()
    sub = connect(b, raw, "dsub", version)
    got = sorted((m.topic, m.payload) for m in sub.drain_publishes(expect=3))
    assert got == [("d/1", b"acked q1"), ("d/2", b"acked q2"), ("d/r", b"retained")]


def test_durable_unsubscribe_survives_kill(broker, raw):
    b = start(broker, "durable")
    c = connect(b, raw, "du", MQTT311)
    c.subscribe([("keep", 1), ("drop", 1)])
    c.unsubscribe(["drop"])
    b.stop(signal.SIGKILL, check=False)
    b.start()
    c = connect(b, raw, "du", MQTT311)
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    pub.publish("drop", b"x", qos=1)
    pub.publish("keep", b"y", qos=1)
    assert [m.payload for m in c.drain_publishes(expect=1)] == [b"y"]


# ---------------------------------------------------------------- the file

def test_file_is_created_0600_where_configured(broker, raw, tmp_path):
    where = tmp_path / "store"
    where.mkdir()
    os.chmod(where, 0o777)
    b = broker("persistence true", "persistence_location %s/" % where,
               "persistence_file kept.db")
    b.restart()
    mode = stat.S_IMODE(os.stat(where / "kept.db").st_mode)
    assert mode == 0o600
    con = sqlite3.connect(str(where / "kept.db"))
    assert con.execute("PRAGMA application_id").fetchone()[0] == 0x41524252
    assert con.execute("PRAGMA user_version").fetchone()[0] == 1
    con.close()


def test_unwritable_location_stops_the_start(run_broker, tmp_path):
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % free_port(), "persistence true",
                                     "persistence_location /proc/nonexistent/"])
    assert rc == 1
    assert "Error: persistence: unable to open /proc/nonexistent/arbor.db" in out


def test_mosquitto_file_is_not_touched(run_broker, tmp_path):
    path = tmp_path / "mosquitto.db"
    data = b"\x00\xb5\x00mosquitto db" + bytes(64)
    path.write_bytes(data)
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % free_port(), "persistence true",
                                     "persistence_file %s" % path, "user root"])
    assert rc == 1
    assert "is a Mosquitto persistence file" in out
    assert path.read_bytes() == data


def test_newer_format_is_not_touched(broker, run_broker, tmp_path):
    b = start(broker)
    b.restart()
    b.stop()
    con = sqlite3.connect(db_path(b))
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    rc, out = run_broker(conf_lines=["listener %d 127.0.0.1" % free_port(), "persistence true",
                                     "persistence_file %s" % db_path(b), "user root"])
    assert rc == 1
    assert "has store format 99; this arbor reads format 1" in out


def fill(b, raw, sessions=20, retained=100):
    pub = connect(b, raw, "filler", MQTT5, clean=True)
    for i in range(retained):
        pub.publish("fill/%d" % i, b"retained %d " % i + bytes(50), qos=1, retain=True)
    for s in range(sessions):
        c = connect(b, raw, "fs%d" % s, MQTT5)
        c.subscribe("q/%d" % s, 1)
        c.disconnect()
        pub.publish("q/%d" % s, b"queued", qos=1)
    pub.disconnect()


def survives(b, raw):
    """The broker is up and serves clients (the damaged file did not stop it)."""
    c = connect(b, raw, "probe", MQTT311, clean=True)
    c.subscribe("fill/#", 0)
    c.drain_publishes(0.2)
    c.publish("after", b"x", qos=1)
    c.disconnect()


@pytest.mark.parametrize("seed", range(6))
def test_truncated_file(broker, raw, seed):
    b = start(broker)
    fill(b, raw)
    b.stop()
    path = db_path(b)
    size = os.path.getsize(path)
    rnd = random.Random(seed)
    cut = rnd.randrange(0, size - 1)
    with open(path, "r+b") as f:
        f.truncate(cut)
    b.start()
    survives(b, raw)  # its first loop turn comes after the restore
    log = b.log_text()
    # SQLite's own header notices any shortening: the file is moved aside, what can still be
    # read from it is copied into a new one
    assert "Error: persistence file %s is damaged (" % path in log
    assert "records could still be read from it; the damaged file was kept as" in log


@pytest.mark.parametrize("seed", range(10))
def test_bit_flips(broker, raw, seed):
    b = start(broker)
    fill(b, raw)
    b.stop()
    path = db_path(b)
    data = bytearray(open(path, "rb").read())
    rnd = random.Random(1000 + seed)
    flips = []
    for _ in range(3):
        at = rnd.randrange(0, len(data))
        bit = 1 << rnd.randrange(8)
        data[at] ^= bit
        flips.append(at)
    open(path, "wb").write(bytes(data))
    b.start()
    survives(b, raw)
    b.restart()  # and what it wrote back is sound
    survives(b, raw)


def test_bit_flip_in_a_record_drops_that_record_only(broker, raw):
    b = start(broker)
    pub = connect(b, raw, "pub", MQTT311, clean=True)
    for i in range(5):
        pub.publish("flip/%d" % i, b"value-%d-" % i + b"z" * 40, qos=1, retain=True)
    b.stop()
    path = db_path(b)
    data = bytearray(open(path, "rb").read())
    at = data.find(b"value-3-")
    assert at > 0
    data[at + 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    b.start()
    b.wait_log("dropped 1 retained message record(s) (checksum mismatch)")
    sub = connect(b, raw, "sub", MQTT311, clean=True)
    sub.subscribe("flip/#", 1)
    assert sorted(m.topic for m in sub.drain_publishes(expect=4)) == [
        "flip/0", "flip/1", "flip/2", "flip/4"]


def test_garbage_file_is_moved_aside(broker, raw, tmp_path):
    b = start(broker, "snapshot", "user root")
    b.stop()
    open(db_path(b), "wb").write(b"this is not a database at all" * 100)
    b.start()
    b.wait_log("is damaged (not an SQLite file; the damaged file was kept as")
    assert [n for n in os.listdir(b.tmp_dir) if n.startswith("arbor.db.damaged-")]
    survives(b, raw)


# ---------------------------------------------------------------- access control across a restart

def acl_start(broker, tmp_path, rules, mode="snapshot"):
    path = tmp_path / "acl"
    path.write_text(rules)
    os.chmod(str(path), 0o644)
    return start(broker, mode, "acl_file %s" % path), path


@pytest.mark.parametrize("mode,how", STOPS, ids=STOP_IDS)
def test_acl_applies_to_a_restored_offline_session(broker, raw, tmp_path, mode, how):
    """The restored session's access list is compiled again (its user name is kept), so its
    offline queue only takes what it may read."""
    b, _ = acl_start(broker, tmp_path, "user alice\ntopic read alice/#\n"
                                       "user writer\ntopic write #\n", mode)
    a = connect(b, raw, "a", MQTT311, username="alice")
    a.subscribe("#", 1)
    a.disconnect()
    stop_and_start(b, how)
    w = connect(b, raw, "w", MQTT311, clean=True, username="writer")
    w.publish("alice/x", b"1", qos=1)
    w.publish("other/y", b"2", qos=1)
    a = connect(b, raw, "a", MQTT311, username="alice")
    assert [m.topic for m in a.drain_publishes(expect=1)] == ["alice/x"]


def test_retained_source_survives_for_check_retain_source(broker, raw, tmp_path):
    b, path = acl_start(broker, tmp_path, "user alice\ntopic readwrite r/#\n"
                                          "user bob\ntopic read r/#\n")
    a = connect(b, raw, "a", MQTT311, clean=True, username="alice")
    a.publish("r/x", b"v", qos=1, retain=True)
    a.disconnect()
    b.stop()
    path.write_text("user alice\ntopic read r/#\nuser bob\ntopic read r/#\n")
    b.start()
    s = connect(b, raw, "s", MQTT311, clean=True, username="bob")
    s.subscribe("r/#", 1)
    s.expect_no_packet(0.4)  # its publisher may no longer write r/x


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_retained_source_keeps_its_listener_for_check_retain_source(broker, raw, tmp_path,
                                                                      mode):
    """per_listener_settings: the source's listener is saved with it, so after a restart the
    publisher is still judged by its own listener's rules, not by the subscriber's (whose
    listener has no acl_file here)."""
    b, acl = retained_from_an_acl_listener(broker, raw, tmp_path, "persistence true",
                                           "persistence_mode %s" % mode)
    b.restart()
    s = connect(b, raw, "s0", MQTT311, clean=True)  # the first listener: no acl_file
    s.subscribe("r/#", 1)
    # kept, still allowed (r/y: published without an acl_file, always sent)
    assert sorted(m.topic for m in s.drain_publishes(expect=2)) == ["r/x", "r/y"]
    s.disconnect()
    acl.write_text("topic read r/#\n")  # the publisher may no longer write r/x
    b.restart()
    s = connect(b, raw, "s1", MQTT311, clean=True)
    s.subscribe("r/#", 1)
    assert [m.topic for m in s.drain_publishes(expect=1)] == ["r/y"]
