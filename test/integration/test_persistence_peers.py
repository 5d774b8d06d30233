"""Persistence with MQTT-ST peers: a restarted broker restores its retained messages with the
origin stamps they had, so that the spanning tree still tells which of two retained values is
newer (arbor.conf(5) PERSISTENCE)."""

import signal
import time
import uuid

import pytest

from helpers import wait_until
from peer_net import retained_messages
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only


@pytest.mark.parametrize("how", ["term", "durable-kill"])
def test_restored_retained_value_keeps_its_stamp_and_wins_when_newer(cluster, how):
    lines = ["persistence true", "persistence_file b{index}.db"]
    if how == "durable-kill":
        lines.append("persistence_mode durable")
    c = cluster(2, [(0, 1)], [200, 100], delays={(0, 1): 2}, extra_lines=lines)
    c.wait_tree(timeout=15)
    topic = "persist-%s/r" % uuid.uuid4().hex[:8]
    c.client(0, version=5).publish(topic, b"old", qos=1, retain=True)
    wait_until(lambda: retained_messages(c.brokers[1], topic, quiet=0.05) == {topic: b"old"},
               timeout=5, what="the old value on b1")
    c.cut(0, 1, "reset")
    c.wait_tree(timeout=10)
    c.client(1, version=5).publish(topic, b"new", qos=1, retain=True)  # b0 cannot hear it
    if how == "term":
        c.restart(1)
    else:
        c.kill(1)
        c.restart(1)
    assert retained_messages(c.brokers[1], topic, quiet=0.05) == {topic: b"new"}
    c.heal(0, 1)
    c.wait_tree(timeout=15)
    held = {}

    def converged():
        for i in range(2):
            held[i] = retained_messages(c.brokers[i], topic, quiet=0.05)
        return all(h == {topic: b"new"} for h in held.values())
    try:
        wait_until(converged, timeout=10, what="the newer value on both brokers")
    except AssertionError:
        raise AssertionError("retained values after healing: %r" % held)


def _published_while_cut(c, topic, tags):
    """Publish 200 QoS 1 messages per tag on broker 1 (cut off from broker 0)."""
    pub = c.client(1, version=5)
    sent = []
    for tag in tags:
        for n in range(200):
            payload = b"%s-%d" % (tag, n)
            pub.publish(topic + "/x", payload, qos=1)
            sent.append(payload)
    pub.close()
    return sent


@pytest.mark.parametrize("how", ["term", "snapshot-kill"])
def test_restart_keeps_the_message_log_and_the_stream(cluster, how):
    """docs/mqtt-st-protocol.md 7.6: a broker restarted during a partition still sends the
    other side, once it heals, what it accepted before the restart (its log was kept), each
    message exactly once and in order. After a clean shutdown it goes on with its stream;
    after a crash in snapshot mode it starts a new one (what it sent after the last save is
    not known), and the saved log still arrives."""
    c = cluster(2, [(0, 1)], extra_lines=["persistence true", "persistence_file b{index}.db",
                                           "max_queued_messages 100000"])
    c.wait_tree(timeout=15)
    topic = "plog-%s" % uuid.uuid4().hex[:8]
    sub = c.client(0, version=5)
    sub.subscribe(topic + "/#", 1)
    c.cut(0, 1, "reset")
    wait_until(lambda: c.snapshot().root_of(1) == c.identity(1), timeout=15,
               what="broker 1 on its own")
    sent = _published_while_cut(c, topic, [b"a"])
    if how == "term":
        c.restart(1)
        c.brokers[1].wait_log("(clean shutdown)")
    else:
        c.brokers[1].signal(signal.SIGUSR1)  # a save, as autosave would make
        c.brokers[1].wait_log("Saved the persistence file")
        c.kill(1)
        c.restart(1)
        c.brokers[1].wait_log("MQTT-ST: starts a new stream")
    c.brokers[1].wait_log("Restored 200 messages of the MQTT-ST message log")
    sent += _published_while_cut(c, topic, [b"b"])
    c.heal(0, 1)
    c.wait_tree(timeout=15)
    got = [m.payload for m in sub.get_messages(len(sent), 30)]
    sub.expect_no_message(1.0)
    assert got == sent  # once each, in order
    lost = c.stp(0, fresh=True).get("messages/lost")
    assert lost in ("0", None), lost


def _stored_count(c, i, at_least=0):
    """$SYS/broker/store/messages/count of broker i (the messages it holds in memory), once it
    is at least at_least: the value is published when it changes (sys_interval 1), and the
    retained one a subscription gets first may be from before the last change. The value read
    is the one that stays unchanged for 2.5 s (two intervals)."""
    s = c.client(i, version=4)
    s.subscribe("$SYS/broker/store/messages/count", 0)
    value = int(s.get_message(15).payload)
    deadline = time.monotonic() + 30
    while True:
        try:
            value = int(s.get_message(2.5).payload)
        except AssertionError:
            if value >= at_least or time.monotonic() > deadline:
                break
    s.close()
    return value


@pytest.mark.parametrize("mode", ["snapshot", "durable"])
def test_a_logged_message_queued_for_a_session_is_restored_once(cluster, mode):
    """A message in the MQTT-ST log that also waits for an offline session is one message in
    memory after a restart, as before it (it is stored twice on disk, as a log entry and as a
    message row: the restore shares them again)."""
    c = cluster(2, [(0, 1)], extra_lines=["persistence true", "persistence_file b{index}.db",
                                           "persistence_mode " + mode, "sys_interval 1",
                                           "max_queued_messages 100000"])
    c.wait_tree(timeout=15)
    topic = "pshare-%s" % uuid.uuid4().hex[:8]
    offline = c.client(1, version=4, client_id="keeper-" + topic, clean=False)
    offline.subscribe(topic + "/#", 1)
    offline.close()
    c.cut(0, 1, "reset")
    wait_until(lambda: c.snapshot().root_of(1) == c.identity(1), timeout=15,
               what="broker 1 on its own")
    _published_while_cut(c, topic, [b"a"])  # 200 messages: logged, and queued for keeper
    before = _stored_count(c, 1, at_least=200)
    c.restart(1)
    c.brokers[1].wait_log("Restored 200 messages of the MQTT-ST message log")
    after = _stored_count(c, 1)
    assert after < before + 20, (before, after)  # not 200 more
    keeper = c.client(1, version=4, client_id="keeper-" + topic, clean=False)
    got = [m.payload for m in keeper.get_messages(200, 30)]
    assert got == [b"a-%d" % n for n in range(200)]
